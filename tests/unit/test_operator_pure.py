"""The operator's pure pieces: Active condition, drift verdicts and hysteresis, Kueue-shape tolerance."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from sovereignspec.api.speculation_policy import SpeculationPolicy
from sovereignspec.model.workload import CheckEntry
from sovereignspec.operator.admission_checks import active_condition
from sovereignspec.operator.drift import DriftResult, SweepPace, drift_condition, grace_over, k_at

NOW = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC)


def _check(
    params: dict[str, str] | None, conditions: list[dict[str, object]] | None = None
) -> dict[str, object]:
    spec: dict[str, object] = {"controllerName": "sovereignspec.io/admission"}
    if params is not None:
        spec["parameters"] = params
    return {
        "metadata": {"name": "c", "generation": 3},
        "spec": spec,
        "status": {"conditions": conditions or []},
    }


PARAMS = {"apiGroup": "sovereignspec.io", "kind": "SpeculationPolicy", "name": "p"}


def test_active_needs_an_existing_valid_policy() -> None:
    missing = active_condition(_check(PARAMS), {}, NOW)
    assert missing is not None and (missing["status"], missing["reason"]) == ("False", "PolicyNotFound")
    invalid = active_condition(_check(PARAMS), {"p": "kMax: must be >= 1"}, NOW)
    assert invalid is not None and invalid["reason"] == "PolicyInvalid" and "kMax" in invalid["message"]
    none = active_condition(_check(None), {}, NOW)
    assert none is not None and none["reason"] == "ParametersMissing"
    wrong = active_condition(_check({**PARAMS, "kind": "ConfigMap"}), {}, NOW)
    assert wrong is not None and wrong["reason"] == "ParametersInvalid"
    ok = active_condition(_check(PARAMS), {"p": SpeculationPolicy()}, NOW)
    assert ok is not None and ok["status"] == "True" and ok["observedGeneration"] == 3
    assert ok["lastTransitionTime"] == "2026-11-29T10:00:00Z"


def test_active_condition_is_level_based_and_keeps_its_transition_time() -> None:
    first = active_condition(_check(PARAMS), {"p": SpeculationPolicy()}, NOW)
    assert first is not None
    assert (
        active_condition(_check(PARAMS, [first]), {"p": SpeculationPolicy()}, NOW + timedelta(hours=1))
        is None
    )
    # Same status, new message (e.g. generation bump): time kept.
    older = {**first, "observedGeneration": 2}
    again = active_condition(_check(PARAMS, [older]), {"p": SpeculationPolicy()}, NOW + timedelta(hours=1))
    assert again is not None and again["lastTransitionTime"] == first["lastTransitionTime"]
    # Status flips: time moves.
    flipped = active_condition(_check(PARAMS, [first]), {}, NOW + timedelta(hours=1))
    assert flipped is not None and flipped["lastTransitionTime"] == "2026-11-29T11:00:00Z"


def _cfg(rows: list[list[int]]) -> str:
    return json.dumps(
        {
            "method": "eagle3",
            "num_speculative_tokens": max(r[2] for r in rows),
            "num_speculative_tokens_per_batch_size": rows,
        }
    )


def test_k_at_reads_the_schedule() -> None:
    cfg = _cfg([[1, 3, 5], [4, 15, 3], [16, 1024, 0]])
    assert [k_at(cfg, b) for b in (1, 3, 4, 15, 16, 1024)] == [5, 5, 3, 3, 0, 0]
    assert k_at("", 8) == 0


def _result(drifted: bool, message: str = "m", grace: int = 60) -> DriftResult:
    return DriftResult(drifted, "a", "b", message, reconfigure=True, drift_grace_seconds=grace)


def test_drift_condition_and_grace() -> None:
    cond = drift_condition(None, _result(True), 1, NOW)
    assert cond is not None and cond["status"] == "True" and cond["reason"] == "SpeculationDrifted"
    assert drift_condition(cond, _result(True), 1, NOW + timedelta(seconds=5)) is None  # unchanged: no write
    assert not grace_over(cond, _result(True, grace=60), NOW + timedelta(seconds=59))
    assert grace_over(cond, _result(True, grace=60), NOW + timedelta(seconds=60))
    cleared = drift_condition(cond, _result(False), 1, NOW + timedelta(seconds=90))
    assert cleared is not None and cleared["status"] == "False"
    assert cleared["lastTransitionTime"] == "2026-11-29T10:01:30Z"
    assert not grace_over(cleared, _result(True), NOW + timedelta(hours=1))


def test_a_drift_message_whose_verdict_holds_is_rewritten_at_most_every_refresh_period() -> None:
    """Live figures in a NoDrift message move with every telemetry refresh: it is rewritten only once
    `refresh_seconds` have passed since the last write; a new status, or a drifted message, at once."""
    first = drift_condition(None, _result(False, "S_real 1.88"), 1, NOW, 300)
    assert first is not None
    assert first["lastUpdateTime"] == first["lastTransitionTime"] == "2026-11-29T10:00:00Z"
    later = NOW + timedelta(seconds=299)
    assert drift_condition(first, _result(False, "S_real 1.91"), 1, later, 300) is None
    due = drift_condition(first, _result(False, "S_real 1.91"), 1, NOW + timedelta(seconds=300), 300)
    assert due is not None and due["message"] == "S_real 1.91"
    assert due["lastTransitionTime"] == "2026-11-29T10:00:00Z"
    assert due["lastUpdateTime"] == "2026-11-29T10:05:00Z"
    flipped = drift_condition(due, _result(True, "k 3 -> 4"), 1, NOW + timedelta(seconds=301), 300)
    assert flipped is not None and flipped["status"] == "True"  # a new verdict does not wait
    assert flipped["lastTransitionTime"] == flipped["lastUpdateTime"] == "2026-11-29T10:05:01Z"
    # A drifted verdict's message says what k would become, which a user acts on: it never waits.
    climbed = drift_condition(flipped, _result(True, "k 3 -> 0"), 1, NOW + timedelta(seconds=302), 300)
    assert climbed is not None and climbed["message"] == "k 3 -> 0"
    assert climbed["lastTransitionTime"] == "2026-11-29T10:05:01Z"
    # Written before lastUpdateTime existed (or by decision_status at admission): lastTransitionTime counts.
    old = {"type": "Drift", "status": "False", "reason": "NoDrift", "message": "a",
           "lastTransitionTime": "2026-11-29T10:00:00Z"}  # fmt: skip
    assert drift_condition(old, _result(False, "b"), 1, NOW + timedelta(seconds=10), 300) is None
    assert drift_condition(old, _result(False, "b"), 1, NOW + timedelta(seconds=10), 0) is not None


def test_check_entries_tolerate_fields_newer_kueue_adds() -> None:
    entry = CheckEntry.model_validate(
        {
            "name": "c",
            "state": "Pending",
            "message": "Reset to Pending after eviction",
            "retryCount": 2,
            "someFutureField": {"x": 1},
        }
    )
    assert entry.retry_count == 2 and entry.state == "Pending"


def test_pod_integration_workloads_take_the_pods_metadata() -> None:
    from sovereignspec.kube.pod_workloads import owner_pod, with_pod_metadata

    wl = {
        "metadata": {
            "namespace": "web",
            "name": "pod-svc-abc",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "svc-abc", "uid": "u"}],
        },
        "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
    }
    assert owner_pod(wl) == ("web", "svc-abc")
    out = with_pod_metadata(wl, {"app": "svc"}, {"sovereignspec.io/class": "interactive"})
    meta = out["spec"]["podSets"][0]["template"]["metadata"]
    assert meta == {"labels": {"app": "svc"}, "annotations": {"sovereignspec.io/class": "interactive"}}
    assert "metadata" not in wl["spec"]["podSets"][0]["template"]  # the input is not mutated
    job_owned = {"metadata": {"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j"}]}}
    assert owner_pod(job_owned) is None


def test_sweep_pace_keeps_a_share_of_the_operators_cpu() -> None:
    sweep, proc, wall = [0.0], [0.0], [100.0]

    def pace_of(share: float, floor: float) -> SweepPace:
        return SweepPace(
            share, floor=floor, cpu=lambda: sweep[0], process_cpu=lambda: proc[0], clock=lambda: wall[0]
        )

    def item(cpu: float, others: float = 0.0, elapsed: float | None = None) -> None:
        sweep[0] += cpu
        proc[0] += cpu + others
        wall[0] += cpu + others if elapsed is None else elapsed

    pace = pace_of(0.1, 0.02)
    assert pace.delay() == 0.0  # nothing spent yet
    pace.resume()
    item(0.01, others=0.09)  # 10 ms of 100 ms of the operator's CPU: within the share
    assert pace.delay() == 0.0
    pace.resume()
    item(0.01)  # the operator otherwise idle: 20 ms of 110 ms is above 10 %
    # not above the floor (2 % of wall time) before 1 s: wait, polling for others' CPU meanwhile
    assert pace.delay() == SweepPace.POLL
    wall[0] += 0.25
    proc[0] += 0.05  # other handlers ran while the sweep slept: not the sweep's CPU
    assert pace.delay() == SweepPace.POLL  # 20 of 160 ms
    wall[0] += 0.25
    proc[0] += 0.04
    assert pace.delay() == 0.0  # 20 of 200 ms
    assert abs(pace.spent - 0.02) < 1e-9

    idle = pace_of(0.1, 0.02)
    idle.resume()
    item(0.01)  # alone on the core: the floor paces it, 10 ms per 0.5 s of wall time
    assert abs(idle.delay() - 0.25) < 1e-9  # at most one poll
    wall[0] += 0.25
    assert abs(idle.delay() - 0.24) < 1e-9  # 0.5 s since the start, minus the 10 ms of the item
    wall[0] += 0.24
    assert idle.delay() == 0.0
    assert idle.delay() == 0.0  # asking again counts nothing twice

    unpaced = pace_of(1.0, 0.02)
    unpaced.resume()
    item(5.0)
    assert unpaced.delay() == 0.0


def test_sweep_pace_yields_to_admissions() -> None:
    """While the operator answers admission checks the sweep keeps under busy_share of the CPU spent
    meanwhile; that time earns the idle share and the wall-time floor nothing, and the other way round."""
    sweep, proc, wall, answering = [0.0], [0.0], [100.0], [True]
    pace = SweepPace(
        0.1, floor=0.02, busy_share=0.02, answering=lambda: answering[0],
        cpu=lambda: sweep[0], process_cpu=lambda: proc[0], clock=lambda: wall[0],
    )  # fmt: skip
    pace.resume()
    sweep[0] += 0.01
    proc[0] += 0.01 + 0.49  # 10 ms of the operator's 500 ms: within 2 %
    wall[0] += 5.0
    assert pace.delay() == 0.0
    pace.resume()
    sweep[0] += 0.01
    proc[0] += 0.01 + 0.04  # 20 ms of 550 ms: above 2 %, though within the idle share (10 %) ...
    wall[0] += 5.0  # ... and far below the floor's 2 % of 10 s
    assert pace.delay() == SweepPace.POLL  # waits for the decisions' CPU
    proc[0] += 0.45  # 20 ms of 1 s
    assert pace.delay() == 0.0
    pace.resume()
    sweep[0] += 0.01  # 30 ms of 1.01 s: over the busy share again
    proc[0] += 0.01
    assert pace.delay() == SweepPace.POLL
    answering[0] = False  # the burst is over: a new ledger, nothing spent in it yet
    assert pace.delay() == 0.0
    pace.resume()
    sweep[0] += 0.1
    proc[0] += 0.1  # 100 ms of the 100 ms spent since: above 10 %, so the floor paces it ...
    assert pace.delay() == SweepPace.POLL  # ... and the burst's 10 s of wall time earned it nothing
    wall[0] += 4.75
    assert abs(pace.delay() - 0.25) < 1e-9  # 100 ms needs 5 s of idle wall time at 2 %
    wall[0] += 0.25
    assert pace.delay() == 0.0
    assert abs(pace.spent - 0.13) < 1e-9
    assert abs(pace.busy.spent - 0.03) < 1e-9 and abs(pace.idle.wall - 5.0) < 1e-9
    answering[0] = True  # answering again: the idle time earned the busy ledger nothing
    assert pace.delay() == SweepPace.POLL

    capped = SweepPace(0.05, floor=0.02, busy_share=0.5)
    assert capped.busy_share == 0.05  # never above the CPU share


def test_indexed_bodies_leave_out_managed_fields_and_keep_the_rest() -> None:
    from sovereignspec.operator.handlers import _lean

    body = {
        "metadata": {"name": "w", "namespace": "ns", "uid": "u", "managedFields": [{"manager": "kueue"}]},
        "spec": {"podSets": [{"name": "main", "count": 1}]},
        "status": {"admissionChecks": [{"name": "c", "state": "Pending"}]},
    }
    lean = _lean(body)
    assert "managedFields" not in lean["metadata"]
    assert lean["metadata"] == {"name": "w", "namespace": "ns", "uid": "u"}
    assert lean["spec"] == body["spec"] and lean["status"] == body["status"]
    assert body["metadata"]["managedFields"] == [{"manager": "kueue"}]  # the event's body is not changed
    assert _lean({"metadata": {"name": "x"}}) == {"metadata": {"name": "x"}}
