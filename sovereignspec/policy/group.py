"""Pod groups: one Kueue Workload, several pods, one decision (StatefulSets, LeaderWorkerSets, plain
pod groups). Pure.

How Kueue v0.19 builds these Workloads (pkg/controller/jobs/{statefulset,leaderworkerset,pod}):
- StatefulSet: one Workload per StatefulSet, podSet `main` with `count = replicas`, its template the
  pod *spec only* (no labels, no annotations). Each pod carries the label
  `kueue.x-k8s.io/pod-group-name` = the Workload's name and `kueue.x-k8s.io/role-hash: main`.
- LeaderWorkerSet: one Workload per replica group, podSets `leader` (count 1) and `worker`
  (count size-1), or `main` (count size) without a leader template; the templates *keep* their
  metadata (LWS's own keys dropped), and the pods carry the same group label.
- Plain pod groups: podSets named by role hash, templates without metadata; pods labelled as above.

So claims are read from the templates where Kueue keeps them and from the group's pods otherwise
(`with_members`), and every source must agree (`claims_of`): one vLLM engine runs one
`--speculative-config`. A LeaderWorkerSet is one engine over several nodes (`spans_nodes`): each pod
takes a whole node and every pod set is pinned to its own node (`place_units`), all in one
jurisdiction. The schedule over several nodes is the per-range minimum of k* (budget.budget_on, the rule
TAS placements already used; docs/decision.md says why).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from sovereignspec.api.meta import CLAIM_ANNOTATIONS
from sovereignspec.api.speculation_decision import Placement as PodSetPlacement
from sovereignspec.api.speculation_decision import Reason
from sovereignspec.model.cluster import ClusterSnapshot, NodeInfo, PodInfo
from sovereignspec.model.workload import PodSetInfo, WorkloadInfo
from sovereignspec.policy.cache.index import index_of
from sovereignspec.policy.candidates import Candidates, Constraints
from sovereignspec.policy.placement import Placement
from sovereignspec.policy.record import ReasonType, Refusal
from sovereignspec.policy.sovereignty import TenantRules
from sovereignspec.policy.speculation import Gate

ROLE_HASH_ANNOTATION = "kueue.x-k8s.io/role-hash"
MULTI_NODE_OWNERS = frozenset({"LeaderWorkerSet"})
"""Owner kinds whose pods form one engine across nodes (tensor/pipeline parallel)."""


def members(wl: WorkloadInfo, snapshot: ClusterSnapshot) -> list[PodInfo]:
    """The pods of the workload's group (label `kueue.x-k8s.io/pod-group-name` = its name), by name,
    from the snapshot's index (policy/cache/groups.py)."""
    return sorted(index_of(snapshot).pod_groups.get((wl.namespace, wl.name), ()), key=lambda p: p.name)


def _pods_of(ps: PodSetInfo, wl: WorkloadInfo, group: Sequence[PodInfo]) -> list[PodInfo]:
    if len(wl.pod_sets) == 1:
        return list(group)
    return [p for p in group if p.annotations.get(ROLE_HASH_ANNOTATION) == ps.name]


def with_members(wl: WorkloadInfo, group: Sequence[PodInfo]) -> WorkloadInfo:
    """The workload whose metadata-less pod sets read their labels and annotations from their first
    pod (by name): a StatefulSet's pods all come from one template. Template metadata, where Kueue
    keeps it (LeaderWorkerSet), stands as it is."""
    if not group:
        return wl
    sets = []
    changed = False
    for ps in wl.pod_sets:
        own = _pods_of(ps, wl, group)
        if ps.annotations or ps.labels or not own:
            sets.append(ps)
            continue
        changed = True
        sets.append(
            ps.model_copy(update={"annotations": dict(own[0].annotations), "labels": dict(own[0].labels)})
        )
    return wl.model_copy(update={"pod_sets": sets}) if changed else wl


def _claims(annotations: Mapping[str, str]) -> dict[str, str]:
    return {k: annotations[k] for k in CLAIM_ANNOTATIONS if k in annotations}


@dataclass(frozen=True)
class GroupClaims:
    annotations: dict[str, str]
    """The claim annotations every source agrees on (those of the first source when they disagree)."""
    disagreement: Reason | None = None
    """Set when two sources differ: names the key, both sources and both values."""


def _shown(v: str | None) -> str:
    return "unset" if v is None else repr(v)


def claims_of(wl: WorkloadInfo, group: Sequence[PodInfo] = ()) -> GroupClaims:
    """Claims of the workload's GPU pod sets and of the group's pods; all must carry the same claim
    annotations (a key missing on one source and set on another is a difference). A workload without a
    GPU pod set reads its first pod set, as before."""
    gpu_sets = [ps for ps in wl.pod_sets if ps.gpus_per_pod > 0]
    sources: list[tuple[str, dict[str, str]]] = [
        (f"pod set {ps.name}", _claims(ps.annotations)) for ps in gpu_sets
    ]
    sources += [(f"pod {p.name}", _claims(p.annotations)) for p in group if p.gpu_request > 0]
    if not sources:
        return GroupClaims(annotations={})
    first_name, first = sources[0]
    for name, claims in sources[1:]:
        key = next((k for k in CLAIM_ANNOTATIONS if first.get(k) != claims.get(k)), None)
        if key is not None:
            a, b = _shown(first.get(key)), _shown(claims.get(key))
            return GroupClaims(
                annotations=first,
                disagreement=Reason(
                    type=ReasonType.CLAIMS_DISAGREE,
                    message=f"{key} is {a} on {first_name} but {b} on {name}: one engine runs one "
                    "speculative config",
                ),
            )
    return GroupClaims(annotations=first)


def spans_nodes(wl: WorkloadInfo) -> bool:
    """One engine over several pods (a LeaderWorkerSet of size > 1): each pod on a whole node of its own."""
    pods = sum(ps.count for ps in wl.pod_sets if ps.gpus_per_pod > 0)
    return wl.owner_kind in MULTI_NODE_OWNERS and pods > 1


@dataclass(frozen=True)
class Unit:
    """A GPU pod set: podSetUpdates pin all of its pods with one nodeSelector, so it goes to one node."""

    pod_set: str
    pods: int
    gpus_per_pod: int

    @property
    def need(self) -> int:
        return self.pods * self.gpus_per_pod


def units(wl: WorkloadInfo) -> list[Unit]:
    return [
        Unit(ps.name, ps.count, ps.gpus_per_pod) for ps in wl.pod_sets if ps.gpus_per_pod > 0 and ps.count > 0
    ]


def unpinnable(us: Sequence[Unit]) -> Unit | None:
    """A unit of a multi-node engine with more than one pod: its pods each need a whole node, but one
    nodeSelector pins them all to one node. Only a TAS assignment can place it."""
    return next((u for u in us if u.pods > 1), None)


def place_units(
    us: Sequence[Unit],
    order: Sequence[int],
    free: Sequence[int],
    alloc: Sequence[int],
    zone: Sequence[object],
) -> list[int] | None:
    """Each unit on a node of its own, taken whole (its GPU count is the pod's request and all of it is
    free), all nodes in one jurisdiction (`zone`). Candidates are tried in `order` (placement's
    ranking); the jurisdiction of the best-ranked node that can hold the whole group wins. Returns the
    candidate index per unit, or None when no jurisdiction holds the group (never a split)."""
    zones: list[object] = []
    for c in order:
        if zone[c] not in zones:
            zones.append(zone[c])
    for z in zones:
        used: set[int] = set()
        out: list[int] = []
        for u in us:
            pick = next(
                (
                    c
                    for c in order
                    if zone[c] == z and c not in used and alloc[c] == u.gpus_per_pod and free[c] >= u.need
                ),
                None,
            )
            if pick is None:
                break
            used.add(pick)
            out.append(pick)
        else:
            return out
    return None


# ---- decide()'s steps for groups -----------------------------------------------------------------


@dataclass(frozen=True)
class GroupPlan:
    """What decide() needs to know about the workload as a group, and its steps for one: each step
    returns its input unchanged for a workload that is not a multi-node engine."""

    workload: WorkloadInfo
    """The workload, metadata-less pod sets read from their pods."""
    claims: GroupClaims
    units: tuple[Unit, ...] = ()
    """The pod sets of a multi-node engine, each to a whole node of its own (empty: not one)."""
    refusal: Refusal | None = None
    waiting: str | None = None
    """Why nothing can be decided yet (the claims are on pods not seen yet)."""

    def fit(self, c: Constraints | Refusal) -> Constraints | Refusal:
        """The constraints of a multi-node engine: a node must hold one pod, whole."""
        if not self.units or isinstance(c, Refusal):
            return c
        whole = tuple(sorted({u.gpus_per_pod for u in self.units}))
        return replace(c, need=max(u.gpus_per_pod for u in self.units), whole=whole)

    def gate(self, gate: Gate) -> Gate:
        """Claims that disagree turn speculation off, after the reasons that do not read claims."""
        keep = (ReasonType.NO_GPU_REQUEST, ReasonType.TEMPLATE_PINS_SPECULATION)
        if self.claims.disagreement is None or (gate.off is not None and gate.off.type in keep):
            return gate
        return replace(gate, off=self.claims.disagreement)

    def place(
        self, place: Placement, cands: Candidates, rules: TenantRules, retry: int
    ) -> Placement | Refusal:
        """Each unit on a whole node of its own, all in one jurisdiction, best-ranked first; or Retry."""
        if not self.units:
            return place
        keys = sorted(rules.jurisdictions)
        zone = [tuple(n.labels.get(k, "") for k in keys) for n in cands.nodes]
        alloc = cands.rows.alloc[cands.at].tolist()
        got = place_units(self.units, place.order, cands.free.tolist(), alloc, zone)
        if got is not None:
            return replace(place, order=[*got, *(c for c in place.order if c not in got)], placed=got)
        suitable = ", ".join(sorted(n.name for n in cands.nodes)[:5])
        excluded = ", ".join(
            f"{n} {w}" for w, n in sorted(cands.excluded.items(), key=lambda x: (-x[1], x[0]))
        )
        msg = (
            f"no jurisdiction of tenant {rules.tenant} has {len(self.units)} whole free nodes for this group "
            f"now ({len(cands.nodes)} suitable: {suitable}; {excluded or 'none excluded'}); a group never "
            f"spans jurisdictions; retry in {retry}s"
        )
        return Refusal(state="Retry", reason=ReasonType.GROUP_DOES_NOT_FIT, message=msg, retry_after=retry)

    def fields(
        self, cands: Candidates, place: Placement
    ) -> tuple[dict[str, NodeInfo], list[PodSetPlacement], str]:
        """Each pod set's node, the placements that reserve them, and the message's note (nothing for a
        workload that is not a multi-node engine)."""
        if not self.units:
            return {}, [], ""
        node_of = {u.pod_set: cands.nodes[c] for u, c in zip(self.units, place.placed, strict=True)}
        placements = [
            PodSetPlacement(pod_set=u.pod_set, node=node_of[u.pod_set].name, gpus=u.need) for u in self.units
        ]
        note = "; group on " + ", ".join(f"{p.pod_set}={p.node}" for p in placements)
        return node_of, placements, note


def plan_group(wl: WorkloadInfo, snapshot: ClusterSnapshot) -> GroupPlan:
    group = members(wl, snapshot)
    if wl.owner_kind == "StatefulSet" and not group and not any(ps.annotations for ps in wl.pod_sets):
        waiting = "the StatefulSet's pods (which hold its claims) are not seen yet"
        return GroupPlan(wl, GroupClaims(annotations={}), waiting=waiting)
    eff = with_members(wl, group)
    claims = claims_of(eff, group)
    if not spans_nodes(eff) or any(a.topology_domains is not None for a in eff.assignments):
        return GroupPlan(eff, claims)  # one node, or where Kueue's TAS put the pods
    us = tuple(units(eff))
    big = unpinnable(us)
    if big is None:
        return GroupPlan(eff, claims, us)
    msg = (
        f"pod set {big.pod_set} has {big.pods} pods that each need a whole node, but one nodeSelector pins "
        "all pods of a pod set to one node; use Kueue topology-aware scheduling"
    )
    return GroupPlan(
        eff, claims, us, Refusal(state="Rejected", reason=ReasonType.GROUP_NEEDS_TOPOLOGY, message=msg)
    )
