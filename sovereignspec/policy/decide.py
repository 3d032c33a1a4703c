"""`decide()`: the single entry point of the decision core (DESIGN.md §2-§4). Pure and deterministic.

    decide(request: AdmissionRequest, snapshot: ClusterSnapshot, policies: Policies, now) -> Decision

The operator and `sovereignspec decide` both call it: build the snapshot with
`sovereignspec.policy.parse` (or from kopf indexes with the same `parse_*` functions), find the check
and policies with `sovereignspec.policy.request.request_for`, then turn the Decision into writes with
`sovereignspec.policy.decision` and `sovereignspec.policy.admission_check`.

Order: hard rules first (sovereignty, flavor, TAS, template, taints, capacity, isolation: I1-I5),
then speculation (only ever switched off by missing telemetry: I6), then class-aware placement, then
additive podSetUpdates (I4). Choices where DESIGN.md is silent:
- All pod sets of a workload go to the chosen node (serving workloads are one engine per pod set);
  with a TAS assignment the pods go where Kueue put them: every assigned node must be sovereign, no
  hostname is added, and the schedule is the per-range minimum of k* over the assigned nodes.
- Decisions happen only when QuotaReserved, not Evicted/Finished, and our entry is Pending; otherwise
  the Decision is `Pending` with reason `NotActionable` and nothing is to be written.
- `Rejected` only when no node in the cluster passes the static rules (jurisdiction, policy labels,
  template nodeSelector and required nodeAffinity, taints, GPU allocatable) or the tenant's policies
  contradict; anything that can change (capacity, isolation, flavor, node readiness) gives `Retry`
  after `retryAfterSeconds`.
- Node load for "most loaded" placement: background tensor load u when known, else the allocated GPU
  fraction. A node's u aggregates its GPUs with free capacity by `slackAggregation` (min slack ⇔ max u;
  mean averages u); GPUs with free capacity are those with fewer pods than the node's replicas per GPU.
- A neighbour with a vLLM engine sample but no TPOT, or with an SLO annotation but no engine sample,
  counts with the policy's `unknownNeighbourMargin` (default 0.5): margin 0 let any pod that claims an
  SLO and exposes no metrics switch off every neighbour's speculation. A pod with neither is not
  SLO-bound and does not constrain us. A neighbour's SLO claim is clamped like the workload's own (its
  tenant's minTpotSloMs, else the policy's global floor `minTpotSloMs`).
- Isolation counts every active pod of another tenant on the node, DaemonSet pods included; only the
  policy's `systemNamespaces` (and namespaces labelled sovereignspec.io/system=true) are exempt.
- On a time-sliced node, a GPU pod bound there that no GPU sample names yet (dcgm-exporter's pod
  labels lag) counts as a neighbour on every shared GPU at their highest load.
- Draft memory: the minimum free framebuffer over the node's free GPUs must hold the draft; unknown
  free memory turns speculation off on that node.
- Ties: placement by higher S_real, then higher slack, then node name; k* by the smaller k.
- Placement `Throughput` (opt-in, `spec.placement`): the same order with the key S_real(k*, B) / t_u(B),
  the predicted decode tokens/s per sequence at the expected batch (S = 1 where speculation is off on
  the node; 0 when the node's profile or load is unknown). Plain placement is the same in both modes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar, cast

import numpy as np
import numpy.typing as npt

from sovereignspec.api.meta import (
    ANNOTATION_DECISION,
    ANNOTATION_SPECULATIVE_CONFIG,
    LABEL_GPU_PRODUCT,
    LABEL_HOSTNAME,
    LABEL_SPECULATIVE,
    PREFIX,
    Toleration,
)
from sovereignspec.api.speculation_decision import (
    AcceptanceSummary,
    CheckState,
    DecisionInputs,
    NeighbourImpact,
    PodSetUpdate,
    Reason,
    Speculative,
)
from sovereignspec.api.speculation_policy import DEFAULT_PRIORS, BetaPrior, SpeculationPolicySpec
from sovereignspec.model.acceptance import AcceptanceEstimate, estimate_acceptance
from sovereignspec.model.cluster import ClusterSnapshot, NodeInfo, SnapshotIndex
from sovereignspec.model.profiles import DEFAULT_PROFILES, ProfileBook
from sovereignspec.model.speedup import neighbour_slowdown
from sovereignspec.model.speedup import slack as slack_of
from sovereignspec.model.steptime import U_MAX, StepCurve, stretched
from sovereignspec.model.telemetry import AcceptanceSample, GpuSample, TelemetrySnapshot
from sovereignspec.model.workload import NodeSelectorTerm, PodSetInfo, WorkloadInfo
from sovereignspec.policy.claims import Claims, parse_slo_ms, read_claims, shown
from sovereignspec.policy.decision import Candidate, Decision
from sovereignspec.policy.evaluate import (
    Evaluation,
    Groups,
    NeighbourInput,
    Neighbours,
    NodeInput,
    Tables,
    evaluate_groups,
    load_bounds,
    tables,
)
from sovereignspec.policy.pin import Pin, read_pin
from sovereignspec.policy.request import AdmissionRequest, Policies
from sovereignspec.policy.schedule import batch_ranges, merge_schedule, range_index, speculative_config
from sovereignspec.policy.sovereignty import (
    PolicyConflict,
    TenantRules,
    affinity_allows,
    is_system_namespace,
    rules_for_namespace,
    rules_or_strict,
    taints_tolerated,
    tenant_of,
)

# ---------------------------------------------------------------------------------------------------
# Small helpers


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def telemetry_state(tel: TelemetrySnapshot | None, now: datetime, staleness_s: float) -> str | None:
    """None when fresh, else the reason type: TelemetryMissing or TelemetryStale."""
    if tel is None or tel.time is None:
        return "TelemetryMissing"
    age = (now - tel.time).total_seconds()
    if age > staleness_s or age < -staleness_s:
        return "TelemetryStale"
    return None


_BOOKS: dict[int, tuple[SpeculationPolicySpec, ProfileBook]] = {}


def _profiles(policy: SpeculationPolicySpec) -> ProfileBook:
    """The policy's profile book, memoised per policy object (policies are frozen)."""
    hit = _BOOKS.get(id(policy))
    if hit is not None and hit[0] is policy:
        return hit[1]
    book = ProfileBook([*policy.accelerator_profiles, *(DEFAULT_PROFILES if policy.builtin_profiles else ())])
    if len(_BOOKS) > 256:
        _BOOKS.clear()
    _BOOKS[id(policy)] = (policy, book)
    return book


_ESTIMATES: dict[tuple[object, ...], AcceptanceEstimate] = {}


def _estimate(prior: BetaPrior, sample: AcceptanceSample | None, k_max: int, q: float) -> AcceptanceEstimate:
    """estimate_acceptance, memoised on the values it reads (pure, so the memo cannot go stale)."""
    key: tuple[object, ...] = (prior.mean, prior.strength, k_max, q)
    if sample is not None:
        key += (sample.drafts, sample.draft_tokens, sample.accepted, tuple(sample.accepted_per_position))
    hit = _ESTIMATES.get(key)
    if hit is None:
        hit = estimate_acceptance(prior, sample, k_max, q)
        if len(_ESTIMATES) > 4096:
            _ESTIMATES.clear()
        _ESTIMATES[key] = hit
    return hit


_CURVES: dict[int, tuple[object, StepCurve]] = {}


def _curve(profile: object) -> StepCurve:
    """StepCurve per profile object; the profile is kept alive with it so the id stays unique."""
    hit = _CURVES.get(id(profile))
    if hit is not None and hit[0] is profile:
        return hit[1]
    from sovereignspec.api.speculation_policy import AcceleratorProfile

    assert isinstance(profile, AcceleratorProfile)
    curve = StepCurve.from_profile(profile)
    if len(_CURVES) > 4096:
        _CURVES.clear()
    _CURVES[id(profile)] = (profile, curve)
    return curve


def _acceptance_sample(tel: TelemetrySnapshot | None, claims: Claims) -> AcceptanceSample | None:
    if tel is None or claims.method is None:
        return None
    found = [
        a
        for a in tel.acceptance
        if a.method == claims.method
        and a.target_model == (claims.target_model or a.target_model)
        and a.draft_model == (claims.draft_model or a.draft_model)
    ]
    if not found:
        return None
    if len(found) == 1:
        return found[0]
    width = max(len(a.accepted_per_position) for a in found)
    per_pos = [
        sum(a.accepted_per_position[i] for a in found if i < len(a.accepted_per_position))
        for i in range(width)
    ]
    if any(len(a.accepted_per_position) != width for a in found):
        per_pos = []
    accepted = [a.accepted for a in found]
    return AcceptanceSample(
        target_model=found[0].target_model,
        draft_model=found[0].draft_model,
        method=found[0].method,
        drafts=sum(a.drafts for a in found),
        draft_tokens=sum(a.draft_tokens for a in found),
        accepted_per_position=per_pos,
        accepted=None if any(x is None for x in accepted) else sum(x for x in accepted if x is not None),
    )


class _Ctx:
    """Per-decision context: the request's constraints and memoised per-namespace rules."""

    def __init__(
        self, snap: ClusterSnapshot, policies: Policies, wl: WorkloadInfo, rules: TenantRules
    ) -> None:
        self.snap = snap
        self.idx: SnapshotIndex = snap.index
        self.policies = policies
        self.policy = policies.speculation
        self.wl = wl
        self.rules = rules
        key = ("ns-rules", id(policies.sovereignty))
        hit = self.idx.memo.get(key)
        if not (isinstance(hit, tuple) and hit[0] is policies.sovereignty):
            hit = (policies.sovereignty, {}, {})
            self.idx.memo[key] = hit
        self._ns_rules: dict[str, TenantRules] = hit[1]
        self.system_namespaces = frozenset(self.policy.system_namespaces)
        self._slo_ms: dict[tuple[str, str | None, float, float], float] = hit[2]

    def ns_rules(self, namespace: str) -> TenantRules:
        r = self._ns_rules.get(namespace)
        if r is None:
            r = rules_or_strict(namespace, self.idx.ns_labels, self.policies.sovereignty)
            self._ns_rules[namespace] = r
        return r

    def slo_ms(self, namespace: str, raw: str | None, default_ms: float) -> float:
        """A neighbour's SLO claim clamped by its tenant's rules (memoised like the rules)."""
        floor = self.policy.min_tpot_slo_ms
        key = (namespace, raw, default_ms, floor)
        hit = self._slo_ms.get(key)
        if hit is None:
            hit = self._slo_ms[key] = parse_slo_ms(raw, default_ms, self.ns_rules(namespace), floor)[0]
        return hit

    def pod_occupants(self, node: str) -> frozenset[str]:
        """Namespaces of the node's active pods, DaemonSet pods included, but for the system namespaces
        the policy lists (memoised on the base index per list)."""
        exempt = self.system_namespaces
        key = ("pod-occupants", node, exempt)
        pods = self.idx.memo.get(key)
        if not isinstance(pods, frozenset):
            pods = frozenset(
                p.namespace
                for p in self.idx.pods_by_node.get(node, ())
                if not is_system_namespace(p.namespace, self.idx.ns_labels, exempt)
            )
            self.idx.memo[key] = pods
        return pods

    def occupants(self, node: str) -> frozenset[str]:
        """Namespaces holding the node: non-infrastructure active pods and trusted reservations.

        Request-independent, so memoised on the snapshot (the pods' part also on its base index); the
        request's own reservation is in its own namespace, hence its own tenant, which isolation skips."""
        key = ("occupants", node, self.system_namespaces)
        hit = self.idx.rmemo.get(key)
        if isinstance(hit, frozenset):
            return hit
        pods = self.pod_occupants(node)
        held = self.idx.reservations_by_node.get(node)
        frozen = pods | {r.namespace for r, _ in held} if held else pods
        self.idx.rmemo[key] = frozen
        return frozen

    def isolation_ok(self, node: str) -> bool:
        """I2 and I3 for our tenant on this node."""
        return self.isolation_among(node, self.occupants(node))

    def isolation_among(self, node: str, occupants: frozenset[str]) -> bool:
        """I2 and I3 for our tenant on a node held by `occupants`; memoised per (node, tenant rules) on
        the snapshot, valid while the node's occupants are the same."""
        sov = self.policies.sovereignty
        key = ("isolation", node, self.wl.namespace, id(sov))
        hit = self.idx.memo.get(key)
        if isinstance(hit, tuple) and hit[0] is sov and hit[1] == occupants:
            return bool(hit[2])
        ok = self._isolation_ok(occupants)
        self.idx.memo[key] = (sov, occupants, ok)
        return ok

    def _isolation_ok(self, occupants: frozenset[str]) -> bool:
        me = self.rules.tenant
        for ns in occupants:
            other = tenant_of(ns, self.idx.ns_labels)
            if other == me:
                continue
            if self.rules.isolated and other not in self.rules.trusted:
                return False  # I2
            o = self.ns_rules(ns)
            if o.isolated and me not in o.trusted:
                return False  # I3
        return True

    def free_gpus(self, node: NodeInfo) -> int:
        reserved = sum(
            left
            for r, left in self.idx.reservations_by_node.get(node.name, ())
            if not (r.namespace == self.wl.namespace and r.name == self.wl.name)
        )
        return node.gpu_allocatable - self.idx.gpu_used.get(node.name, 0) - reserved

    def gpu_state(self, node: NodeInfo) -> tuple[list[GpuSample], float | None, float | None]:
        """(GPUs with free capacity, aggregated background load u, min free framebuffer MiB), memoised
        on the snapshot per aggregation mode (it does not depend on the request)."""
        key = ("gpu", node.name, self.policy.slack_aggregation)
        hit = self.idx.memo.get(key)
        if hit is None:
            hit = self._gpu_state(node)
            self.idx.memo[key] = hit
        return hit  # type: ignore[return-value]

    def _gpu_state(self, node: NodeInfo) -> tuple[list[GpuSample], float | None, float | None]:
        samples = self.idx.gpus_by_node.get(node.name, [])
        if not samples:
            return [], None, None
        replicas = _replicas(node, samples)
        free = [g for g in samples if len(g.pods) < replicas] or samples
        loads = [g.tensor_active for g in free]
        u: float | None
        if any(x is None for x in loads):
            u = None
        else:
            vals = [float(x) for x in loads if x is not None]
            agg = self.policy.slack_aggregation
            u = max(vals) if agg == "min" else min(vals) if agg == "max" else sum(vals) / len(vals)
        fbs = [g.fb_free_mib for g in free]
        fb = None if any(x is None for x in fbs) else min(float(x) for x in fbs if x is not None)
        return free, u, fb


# ---------------------------------------------------------------------------------------------------
# Hard rules


@dataclass(frozen=True, eq=False)
class _StaticFilter:
    """The node filter's request- and reservation-independent part (I1, I4, taints, GPUs, readiness)."""

    excluded: dict[str, int]
    possible: bool
    """Some node passes I1, the template selector, taints and GPU count: waiting can help."""
    passed: list[NodeInfo]
    why: list[str | None]
    """Per node of the node list, why it is excluded (None: passed)."""
    space: object
    """Names the passed list's row space for facts kept per row: the same while the passed nodes have
    the same names in the same order (a patched filter keeps it)."""


_LATE = ("admitted flavor's nodeLabels", "not ready or unschedulable")
"""Exclusions after I1, the template selector, taints and GPU count: such a node could host later."""


def _static_filter(
    ctx: _Ctx,
    template_selector: Mapping[str, str] | None,
    tolerations: Sequence[Toleration],
    need: int,
    flavor_labels: Mapping[str, str],
    affinities: Affinities = (),
) -> _StaticFilter:
    """Memoised on the index while its node list is the same object (a node change replaces it): the
    per-node label and taint checks were most of a decision over 500 nodes, and they only depend on
    the nodes and on these request constraints."""
    idx = ctx.idx
    sov = ctx.policies.sovereignty
    key = (
        "static-filter",
        None,  # no node: survives pod patches, checked against the node list instead
        ctx.wl.namespace,
        id(sov),
        None if template_selector is None else tuple(sorted(template_selector.items())),
        tuple(tolerations),
        need,
        tuple(sorted(flavor_labels.items())),
        affinities,
    )
    hit = idx.memo.get(key)
    nodes = idx.node_list
    if isinstance(hit, tuple) and hit[0] is nodes and hit[1] is sov:
        return cast(_StaticFilter, hit[2])

    def check(node: NodeInfo) -> str | None:
        labels = node.labels
        if not ctx.rules.allows_node_labels(labels):
            return "jurisdiction or policy labels"
        if template_selector is None or not _labels_match(labels, template_selector):
            return "template nodeSelector"
        if not all(affinity_allows(node, terms) for terms in affinities):
            return "template nodeAffinity"
        if not taints_tolerated(node, tolerations):
            return "untolerated taints"
        if node.gpu_allocatable < need:
            return "too few GPUs"
        if not _labels_match(labels, flavor_labels):
            return _LATE[0]
        if not node.ready or node.unschedulable:
            return _LATE[1]
        return None

    if isinstance(hit, tuple) and hit[1] is sov:  # another node list: check only the changed nodes
        patched = _patch_static(hit[0], cast(_StaticFilter, hit[2]), nodes, check)
        if patched is not None:
            idx.memo[key] = (nodes, sov, patched)
            return patched
    why = [check(node) for node in nodes]
    excluded: dict[str, int] = {}
    for w in why:
        if w is not None:
            excluded[w] = excluded.get(w, 0) + 1
    result = _static_result(nodes, why, excluded, object())
    idx.memo[key] = (nodes, sov, result)
    return result


def _static_result(
    nodes: Sequence[NodeInfo], why: list[str | None], excluded: dict[str, int], space: object
) -> _StaticFilter:
    passed = [n for n, w in zip(nodes, why, strict=True) if w is None]
    possible = bool(passed) or any(excluded.get(w) for w in _LATE)
    return _StaticFilter(excluded, possible, passed, why, space)


def _patch_static(
    old_nodes: Sequence[NodeInfo],
    old: _StaticFilter,
    nodes: Sequence[NodeInfo],
    check: Callable[[NodeInfo], str | None],
) -> _StaticFilter | None:
    """The filter of `nodes` from the filter of `old_nodes` when the same names are in the same order:
    only the nodes whose object changed are checked again (None: rebuild)."""
    if len(old_nodes) != len(nodes):
        return None
    why, excluded = old.why, old.excluded
    for i, (a, b) in enumerate(zip(old_nodes, nodes, strict=True)):
        if a is b:
            continue
        if a.name != b.name:
            return None
        w = check(b)
        if w == why[i]:
            continue
        if why is old.why:
            why, excluded = list(why), dict(excluded)
        if (was := why[i]) is not None:
            excluded[was] -= 1
            if not excluded[was]:
                del excluded[was]
        if w is not None:
            excluded[w] = excluded.get(w, 0) + 1
        why[i] = w
    same_rows = why is old.why or [w is None for w in why] == [w is None for w in old.why]
    return _static_result(nodes, why, excluded, old.space if same_rows else object())


Affinities = tuple[tuple[NodeSelectorTerm, ...], ...]
"""Each pod set's required node affinity terms (pod sets without one left out): all go to one node."""


def _affinities(pod_sets: Sequence[PodSetInfo]) -> Affinities:
    return tuple(ps.node_affinity for ps in pod_sets if ps.node_affinity is not None)


def _pinned_node_selector(pod_sets: Sequence[PodSetInfo]) -> dict[str, str] | None:
    merged: dict[str, str] = {}
    for ps in pod_sets:
        for k, v in ps.node_selector.items():
            if merged.get(k, v) != v:
                return None
            merged[k] = v
    return merged


def _labels_match(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _tas_nodes(wl: WorkloadInfo, nodes: Sequence[NodeInfo]) -> list[str] | None:
    """Nodes named by TAS assignments (None when no pod set has one)."""
    found: set[str] = set()
    any_tas = False
    for a in wl.assignments:
        if a.topology_domains is None:
            continue
        any_tas = True
        levels = a.topology_levels
        for d in a.topology_domains:
            if levels and levels[-1] == LABEL_HOSTNAME and len(d.values) == len(levels):
                found.add(d.values[-1])
                continue
            sel = dict(zip(levels, d.values, strict=False))
            found.update(n.name for n in nodes if _labels_match(n.labels, sel))
    return sorted(found) if any_tas else None


# ---------------------------------------------------------------------------------------------------
# The entry point


def decide(
    request: AdmissionRequest, snapshot: ClusterSnapshot, policies: Policies, now: datetime
) -> Decision:
    wl = request.workload
    policy = policies.speculation
    tel = snapshot.telemetry
    base = {
        "namespace": wl.namespace,
        "workload": wl.name,
        "admission_check": request.check,
        "decided_at": now,
        "observed_generation": wl.generation,
        "telemetry_time": tel.time if tel is not None else None,
    }

    def finish(state: CheckState, reason: str, message: str, **kw: object) -> Decision:
        reasons = list(kw.pop("reasons", []))  # type: ignore[call-overload]
        if not any(r.type == reason for r in reasons):
            reasons.insert(0, Reason(type=reason, message=message))
        return Decision(state=state, reason=reason, message=message, reasons=reasons, **base, **kw)

    # -- actionable at all?
    entry = wl.check(request.check)
    why_not = (
        f"workload has no admission check entry {request.check}" if entry is None
        else "quota is not reserved (QuotaReserved is not True)" if not wl.quota_reserved
        else "workload is evicted" if wl.evicted
        else "workload is finished" if wl.finished
        else f"admission check entry is {entry.state}, not Pending" if entry.state != "Pending"
        else None
    )  # fmt: skip
    if why_not is not None:
        return finish("Pending", "NotActionable", why_not)

    idx = snapshot.index
    tenant = tenant_of(wl.namespace, idx.ns_labels)
    try:
        rules = rules_for_namespace(wl.namespace, idx.ns_labels, policies.sovereignty)
    except PolicyConflict as exc:
        return finish("Rejected", "ContradictoryPolicies", str(exc), tenant=tenant)
    ctx = _Ctx(snapshot, policies, wl, rules)

    pod_sets = wl.pod_sets
    gpu_sets = [ps for ps in pod_sets if ps.gpus_per_pod > 0]
    need = sum(ps.count * ps.gpus_per_pod for ps in pod_sets)
    claims_src = next((ps for ps in gpu_sets if any(k.startswith(PREFIX) for k in ps.annotations)), None)
    claims = read_claims(claims_src.annotations if claims_src else {}, policy, rules)
    notes: list[Reason] = list(claims.notes)
    pins = {ps.name: pin for ps in gpu_sets if (pin := read_pin(ps, policy)) is not None}
    refused = next((p.refused for p in pins.values() if p.refused is not None), None)
    if refused is not None:  # the pods would run a config the policy does not allow: deactivate
        return finish("Rejected", refused.type, refused.message, tenant=tenant)

    # -- flavor constraints (I4)
    flavors = {f.name: f for f in snapshot.flavors}
    flavor_labels: dict[str, str] = {}
    flavor_tolerations: list[Toleration] = []
    flavor_labels_by_set: dict[str, dict[str, str]] = {}
    for a in wl.assignments:
        per_set: dict[str, str] = {}
        for fname in sorted(set(a.flavors.values())):
            f = flavors.get(fname)
            if f is None:
                return finish(
                    "Retry", "FlavorUnknown", f"ResourceFlavor {fname} of pod set {a.name} is not known",
                    tenant=tenant, requeue_after_seconds=policy.retry_after_seconds,
                )  # fmt: skip
            for k, v in f.node_labels.items():
                if flavor_labels.get(k, v) != v:
                    return finish(
                        "Retry", "FlavorConflict", f"admitted flavors disagree on node label {k}",
                        tenant=tenant, requeue_after_seconds=policy.retry_after_seconds,
                    )  # fmt: skip
                flavor_labels[k] = v
                per_set[k] = v
            flavor_tolerations.extend(t for t in f.tolerations if t not in flavor_tolerations)
        flavor_labels_by_set[a.name] = per_set

    template_selector = _pinned_node_selector(pod_sets)
    affinities = _affinities(pod_sets)
    tolerations = [*flavor_tolerations, *rules.tolerations]
    for ps in pod_sets:
        tolerations.extend(ps.tolerations)
    tas = _tas_nodes(wl, snapshot.nodes)
    tas_set = set(tas) if tas is not None else None

    # -- node filter (I1-I4 static, then capacity and isolation)
    if tas_set is None:
        static = _static_filter(ctx, template_selector, tolerations, need, flavor_labels, affinities)
        excluded, static_possible = dict(static.excluded), static.possible
        rows = _rows(ctx, static.passed, static.space)
        free = rows.base_free.copy()
        iso = _pod_isolation(ctx, rows).copy()
        held = (
            range(len(rows.nodes))
            if rows.repeated
            else [i for n in idx.reservations_by_node if (i := rows.at.get(n)) is not None]
        )
        for i in held:  # only the nodes holding reservations read them
            free[i] = ctx.free_gpus(rows.nodes[i])
            iso[i] = ctx.isolation_ok(rows.nodes[i].name)
        fits = free >= need
        for why, out in (("no free GPU capacity", ~fits), ("isolation", fits & ~iso)):
            if count := int(np.count_nonzero(out)):
                excluded[why] = excluded.get(why, 0) + count
        cand_rows: IntArray = np.flatnonzero(fits & iso)
        candidates = [rows.nodes[i] for i in cand_rows.tolist()]
        free_c = free[cand_rows]
        if rows.repeated:  # a name listed twice (a hand-written scenario): a fact memoised by name is
            # the first asker's, so only the candidates ask, in their order, as every node does for TAS
            rows, cand_rows = _rows(ctx, candidates), np.arange(len(candidates))
    else:
        excluded, static_possible = {}, False
        candidates = []
        free_list: list[int] = []
        for node in snapshot.nodes:
            labels = node.labels
            if not rules.allows_node_labels(labels):
                why = "jurisdiction or policy labels"
            elif template_selector is None or not _labels_match(labels, template_selector):
                why = "template nodeSelector"
            elif not all(affinity_allows(node, terms) for terms in affinities):
                why = "template nodeAffinity"
            elif not taints_tolerated(node, tolerations):
                why = "untolerated taints"
            else:
                static_possible = True
                if not _labels_match(labels, flavor_labels):
                    why = "admitted flavor's nodeLabels"
                elif node.name not in tas_set:
                    why = "outside the TAS assignment"
                elif not node.ready or node.unschedulable:
                    why = "not ready or unschedulable"
                elif not ctx.isolation_ok(node.name):
                    why = "isolation"
                else:
                    candidates.append(node)
                    free_list.append(ctx.free_gpus(node))
                    continue
            excluded[why] = excluded.get(why, 0) + 1
        rows = _rows(ctx, candidates)
        cand_rows = np.arange(len(candidates), dtype=np.int64)
        free_c = np.asarray(free_list, dtype=np.int64)
    summary = ", ".join(f"{n} {w}" for w, n in sorted(excluded.items(), key=lambda x: (-x[1], x[0])))
    if tas_set is not None:
        legal = {n.name for n in candidates}
        missing = [n for n in sorted(tas_set) if n not in legal]
        if missing or not tas_set:
            static_any = static_possible
            msg = f"TAS assignment places pods on non-sovereign or unknown nodes: {', '.join(missing[:5])}"
            state: CheckState = "Retry" if static_any else "Rejected"
            return finish(
                state, "TopologyNotSovereign" if static_any else "NeverSovereign", msg, tenant=tenant,
                requeue_after_seconds=policy.retry_after_seconds if static_any else None,
            )  # fmt: skip
    if not candidates:
        if not static_possible:
            return finish(
                "Rejected", "NeverSovereign",
                f"no node in the cluster can ever host tenant {tenant} with this workload's constraints "
                f"({summary or 'no nodes'})", tenant=tenant,
            )  # fmt: skip
        return finish(
            "Retry", "NoSovereignNode",
            f"no sovereign node with free capacity for tenant {tenant} now ({summary}); retry in "
            f"{policy.retry_after_seconds}s", tenant=tenant, requeue_after_seconds=policy.retry_after_seconds,
        )  # fmt: skip

    # -- speculation eligibility (global)
    off: Reason | None = None
    tstate = telemetry_state(tel, now, policy.telemetry.staleness_seconds)
    pinned = sorted(pins)
    pin = max(pins.values(), key=lambda p: p.k, default=None)  # the record names the largest pinned k
    prior = policy.priors.get(claims.method or "") or DEFAULT_PRIORS.get(claims.method or "")
    estimate: AcceptanceEstimate | None = None
    if prior is not None and claims.method is not None:
        estimate = _estimate(
            prior,
            _acceptance_sample(tel if tstate is None else None, claims),
            policy.k_max,
            policy.alpha_quantile,
        )
    if not gpu_sets:
        off = Reason(type="NoGpuRequest", message="no pod set requests nvidia.com/gpu")
    elif pin is not None:
        off = Reason(
            type="TemplatePinsSpeculation",
            message=f"pod set(s) {', '.join(pinned)} set {LABEL_SPECULATIVE} or "
            f"{ANNOTATION_SPECULATIVE_CONFIG} in the template; the template's choice stands "
            f"({pin.describe()})",
        )
    elif claims.malformed:
        off = claims.malformed[0]
    elif claims.method is None:
        off = Reason(type="NotRequested", message="no spec-method or draft-model annotation")
    elif prior is None or estimate is None:
        off = Reason(type="NoPrior", message=f"no acceptance prior for method {claims.method}")
    elif policy.allowed_pairs and not any(
        p.target_model == claims.target_model and p.draft_model == (claims.draft_model or claims.method)
        for p in policy.allowed_pairs
    ):
        off = Reason(
            type="PairNotAllowed",
            message=f"pair target={claims.target_model} draft={claims.draft_model or claims.method} "
            "is not in the policy's allowedPairs",
        )
    elif tstate is not None:
        off = Reason(
            type=tstate, message="telemetry is missing or stale: speculation off, placement unchanged"
        )
    elif claims.workload_class == "batch":
        off = Reason(type="BatchClass", message="batch workloads run plain and pack onto loaded nodes")
    elif estimate.alpha < policy.weak_acceptance:
        off = Reason(
            type="WeakDraft",
            message=f"decision acceptance alpha={estimate.alpha:.2f} is below {policy.weak_acceptance} "
            f"(source {estimate.source})",
        )
    reasons: list[Reason] = [*claims.malformed[1:], *notes]

    ranges = batch_ranges(policy.batch_breakpoints, policy.max_batch)
    e_range = range_index(ranges, claims.expected_batch)
    book = _profiles(policy)
    n_cand = len(candidates)
    # A node name listed twice (a hand-written scenario): what is looked up by name is the last one's.
    canon = np.arange(n_cand)
    if rows.repeated:
        last = {n.name: c for c, n in enumerate(candidates)}
        canon = np.asarray([last[n.name] for n in candidates], dtype=np.int64)
        free_c = free_c[canon]
    gpu = _gpu_rows(ctx, rows) if tstate is None else None

    def gpu_info(c: int) -> GpuInfo:
        return gpu.infos[int(cand_rows[c])] if gpu is not None else ([], None, None)

    at = np.full(n_cand, -1, dtype=np.int64)  # a candidate's row in `evaluation`, -1: not evaluated
    evaluation: Evaluation | None = None
    spec: _SpecRows | None = None
    other_nbs: dict[int, Neighbours] = {}  # evaluated row -> its neighbours, when not the memoised ones
    if off is None:
        assert claims.method is not None and estimate is not None and gpu is not None
        spec = _spec_rows(ctx, rows, gpu, book, claims)
        full_at = spec.evaluated[cand_rows]
        ev_c = np.flatnonzero(full_at >= 0)
        if ev_c.size:
            t, full = _evaluate_rows(
                ctx, rows, spec, estimate.expected_lengths, ranges, claims.expected_batch, claims
            )
            evaluation = full.take(full_at[ev_c])
            at[ev_c] = np.arange(ev_c.size)
            mine = spec.own.get(wl.namespace)
            if mine:  # our own old pods (a re-decision) are no neighbours: evaluate those nodes again
                cand_of = np.full(len(rows.nodes), -1, dtype=np.int64)
                cand_of[cand_rows] = np.arange(n_cand)
                for r in mine:
                    c = int(cand_of[r])
                    memoised = spec.got[r]
                    if c < 0 or at[c] < 0 or not isinstance(memoised, NodeInput):
                        continue
                    nbs = _neighbours(ctx, candidates[c], gpu.infos[r][0], book, policy)
                    if nbs is not memoised.neighbours:
                        other_nbs[int(at[c])] = nbs
                if other_nbs:
                    redo = np.asarray(sorted(other_nbs), dtype=np.int64)
                    bound = load_bounds([other_nbs[int(e)] for e in redo], policy.safety)
                    evaluation.put(redo, evaluate_groups(t, spec.gid[cand_rows[ev_c[redo]]], bound, e_range))
    at = at[canon]

    def node_off(c: int) -> Reason | None:
        """Why speculation is off on candidate c although it is requested (None: evaluated, or off
        for everyone)."""
        got = spec.got[int(cand_rows[canon[c]])] if spec is not None else None
        return got if isinstance(got, Reason) else None

    # -- placement
    def outcome(c: int) -> tuple[float, float | None, int]:
        i = int(at[c])
        if evaluation is not None and i >= 0:
            return (
                float(evaluation.speedup_expected[i]),
                float(evaluation.slack_expected[i]),
                int(evaluation.k_star[i].max()),
            )
        return 1.0, None, 0

    # Ranking, vectorised: keys compared as rounded floats (1e-9) so that float noise never breaks a tie
    # that the name should break.
    name_rank = rows.rank[cand_rows]
    rate: FloatArray | None = None  # placement Throughput's key, per candidate
    if off is None:  # interactive with a healthy draft: highest S_real, then more slack, then name
        key1, key2 = np.ones(n_cand), np.full(n_cand, -1.0)
        hit = at >= 0
        if evaluation is not None:
            key1[hit] = evaluation.speedup_expected[at[hit]]
            key2[hit] = evaluation.slack_expected[at[hit]]
        if policy.placement == "Throughput":  # highest decode rate S_real(k*, B) / t_u(B) instead
            key1 = rate = _predicted_rates(candidates, hit, at, evaluation, book, claims, gpu_info)
    else:  # plain: most loaded node that fits (u if known, else allocated fraction), then name
        alloc_n = rows.alloc[cand_rows]
        alloc = np.zeros(n_cand)
        np.divide(free_c, alloc_n, out=alloc, where=alloc_n != 0)
        alloc = np.where(alloc_n != 0, 1.0 - alloc, 0.0)
        u_c = gpu.u[cand_rows[canon]] if gpu is not None else np.full(n_cand, np.nan)
        key1 = np.where(np.isnan(u_c), alloc, u_c)
        key2 = alloc
    order = np.lexsort((name_rank, -np.round(key2, 9), -np.round(key1, 9))).tolist()
    chosen_c = order[0]
    chosen = candidates[chosen_c]
    placed = order if tas is not None else [chosen_c]

    def rate_of(c: int) -> float | None:
        r = None if rate is None else float(rate[canon[c]])
        return r if r is not None and r > 0 else None

    # -- outcome on the chosen node(s)
    k_row: list[int] = [0] * len(ranges)
    if evaluation is not None and all(at[c] >= 0 for c in placed):
        k_mat = evaluation.k_star[at[placed]]
        k_row = [int(x) for x in k_mat.min(axis=0)]
        if max(k_row) == 0:
            k_self = evaluation.k_star_self[at[placed]].min(axis=0)
            if int(k_self.max()) > 0:
                off = Reason(
                    type="NeighbourSlo", message="a co-located neighbour's SLO margin leaves no draft budget"
                )
            else:
                off = Reason(
                    type="NoGain",
                    message=f"no draft budget reaches S_real ≥ {1 + policy.min_gain:.2f} on {chosen.name}",
                )
    elif off is None:
        bad = next((no for c in placed if (no := node_off(c)) is not None), None)
        off = bad or Reason(type="NoGain", message="speculation not evaluated")
    schedule = merge_schedule(ranges, k_row)
    num = max(k_row)
    enabled = num > 0 and off is None
    config = speculative_config(claims.method or "", claims.draft_model, schedule) if enabled else ""
    method, draft_model = claims.method, claims.draft_model
    if pin is not None:  # recorded as the pods will run it, with its own k (at most kMax: read_pin)
        num, enabled, config = pin.k, pin.k > 0, pin.config
        schedule = pin.schedule or [[1, policy.max_batch, pin.k]]
        method, draft_model = pin.method, pin.draft_model
    _, sigma_e, _ = outcome(chosen_c)
    if sigma_e is None:
        sigma_e = _plain_slack(ctx, chosen, book, claims, gpu_info(int(canon[chosen_c])))
    if pin is not None:
        predicted: float | None = None if enabled else 1.0  # the template's config: not predicted
    elif enabled and evaluation is not None:
        predicted = float(min(evaluation.speedup_expected[at[c]] for c in placed))
    else:
        predicted = 1.0

    neighbours: list[NeighbourImpact] = []
    if evaluation is not None and spec is not None and at[chosen_c] >= 0:
        i = int(at[chosen_c])
        nbs = (
            other_nbs[i]
            if i in other_nbs
            else cast(NodeInput, spec.got[int(cand_rows[canon[chosen_c]])]).neighbours
        )
        slowdown = neighbour_slowdown(nbs.sigma, evaluation.load_increase_expected[i], nbs.u_total)
        for j, nb in enumerate(nbs.items):
            slow = float(slowdown[j]) if enabled else 0.0
            neighbours.append(
                NeighbourImpact(
                    namespace=nb.namespace,
                    pod=nb.pod,
                    margin_before=None if nb.margin is None else round(nb.margin, 6),
                    slowdown=round(slow, 6) if np.isfinite(slow) else None,
                )
            )
    elif tstate is None:
        for nb in _neighbours(ctx, chosen, gpu_info(int(canon[chosen_c]))[0], book, policy).items:
            neighbours.append(
                NeighbourImpact(namespace=nb.namespace, pod=nb.pod, margin_before=nb.margin, slowdown=0.0)
            )

    speculative = Speculative(
        enabled=enabled,
        method=method,
        draft_model=draft_model,
        num_speculative_tokens=num if enabled else 0,
        schedule=schedule if enabled else [[1, policy.max_batch, 0]],
        config=config,
    )
    updates, conflicts = _pod_set_updates(
        wl, rules, chosen, enabled, config, tas is not None, flavor_labels_by_set, pins
    )
    reasons.extend(conflicts)
    if off is not None:
        reasons.insert(0, off)
    for c in placed:
        if (why_off := node_off(c)) is not None and not enabled:
            reasons.append(why_off)
    acceptance = AcceptanceSummary()
    if estimate is not None and (pin is None or pin.method == claims.method):  # the estimate's method
        el = estimate.expected_lengths
        acceptance = AcceptanceSummary(
            source=estimate.source,
            alpha=round(estimate.alpha, 6),
            quantile=policy.alpha_quantile,
            drafts=estimate.drafts,
            per_position=[round(float(x), 6) for x in estimate.p],
            expected_length=round(float(el[min(num if enabled else 0, len(el) - 1)]), 6),
        )
    cands = []
    for c in order[:10]:
        sp, sig, kk = outcome(c)
        load = gpu_info(int(canon[c]))[1]
        cands.append(
            Candidate(
                node=candidates[c].name,
                predicted_speedup=round(sp, 6),
                slack=None if sig is None else round(sig, 6),
                load=None if load is None else round(float(load or 0.0), 6),
                k=kk,
                free_gpus=int(free_c[c]),
                predicted_rate=_round_or_none(rate_of(c)),
            )
        )
    speedup_by_k: list[float] = []
    if evaluation is not None and at[chosen_c] >= 0:
        speedup_by_k = [round(float(x), 6) for x in evaluation.speedup_by_k[at[chosen_c]]]
    inputs_rec = DecisionInputs(
        workload_class=claims.workload_class,
        target_model=claims.target_model,
        draft_model=claims.draft_model,
        method=claims.method,
        tpot_slo_ms=claims.tpot_slo_ms,
        expected_batch=claims.expected_batch,
        placement=None if policy.placement == "RelativeSpeedup" else policy.placement,
    )
    if pin is not None and off is not None:
        reason = off.type
        message = f"node {chosen.name}: speculation pinned by the template ({pin.describe()})"
    elif enabled:
        reason = "SpeculationOn"
        message = (
            f"node {chosen.name}: speculation on ({claims.method}, k≤{num}), predicted S_real "
            f"{_fmt(predicted)} at batch {claims.expected_batch}, slack {_fmt(sigma_e)}"
        )
    else:
        assert off is not None
        reason = off.type
        message = f"node {chosen.name}: speculation off ({off.type}: {off.message})"
    if rate is not None:
        message += f"; placement Throughput: {_fmt(rate_of(chosen_c))} tok/s per sequence"
    if tas is not None and len(placed) > 1:
        message += f"; TAS places pods on {len(placed)} nodes"
    return finish(
        "Ready",
        reason,
        message,
        node=chosen.name,
        tenant=tenant,
        gpus=need,
        workload_class=claims.workload_class,
        speculative=speculative,
        predicted_speedup=None if predicted is None else round(predicted, 6),
        slack=None if sigma_e is None else round(sigma_e, 6),
        acceptance=acceptance,
        neighbours=neighbours,
        pod_set_updates=updates,
        reasons=reasons,
        candidates=cands,
        inputs=inputs_rec,
        speedup_by_k=speedup_by_k,
    )


# ---------------------------------------------------------------------------------------------------
# Per-node facts as arrays aligned with a node list: for the static filter's list they are memoised
# while the snapshot's nodes, pods and telemetry are the same, so a warm decision reads a few arrays
# instead of visiting every node.

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
GpuInfo = tuple[list[GpuSample], float | None, float | None]
"""A node's GPUs with free capacity, their aggregated background load u, their min free framebuffer."""

_T = TypeVar("_T")


@dataclass(frozen=True, eq=False)
class _Rows:
    """A node list and what no request changes about its nodes."""

    nodes: Sequence[NodeInfo]
    names: list[str]
    """The nodes' names (the same list object in rows patched from one another)."""
    at: dict[str, int]
    """Name -> position (the last one for a name listed twice)."""
    rank: IntArray
    """Position of each name in sorted order (stable): the placement's last tie-break."""
    alloc: IntArray
    base_free: IntArray
    """Allocatable GPUs minus those of bound pods (reservations are read per decision)."""
    repeated: bool
    """Some name occurs twice (a hand-written scenario): facts kept by name are the last node's."""
    space: object | None
    """Facts about these rows are memoised on the index under this name (the static filter's list's
    row space), or built each time (None)."""

    def touched(self, nodes: frozenset[str]) -> IntArray | None:
        """The rows of `nodes`, in order; None when patching them would not pay (or a name repeats)."""
        if self.repeated:
            return None
        at = self.at
        rows = sorted(i for n in nodes if (i := at.get(n)) is not None)
        if 2 * len(rows) > len(self.names):
            return None
        return np.asarray(rows, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class _GpuRows:
    infos: list[GpuInfo]
    u: FloatArray
    """Background load u per node, NaN where unknown."""


@dataclass(frozen=True, eq=False)
class _SpecRows:
    """Per node: what the evaluation needs (its `NodeInput`) or why speculation is off there."""

    got: list[NodeInput | Reason]
    groups: Groups
    gid: IntArray
    """The node's (curve, c_d, u) group; -1 where speculation is off."""
    bound: FloatArray
    """The largest load increase the node's neighbours tolerate (policy's safety)."""
    own: dict[str, list[int]]
    """Namespace -> rows with a neighbour in it (a re-decision there must drop its own pods)."""
    evaluated: IntArray
    """Row -> its index among the rows evaluated (-1 where speculation is off)."""


Patch = Callable[[tuple[object, ...], _T, frozenset[str]], _T | None]
"""Makes a fact from the same fact of an index this one was patched from (its owners, its value, the
nodes touched since), or declines (None)."""


def _wide(
    ctx: _Ctx,
    key: tuple[object, ...],
    owners: tuple[object, ...],
    build: Callable[[], _T],
    patch: Patch[_T] | None = None,
) -> _T:
    """`build()` memoised in the index's `wide` memo while `owners` (named by id in `key`) are the same
    objects; the entry keeps them alive, so their ids stay theirs. On a patched index, `patch` makes the
    fact from the newest one the previous indexes hold under `key`, when there is one."""
    idx = ctx.idx
    hit = idx.wide.get(key)
    if (
        isinstance(hit, tuple)
        and len(hit[0]) == len(owners)
        and all(a is b for a, b in zip(hit[0], owners, strict=True))
    ):
        return cast(_T, hit[1])
    value: _T | None = None
    if patch is not None and (old := idx.carried_fact(key)) is not None:
        (old_owners, old_value), touched = cast(tuple[tuple[tuple[object, ...], _T], frozenset[str]], old)
        value = patch(old_owners, old_value, touched)
    if value is None:
        value = build()
    if len(idx.wide) > 256:
        idx.wide.clear()
    idx.wide[key] = (owners, value)
    return value


def _on_rows(
    ctx: _Ctx,
    rows: _Rows,
    key: tuple[object, ...],
    owners: tuple[object, ...],
    build: Callable[[], _T],
    patch: Callable[[_T, IntArray], _T | None],
) -> _T:
    """A fact about `rows`, memoised with them when they are; `patch(old value, rows touched)` makes it
    from the fact of a previous index on rows with the same names and the same `owners`."""
    if rows.space is None:
        return build()

    def carried(old_owners: tuple[object, ...], old: _T, touched: frozenset[str]) -> _T | None:
        old_rows = old_owners[0]
        if not isinstance(old_rows, _Rows) or old_rows.names is not rows.names:
            return None
        if any(a is not b for a, b in zip(old_owners[1:], owners, strict=True)):
            return None
        at = rows.touched(touched)
        return None if at is None else patch(old, at)

    return _wide(ctx, (*key, rows.space), (rows, *owners), build, carried)


def _rows(ctx: _Ctx, nodes: Sequence[NodeInfo], space: object | None = None) -> _Rows:
    """`nodes` as rows; memoised under `space` when given (the static filter's passed list)."""
    used = ctx.idx.gpu_used

    def build() -> _Rows:
        names = [n.name for n in nodes]
        rank = np.empty(len(names), dtype=np.int64)
        rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
        alloc = np.fromiter((n.gpu_allocatable for n in nodes), dtype=np.int64, count=len(nodes))
        base_free = alloc - np.fromiter((used.get(n, 0) for n in names), dtype=np.int64, count=len(nodes))
        at = {name: i for i, name in enumerate(names)}
        return _Rows(nodes, names, at, rank, alloc, base_free, len(at) != len(names), space)

    def patch(_: tuple[object, ...], old: _Rows, touched: frozenset[str]) -> _Rows | None:
        # the same space: the same names in the same order (the static filter keeps it only then)
        at = old.touched(touched)
        if at is None or len(old.names) != len(nodes):
            return None
        alloc, base_free = old.alloc.copy(), old.base_free.copy()
        for i in at.tolist():
            alloc[i] = nodes[i].gpu_allocatable
            base_free[i] = alloc[i] - used.get(old.names[i], 0)
        return _Rows(nodes, old.names, old.at, old.rank, alloc, base_free, False, space)

    return build() if space is None else _wide(ctx, ("rows", space), (nodes,), build, patch)


def _pod_isolation(ctx: _Ctx, rows: _Rows) -> BoolArray:
    """I2 and I3 for the request's tenant against each node's pods (reservations are read per decision)."""

    def one(i: int) -> bool:
        name = rows.names[i]
        return ctx.isolation_among(name, ctx.pod_occupants(name))

    def build() -> BoolArray:
        return np.fromiter(map(one, range(len(rows.names))), dtype=np.bool_, count=len(rows.names))

    def patch(old: BoolArray, at: IntArray) -> BoolArray:
        new = old.copy()
        for i in at.tolist():
            new[i] = one(i)
        return new

    sov = ctx.policies.sovereignty
    key = ("isolation", ctx.wl.namespace, id(sov), ctx.system_namespaces)
    return _on_rows(ctx, rows, key, (sov,), build, patch)


def _gpu_rows(ctx: _Ctx, rows: _Rows) -> _GpuRows:
    def build() -> _GpuRows:
        infos = [ctx.gpu_state(n) for n in rows.nodes]
        u = np.fromiter((np.nan if i[1] is None else i[1] for i in infos), dtype=np.float64, count=len(infos))
        return _GpuRows(infos, u)

    def patch(old: _GpuRows, at: IntArray) -> _GpuRows:
        infos, u = list(old.infos), old.u.copy()
        for i in at.tolist():
            infos[i] = info = ctx.gpu_state(rows.nodes[i])
            u[i] = np.nan if info[1] is None else info[1]
        return _GpuRows(infos, u)

    return _on_rows(ctx, rows, ("gpu", ctx.policy.slack_aggregation), (), build, patch)


def _spec_rows(ctx: _Ctx, rows: _Rows, gpu: _GpuRows, book: ProfileBook, claims: Claims) -> _SpecRows:
    """Memoised per rows, policies, method and target model (`gpu` is the rows' GPU state under the
    policy's slack aggregation, so the policy names it)."""
    policy, sov = ctx.policy, ctx.policies.sovereignty

    def one(i: int) -> NodeInput | Reason:
        node = rows.nodes[i]
        key = ("node-input", node.name, (id(policy), id(sov), claims.method, claims.target_model))
        hit = ctx.idx.memo.get(key)
        if isinstance(hit, tuple) and hit[0] is policy and hit[1] is sov:
            return cast(NodeInput | Reason, hit[2])
        got = _node_input(ctx, node, gpu.infos[i], book, claims)
        ctx.idx.memo[key] = (policy, sov, got)
        return got

    def build() -> _SpecRows:
        got = [one(i) for i in range(len(rows.nodes))]
        inputs = [g for g in got if isinstance(g, NodeInput)]
        groups, of = Groups.of_nodes(inputs)
        ok = np.fromiter((isinstance(g, NodeInput) for g in got), dtype=np.bool_, count=len(got))
        gid = np.full(len(got), -1, dtype=np.int64)
        gid[ok] = of
        evaluated = np.full(len(got), -1, dtype=np.int64)
        evaluated[ok] = np.arange(len(inputs))
        bound = np.full(len(got), np.inf)
        bound[ok] = load_bounds([nd.neighbours for nd in inputs], policy.safety)
        own: dict[str, list[int]] = {}
        for i, g in enumerate(got):
            if isinstance(g, NodeInput):
                for ns in g.neighbours.namespaces:
                    own.setdefault(ns, []).append(i)
        return _SpecRows(got, groups, gid, bound, own, evaluated)

    def patch(old: _SpecRows, at: IntArray) -> _SpecRows:
        got = list(old.got)
        rows_at = at.tolist()
        for i in rows_at:
            got[i] = one(i)
        on = [i for i in rows_at if isinstance(got[i], NodeInput)]
        inputs = [cast(NodeInput, got[i]) for i in on]
        groups, of = old.groups.extended(inputs)  # the groups there keep their numbers
        gid, bound = old.gid.copy(), old.bound.copy()
        gid[at], bound[at] = -1, np.inf
        gid[on] = of
        bound[on] = load_bounds([nd.neighbours for nd in inputs], policy.safety)
        evaluated = old.evaluated
        ok = gid >= 0
        if not np.array_equal(ok[at], old.gid[at] >= 0):
            evaluated = np.full(len(got), -1, dtype=np.int64)
            evaluated[ok] = np.arange(int(np.count_nonzero(ok)))
        own = dict(old.own)
        moved = set(rows_at)
        spaces = {
            ns
            for i in rows_at
            for g in (old.got[i], got[i])
            if isinstance(g, NodeInput)
            for ns in g.neighbours.namespaces
        }
        for ns in spaces:
            mine = [r for r in own.get(ns, ()) if r not in moved]
            mine.extend(i for i, nd in zip(on, inputs, strict=True) if ns in nd.neighbours.namespaces)
            if mine:
                own[ns] = sorted(mine)
            else:
                own.pop(ns, None)
        return _SpecRows(got, groups, gid, bound, own, evaluated)

    key = ("spec", id(policy), id(sov), claims.method, claims.target_model)
    return _on_rows(ctx, rows, key, (policy, sov), build, patch)


def _evaluate_rows(
    ctx: _Ctx,
    rows: _Rows,
    spec: _SpecRows,
    el: FloatArray,
    ranges: Sequence[tuple[int, int]],
    batch: int,
    claims: Claims,
) -> tuple[Tables, Evaluation]:
    """The evaluation of every row where speculation can be on (in row order), and the group tables it
    was read from, memoised per rows' spec (policies, method, target model), acceptance curve, ranges and
    expected batch. Patched, only the touched rows are evaluated again, and groups added since get
    their tables (a group's table and a node's evaluation read only that group and that node)."""
    policy, sov = ctx.policy, ctx.policies.sovereignty
    ends = [end for _, end in ranges]
    e_range = range_index(ranges, batch)

    def evaluate(t: Tables) -> Evaluation:
        ok = spec.evaluated >= 0
        return evaluate_groups(t, spec.gid[ok], spec.bound[ok], e_range)

    def build() -> tuple[Tables, Evaluation, _SpecRows]:
        t = tables(spec.groups, el, ends, batch, policy.min_gain)
        return t, evaluate(t), spec

    def patch(
        old: tuple[Tables, Evaluation, _SpecRows], at: IntArray
    ) -> tuple[Tables, Evaluation, _SpecRows] | None:
        t, ev, was = old
        if spec.groups is not was.groups:
            if not spec.groups.extends(was.groups):
                return None
            added = spec.groups.since(was.groups)
            t = t.concat(tables(added, el, ends, batch, policy.min_gain))
        if not np.array_equal(spec.evaluated, was.evaluated):
            return t, evaluate(t), spec
        ev = ev.copy()
        redo = spec.evaluated[at]
        on = redo >= 0
        if on.any():
            rows_on = at[on]
            ev.put(redo[on], evaluate_groups(t, spec.gid[rows_on], spec.bound[rows_on], e_range))
        return t, ev, spec

    key = (
        "evaluation",
        id(policy),
        id(sov),
        claims.method,
        claims.target_model,
        el.tobytes(),
        tuple(ranges),
        batch,
    )
    got = _on_rows(ctx, rows, key, (policy, sov), build, patch)
    if got[2] is not spec:  # the spec was made again under the same memo (not while the memo holds)
        got = build()
    return got[0], got[1]


def _node_input(
    ctx: _Ctx,
    node: NodeInfo,
    info: tuple[list[GpuSample], float | None, float | None],
    book: ProfileBook,
    claims: Claims,
) -> NodeInput | Reason:
    """What the vectorised evaluation needs about one node, or why speculation is off there.

    Depends on the snapshot, the policies, the method and the target model only (memoised)."""
    free_gpus, u, fb = info
    policy = ctx.policy
    method = claims.method or ""
    product = node.labels.get(LABEL_GPU_PRODUCT) or next(
        (g.model_name for g in free_gpus if g.model_name), None
    )
    prof = book.find(product, claims.target_model)
    if prof is None:
        return Reason(
            type="NoAcceleratorProfile", message=f"no profile for GPU {product} / {claims.target_model}"
        )
    if u is None:
        return Reason(type="NodeTelemetryMissing", message=f"no GPU load for {node.name}")
    mem = prof.draft_memory_mib.get(method, 0.0)
    if fb is None or fb < mem:
        return Reason(
            type="InsufficientDraftMemory",
            message=f"draft needs {mem:.0f} MiB, free {_fmt(fb)} MiB on {node.name}",
        )
    return NodeInput(
        name=node.name,
        curve=_curve(prof),
        c_d=prof.draft_cost.get(method, 0.0),
        u=u,
        neighbours=_neighbours(ctx, node, free_gpus, book, policy, filter_self=False),
    )


def _round_or_none(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def _predicted_rates(
    candidates: Sequence[NodeInfo],
    hit: npt.NDArray[np.bool_],
    at: npt.NDArray[np.int64],
    evaluation: Evaluation | None,
    book: ProfileBook,
    claims: Claims,
    gpu_info: Callable[[int], GpuInfo],
) -> npt.NDArray[np.float64]:
    """Placement Throughput's key: decode tokens/s per sequence at the expected batch, S_real(k*, B) /
    t_u(B). Evaluated nodes in one vectorised step; a node where speculation is off (no draft memory,
    ...) runs plain, S = 1, at 1 / t_u(B) when its profile and load are known; otherwise 0 (last)."""
    rate = np.zeros(len(candidates))
    if evaluation is not None and hit.any():
        rate[hit] = evaluation.speedup_expected[at[hit]] / evaluation.step_expected[at[hit]]
    for i in np.nonzero(~hit)[0].tolist():
        step = _plain_step(candidates[i], book, claims, gpu_info(i))
        if step is not None and step > 0:
            rate[i] = 1.0 / step
    return rate


def _plain_inputs(
    node: NodeInfo,
    book: ProfileBook,
    claims: Claims,
    info: tuple[list[GpuSample], float | None, float | None] | None,
) -> tuple[float, float, float] | None:
    """(t0, g(B), u) at the expected batch on a node that was not evaluated, when its profile and load
    are known."""
    if info is None or info[1] is None:
        return None
    product = node.labels.get(LABEL_GPU_PRODUCT) or next(
        (g.model_name for g in info[0] if g.model_name), None
    )
    prof = book.find(product, claims.target_model)
    if prof is None:
        return None
    c = _curve(prof)
    return c.t0, float(c.g(claims.expected_batch)), info[1]


def _plain_step(
    node: NodeInfo,
    book: ProfileBook,
    claims: Claims,
    info: tuple[list[GpuSample], float | None, float | None] | None,
) -> float | None:
    """t_u(B) at the expected batch on a node that was not evaluated, when computable."""
    got = _plain_inputs(node, book, claims, info)
    return None if got is None else float(stretched(*got))


def _plain_slack(
    ctx: _Ctx,
    node: NodeInfo,
    book: ProfileBook,
    claims: Claims,
    info: tuple[list[GpuSample], float | None, float | None] | None,
) -> float | None:
    """sigma at the expected batch on a node that was not evaluated (speculation off), when computable."""
    got = _plain_inputs(node, book, claims, info)
    return None if got is None else float(slack_of(*got))


def _neighbours(
    ctx: _Ctx,
    node: NodeInfo,
    gpus: Sequence[GpuSample],
    book: ProfileBook,
    policy: SpeculationPolicySpec,
    filter_self: bool = True,
) -> Neighbours:
    """Co-located engines on the node's free GPUs, memoised per (snapshot, node, policies): they do not
    depend on the request; only the request's own pods (a re-decision) are filtered out afterwards."""
    key = ("neighbours", node.name, id(policy), id(ctx.policies.sovereignty))
    hit = ctx.idx.memo.get(key)
    if isinstance(hit, tuple) and hit[0] is policy and hit[1] is ctx.policies.sovereignty:
        found: Neighbours = hit[2]
    else:
        found = Neighbours.of(_neighbours_uncached(ctx, node, gpus, book, policy))
        ctx.idx.memo[key] = (policy, ctx.policies.sovereignty, found)
    wl = ctx.wl
    if (
        filter_self
        and wl.namespace in found.namespaces
        and any(nb.namespace == wl.namespace and nb.pod.startswith(wl.name) for nb in found.items)
    ):
        return Neighbours.of(
            [nb for nb in found.items if not (nb.namespace == wl.namespace and nb.pod.startswith(wl.name))]
        )
    return found


def _neighbours_uncached(
    ctx: _Ctx, node: NodeInfo, gpus: Sequence[GpuSample], book: ProfileBook, policy: SpeculationPolicySpec
) -> list[NeighbourInput]:
    seen: dict[tuple[str, str], float] = {}
    for g in gpus:
        for p in g.pods:
            key = (p.namespace, p.name)
            u = float(g.tensor_active or 0.0)
            seen[key] = max(seen.get(key, 0.0), u)
    unattributed = _unattributed_gpu_pods(ctx, node) if gpus else []
    if unattributed:
        u_shared = max(float(g.tensor_active or 0.0) for g in gpus)
        for key in unattributed:
            seen[key] = max(seen.get(key, 0.0), u_shared)
    out = []
    product_default = node.labels.get(LABEL_GPU_PRODUCT) or next(
        (g.model_name for g in gpus if g.model_name), None
    )
    pod_by_key, engine_by_pod = ctx.idx.pod_by_key, ctx.idx.engine_by_pod
    default_slo, unknown_sigma = policy.default_tpot_slo_ms, policy.unknown_neighbour_slack
    unknown_margin = policy.unknown_neighbour_margin
    for key, u_tot in sorted(seen.items()):
        pod = pod_by_key.get(key)
        ann = pod.annotations if pod is not None else {}
        engine = engine_by_pod.get(key)
        raw_slo = ann.get(_SLO_KEY)
        ns = key[0]
        margin: float | None
        if engine is not None and engine.tpot_seconds is not None:
            margin = ctx.slo_ms(ns, raw_slo, default_slo) / 1000.0 / engine.tpot_seconds - 1.0
        elif engine is not None or raw_slo is not None:
            margin = unknown_margin  # SLO-bound, TPOT not measured: the policy's assumption
        else:
            margin = None
        sigma = unknown_sigma
        if engine is not None and engine.running is not None:
            prof = book.find(product_default, ann.get(_TARGET_KEY))
            if prof is not None:
                sigma = _neighbour_sigma(_curve(prof), engine.running, u_tot)
        out.append(NeighbourInput(namespace=ns, pod=key[1], sigma=sigma, margin=margin, u_total=u_tot))
    return out


_SLO_KEY = PREFIX + "tpot-slo-ms"
_TARGET_KEY = PREFIX + "target-model"
_SIGMAS: dict[tuple[int, float, float], tuple[StepCurve, float]] = {}


def _neighbour_sigma(c: StepCurve, running: float, u_tot: float) -> float:
    """A neighbour's slack from its curve, its running sequences and its GPU's load (memoised on the
    values: a cluster has few products and load levels; the curve is kept so its id stays its own)."""
    key = (id(c), running, u_tot)
    hit = _SIGMAS.get(key)
    if hit is not None and hit[0] is c:
        return hit[1]
    compute = (c.t_scalar(max(running, 1.0)) - c.t0) / (1.0 - min(u_tot, U_MAX))
    sigma = c.t0 / (c.t0 + compute)
    if len(_SIGMAS) > 4096:
        _SIGMAS.clear()
    _SIGMAS[key] = (c, sigma)
    return sigma


def _replicas(node: NodeInfo, samples: Sequence[GpuSample]) -> int:
    """Pods per GPU the node advertises (time-slicing replicas; 1 for whole GPUs)."""
    return max(1, node.gpu_allocatable // len(samples)) if node.gpu_allocatable else 1


def _unattributed_gpu_pods(ctx: _Ctx, node: NodeInfo) -> list[tuple[str, str]]:
    """GPU pods bound to a time-sliced node that no GPU sample names yet: dcgm-exporter's pod labels
    lag a pod's start by a collection interval, and such a pod may share any of the node's GPUs."""
    samples = ctx.idx.gpus_by_node.get(node.name, [])
    if not samples or _replicas(node, samples) <= 1:
        return []  # whole GPUs: an unattributed pod holds one of its own
    named = {(p.namespace, p.name) for g in samples for p in g.pods}
    return [
        (p.namespace, p.name)
        for p in ctx.idx.pods_by_node.get(node.name, ())
        if p.gpu_request > 0 and not p.daemonset and (p.namespace, p.name) not in named
    ]


def _pod_set_updates(
    wl: WorkloadInfo,
    rules: TenantRules,
    node: NodeInfo,
    enabled: bool,
    config: str,
    tas: bool,
    flavor_labels_by_set: Mapping[str, Mapping[str, str]],
    pins: Mapping[str, Pin] | None = None,
) -> tuple[list[PodSetUpdate], list[Reason]]:
    """Additive updates only: a key the template (or flavor) already sets to another value is dropped.
    A pod set whose template pins its speculation gets the label and config of its own pin."""
    conflicts: list[Reason] = []
    selector: dict[str, str] = {}
    for key in sorted(rules.jurisdictions):
        selector[key] = node.labels[key]
    selector.update(rules.node_selector)
    if not tas:
        selector[LABEL_HOSTNAME] = node.labels.get(LABEL_HOSTNAME, node.name)
    out = []
    for ps in wl.pod_sets:
        gpu = ps.gpus_per_pod > 0
        own = (pins or {}).get(ps.name)
        on, cfg = (own.k > 0, own.config) if own is not None else (enabled, config)
        labels = {LABEL_SPECULATIVE: "on" if on else "off"} if gpu else {}
        annotations = {ANNOTATION_DECISION: wl.name}
        if gpu:
            annotations[ANNOTATION_SPECULATIVE_CONFIG] = cfg
        if own is not None:  # what the template pins stays the template's: only what it lacks is added
            labels = {k: v for k, v in labels.items() if ps.labels.get(k) != v}
            annotations = {k: v for k, v in annotations.items() if ps.annotations.get(k) != v}

        def additive(
            kind: str, want: dict[str, str], have: Mapping[str, str], ps_name: str = ps.name
        ) -> dict[str, str]:
            kept = {}
            for k, v in sorted(want.items()):
                if k in have and have[k] != v:
                    conflicts.append(
                        Reason(
                            type="TemplateConflict",
                            message=f"pod set {ps_name}: {kind} {k}={shown(have[k])} in the template; "
                            "not overriding",
                        )
                    )
                else:
                    kept[k] = v
            return kept

        fixed = {**flavor_labels_by_set.get(ps.name, {}), **ps.node_selector}
        out.append(
            PodSetUpdate(
                name=ps.name,
                labels=additive("label", labels, ps.labels),
                annotations=additive("annotation", annotations, ps.annotations),
                node_selector=additive("nodeSelector", selector, fixed),
                tolerations=[t for t in rules.tolerations if t not in ps.tolerations],
            )
        )
    return out, conflicts
