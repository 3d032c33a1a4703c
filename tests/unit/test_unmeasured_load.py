"""Load not measured yet (docs/decision.md, "Load not measured yet"): an engine that started within the
telemetry window has not reached its GPU's windowed tensor-active, so the GPU reads idle. Its GPU's load
is at least what the engines on it predict alone: from their reported running sequences, or, before an
engine reports, from its claimed expected batch."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.model.cluster import ClusterSnapshot, PodInfo
from sovereignspec.model.profiles import profile_book
from sovereignspec.model.steptime import StepCurve
from sovereignspec.model.telemetry import EngineSample, GpuSample, PodRef
from sovereignspec.policy.node_state import claims_of, placed_as_distributed, tied_gpus
from sovereignspec.policy.unmeasured_load import busy_alone, with_unmeasured_load
from tests.unit.test_keep_capacity import H100, TARGET, _decide, _snapshot

BOOK = profile_book(SpeculationPolicySpec())


def _pod(name: str, **claims: str) -> PodInfo:
    ann = {f"sovereignspec.io/{k.replace('_', '-')}": v for k, v in claims.items()}
    return PodInfo(namespace="web", name=name, node="n", phase="Running", gpu_request=1, annotations=ann)


def _busy(pod: PodInfo, running: float | None) -> float | None:
    return busy_alone(claims_of(pod), H100, BOOK, StepCurve.from_profile, 8, 1024, running)


def _gpu(u: float | None, *pods: str) -> GpuSample:
    refs = [PodRef(namespace="web", name=p) for p in pods]
    return GpuSample(node="n", uuid="g", tensor_active=u, pods=refs)


def test_busy_fraction_is_the_compute_share_of_the_plain_step() -> None:
    prof = BOOK.find(H100, TARGET)
    assert prof is not None
    curve = StepCurve.from_profile(prof)
    pod = _pod("a", target_model=TARGET, expected_batch="44")
    t = curve.t_scalar(44.0)
    assert _busy(pod, None) == (t - curve.t0) / t
    assert _busy(pod, 8.0) == _busy(_pod("b", target_model=TARGET), None)  # unclaimed: the default batch
    assert (_busy(pod, 8.0) or 0) < (_busy(pod, 64.0) or 0) < 1
    assert _busy(_pod("c"), None) is None  # no target model: not an engine that can be priced
    assert _busy(_pod("d", target_model=TARGET, expected_batch="many"), None) == _busy(pod, 8.0)
    for bad in ("0", "-3", "9" * 100):  # read as the engine's own decision read it: the default
        assert _busy(_pod("e", target_model=TARGET, expected_batch=bad), None) == _busy(pod, 8.0)


def test_an_engine_that_reports_before_its_load_is_in_the_window_floors_the_gpu_load() -> None:
    pod = _pod("a", target_model=TARGET)
    engines = {("web", "a"): EngineSample(namespace="web", pod="a", running=44.0)}
    got = with_unmeasured_load([_gpu(0.02, "a")], {("web", "a"): pod}, engines, _busy)
    assert got[0].tensor_active == _busy(pod, 44.0)
    measured = [_gpu(0.9, "a")]  # once measured, the measurement stands
    assert with_unmeasured_load(measured, {("web", "a"): pod}, engines, _busy) is measured


def test_an_engine_that_does_not_report_yet_is_priced_at_its_claimed_batch() -> None:
    pods = {("web", "a"): _pod("a", target_model=TARGET, expected_batch="44"), ("web", "b"): _pod("b")}
    got = with_unmeasured_load([_gpu(0.0, "a", "b")], pods, {}, _busy)
    assert got[0].tensor_active == _busy(pods[("web", "a")], None)
    unknown = [_gpu(None, "a")]  # unknown load stays unknown: speculation is off there (I6)
    assert with_unmeasured_load(unknown, pods, {}, _busy) is unknown


@given(
    st.floats(0.0, 1.0),
    st.lists(st.tuples(st.integers(1, 512), st.booleans(), st.booleans()), max_size=6),
)
def test_the_load_is_the_measurement_or_the_engines_floor_never_past_one(
    u: float, engines: list[tuple[int, bool, bool]]
) -> None:
    pods, samples, names = {}, {}, []
    for i, (batch, priced, reports) in enumerate(engines):
        name = f"p{i}"
        names.append(name)
        claims = {"target_model": TARGET, "expected_batch": str(batch)} if priced else {}
        pods[("web", name)] = _pod(name, **claims)
        if reports:
            samples[("web", name)] = EngineSample(namespace="web", pod=name, running=float(batch))
    got = with_unmeasured_load([_gpu(u, *names)], pods, samples, _busy)[0].tensor_active
    floor = sum(_busy(p, samples[k].running if k in samples else None) or 0.0 for k, p in pods.items())
    assert got == max(u, min(1.0, floor))


def test_the_next_workload_of_a_burst_does_not_pile_onto_a_gpu_that_reads_idle() -> None:
    """random-001-025, seed 1: s-3 (batch 44) started on a time-sliced H100 15 s before s-4 (batch 36)
    arrived; the GPU still read idle, s-4 joined it and both lost a third of their rate."""
    idle = [(0.0, [])]
    started = [(0.0, [44])]  # reports 44 running sequences; its load is not in the window yet
    snap = _snapshot([("busy", H100, 2, started), ("free", H100, 2, idle)])
    pods = [p.model_copy(update={"annotations": {**p.annotations, "sovereignspec.io/target-model": TARGET}})
            for p in snap.pods]  # fmt: skip
    snap = snap.model_copy(update={"pods": pods})
    got = _decide(snap, "interactive", 36)
    assert got.node == "free"
    load = {c.node: c.load for c in got.candidates}
    assert load["free"] == 0.0 and load["busy"] == pytest.approx(_busy(pods[0], 44.0), abs=1e-6)


def test_a_pod_no_sample_names_yet_floors_every_gpu_with_room_for_it() -> None:
    """dcgm-exporter names a pod a collection after it starts: until then, on a time-sliced node, it may
    hold any GPU with a free replica, and each such GPU is priced with it; a full GPU cannot hold it."""
    pods = {("web", "a"): _pod("a", target_model=TARGET, expected_batch="44"),
            ("web", "new"): _pod("new", target_model=TARGET, expected_batch="36")}  # fmt: skip
    full, room, empty = _gpu(0.0, "a", "x"), _gpu(0.0, "a"), _gpu(0.0)
    got = with_unmeasured_load([full, room, empty], pods, {}, _busy, [("web", "new")], per_gpu=2)
    a, new = _busy(pods[("web", "a")], None) or 0.0, _busy(pods[("web", "new")], None) or 0.0
    assert [g.tensor_active for g in got] == [a, min(1.0, a + new), new]
    unpriced = {("web", "b"): _pod("b")}  # no target model: nothing to price
    assert (
        with_unmeasured_load([empty], unpriced, {}, _busy, [("web", "b")], per_gpu=2)[0].tensor_active == 0.0
    )
    assert with_unmeasured_load([_gpu(None)], pods, {}, _busy, [("web", "new")], 2)[0].tensor_active is None


def test_the_next_workload_of_a_burst_does_not_pile_onto_pods_no_sample_names_yet() -> None:
    """random-003-g3-036, seed 1: s-1, s-4 and s-6 arrived 10-16 s apart and each was sent to the same
    time-sliced node, whose GPUs still read idle and named none of the pods bound there."""
    idle = [(0.0, [])]
    snap = _snapshot([("busy", H100, 2, idle), ("free", H100, 2, idle)])
    bound = PodInfo(namespace="web", name="s-1", node="busy", phase="Running", gpu_request=1,
                    annotations={"sovereignspec.io/target-model": TARGET,
                                 "sovereignspec.io/expected-batch": "64"})  # fmt: skip
    snap = snap.model_copy(update={"pods": [*snap.pods, bound]})
    assert _decide(snap, "interactive", 36).node == "free"


def test_pods_no_sample_names_yet_are_placed_as_a_distributed_device_plugin_places_them() -> None:
    """Each goes to a GPU with the fewest pods, the least loaded of those: the GPUs left with the fewest
    are the ones a next pod may get, judged at their highest load; a pod that finds every GPU full is
    left unplaced."""
    gpus = [
        GpuSample(node="n", uuid=f"g{i}", tensor_active=u, pods=[PodRef(namespace="web", name=p) for p in ps])
        for i, (u, ps) in enumerate([(0.5, ["a"]), (0.3, []), (0.1, [])])
    ]
    new = [("web", x) for x in ("x", "y", "z", "v", "w")]
    got = placed_as_distributed(gpus, new[:3], per_gpu=2)
    assert [[p.name for p in g.pods] for g in got] == [["a"], ["y"], ["x", "z"]]
    full = placed_as_distributed(gpus, new, per_gpu=2)
    assert [[p.name for p in g.pods] for g in full] == [["a", "w"], ["y", "v"], ["x", "z"]]
    assert placed_as_distributed(gpus, [], per_gpu=2) == gpus
    # x chose between the two empty GPUs, z among all three, each for g2: had z gone elsewhere, a next
    # pod could get g2 beside x alone. The GPUs with the fewest (g0, g1) are a next pod's anyway.
    alone = tied_gpus(gpus, new[:3], per_gpu=2)
    assert [(g.uuid, [p.name for p in g.pods]) for g in alone] == [("g2", ["x"])]
    assert tied_gpus(gpus, new[:1], per_gpu=2) == [gpus[2]]
    assert tied_gpus(gpus, new, per_gpu=2) == []  # every GPU full, whichever way the ties went
    assert tied_gpus(gpus[:2], new[:1], per_gpu=2) == []  # one GPU had the fewest: no choice
    assert placed_as_distributed(gpus, new, per_gpu=1)[1:] == [
        g.model_copy(update={"pods": [PodRef(namespace="web", name=n)]})
        for g, n in zip(gpus[1:], ("y", "x"), strict=True)
    ]


def test_pods_no_sample_names_yet_are_placed_in_key_order_whatever_order_the_snapshot_lists() -> None:
    """A patched index lists a node's pods in another order than a fresh one (a hypothesis example of
    `test_patched_snapshot_decides_like_a_fresh_one`): x and y, bound to a time-sliced node whose samples
    name neither, go x to the empty GPU and y beside the engine already there, in either order, so the
    new pod's GPU and neighbour are x's."""
    snap = _snapshot([("n", H100, 2, [(0.0, [8]), (0.0, [])])])
    new = [
        PodInfo(namespace="web", name=x, node="n", phase="Running", gpu_request=1,
                annotations={"sovereignspec.io/target-model": TARGET, "sovereignspec.io/tpot-slo-ms": "200"})
        for x in ("x", "y")
    ]  # fmt: skip
    outputs = []
    for order in (new, new[::-1]):
        got = _decide(snap.model_copy(update={"pods": [*snap.pods, *order]}), "interactive", 8)
        assert got.node == "n"
        outputs.append(got.output())
    assert outputs[0] == outputs[1]
    # y's GPU was a tie (each held one pod once x took the empty one): y may hold either, and the new
    # pod the other.
    assert [nb["pod"] for nb in outputs[0]["neighbours"]] == ["n-g0-p0", "x"]


def _tie(named: bool) -> ClusterSnapshot:
    """Three time-sliced H100s: one full, one with a busier engine, one with an engine within `safety` of
    its SLO (TPOT 195 ms, SLO 200), and a pod x bound to the node, named by the third's sample or by none."""
    snap = _snapshot([("n", H100, 2, [(0.3, [8, 8]), (0.2, [8]), (0.1, [8])])])
    tel = snap.telemetry
    engines = [e.model_copy(update={"tpot_seconds": 0.195}) if e.pod == "n-g2-p0" else e for e in tel.engines]
    x = PodRef(namespace="web", name="x")
    gpus = [g.model_copy(update={"pods": [*g.pods, x]}) if named and g.uuid == "n-2" else g for g in tel.gpus]
    claims = {"sovereignspec.io/target-model": TARGET, "sovereignspec.io/tpot-slo-ms": "200"}
    unnamed = PodInfo(namespace="web", name="x", node="n", phase="Running", gpu_request=1, annotations=claims)
    telemetry = tel.model_copy(update={"engines": engines, "gpus": gpus})
    return snap.model_copy(update={"pods": [*snap.pods, unnamed], "telemetry": telemetry})


def test_the_gpus_of_a_tie_are_judged_whichever_the_plugin_gave_a_pod_no_sample_names_yet() -> None:
    """heldout-clinic, seed 1: triage-chat, bound to c-a100 but named by no sample yet, tied between the
    GPU of coding-audit and that of scribe-1, and was placed beside scribe-1, the less loaded; the next
    workload was then judged beside coding-audit alone, and got scribe-1's GPU. The plugin's tie-break is
    unknown, so a new pod may get either GPU of the tie, as it reads without x: the neighbour condition
    sees the engine within `safety` of its SLO beside which x was placed, and turns speculation off."""
    got = _decide(_tie(named=False), "interactive", 4)
    assert got.node == "n"
    assert [nb["pod"] for nb in got.output()["neighbours"]] == ["n-g1-p0", "n-g2-p0"]
    assert not got.speculative.enabled
    assert got.reasons[0].type == "NeighbourSlo"
    # Once a sample names x on that GPU there is no tie: the GPU with room is the other one.
    known = _decide(_tie(named=True), "interactive", 4)
    assert [nb["pod"] for nb in known.output()["neighbours"]] == ["n-g1-p0"]
    assert known.speculative.enabled
