"""SovereignSpec in the simulator: the operator's objects, built from the simulator's *noisy, lagged*
telemetry only, handed to the real `sovereignspec.policy.decide.decide()`.

Telemetry the policy sees is what the operator holds: the answers to the policy's queries at its last
refresh (every REFRESH_S, at a phase drawn per seed), of data LAG_S old then, so 15-25 s old. Each query
reads the policy's `telemetry.window` (default 2m), as the built-in queries do: DCGM tensor-active
averaged per pod's series, each over the pod's life in the window, the largest per GPU
(`evidence/tensor_reading`), vLLM TPOT as the policy's `tpotStatistic` reads the per-request histogram
(`evidence/tpot_reading`), each with noise, and spec-decode counters summed per engine (per-position up
to the k the engine ran); `num_requests_running` as old. A GPU sample names the pods its data saw and
counts their framebuffer (dcgm-exporter labels a series with its pod from a collection after the pod
starts), while the cluster snapshot's pods are current, as the API server's are. docs/evidence.md says
what each of these replaced.
As in the operator with its defaults (`reconfigureOnNeighbourHarm: true`, `reconfigureOnDrift: false`),
the simulator runs the operator's drift rule itself (`sovereignspec.policy.drift.evaluate_drift`, the
function the operator's sweep calls): every DRIFT_PERIOD_S, for each admitted subject, on the cluster
snapshot with its pods carrying the decision annotation (so the rule finds its own pods and takes their
load out of their GPUs' tensor-active). As in the operator, a drift verdict must be one the policy
re-admits on (neighbour harm, or any drift with `reconfigureOnDrift`), and the drift must have lasted the
verdict's grace (`neighbourHarmGraceSeconds` for harm, `driftGraceSeconds` otherwise; checks in a row),
before the workload is re-admitted; then the engine restarts with the drift
check's schedule on the same node: RESTART_S without tokens (the operator answers drift with Retry:
evict, re-admit, a new pod that reloads the model; the simulator keeps the node).

`calibrated_policy()` is the policy a user would write with the shipped calibrated profiles
(sovereignspec/evidence/profiles/published.yaml) under `acceleratorProfiles`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import yaml

from sovereignspec.api.meta import (
    ANNOTATION_CLASS,
    ANNOTATION_DECISION,
    ANNOTATION_DRAFT_MODEL,
    ANNOTATION_EXPECTED_BATCH,
    ANNOTATION_SPEC_METHOD,
    ANNOTATION_TARGET_MODEL,
    ANNOTATION_TPOT_SLO_MS,
    CONTROLLER_NAME,
    DEFAULT_JURISDICTION_LABEL,
    LABEL_GPU_PRODUCT,
    LABEL_HOSTNAME,
    ObjectMeta,
)
from sovereignspec.api.sovereignty_policy import SovereigntyPolicy, SovereigntyPolicySpec
from sovereignspec.api.speculation_decision import SpeculationDecision
from sovereignspec.api.speculation_policy import SpeculationPolicy, SpeculationPolicySpec
from sovereignspec.api.telemetry_spec import TelemetrySpec
from sovereignspec.evidence.policies import Scheduled, gpu_on_node, spread_place
from sovereignspec.evidence.sim import FloatArray, IntArray, Simulation
from sovereignspec.evidence.tensor_reading import tensor_as_read
from sovereignspec.evidence.tpot_reading import REQUEST_S, peak_mean_as_read, tpot_as_read
from sovereignspec.evidence.truth import GPU_TYPES, TARGET
from sovereignspec.model.cluster import AdmissionCheckInfo, ClusterSnapshot, NodeInfo, PodInfo
from sovereignspec.model.telemetry import AcceptanceSample, EngineSample, GpuSample, PodRef, TelemetrySnapshot
from sovereignspec.model.workload import CheckEntry, PodSetAssignment, PodSetInfo, WorkloadInfo
from sovereignspec.policy.decide import decide
from sovereignspec.policy.decision import Decision, speculation_decision_object
from sovereignspec.policy.drift import evaluate_drift
from sovereignspec.policy.request import AdmissionRequest, Policies

EPOCH = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC)
LAG_S = 15.0
"""Age of the data in Prometheus's answer when the operator reads it (scrape interval, rate window end)."""
REFRESH_S = 10.0
"""The operator's default `telemetry_refresh_seconds` (a unit test keeps the two equal): between two
refreshes, every decision and drift check reads the last one's answers."""
GPU_NOISE = 0.03
TPOT_NOISE = 0.03
CHECK = "sovereignspec"
DRIFT_PERIOD_S = 10.0
"""The operator's default `drift_interval_seconds` (a unit test keeps the two equal)."""
RESTART_S = 30.0
"""Evict, re-admit and reload an 8B engine (weights from the node's cache, CUDA graphs): ~30 s."""
PUBLISHED_PROFILES = Path(__file__).parent / "profiles" / "published.yaml"


def calibrated_policy(reconfigure_on_drift: bool = False) -> SpeculationPolicySpec:
    """The default policy plus the shipped calibrated AcceleratorProfiles, as a user would configure."""
    doc = yaml.safe_load(PUBLISHED_PROFILES.read_text())
    spec = dict(doc["spec"])
    spec["reconfigureOnDrift"] = reconfigure_on_drift
    return SpeculationPolicySpec.model_validate(spec)


def refresh_tick(sim: Simulation, tick: int) -> int:
    """The tick of the operator's last telemetry refresh at or before `tick`. Refreshes fall every
    REFRESH_S from a phase drawn per seed (the operator's start is not aligned with arrivals); the
    first is at tick 0."""
    period = max(1, round(REFRESH_S / sim.sc.dt_s))
    phase = int(np.random.default_rng([sim.seed, 4]).integers(period))
    return max(0, tick - (tick - phase) % period)


def data_tick(sim: Simulation, tick: int) -> int:
    """The last tick of the data the operator holds at `tick`: its last refresh's, LAG_S old then."""
    return max(0, refresh_tick(sim, tick) - round(LAG_S / sim.sc.dt_s))


def observe(
    sim: Simulation,
    tick: int,
    telemetry: TelemetrySpec,
    *,
    engines_visible: bool = True,
    acceptance_visible: bool = True,
) -> TelemetrySnapshot:
    """The telemetry snapshot the operator holds at `tick` (its last refresh, lagged, over the window,
    noisy). The ablations hide the engines' vLLM samples (`engines_visible`) or the spec-decode counters
    (`acceptance_visible`)."""
    dt = sim.sc.dt_s
    refreshed = refresh_tick(sim, tick)
    # One reading, one noise draw, until the next refresh.
    rng = np.random.default_rng([sim.seed, 3, refreshed])
    ref = data_tick(sim, tick)
    w_gpu = w_tpot = w_acc = slice(max(0, ref - max(1, round(telemetry.window_seconds / dt)) + 1), ref + 1)
    request_ticks = max(1, round(REQUEST_S / dt))
    peak_ticks = max(1, round(telemetry.tpot_peak_seconds / dt))
    placed = sim.placement[ref] if refreshed > 0 else sim.gpu_of
    started = sim.started[ref]
    gpus = []
    for j, g in enumerate(sim.gpus):
        gt = GPU_TYPES[g.kind]
        on = np.flatnonzero(placed == j)  # the pods the reading's data saw on this GPU
        tensor = 0.0
        if refreshed:
            load = tensor_as_read(sim.tensor[:, j], w_gpu, started[on])
            tensor = float(np.clip(load + rng.normal(0, GPU_NOISE), 0.0, 1.0))
        fb = max(0.0, gt.memory_mib * 0.9 * (1.0 - len(on) / int(sim.g_replicas[j]))) + 500.0
        pods = [PodRef(namespace=sim.sc.engines[e].tenant, name=sim.sc.engines[e].name) for e in on]
        gpus.append(
            GpuSample(node=g.node, uuid=f"GPU-{g.node}-{g.index}", model_name=gt.model_name,
                      tensor_active=tensor, fb_free_mib=fb, pods=pods)
        )  # fmt: skip
    engines, acceptance = [], []
    for e, eng in enumerate(sim.sc.engines):
        if placed[e] < 0 or not sim.active[w_tpot, e].any():
            continue
        life = slice(max(0, w_tpot.start - request_ticks + 1), w_tpot.stop)
        history, window = (sim.tpot[life, e], sim.tokens[life, e]), w_tpot.stop - w_tpot.start
        if telemetry.tpot_statistic == "PeakMean":
            tpot = peak_mean_as_read(*history, window, request_ticks, peak_ticks)
        else:
            tpot = tpot_as_read(*history, window, request_ticks, telemetry.tpot_quantile)
        noise = rng.normal(0, TPOT_NOISE)  # drawn either way: the noise stream stays the same
        read = max(1e-4, tpot * (1.0 + noise)) if np.isfinite(tpot) else None  # NaN quantile: missing
        if engines_visible:
            ran = sim.batch[w_tpot, e][sim.active[w_tpot, e]]  # min_over_time over the window
            engines.append(
                EngineSample(namespace=eng.tenant, pod=eng.name, model_name=TARGET.name,
                             tpot_seconds=read, running=float(sim.batch[ref, e]),
                             running_min=float(ran.min()), waiting=0.0)
            )  # fmt: skip
        drafts = float(sim.drafts[w_acc, e].sum())
        if eng.draft is not None and drafts > 0 and acceptance_visible:
            k_run = int(sim.k[w_acc, e].max())
            acc = sim.accepted[w_acc, e, :k_run].sum(axis=0)
            draft_tokens = float((sim.drafts[w_acc, e] * sim.k[w_acc, e]).sum())
            acceptance.append(
                AcceptanceSample(target_model=TARGET.name, draft_model=eng.draft.draft_model,
                                 method=eng.draft.method, drafts=drafts, draft_tokens=draft_tokens,
                                 accepted_per_position=[float(x) for x in acc], accepted=float(acc.sum()))
            )  # fmt: skip
    return TelemetrySnapshot(
        time=EPOCH + timedelta(seconds=ref * dt), gpus=gpus, engines=engines, acceptance=acceptance
    )


def snapshot(
    sim: Simulation,
    tick: int,
    policy: SpeculationPolicySpec,
    *,
    neighbours_visible: bool = True,
    acceptance_visible: bool = True,
) -> ClusterSnapshot:
    """The cluster as the operator sees it; pods carry their workload's claims (SLO, target model, the
    expected batch when claimed), as Kueue's pods carry their template's annotations, and subjects' pods
    the decision annotation Kueue's podSetUpdates put there (how the drift rule recognises a workload's
    own pods).

    Information ablations: without `neighbours_visible` no pod claims an SLO and no engine sample is
    visible (`sovereignspec-neighbour-blind`): no co-located pod is SLO-bound, so decide()'s neighbour
    condition never binds (DESIGN.md §2: a pod with neither an SLO annotation nor an engine sample does
    not constrain us), but decide() also loses the engines' TPOT and running sequences everywhere else;
    without `acceptance_visible` no spec-decode counters reach decide(): it runs on its acceptance
    priors alone. The neighbour condition itself is switched off in the policies, not here
    (`SovereignSpec(neighbour_condition=False)`)."""
    sc = sim.sc
    nodes = [
        NodeInfo(name=n.name, labels={LABEL_HOSTNAME: n.name, DEFAULT_JURISDICTION_LABEL: n.jurisdiction,
                                      LABEL_GPU_PRODUCT: GPU_TYPES[n.gpu].product},
                 gpu_allocatable=n.gpus * n.slots)
        for n in sc.nodes
    ]  # fmt: skip
    pods = [
        PodInfo(namespace=eng.tenant, name=eng.name, node=sim.gpus[int(sim.gpu_of[e])].node, phase="Running",
                gpu_request=1, annotations={**({ANNOTATION_TPOT_SLO_MS: f"{eng.slo_ms:g}"}
                                               if neighbours_visible else {}),
                                            ANNOTATION_TARGET_MODEL: TARGET.name,
                                            **({ANNOTATION_EXPECTED_BATCH: str(eng.expected_batch)}
                                               if eng.expected_batch is not None else {}),
                                            **({ANNOTATION_DECISION: eng.name} if eng.subject else {})})
        for e, eng in enumerate(sc.engines) if sim.gpu_of[e] >= 0
    ]  # fmt: skip
    tenants = sorted({eng.tenant for eng in sc.engines})
    sov = [
        SovereigntyPolicy(metadata=ObjectMeta(name=f"residency-{t}"),
                          spec=SovereigntyPolicySpec(tenants=[t], jurisdictions=list(j)))
        for t, j in sorted(sc.jurisdictions.items())
    ]  # fmt: skip
    return ClusterSnapshot.one_check(
        AdmissionCheckInfo(name=CHECK, controller_name=CONTROLLER_NAME),
        tenants,
        nodes=nodes,
        pods=pods,
        speculation_policies=[SpeculationPolicy(metadata=ObjectMeta(name="default"), spec=policy)],
        sovereignty_policies=sov,
        telemetry=observe(
            sim,
            tick,
            policy.telemetry,
            engines_visible=neighbours_visible,
            acceptance_visible=acceptance_visible,
        ),
    )


def workload(sim: Simulation, e: int, pin_node: str | None) -> WorkloadInfo:
    eng = sim.sc.engines[e]
    ann = {ANNOTATION_CLASS: eng.workload_class, ANNOTATION_TARGET_MODEL: TARGET.name,
           ANNOTATION_TPOT_SLO_MS: f"{eng.slo_ms:g}"}  # fmt: skip
    if eng.draft is not None:
        ann[ANNOTATION_DRAFT_MODEL] = eng.draft.draft_model
        ann[ANNOTATION_SPEC_METHOD] = eng.draft.method
    if eng.expected_batch is not None:
        ann[ANNOTATION_EXPECTED_BATCH] = str(eng.expected_batch)
    return WorkloadInfo(
        namespace=eng.tenant, name=eng.name, generation=1, queue_name="lq", quota_reserved=True,
        pod_sets=[PodSetInfo(name="main", count=1, gpus_per_pod=1, annotations=ann,
                             node_selector={LABEL_HOSTNAME: pin_node} if pin_node else {})],
        assignments=[PodSetAssignment(name="main", flavors={"nvidia.com/gpu": "gpu"}, count=1)],
        checks=[CheckEntry(name=CHECK, state="Pending")],
    )  # fmt: skip


class SovereignSpec(Scheduled):
    """decide() at admission; the engine then runs the decided schedule. With `budget_only`, the node
    is pinned (template nodeSelector) to where the baselines would put it: the draft budget alone; with
    `placed` (diagnostic), to the GPUs another run chose.

    Ablations: `neighbour_condition=False` decides on the same snapshot with the neighbour-SLO condition
    switched off (`Policies.neighbour_condition`: claim C6's `sovereignspec-no-neighbour-condition`);
    `neighbour_telemetry=False` hides every SLO annotation and engine sample from the snapshot instead
    (`sovereignspec-neighbour-blind`, what C6 measured before: a different information set, not the
    condition alone); `acceptance_telemetry=False` decides on the acceptance priors alone."""

    def __init__(
        self,
        policy: SpeculationPolicySpec | None = None,
        budget_only: bool = False,
        name: str | None = None,
        placed: IntArray | None = None,
        neighbour_condition: bool = True,
        acceptance_telemetry: bool = True,
        neighbour_telemetry: bool = True,
    ) -> None:
        super().__init__(name or ("sovereignspec-budget-only" if budget_only else "sovereignspec"), None)
        self.placed = placed  # diagnostic: decide() pinned to these GPUs' nodes
        self.neighbour_condition = neighbour_condition  # ablation: False switches condition 2 off
        self.neighbour_telemetry = neighbour_telemetry  # ablation: False hides every SLO and engine sample
        self.acceptance_telemetry = acceptance_telemetry  # ablation: False decides on the priors alone
        self.policy = policy or SpeculationPolicySpec()
        if not neighbour_condition:  # the ablation has no neighbour protection, after admission either
            self.policy = self.policy.model_copy(update={"reconfigure_on_neighbour_harm": False})
        self.policies = Policies(
            speculation=self.policy, speculation_name="default", neighbour_condition=neighbour_condition
        )
        self.budget_only = budget_only
        self.decisions: dict[str, Decision] = {}
        self.admitted_at: dict[int, int] = {}
        self.reconfigurations = 0
        self.records: dict[int, SpeculationDecision] = {}
        self.drift_since: dict[int, int] = {}
        self.harm_on_record: set[int] = set()  # the Drift condition's reason is NeighbourHarm

    def choose_k(self, sim: Simulation, tick: int, batch: FloatArray) -> IntArray:
        if self.policy.reconfigure_on_drift or self.policy.reconfigure_on_neighbour_harm:
            period = max(1, round(DRIFT_PERIOD_S / sim.sc.dt_s))
            for e, at in self.admitted_at.items():
                if tick > at and (tick - at) % period == 0 and tick >= sim.down_until[e]:
                    self._check_drift(sim, e, tick)
        return super().choose_k(sim, tick, batch)

    def _decide(self, sim: Simulation, e: int, pin: str | None) -> Decision:
        snap = snapshot(sim, sim.tick, self.policy, neighbours_visible=self.neighbour_telemetry,
                        acceptance_visible=self.acceptance_telemetry)  # fmt: skip
        policies = Policies(speculation=self.policy, speculation_name="default",
                            sovereignty=tuple(snap.sovereignty_policies),
                            neighbour_condition=self.neighbour_condition)  # fmt: skip
        return decide(AdmissionRequest(workload=workload(sim, e, pin), check=CHECK), snap, policies,
                      EPOCH + timedelta(seconds=sim.tick * sim.sc.dt_s))  # fmt: skip

    def _check_drift(self, sim: Simulation, e: int, tick: int) -> None:
        """The operator's drift sweep for one workload: evaluate_drift on today's snapshot; a verdict
        that has held for the grace period re-admits it (restart with the new schedule)."""
        record = self.records.get(e)
        if record is None:
            return
        now = EPOCH + timedelta(seconds=tick * sim.sc.dt_s)
        result = evaluate_drift(workload(sim, e, None), CHECK, record, snapshot(sim, tick, self.policy), now)
        if result is None:  # cannot tell today: the condition on record stays as it is
            return
        if not result.drifted:
            self.drift_since.pop(e, None)
            self.harm_on_record.discard(e)
            return
        result = result.on_record(e in self.harm_on_record)
        if result.neighbour_harm:
            self.harm_on_record.add(e)
        since = self.drift_since.setdefault(e, tick)
        if not result.readmit or (tick - since) * sim.sc.dt_s < result.grace_seconds:
            return
        del self.drift_since[e]
        self.harm_on_record.discard(e)
        cfg = json.loads(result.current_config) if result.current_config else {}
        schedule = cfg.get("num_speculative_tokens_per_batch_size") or None
        sim.schedule[e] = schedule
        sim.down_until[e] = tick + round(RESTART_S / sim.sc.dt_s)
        sim.pod_start[e] = tick  # evicted and re-admitted: a new pod, new series
        self.reconfigurations += 1
        assert record.status is not None
        spec = record.status.speculative.model_copy(
            update={"enabled": bool(cfg), "config": result.current_config, "schedule": schedule or [],
                    "num_speculative_tokens": int(cfg.get("num_speculative_tokens", 0))}
        )  # fmt: skip
        self.records[e] = record.model_copy(
            update={"status": record.status.model_copy(update={"speculative": spec})}
        )

    def admit(self, sim: Simulation, e: int) -> int | None:
        pin = None
        if self.placed is not None:
            fixed = int(self.placed[e])
            if fixed < 0:
                return None
            d = self._decide(sim, e, sim.gpus[fixed].node)
            self.decisions[sim.sc.engines[e].name] = d
            ok = d.state == "Ready" and d.speculative.enabled
            sim.schedule[e] = d.speculative.schedule if ok else None
            self.admitted_at[e] = sim.tick
            return fixed
        if self.budget_only:
            g = spread_place(sim, e)
            if g is None:
                return None
            pin = sim.gpus[g].node
        d = self._decide(sim, e, pin)
        self.decisions[sim.sc.engines[e].name] = d
        if d.state != "Ready" or d.node is None:
            return None
        sim.schedule[e] = d.speculative.schedule if d.speculative.enabled else None
        self.admitted_at[e] = sim.tick
        self.records[e] = SpeculationDecision.model_validate(speculation_decision_object(d, None))
        return gpu_on_node(sim, e, d.node)
