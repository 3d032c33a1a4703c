"""Drift: would we still decide the same speculation for an admitted workload, on its node, today?

Pure (no Kubernetes): the operator's drift sweep (sovereignspec/operator/drift.py) and the evidence
simulator's reconfigure-on-drift both call `evaluate_drift`, so the simulator measures the rule the
operator runs.

"The same" is judged where it matters and is robust to telemetry noise: speculation on/off, and the
draft budget k at the workload's expected batch. A change deeper in the schedule (a batch range the
engine rarely reaches) is not drift, with one exception: a cut at a batch the engine runs at (its
`num_requests_running` now, and the fewest over the telemetry window), beside a neighbour within `safety`
of its SLO, is neighbour harm. A batch job claims its mean batch, where its schedule is often off, and
drafts whenever its batch dips; that is when it harms a neighbour at its SLO (docs/decision.md, "Harm
at the batch the engine runs at"; the window's dips: "Harm at the batch the engine dipped to").

The admitted decision is re-evaluated with the same `decide()` on a snapshot restricted to the node
it runs on, without the workload's own reservation and pods (it is not its own neighbour). DESIGN.md's
`u` is the tensor load of *other* workloads, but dcgm-exporter's tensor-active is per GPU and, on a
time-sliced GPU, the same value on every pod's series: the workload's own engine is inside it. Judging
today's slack from that value sees less slack than at admission (when the workload was not running),
turns k down, the load drops, and the next check turns it up again. So on each GPU that names the
workload's pods (`others_load`):
- the pods are removed from the sample (their slot counts as free, as it was at admission);
- when no other pod is attributed to the GPU (a whole GPU, or a time-sliced one it has alone) the
  whole measured load is the workload's own: `u = 0`;
- when other pods share it, the workload's own share is subtracted with the decision core's model:
  its engine occupies `s(u) = g(B(k+1)) / (t_u(B(k+1)) + k·c_d·t_u(B))` of wall time (the tensor
  share behind DESIGN's Δu), with B its live `num_requests_running` and k its admitted budget at B,
  and `u` solves `measured = u + s(u)` (monotone in u: bisection). Without a profile or an engine
  sample nothing is subtracted (the old, conservative reading).
A larger budget counts as drift only when its predicted S_real beats the admitted one by more than
minGain (a restart costs minutes of tokens); a smaller one, or on/off, always counts (the admitted
budget may no longer pass a condition).
A smaller budget is *neighbour harm* when an SLO-bound engine on the GPUs the workload holds runs within
the policy's `safety` of its SLO, measured with our drafts running (m_j < safety). Harm is re-admitted on
(`reconfigureOnNeighbourHarm`, on by default) even where drift alone is not (`reconfigureOnDrift`, off): a
co-located engine's load grew after admission, and only a restart with the smaller budget gives it its
margin back (docs/decision.md, "Neighbour harm after admission"). It is re-admitted once the drift has
lasted `neighbourHarmGraceSeconds` (default 0: at the sweep that finds it), other drift once it has lasted
`driftGraceSeconds` (120). A verdict once harm stays harm while the cut lasts (`DriftResult.on_record`), so
that a margin read from noisy telemetry does not restart a grace period.
The framebuffer is the same story: the engine's own memory (vLLM takes a fixed fraction of the GPU, a
draft included) shows as used, so free memory on its own GPU says nothing about room for its draft,
which comes out of its own fraction; the draft-memory condition is taken as met there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from sovereignspec.api.meta import ANNOTATION_DECISION, CONTROLLER_NAME, LABEL_GPU_PRODUCT, PREFIX
from sovereignspec.api.speculation_decision import SpeculationDecision, SpeculationDecisionStatus
from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.model.cluster import ClusterSnapshot, NodeInfo, PodInfo
from sovereignspec.model.profiles import profile_book
from sovereignspec.model.steptime import U_MAX, StepCurve
from sovereignspec.model.telemetry import EngineSample, GpuSample
from sovereignspec.model.workload import WorkloadInfo
from sovereignspec.policy.cache.index import index_of
from sovereignspec.policy.claims import read_claims
from sovereignspec.policy.decide import decide
from sovereignspec.policy.decision import Decision, configs_message
from sovereignspec.policy.group import members, with_members
from sovereignspec.policy.record import ReasonType
from sovereignspec.policy.request import request_for
from sovereignspec.policy.sovereignty import TenantRules

# Reasons that mean "cannot tell today", not "would decide otherwise": no drift verdict on them, so a
# telemetry gap never evicts a running workload (I6: missing telemetry changes only new decisions).
UNKNOWN = frozenset(
    {ReasonType.NODE_TELEMETRY_MISSING, ReasonType.TELEMETRY_MISSING, ReasonType.TELEMETRY_STALE}
)


@dataclass(frozen=True)
class DriftResult:
    drifted: bool
    admitted_config: str
    current_config: str
    message: str
    reconfigure: bool
    """reconfigureOnDrift: any drift is re-admitted once `drift_grace_seconds` is over."""
    drift_grace_seconds: int
    cut: bool = False
    """k at the expected batch is smaller than admitted (or, for neighbour harm, at the running batch)."""
    neighbour_harm: bool = False
    """The cut comes with an SLO-bound engine on our GPUs within `safety` of its SLO (module docstring)."""
    reconfigure_on_harm: bool = False
    """reconfigureOnNeighbourHarm."""
    harm_grace_seconds: int = 0
    """neighbourHarmGraceSeconds: neighbour harm is re-admitted once this is over."""

    @property
    def readmit(self) -> bool:
        """Re-admit once the grace period is over."""
        return self.drifted and (self.reconfigure or self._harm_readmits)

    @property
    def grace_seconds(self) -> int:
        """How long the drift must have lasted before it is re-admitted: a neighbour over its margin
        waits `harm_grace_seconds`, other drift `drift_grace_seconds`."""
        return self.harm_grace_seconds if self._harm_readmits else self.drift_grace_seconds

    @property
    def _harm_readmits(self) -> bool:
        return self.neighbour_harm and self.reconfigure_on_harm

    def on_record(self, harm_on_record: bool) -> DriftResult:
        """This verdict after one that found neighbour harm (the Drift condition's reason): harm while the
        cut lasts."""
        if not harm_on_record or self.neighbour_harm or not (self.drifted and self.cut):
            return self
        return self.harmed()

    def harmed(self) -> DriftResult:
        """This verdict as neighbour harm, and its message saying so."""
        return replace(self, neighbour_harm=True, message=f"{HARM_PREFIX}{self.message}")


HARM_PREFIX = "a co-located engine runs within the policy's safety margin of its SLO; "


def k_at(config: str, batch: float) -> int:
    """The draft budget a `--speculative-config` gives at `batch` (0 when off)."""
    if not config:
        return 0
    cfg = json.loads(config)
    for start, end, k in cfg.get("num_speculative_tokens_per_batch_size") or []:
        if start <= batch <= end:
            return int(k)
    return int(cfg.get("num_speculative_tokens", 0))


def own_share(curve: StepCurve, c_d: float, batch: float, k: int, u: float) -> float:
    """Fraction of wall time the engine's tensor work occupies at batch B, budget k, others' load u."""
    uu = min(max(u, 0.0), U_MAX)
    g_b, g_bk = curve.t_scalar(batch) - curve.t0, curve.t_scalar(batch * (k + 1)) - curve.t0
    t_b = curve.t0 + g_b / (1.0 - uu)
    t_bk = curve.t0 + g_bk / (1.0 - uu)
    return g_bk / (t_bk + k * c_d * t_b)


def others_load(measured: float, shares: list[tuple[StepCurve, float, float, int]]) -> float:
    """u with `measured = u + sum of the own engines' shares at u` (bisection; never above measured)."""
    if not shares:
        return measured

    def total(u: float) -> float:
        return u + sum(own_share(c, cd, b, k, u) for c, cd, b, k in shares)

    if total(0.0) >= measured:
        return 0.0
    lo, hi = 0.0, measured
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if total(mid) < measured:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def without_own_load(
    gpus: list[GpuSample],
    own: frozenset[tuple[str, str]],
    node: NodeInfo | None,
    unattributed: bool,
    engines: Mapping[tuple[str, str], EngineSample],
    policy: SpeculationPolicySpec,
    target_model: str | None,
    method: str | None,
    admitted_config: str,
) -> list[GpuSample]:
    """The node's GPU samples as other workloads load them (see the module docstring)."""
    book = profile_book(policy)
    out = []
    for g in gpus:
        mine = [p for p in g.pods if (p.namespace, p.name) in own]
        if not mine:
            out.append(g)
            continue
        others = [p for p in g.pods if (p.namespace, p.name) not in own]
        product = (node.labels.get(LABEL_GPU_PRODUCT) if node is not None else None) or g.model_name
        prof = book.find(product, target_model)
        u = g.tensor_active
        if u is not None and not others and not unattributed:
            u = 0.0
        elif u is not None:
            shares: list[tuple[StepCurve, float, float, int]] = []
            for p in mine:
                eng = engines.get((p.namespace, p.name))
                if prof is None or eng is None or eng.running is None:
                    shares = []  # cannot attribute: keep the measured (conservative) load
                    break
                b = max(float(eng.running), 1.0)
                shares.append(
                    (StepCurve.from_profile(prof), prof.draft_cost.get(method or "", 0.0), b,
                     k_at(admitted_config, b))
                )  # fmt: skip
            u = others_load(float(u), shares)
        fb = g.fb_free_mib
        if fb is not None and prof is not None:  # its own framebuffer holds (or makes room for) the draft
            fb = max(fb, prof.draft_memory_mib.get(method or "", 0.0))
        out.append(g.model_copy(update={"pods": others, "tensor_active": u, "fb_free_mib": fb}))
    return out


def evaluate_drift(
    wl: WorkloadInfo,
    check: str,
    decision: SpeculationDecision,
    snap: ClusterSnapshot,
    now: datetime,
    controller_name: str = CONTROLLER_NAME,
) -> DriftResult | None:
    """None when there is nothing to compare (no node or status on record)."""
    st = decision.status
    if st is None or st.node is None or st.state != "Ready":
        return None
    if st.placements:  # a group over several nodes: not re-decided on one node (docs/decision.md)
        return None
    # A pod group's claims are on its pods, which the one-node snapshot leaves out (they are not
    # their own neighbours): read them from the whole snapshot first.
    wl = with_members(wl, members(wl, snap))
    node = st.node
    restricted, held, running = _one_node_snapshot(wl, st, snap, controller_name)
    as_pending = wl.model_copy(
        update={
            "checks": [c.model_copy(update={"state": "Pending"}) if c.name == check else c for c in wl.checks]
        }
    )
    req, policies = request_for(as_pending, restricted, controller_name)
    fresh = decide(req.model_copy(update={"gpus_held": held}), restricted, policies, now)
    if any(r.type in UNKNOWN for r in fresh.reasons):
        return None
    admitted = st.speculative.config
    if fresh.state != "Ready":
        current, why = "", f"node {node} would no longer be chosen now ({fresh.reason}: {fresh.message})"
    else:
        current = fresh.speculative.config
        # Configs only, no live figures: the condition is rewritten only when the verdict changes.
        why = configs_message(node, admitted, current)
    result = _verdict(wl, policies.speculation, fresh.speedup_by_k, admitted, current, why)
    if fresh.state == "Ready" and _near_slo(fresh, policies.speculation):
        if result.drifted and result.cut:
            result = result.harmed()
        elif not result.drifted:
            result = _cut_where_it_runs(result, running)
    return result


def _cut_where_it_runs(result: DriftResult, running: tuple[int, ...]) -> DriftResult:
    """Neighbour harm at the batch the engine runs at now: today's budget there is smaller than the
    admitted one (called only while a neighbour is within `safety` of its SLO)."""
    for batch in running:
        before, after = k_at(result.admitted_config, batch), k_at(result.current_config, batch)
        if after < before:
            # No live figure in the message: a drifted verdict's new message is written at once.
            why = f"k smaller at the batch the engine runs at; {result.message}"
            return replace(result, drifted=True, cut=True, message=why).harmed()
    return result


def _one_node_snapshot(
    wl: WorkloadInfo, st: SpeculationDecisionStatus, snap: ClusterSnapshot, controller_name: str
) -> tuple[ClusterSnapshot, frozenset[str], tuple[int, ...]]:
    """The snapshot a one-node decision on the admitted node reads, without the workload's own pods,
    reservation and load; the UUIDs of the GPUs its pods hold there (its neighbours are on those); the
    batches its engines run at (`_running_batches`)."""
    assert st.node is not None
    node = st.node
    own = (wl.namespace, wl.name)
    idx = index_of(snap)
    # What a one-node decision reads: the node's pods and those its GPU samples name (a sweep over
    # every admitted decision must not scan every pod of the cluster for each).
    near = {(p.namespace, p.name): p for p in idx.pods_by_node.get(node, ())}
    for g in idx.gpus_by_node.get(node, ()):
        for ref in g.pods:
            named = idx.pod_by_key.get((ref.namespace, ref.name))
            if named is not None:
                near.setdefault((named.namespace, named.name), named)

    def is_own(p: PodInfo) -> bool:
        return p.namespace == own[0] and p.annotations.get(ANNOTATION_DECISION) == own[1]

    own_pods = frozenset(k for k, p in near.items() if is_own(p))
    held = frozenset(
        g.uuid
        for g in idx.gpus_by_node.get(node, ())
        if any((r.namespace, r.name) in own_pods for r in g.pods)
    )
    running = _running_batches(own_pods, idx.engine_by_pod)
    node_info = idx.node_by_name.get(node)
    admitted = st.speculative.config
    tel = snap.telemetry
    if tel is not None:  # the node's GPU samples and its pods' engines, not the cluster's thousands
        gpus = idx.gpus_by_node.get(node, [])
        if own_pods:
            attributed = {(r.namespace, r.name) for g in gpus for r in g.pods}
            unattributed = any(
                p.gpu_request > 0 and not p.daemonset and k not in attributed and k not in own_pods
                for k, p in near.items()
                if p.node == node
            )
            ann = wl.pod_sets[0].annotations if wl.pod_sets else {}
            gpus = without_own_load(
                gpus, own_pods, node_info, unattributed, idx.engine_by_pod,
                _policy_of(wl, snap, controller_name), ann.get(PREFIX + "target-model"),
                st.speculative.method or ann.get(PREFIX + "spec-method"), admitted,
            )  # fmt: skip
        tel = tel.model_copy(
            update={
                "gpus": gpus,
                "engines": [
                    e for k in near if k not in own_pods and (e := idx.engine_by_pod.get(k)) is not None
                ],
            }
        )
    return (
        ClusterSnapshot(
            nodes=[node_info] if node_info is not None else [],
            pods=[p for p in near.values() if not is_own(p)],
            namespaces=snap.namespaces,
            flavors=snap.flavors,
            admission_checks=snap.admission_checks,
            speculation_policies=snap.speculation_policies,
            sovereignty_policies=snap.sovereignty_policies,
            reservations=[
                r for r, _ in idx.reservations_by_node.get(node, ()) if (r.namespace, r.name) != own
            ],
            workloads=snap.workloads,
            telemetry=tel,
        ),
        held,
        running,
    )


def _running_batches(
    own_pods: frozenset[tuple[str, str]], engine_by_pod: Mapping[tuple[str, str], EngineSample]
) -> tuple[int, ...]:
    """The batches the workload's engines run at, smallest first (at least 1): each engine's
    `num_requests_running` now and the fewest over the telemetry window. One instantaneous reading
    misses the dips between refreshes, where the schedule drafts the most."""
    return tuple(
        sorted(
            {
                max(1, round(r))
                for k in own_pods
                if (e := engine_by_pod.get(k)) is not None
                for r in (e.running, e.running_min)
                if r is not None
            }
        )
    )


def _verdict(
    wl: WorkloadInfo,
    policy: SpeculationPolicySpec,
    speedup_by_k: list[float],
    admitted: str,
    current: str,
    why: str,
) -> DriftResult:
    """Drifted when k at the expected batch changes (a larger k only for a material gain)."""
    batch = _expected_batch(wl, policy)
    before, after = k_at(admitted, batch), k_at(current, batch)
    drifted = before != after
    if drifted and 0 < before < after and before < len(speedup_by_k) > after:
        # A larger budget is worth a restart only for a material gain (hysteresis): noise in the
        # acceptance counters moves the argmax between neighbouring k of nearly equal S_real.
        s_before, s_after = speedup_by_k[before], speedup_by_k[after]
        drifted = s_after > s_before * (1.0 + policy.min_gain)
        if not drifted:
            why = (
                f"k at expected batch {batch}: {before} would become {after}, predicted S_real "
                f"{s_before:.2f} -> {s_after:.2f}, not above the minGain hysteresis; {why}"
            )
    if drifted:
        why = f"k at expected batch {batch}: {before} -> {after}; {why}"
    return DriftResult(
        drifted=drifted,
        admitted_config=admitted,
        current_config=current,
        message=why,
        reconfigure=policy.reconfigure_on_drift,
        drift_grace_seconds=policy.drift_grace_seconds,
        cut=after < before,
        reconfigure_on_harm=policy.reconfigure_on_neighbour_harm,
        harm_grace_seconds=policy.neighbour_harm_grace_seconds,
    )


def _near_slo(fresh: Decision, policy: SpeculationPolicySpec) -> bool:
    """An SLO-bound engine on the GPUs the workload holds runs within `safety` of its SLO, measured with
    the workload's drafts running (m_j = SLO_j / TPOT_j - 1 < safety)."""
    return any(nb.margin_before is not None and nb.margin_before < policy.safety for nb in fresh.neighbours)


def _expected_batch(wl: WorkloadInfo, policy: SpeculationPolicySpec) -> int:
    ann = wl.pod_sets[0].annotations if wl.pod_sets else {}
    return read_claims(ann, policy, TenantRules(tenant=wl.namespace)).expected_batch


def _policy_of(wl: WorkloadInfo, snap: ClusterSnapshot, controller_name: str) -> SpeculationPolicySpec:
    try:
        return request_for(wl, snap, controller_name)[1].speculation
    except ValueError:
        return SpeculationPolicySpec()
