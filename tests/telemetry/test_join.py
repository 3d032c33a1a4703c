"""Draft identity from pod annotations and the pure acceptance join."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sovereignspec.model.acceptance import full_draft_tokens
from sovereignspec.model.telemetry import PodRef, TelemetrySnapshot
from sovereignspec.telemetry.annotations import DraftIdentity, draft_identity, identities_from_pods, pod_ref
from sovereignspec.telemetry.gaps import Gap, GapCode
from sovereignspec.telemetry.join import build_snapshot, join_acceptance
from sovereignspec.telemetry.reading import PodAcceptance, TelemetryReading

T, D, M = "meta-llama/Llama-3.1-8B-Instruct", "eagle3-llama", "eagle3"


def pod(name: str, ann: dict[str, str] | None, ns: str = "t") -> dict[str, Any]:
    md: dict[str, Any] = {"namespace": ns, "name": name}
    if ann is not None:
        md["annotations"] = ann
    return {"metadata": md}


def full(**extra: str) -> dict[str, str]:
    return {
        "sovereignspec.io/target-model": T,
        "sovereignspec.io/draft-model": D,
        "sovereignspec.io/spec-method": M,
        **extra,
    }


def test_identity_from_annotations() -> None:
    assert draft_identity(pod("a", full())) == DraftIdentity(target_model=T, draft_model=D, method=M)
    assert pod_ref(pod("a", None)) == PodRef(namespace="t", name="a")


def test_identity_falls_back_to_the_speculative_config() -> None:
    cfg = json.dumps({"method": "eagle", "model": "drafty", "num_speculative_tokens": 3})
    ident = draft_identity(pod("a", {"sovereignspec.io/speculative-config": cfg}))
    assert ident == DraftIdentity(target_model=None, draft_model="drafty", method="eagle")
    ngram = json.dumps({"method": "ngram", "num_speculative_tokens": 3})
    assert draft_identity(pod("a", {"sovereignspec.io/speculative-config": ngram})) == DraftIdentity(
        draft_model="ngram", method="ngram"
    )


def test_no_identity_for_plain_or_malformed_pods() -> None:
    assert draft_identity(pod("a", None)) is None
    assert draft_identity(pod("a", {"sovereignspec.io/speculative-config": ""})) is None
    assert draft_identity(pod("a", {"sovereignspec.io/speculative-config": "{not json"})) is None
    assert draft_identity(pod("a", {"sovereignspec.io/spec-method": "eagle3"})) is None  # no draft named
    assert draft_identity({"metadata": "junk"}) is None
    assert draft_identity({}) is None
    assert pod_ref({"metadata": {"name": "x"}}) is None


def test_identities_from_pods_skips_pods_without_one() -> None:
    ids = identities_from_pods([pod("a", full()), pod("b", None), {"metadata": {"annotations": full()}}])
    assert list(ids) == [PodRef(namespace="t", name="a")]


def acc(name: str, drafts: float, per_pos: tuple[float, ...], tokens: float | None = None) -> PodAcceptance:
    return PodAcceptance(
        namespace="t",
        pod=name,
        drafts=drafts,
        draft_tokens=tokens,
        accepted_per_position=per_pos,
        model_name=T,
    )


def test_join_sums_pods_on_their_common_positions() -> None:
    ids = {
        PodRef(namespace="t", name=n): DraftIdentity(target_model=T, draft_model=D, method=M) for n in "abc"
    }
    samples, gaps = join_acceptance(
        [acc("a", 100, (80, 60, 40, 30), 400), acc("b", 50, (40, 30), None), acc("c", 0, (0, 0))], ids
    )
    assert gaps == []
    (s,) = samples
    assert (s.target_model, s.draft_model, s.method) == (T, D, M)
    assert s.drafts == 150
    assert s.accepted_per_position == [120, 90]
    assert s.draft_tokens == 400 + 50 * 2  # the missing count estimated as drafts x k, not 0


def test_join_separates_identities_and_reports_unmapped_pods() -> None:
    ids = {
        PodRef(namespace="t", name="a"): DraftIdentity(target_model=T, draft_model=D, method=M),
        PodRef(namespace="t", name="b"): DraftIdentity(draft_model="ng", method="ngram"),
    }
    samples, gaps = join_acceptance([acc("a", 10, (5,)), acc("b", 10, (3,)), acc("z", 10, (1,))], ids)
    assert [(s.target_model, s.method, s.drafts) for s in samples] == [(T, "eagle3", 10), (T, "ngram", 10)]
    assert gaps == [Gap("acceptance", GapCode.UNMAPPED, "t/z: speculative counters but no draft identity")]


def test_build_snapshot_is_the_decide_type() -> None:
    reading = TelemetryReading(
        time=datetime(2026, 1, 1, tzinfo=UTC),
        pod_acceptance=[acc("a", 10, (5,))],
        gaps=[Gap("tpot", GapCode.NAN, "t/b: value is NaN")],
    )
    snap = build_snapshot(reading, {PodRef(namespace="t", name="a"): DraftIdentity(draft_model=D, method=M)})
    assert isinstance(snap, TelemetrySnapshot)
    assert [g.reason for g in snap.missing] == ["nan: t/b: value is NaN"]
    # Round-trips through the wire form, as `sovereignspec decide` reads it from a file.
    assert TelemetrySnapshot.model_validate(snap.wire()) == snap


def test_join_fills_a_zero_draft_token_count_as_the_model_does() -> None:
    """A pod whose draft-token counter reads 0 while it drafted is read as the model reads a 0 count (full
    length, drafts x k), for one pod as in a pool: one rule (`full_draft_tokens`), not two."""
    ids = {
        PodRef(namespace="t", name=n): DraftIdentity(target_model=T, draft_model=D, method=M) for n in "ab"
    }
    (one,), _ = join_acceptance([acc("a", 10, (5, 2, 1), 0.0)], ids)
    assert one.draft_tokens == 30
    (pooled,), _ = join_acceptance([acc("a", 10, (5, 2, 1), 0.0), acc("b", 20, (9, 4, 1), 55.0)], ids)
    assert pooled.draft_tokens == 30 + 55
    assert full_draft_tokens(10, None, 3) == full_draft_tokens(10, 0.0, 3) == 30
    assert full_draft_tokens(10, 25.0, 3) == 25
