"""Per-decision access to the facts memoised on a snapshot's index: a tenant's rules, a node's
occupants and isolation, its GPU state and neighbours, its evaluation input, and the value-keyed memos
(profile book, acceptance estimate, step curves, neighbour slack) the rules would otherwise recompute.

Every fact is computed by a rule module; this module only names it (`FactKey`) and keeps it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Literal, TypeVar, cast

from sovereignspec.api.meta import ANNOTATION_EXPECTED_BATCH
from sovereignspec.api.speculation_decision import Reason
from sovereignspec.api.speculation_policy import AcceleratorProfile, BetaPrior, SpeculationPolicySpec
from sovereignspec.model.acceptance import AcceptanceEstimate, estimate_acceptance
from sovereignspec.model.cluster import ClusterSnapshot, NodeInfo, PodInfo
from sovereignspec.model.profiles import ProfileBook, profile_book
from sovereignspec.model.steptime import StepCurve
from sovereignspec.model.telemetry import AcceptanceSample, GpuSample
from sovereignspec.model.workload import WorkloadInfo
from sovereignspec.policy.cache.index import SnapshotIndex, index_of
from sovereignspec.policy.cache.keys import FactKey, Same, interned
from sovereignspec.policy.cache.shared import ValueLru
from sovereignspec.policy.claims import Claims, parse_slo_ms
from sovereignspec.policy.node_state import (
    TARGET_KEY,
    GpuInfo,
    Neighbours,
    NeighbourSlack,
    NodeInput,
    NodeView,
    claims_of,
    gpu_product,
    gpu_state,
    handed_out,
    neighbour_inputs,
    neighbour_sigma,
    node_input,
    placed_and_tied,
    replicas,
    unattributed_gpu_pods,
)
from sovereignspec.policy.request import Policies
from sovereignspec.policy.sovereignty import (
    TenantRules,
    is_system_namespace,
    isolation_allows,
    rules_or_strict,
)
from sovereignspec.policy.unmeasured_load import busy_alone, with_unmeasured_load

_T = TypeVar("_T")
_CurveEntry = tuple[StepCurve, dict[tuple[float, float], NeighbourSlack]]
"""A profile's curve, and the neighbours' slack on it by (running sequences, GPU load)."""


ESTIMATES: ValueLru[AcceptanceEstimate] = ValueLru(4096)
"""Acceptance estimates by (prior, k_max, quantile, counters): the same for every snapshot."""


def batch_policies(snap: ClusterSnapshot, policies: Policies, claims: Claims) -> Policies:
    """The policies a batch-class workload is decided with under `batchClass: Model`: its node is judged
    on the GPU the pod gets (the least loaded free GPU: `slackAggregation: max`). The derived spec is
    kept on the index per policy object, so that the facts keyed by it stay memoised."""
    spec = policies.speculation
    if claims.workload_class != "batch" or spec.batch_class != "Model" or spec.slack_aggregation == "max":
        return policies
    memo = index_of(snap).memo
    key = FactKey("batch-spec", scope=(Same(spec),))
    derived = memo.get(key)
    if not isinstance(derived, SpeculationPolicySpec):
        derived = memo[key] = spec.model_copy(update={"slack_aggregation": "max"})
    return replace(policies, speculation=derived)


class Facts:
    """One decision's view of the snapshot: the request's workload and tenant rules, and the facts the
    index keeps for the life of the snapshot (and of the snapshots carried from it)."""

    def __init__(
        self,
        snap: ClusterSnapshot,
        policies: Policies,
        wl: WorkloadInfo,
        rules: TenantRules,
        holding: frozenset[str] = frozenset(),
    ) -> None:
        self.snap = snap
        self.idx: SnapshotIndex = index_of(snap)
        self.policies = policies
        self.policy: SpeculationPolicySpec = policies.speculation
        self.wl = wl
        self.rules = rules
        self.holding = holding
        """GPU UUIDs the workload's own pods hold (a re-decision): its neighbours are on those."""
        self.several_gpus = sum(ps.count * ps.gpus_per_pod for ps in wl.pod_sets) > 1
        """Which GPU the device plugin hands is modelled for a pod that asks for one replica only."""
        self.sovereignty = interned(policies.sovereignty)
        """The SovereigntyPolicies, the same tuple for the same policy objects (`keys.interned`)."""
        self.sov = Same(self.sovereignty)
        self.spec = Same(policies.speculation)
        self.system_namespaces = frozenset(self.policy.system_namespaces)
        # Looked up per neighbour on a cold index: one dict each, fetched once per decision.
        self._ns_rules: dict[str, TenantRules] = self.memo(FactKey("ns-rules", scope=(self.sov,)), dict)
        self._slo_ms: dict[tuple[str, str | None, float, float], float] = self.memo(
            FactKey("slo-ms", scope=(self.sov,)), dict
        )
        self._curves: dict[Same, _CurveEntry] = self.memo(FactKey("curves"), dict)
        self._book: ProfileBook | None = None
        self._nb_scope: tuple[object, ...] | None = None
        self._ld_scope: tuple[object, ...] | None = None

    def memo(self, key: FactKey, build: Callable[[], _T]) -> _T:
        """`build()` kept on the index under `key`."""
        hit = self.idx.memo.get(key)
        if hit is None:
            hit = build()
            self.idx.memo[key] = hit
        return cast(_T, hit)

    # -- values the rules recompute otherwise (pure in their keys)

    def profiles(self) -> ProfileBook:
        """Kept per the fields `profile_book` reads: a batch-class spec derived from the policy
        (`batch_policies`) shares its profile list, hence its book and the facts keyed by it."""
        if self._book is None:
            p = self.policy
            key = FactKey("profiles", scope=(Same(p.accelerator_profiles), p.builtin_profiles))
            self._book = self.memo(key, lambda: profile_book(self.policy))
        return self._book

    def _neighbour_scope(self) -> tuple[object, ...]:
        """Everything `neighbour_inputs` reads of the policies: the profile book, four numbers and what
        `samples` reads (the load scope and the allocation) (not the slack aggregation: both classes of a
        tenant share a node's neighbours)."""
        if self._nb_scope is not None:
            return self._nb_scope
        p = self.policy
        self._nb_scope = (
            Same(self.profiles()), p.default_tpot_slo_ms, p.unknown_neighbour_slack,
            p.unknown_neighbour_margin, p.min_tpot_slo_ms, self.sov, p.default_expected_batch, p.max_batch,
            p.shared_gpu_allocation,
        )  # fmt: skip
        return self._nb_scope

    def _curve_entry(self, profile: AcceleratorProfile) -> _CurveEntry:
        key = Same(profile)
        got = self._curves.get(key)
        if got is None:
            got = self._curves[key] = (StepCurve.from_profile(profile), {})
        return got

    def curve(self, profile: AcceleratorProfile) -> StepCurve:
        """One curve object per profile: nodes are grouped by curve object."""
        return self._curve_entry(profile)[0]

    def sigma(self, profile: AcceleratorProfile, running: float, u_total: float) -> NeighbourSlack:
        """A neighbour's slack and t0 (a cluster has few products, running counts and load levels)."""
        curve, known = self._curve_entry(profile)
        got = known.get((running, u_total))
        if got is None:
            got = known[(running, u_total)] = NeighbourSlack(
                neighbour_sigma(curve, running, u_total), curve.t0
            )
        return got

    def estimate(
        self, prior: BetaPrior, sample: AcceptanceSample | None, k_max: int, q: float
    ) -> AcceptanceEstimate:
        scope: tuple[object, ...] = (prior.mean, prior.strength, k_max, q)
        if sample is not None:
            scope += (
                sample.drafts,
                sample.draft_tokens,
                sample.accepted,
                tuple(sample.accepted_per_position),
            )
        return self.memo(
            FactKey("estimate", scope=scope),
            lambda: ESTIMATES.get(scope, lambda: estimate_acceptance(prior, sample, k_max, q)),
        )

    # -- tenants and isolation

    def ns_rules(self, namespace: str) -> TenantRules:
        """Another tenant's rules (strict when its policies contradict)."""
        got = self._ns_rules.get(namespace)
        if got is None:
            got = rules_or_strict(namespace, self.idx.ns_labels, self.policies.sovereignty)
            self._ns_rules[namespace] = got
        return got

    def slo_ms(self, namespace: str, raw: str | None, default_ms: float) -> float:
        """A neighbour's SLO claim clamped like the workload's own (its tenant's minTpotSloMs, else the
        policy's global floor)."""
        floor = self.policy.min_tpot_slo_ms
        key = (namespace, raw, default_ms, floor)
        got = self._slo_ms.get(key)
        if got is None:
            got = self._slo_ms[key] = parse_slo_ms(raw, default_ms, self.ns_rules(namespace), floor)[0]
        return got

    def pod_occupants(self, node: str) -> frozenset[str]:
        """Namespaces of the node's active pods, DaemonSet pods included, but for the system namespaces
        the policy lists."""
        exempt = self.system_namespaces

        def build() -> frozenset[str]:
            return frozenset(
                p.namespace
                for p in self.idx.pods_by_node.get(node, ())
                if not is_system_namespace(p.namespace, self.idx.ns_labels, exempt)
            )

        return self.memo(FactKey("pod-occupants", node, (exempt,)), build)

    def occupants(self, node: str) -> frozenset[str]:
        """Namespaces holding the node: non-infrastructure active pods and trusted reservations (this
        snapshot's only: reservations change per decision). The request's own reservation is in its own
        namespace, hence its own tenant, which isolation skips."""
        key = FactKey("occupants", node, (self.system_namespaces,))
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
        """I2 and I3 for our tenant on a node held by `occupants` (kept while they are the same)."""
        key = FactKey("isolation", node, (self.wl.namespace, self.sov))
        hit = self.idx.memo.get(key)
        if isinstance(hit, tuple) and hit[0] == occupants:
            return bool(hit[1])
        ok = isolation_allows(self.rules, occupants, self.idx.ns_labels, self.ns_rules)
        self.idx.memo[key] = (occupants, ok)
        return ok

    def free_gpus(self, node: NodeInfo) -> int:
        """Allocatable GPUs less bound pods' and other workloads' reservations."""
        reserved = sum(
            left
            for r, left in self.idx.reservations_by_node.get(node.name, ())
            if not (r.namespace == self.wl.namespace and r.name == self.wl.name)
        )
        return node.gpu_allocatable - self.idx.gpu_used.get(node.name, 0) - reserved

    # -- a node's GPUs and engines

    def _load_scope(self) -> tuple[object, ...]:
        """What `samples` reads of the policies: the profile book and the batch an engine is priced at."""
        if self._ld_scope is None:
            p = self.policy
            self._ld_scope = (Same(self.profiles()), p.default_expected_batch, p.max_batch)
        return self._ld_scope

    def samples(self, node: NodeInfo) -> Sequence[GpuSample]:
        """The node's GPU samples, loads raised to what their engines compute alone (`unmeasured_load`),
        with the pods no sample names yet on the GPUs a `Distributed` device plugin gave them
        (`node_state.placed_as_distributed`), else priced on every GPU with a free replica."""
        return self._placed(node)[0]

    def tied(self, node: NodeInfo) -> Sequence[GpuSample]:
        """The GPUs a pod no sample names yet was placed among in a tie, as a new pod may find them
        (`node_state.tied_gpus`), loads raised as in `samples`."""
        return self._placed(node)[1]

    def _placed(self, node: NodeInfo) -> tuple[Sequence[GpuSample], Sequence[GpuSample]]:
        raw = self.idx.gpus_by_node.get(node.name, [])
        if not raw:
            return raw, ()

        def build() -> tuple[Sequence[GpuSample], Sequence[GpuSample]]:
            product = gpu_product(node, raw)
            known: dict[tuple[str, str | None, float | None], float | None] = self.memo(
                FactKey("busy", scope=(*self._load_scope(), product)), dict
            )  # a cluster has few (model, claimed batch, running) triples: computed once each
            book, p = self.profiles(), self.policy

            def busy(pod: PodInfo, running: float | None) -> float | None:
                claims = claims_of(pod)
                target = claims.get(TARGET_KEY)
                if not target:
                    return None
                key = (
                    target,
                    None if running is not None else claims.get(ANNOTATION_EXPECTED_BATCH),
                    running,
                )
                if key not in known:
                    known[key] = busy_alone(
                        claims, product, book, self.curve, p.default_expected_batch, p.max_batch, running
                    )
                return known[key]

            def floored(samples: Sequence[GpuSample], unplaced: list[tuple[str, str]]) -> Sequence[GpuSample]:
                ix = self.idx
                return with_unmeasured_load(samples, ix.pod_by_key, ix.engine_by_pod, busy, unplaced, per_gpu)

            unattributed = unattributed_gpu_pods(node, raw, self.idx.pods_by_node.get(node.name, ()))
            per_gpu = replicas(node, raw)
            if unattributed and p.shared_gpu_allocation == "Distributed":
                placed, tied = placed_and_tied(raw, unattributed, per_gpu)
                return floored(placed, []), floored(tied, []) if tied else ()
            return floored(raw, unattributed), ()

        key = FactKey("samples", node.name, (*self._load_scope(), self.policy.shared_gpu_allocation))
        return self.memo(key, build)

    def gpu_state(self, node: NodeInfo) -> GpuInfo:
        """The node's free GPUs, and the load and free memory of those a new pod will run on, the ones
        the device plugin hands it (`handed_out`): S_real is judged on the GPU the pod gets, as the
        neighbour condition is (docs/decision.md, "Our own load on the GPU we get"). A re-decision reads
        every free GPU: its own GPU's load is taken out as its own (`drift.without_own_load`), so on a
        whole GPU that GPU alone would never show a load that came after admission."""
        agg, allocation = self.policy.slack_aggregation, self.policy.shared_gpu_allocation
        fresh = not self.holding
        key = FactKey("gpu", node.name, (agg, allocation, fresh, *self._load_scope()))

        def build() -> GpuInfo:
            samples = self.samples(node)
            if not fresh:
                return gpu_state(node, samples, agg)
            pods = self.idx.pods_by_node.get(node.name, ())
            unknown = lambda: bool(unattributed_gpu_pods(node, samples, pods))  # noqa: E731
            tied = self.tied(node)
            return gpu_state(
                node, samples, agg, lambda free: handed_out(node, samples, free, unknown, allocation, tied)
            )

        return self.memo(key, build)

    def neighbours(
        self,
        node: NodeInfo,
        gpus: Sequence[GpuSample] | None = None,
        own: bool = True,
        judged: Literal["free", "handed", "held"] = "free",
    ) -> Neighbours:
        """Co-located engines on the node's GPUs with free capacity, kept per node and policies, or on
        those of them the pod will run on: `handed`, the ones the device plugin hands a new pod
        (`node_state.handed_out`, request-independent), or `held`, the ones the request's pods hold (a
        re-decision, `holding`). `own=False` keeps the request's own old pods (the evaluation drops
        them later)."""
        free = self.gpu_state(node)[0] if gpus is None else gpus
        idx = self.idx
        allocation = self.policy.shared_gpu_allocation
        scope = self._neighbour_scope()
        if judged != "free":
            scope = (*scope, allocation if judged == "handed" else self.holding)

        def build() -> Neighbours:
            view = NodeView(
                node, self.samples(node), idx.pods_by_node.get(node.name, ()),
                idx.pod_by_key, idx.engine_by_pod,
            )  # fmt: skip
            on: Sequence[GpuSample] = free
            if judged == "handed":
                unknown = lambda: bool(unattributed_gpu_pods(node, view.samples, view.pods))  # noqa: E731
                on = handed_out(node, view.samples, free, unknown, allocation, self.tied(node))
            elif judged == "held":
                on = [g for g in free if g.uuid in self.holding] or free
            same = len(on) == len(free) and all(a is b for a, b in zip(on, free, strict=True))
            if judged != "free" and same:
                # Nothing narrowed: the same object, so a request judging every GPU redoes nothing.
                return self.neighbours(node, free, own=False)
            found = neighbour_inputs(view, on, self.profiles(), self.policy, self.slo_ms, self.sigma)
            return Neighbours.of(found)

        kind = "neighbours" if judged == "free" else f"{judged}-neighbours"
        found = self.memo(FactKey(kind, node.name, scope), build)
        return found.without_workload(self.wl.namespace, self.wl.name) if own else found

    def node_input(
        self, node: NodeInfo, info: GpuInfo, method: str, target: str | None
    ) -> NodeInput | Reason:
        """The node's evaluation input, or why speculation is off there."""
        key = FactKey("node-input", node.name, (self.spec, self.sov, method, target))

        def build() -> NodeInput | Reason:
            nbs = lambda: self.neighbours(node, info[0], own=False, judged="handed")  # noqa: E731
            return node_input(node, info, self.profiles(), method, target, nbs, self.curve)

        return self.memo(key, build)
