"""The sovereign filter: which nodes may host the workload now (I1-I5, DESIGN.md §3).

One chain of exclusions, in this order, for every node and for the TAS and the non-TAS path alike:
jurisdiction and policy labels (I1), the template's nodeSelector and required nodeAffinity, taints,
the GPU count (not under TAS: Kueue placed the pods), the admitted flavor's nodeLabels (I4), the TAS
assignment (under TAS only), readiness, free GPU capacity (not under TAS), isolation (I2, I3). The
exclusions up to the GPU count never change for a node, so a cluster where every node fails one of them
is `Rejected` (NeverSovereign); anything later can change, so no candidate gives `Retry`
(NoSovereignNode).

Choices where DESIGN.md is silent: all pod sets of a workload go to one node (serving workloads are one
engine per pod set); with a TAS assignment the pods go where Kueue put them and every assigned node
must pass the chain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sovereignspec.api.meta import LABEL_HOSTNAME, Toleration
from sovereignspec.model.cluster import FlavorInfo, NodeInfo
from sovereignspec.model.workload import NodeSelectorTerm, PodSetInfo, WorkloadInfo
from sovereignspec.policy.cache.facts import Facts
from sovereignspec.policy.cache.rows import Rows, node_rows, pod_isolation
from sovereignspec.policy.cache.static import static_filter
from sovereignspec.policy.record import ReasonType, Refusal
from sovereignspec.policy.sovereignty import TenantRules, affinity_allows, taints_tolerated

IntArray = npt.NDArray[np.int64]

# Why a node is excluded (counted per reason in the NoSovereignNode message).
JURISDICTION = "jurisdiction or policy labels"
TEMPLATE = "template nodeSelector"
AFFINITY = "template nodeAffinity"
TAINTS = "untolerated taints"
TOO_FEW_GPUS = "too few GPUs"
FLAVOR = "admitted flavor's nodeLabels"
OUTSIDE_TAS = "outside the TAS assignment"
NOT_READY = "not ready or unschedulable"
NO_CAPACITY = "no free GPU capacity"
NOT_WHOLE = "not a whole free node for the group's pods"
ISOLATION = "isolation"

LATE = (FLAVOR, OUTSIDE_TAS, NOT_READY)
"""Static exclusions a node can leave: a node excluded so could host later."""


@dataclass(frozen=True)
class Constraints:
    """What the workload and its admission ask of a node."""

    need: int
    """GPUs of all its pods."""
    template_selector: Mapping[str, str] | None
    """The pod sets' merged nodeSelector (None: they contradict each other)."""
    affinities: tuple[tuple[NodeSelectorTerm, ...], ...]
    """Each pod set's required node affinity terms (pod sets without one left out): all hold."""
    tolerations: tuple[Toleration, ...]
    flavor_labels: Mapping[str, str]
    flavor_labels_by_set: Mapping[str, Mapping[str, str]]
    tas: frozenset[str] | None
    """The nodes of its TAS assignments (None: no pod set has one)."""
    whole: tuple[int, ...] = ()
    """A multi-node engine (policy/group.py): the per-pod GPU counts; each pod takes a whole node of
    exactly that many GPUs, all free (`need` is then one pod's GPUs)."""


def constraints_of(
    wl: WorkloadInfo, flavors: Sequence[FlavorInfo], nodes: Sequence[NodeInfo], rules: TenantRules, retry: int
) -> Constraints | Refusal:
    """The workload's constraints, or Retry when its admitted flavors are unknown or disagree."""
    by_name = {f.name: f for f in flavors}
    flavor_labels: dict[str, str] = {}
    flavor_tolerations: list[Toleration] = []
    by_set: dict[str, dict[str, str]] = {}
    for a in wl.assignments:
        per_set: dict[str, str] = {}
        for fname in sorted(set(a.flavors.values())):
            f = by_name.get(fname)
            if f is None:
                msg = f"ResourceFlavor {fname} of pod set {a.name} is not known"
                return Refusal(
                    state="Retry", reason=ReasonType.FLAVOR_UNKNOWN, message=msg, retry_after=retry
                )
            for k, v in f.node_labels.items():
                if flavor_labels.get(k, v) != v:
                    msg = f"admitted flavors disagree on node label {k}"
                    return Refusal(
                        state="Retry", reason=ReasonType.FLAVOR_CONFLICT, message=msg, retry_after=retry
                    )
                flavor_labels[k] = v
                per_set[k] = v
            flavor_tolerations.extend(t for t in f.tolerations if t not in flavor_tolerations)
        by_set[a.name] = per_set
    tolerations = [*flavor_tolerations, *rules.tolerations]
    for ps in wl.pod_sets:
        tolerations.extend(ps.tolerations)
    tas = _tas_nodes(wl, nodes)
    return Constraints(
        need=sum(ps.count * ps.gpus_per_pod for ps in wl.pod_sets),
        template_selector=_pinned_node_selector(wl.pod_sets),
        affinities=tuple(ps.node_affinity for ps in wl.pod_sets if ps.node_affinity is not None),
        tolerations=tuple(tolerations),
        flavor_labels=flavor_labels,
        flavor_labels_by_set=by_set,
        tas=None if tas is None else frozenset(tas),
    )


def exclusion(node: NodeInfo, rules: TenantRules, c: Constraints) -> str | None:
    """The static part of the chain: why `node` is excluded whatever runs on it (None: it passes)."""
    labels = node.labels
    if not rules.allows_node_labels(labels):
        return JURISDICTION
    if c.template_selector is None or not labels_match(labels, c.template_selector):
        return TEMPLATE
    if not all(affinity_allows(node, terms) for terms in c.affinities):
        return AFFINITY
    if not taints_tolerated(node, c.tolerations):
        return TAINTS
    if c.tas is None and node.gpu_allocatable < c.need:
        return TOO_FEW_GPUS
    if not labels_match(labels, c.flavor_labels):
        return FLAVOR
    if c.tas is not None and node.name not in c.tas:
        return OUTSIDE_TAS
    if not node.ready or node.unschedulable:
        return NOT_READY
    return None


@dataclass(frozen=True, eq=False)
class Candidates:
    """The nodes that pass the whole chain, in node-list order, as rows of `rows`."""

    nodes: list[NodeInfo]
    rows: Rows
    at: IntArray
    """Each candidate's row."""
    free: IntArray
    """Each candidate's free GPUs (by the last node of a repeated name, as every name-keyed fact)."""
    canon: IntArray
    """Each candidate's canonical candidate: itself, or the last one of the same name."""
    excluded: Mapping[str, int]
    """How many nodes each exclusion removed."""


def sovereign_candidates(facts: Facts, c: Constraints, retry: int) -> Candidates | Refusal:
    """The chain over the cluster's nodes: capacity and isolation read this snapshot's reservations."""
    rules = facts.rules
    scope = (
        facts.wl.namespace,
        None if c.template_selector is None else tuple(sorted(c.template_selector.items())),
        c.tolerations,
        c.need,
        tuple(sorted(c.flavor_labels.items())),
        c.tas,
        c.affinities,
    )
    static = static_filter(facts, scope, lambda node: exclusion(node, rules, c), LATE)
    excluded = dict(static.excluded)
    rows = node_rows(facts, static.passed, static.space)
    free, iso = rows.base_free.copy(), pod_isolation(facts, rows).copy()
    idx = facts.idx
    held = (
        range(len(rows.nodes))
        if rows.repeated
        else [i for n in idx.reservations_by_node if (i := rows.at.get(n)) is not None]
    )
    for i in held:  # only the nodes holding reservations read them
        free[i] = facts.free_gpus(rows.nodes[i])
        iso[i] = facts.isolation_ok(rows.nodes[i].name)
    fits = free >= c.need if c.tas is None else np.ones(len(free), dtype=np.bool_)
    not_whole = np.zeros_like(fits)
    if c.whole:  # each pod of a multi-node engine takes a whole node: all its GPUs, all free
        whole = np.isin(rows.alloc, c.whole) & (free >= rows.alloc)
        not_whole, fits = fits & ~whole, fits & whole
    for why, out in ((NO_CAPACITY, ~fits & ~not_whole), (NOT_WHOLE, not_whole), (ISOLATION, fits & ~iso)):
        if count := int(np.count_nonzero(out)):
            excluded[why] = excluded.get(why, 0) + count
    at: IntArray = np.flatnonzero(fits & iso)
    nodes = [rows.nodes[i] for i in at.tolist()]
    free_c, canon = free[at], np.arange(len(nodes))
    if rows.repeated:  # a name listed twice (a hand-written scenario): a fact kept by name is the first
        # asker's, so only the candidates ask, in their order; the last node of a name stands for it
        rows, at = node_rows(facts, nodes), np.arange(len(nodes))
        last = {n.name: i for i, n in enumerate(nodes)}
        canon = np.asarray([last[n.name] for n in nodes], dtype=np.int64)
        free_c = free_c[canon]
    refusal = _refusal(facts, c, nodes, excluded, static.possible, retry)
    return refusal or Candidates(nodes, rows, at, free_c, canon, excluded)


def _refusal(
    facts: Facts, c: Constraints, nodes: list[NodeInfo], excluded: dict[str, int], possible: bool, retry: int
) -> Refusal | None:
    tenant = facts.rules.tenant
    if c.tas is not None:
        legal = {n.name for n in nodes}
        missing = [n for n in sorted(c.tas) if n not in legal]
        if missing or not c.tas:
            msg = f"TAS assignment places pods on non-sovereign or unknown nodes: {', '.join(missing[:5])}"
            if possible:
                return Refusal(
                    state="Retry", reason=ReasonType.TOPOLOGY_NOT_SOVEREIGN, message=msg, retry_after=retry
                )
            return Refusal(state="Rejected", reason=ReasonType.NEVER_SOVEREIGN, message=msg)
    if nodes:
        return None
    summary = ", ".join(f"{n} {w}" for w, n in sorted(excluded.items(), key=lambda x: (-x[1], x[0])))
    if not possible:
        msg = (
            f"no node in the cluster can ever host tenant {tenant} with this workload's constraints "
            f"({summary or 'no nodes'})"
        )
        return Refusal(state="Rejected", reason=ReasonType.NEVER_SOVEREIGN, message=msg)
    msg = f"no sovereign node with free capacity for tenant {tenant} now ({summary}); retry in {retry}s"
    return Refusal(state="Retry", reason=ReasonType.NO_SOVEREIGN_NODE, message=msg, retry_after=retry)


def _pinned_node_selector(pod_sets: Sequence[PodSetInfo]) -> dict[str, str] | None:
    merged: dict[str, str] = {}
    for ps in pod_sets:
        for k, v in ps.node_selector.items():
            if merged.get(k, v) != v:
                return None
            merged[k] = v
    return merged


def labels_match(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
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
            found.update(n.name for n in nodes if labels_match(n.labels, sel))
    return sorted(found) if any_tas else None
