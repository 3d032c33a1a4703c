"""Which (target, draft, method) a serving pod runs, read from its annotations.

The operator supplies this mapping from its pod index; vLLM's counters only name the served model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from sovereignspec.api.base import Model
from sovereignspec.model.telemetry import PodRef

PREFIX = "sovereignspec.io/"
TARGET_MODEL = PREFIX + "target-model"
DRAFT_MODEL = PREFIX + "draft-model"
SPEC_METHOD = PREFIX + "spec-method"
SPECULATIVE_CONFIG = PREFIX + "speculative-config"


class DraftIdentity(Model):
    """The acceptance key. `target_model` None = take vLLM's `model_name` label."""

    target_model: str | None = None
    draft_model: str
    method: str


def _metadata(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    md = pod.get("metadata")
    return md if isinstance(md, Mapping) else {}


def pod_ref(pod: Mapping[str, Any]) -> PodRef | None:
    """namespace/name of a pod dict (API JSON, kopf body or kubernetes client `to_dict()`)."""
    md = _metadata(pod)
    ns, name = md.get("namespace"), md.get("name")
    if isinstance(ns, str) and ns and isinstance(name, str) and name:
        return PodRef(namespace=ns, name=name)
    return None


def speculative_config(annotations: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pod's `speculative-config` JSON object, or None when absent, empty (off) or malformed."""
    raw = annotations.get(SPECULATIVE_CONFIG)
    if not isinstance(raw, str) or not raw.strip():
        return None
    try:
        cfg = json.loads(raw)
    except ValueError:
        return None
    return cfg if isinstance(cfg, dict) else None


def draft_identity(pod: Mapping[str, Any]) -> DraftIdentity | None:
    """From `sovereignspec.io/{target-model,draft-model,spec-method}`; the draft and method fall back
    to the `speculative-config` JSON (`model`, `method`). None when the pod names no draft."""
    ann = _metadata(pod).get("annotations")
    if not isinstance(ann, Mapping):
        return None
    cfg = speculative_config(ann) or {}

    def text(key: str, fallback: Any = None) -> str | None:
        v = ann.get(key)
        if isinstance(v, str) and v.strip():
            return v.strip()
        return fallback.strip() if isinstance(fallback, str) and fallback.strip() else None

    method = text(SPEC_METHOD, cfg.get("method"))
    draft = text(DRAFT_MODEL, cfg.get("model"))
    if method is None:
        return None
    if draft is None:
        if method != "ngram":  # ngram drafts from the prompt: no draft model
            return None
        draft = "ngram"
    return DraftIdentity(target_model=text(TARGET_MODEL), draft_model=draft, method=method)


def identities_from_pods(pods: Iterable[Mapping[str, Any]]) -> dict[PodRef, DraftIdentity]:
    """pod → draft identity for every pod that names one."""
    out: dict[PodRef, DraftIdentity] = {}
    for pod in pods:
        ref, ident = pod_ref(pod), draft_identity(pod)
        if ref is not None and ident is not None:
            out[ref] = ident
    return out
