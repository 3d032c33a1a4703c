"""Issue 18: the joined telemetry is rebuilt only when the identity of a pod that drafted in the reading's
window changes. In a burst every decision saw a new pod, so new identities, and the join over every
speculating pod ran again per decision (py-spy at 1,000 workloads: 9.6 ms per decision in the snapshot,
three quarters of it the join; docs/scale.md, session 24)."""

from __future__ import annotations

from datetime import UTC, datetime

from sovereignspec.model.cluster import PodInfo
from sovereignspec.model.telemetry import PodRef
from sovereignspec.operator import mirror as mirror_module
from sovereignspec.operator.controller import Controller
from sovereignspec.operator.health import HealthState
from sovereignspec.operator.mirror import Mirror
from sovereignspec.operator.settings import OperatorSettings
from sovereignspec.telemetry.annotations import DraftIdentity
from sovereignspec.telemetry.join import build_snapshot, joined_refs
from sovereignspec.telemetry.reading import PodAcceptance, TelemetryReading

NS, T = "bank", "meta-llama/Llama-3.1-8B-Instruct"
EAGLE = DraftIdentity(target_model=T, draft_model="eagle3-a", method="eagle3")
OTHER = DraftIdentity(target_model=T, draft_model="eagle3-b", method="eagle3")


def _pod(name: str) -> PodInfo:
    return PodInfo(namespace=NS, name=name, node="n-1", gpu_request=1)


def _put(m: Mirror, name: str, ident: DraftIdentity | None) -> None:
    m.put_pod((NS, name), _pod(name), PodRef(namespace=NS, name=name), ident)


def _reading() -> TelemetryReading:
    drafted = PodAcceptance(namespace=NS, pod="a", drafts=100, accepted_per_position=(80, 60), model_name=T)
    idle = PodAcceptance(namespace=NS, pod="c", drafts=0, accepted_per_position=(0, 0), model_name=T)
    return TelemetryReading(time=datetime(2026, 12, 4, tzinfo=UTC), pod_acceptance=[drafted, idle])


def test_joined_refs_are_the_pods_that_drafted() -> None:
    assert joined_refs(_reading().pod_acceptance) == {PodRef(namespace=NS, name="a")}


def test_the_join_is_kept_while_only_pods_that_did_not_draft_change() -> None:
    ctrl = Controller(settings=OperatorSettings(), api=None, health=HealthState())  # type: ignore[arg-type]
    ctrl._reading = _reading()
    m = ctrl.mirror
    _put(m, "a", EAGLE)
    first = ctrl.telemetry(m.identities())
    assert first is not None and [s.draft_model for s in first.acceptance] == ["eagle3-a"]

    _put(m, "b", OTHER)  # a new pod, not in the reading's window
    _put(m, "c", OTHER)  # in the reading, but it has not drafted
    ids = m.identities()
    kept = ctrl.telemetry(ids)
    assert kept is first
    assert kept == build_snapshot(ctrl._reading, ids)  # what a rebuild would give

    _put(m, "a", OTHER)  # the pod that drafted now names another draft: rebuilt
    ids = m.identities()
    rebuilt = ctrl.telemetry(ids)
    assert rebuilt is not first and rebuilt == build_snapshot(ctrl._reading, ids)
    assert rebuilt is not None and [s.draft_model for s in rebuilt.acceptance] == ["eagle3-b"]

    m.put_pod((NS, "a"), None)  # gone: rebuilt, its counters no longer joined
    gone = ctrl.telemetry(m.identities())
    assert gone is not None and gone.acceptance == []


def test_identities_not_from_the_mirror_are_compared_whole() -> None:
    ctrl = Controller(settings=OperatorSettings(), api=None, health=HealthState())  # type: ignore[arg-type]
    ctrl._reading = _reading()
    a = PodRef(namespace=NS, name="a")
    first = ctrl.telemetry({a: EAGLE})
    assert ctrl.telemetry({a: EAGLE}) is first
    other = ctrl.telemetry({a: OTHER})
    assert other is not None and [s.draft_model for s in other.acceptance] == ["eagle3-b"]


def test_the_identity_log_says_when_it_no_longer_reaches_back() -> None:
    m = Mirror()
    assert m.identity_changes(0) == set()
    _put(m, "a", EAGLE)
    v = m.identity_version
    _put(m, "b", EAGLE)
    _put(m, "a", OTHER)  # old and new entry of one change
    assert m.identity_changes(v) == {PodRef(namespace=NS, name="b"), PodRef(namespace=NS, name="a")}
    assert m.identity_changes(m.identity_version) == set()
    _put(m, "b", EAGLE)  # no change: nothing logged
    assert m.identity_changes(m.identity_version) == set()
    for i in range(mirror_module.IDENTITY_LOG):
        _put(m, f"p-{i}", EAGLE)
    assert m.identity_changes(v) is None  # forgotten: the caller must rebuild
    assert m.identity_changes(m.identity_version - 1) == {
        PodRef(namespace=NS, name=f"p-{mirror_module.IDENTITY_LOG - 1}")
    }
