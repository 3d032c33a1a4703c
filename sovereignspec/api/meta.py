"""Kubernetes shapes shared by the custom resources: object metadata, tolerations, label selectors.

Only the fields SovereignSpec reads are modelled; metadata from `kubectl get -o yaml` carries many
more (managedFields, creationTimestamp, ...), so `ObjectMeta` ignores unknown keys instead of
rejecting them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import ConfigDict, Field

from sovereignspec.api.base import Model

GROUP = "sovereignspec.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

# Label and annotation keys of the workload contract (DESIGN.md §4).
PREFIX = "sovereignspec.io/"
LABEL_SPECULATIVE = PREFIX + "speculative"
ANNOTATION_SPECULATIVE_CONFIG = PREFIX + "speculative-config"
ANNOTATION_DECISION = PREFIX + "decision"
ANNOTATION_CLASS = PREFIX + "class"
ANNOTATION_TARGET_MODEL = PREFIX + "target-model"
ANNOTATION_DRAFT_MODEL = PREFIX + "draft-model"
ANNOTATION_SPEC_METHOD = PREFIX + "spec-method"
ANNOTATION_TPOT_SLO_MS = PREFIX + "tpot-slo-ms"
ANNOTATION_EXPECTED_BATCH = PREFIX + "expected-batch"
CLAIM_ANNOTATIONS = (
    ANNOTATION_CLASS,
    ANNOTATION_TARGET_MODEL,
    ANNOTATION_DRAFT_MODEL,
    ANNOTATION_SPEC_METHOD,
    ANNOTATION_TPOT_SLO_MS,
    ANNOTATION_EXPECTED_BATCH,
)
"""What a workload claims about itself (policy/claims.py reads each; every pod of a group must agree)."""
LABEL_TENANT = PREFIX + "tenant"
LABEL_SYSTEM_NAMESPACE = PREFIX + "system"
DEFAULT_JURISDICTION_LABEL = PREFIX + "jurisdiction"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_GPU_PRODUCT = "nvidia.com/gpu.product"
RESOURCE_GPU = "nvidia.com/gpu"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "sovereignspec"
POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
"""Kueue's label on every pod of a pod group (StatefulSet, LeaderWorkerSet, plain group): its Workload."""

CONTROLLER_NAME = "sovereignspec.io/admission"
"""`AdmissionCheck.spec.controllerName` of the checks this controller answers."""


class OwnerReference(Model):
    model_config = ConfigDict(extra="ignore")

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(Model):
    """The metadata fields SovereignSpec reads; everything else the API server adds is ignored."""

    model_config = ConfigDict(extra="ignore")

    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: list[OwnerReference] = []


class Toleration(Model):
    """A core/v1 Toleration, added to the pods through podSetUpdates."""

    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class LabelSelectorRequirement(Model):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = []


class LabelSelector(Model):
    """A metav1.LabelSelector. An empty selector matches everything (Kubernetes semantics)."""

    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = Field(default=[], max_length=32)

    def matches(self, labels: dict[str, str]) -> bool:
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        for req in self.match_expressions:
            present = req.key in labels
            if req.operator == "Exists" and not present:
                return False
            if req.operator == "DoesNotExist" and present:
                return False
            if req.operator == "In" and (not present or labels[req.key] not in req.values):
                return False
            if req.operator == "NotIn" and present and labels[req.key] in req.values:
                return False
        return True


RFC3339 = "%Y-%m-%dT%H:%M:%SZ"
"""metav1.Time's wire form: UTC, second precision, trailing Z."""


def rfc3339(t: datetime) -> str:
    """`t` as metav1.Time writes it."""
    return t.astimezone(UTC).strftime(RFC3339)


def wire_time(raw: object) -> datetime | None:
    """A metav1.Time string read back (the inverse of `rfc3339`); None when absent or unreadable."""
    if not isinstance(raw, str):
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
