"""Parse a Kueue v1beta2 Workload, status included: pod sets, admission, TAS assignments, checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sovereignspec.model.workload import (
    CheckEntry,
    NodeSelectorTerm,
    PodSetAssignment,
    PodSetInfo,
    TopologyDomain,
    WorkloadInfo,
)
from sovereignspec.policy.parse_common import (
    ParseError,
    field_list,
    field_map,
    map_list,
    meta_of,
    pod_spec_gpus,
    str_map,
    tolerations_of,
    validate,
)


def _topology(raw: Mapping[str, Any], where: str) -> tuple[list[str], list[TopologyDomain]]:
    """TAS assignment in the v1beta2 slice format (or the v1beta1 `domains` list) → explicit domains."""
    levels = [str(x) for x in field_list(raw.get("levels"), "topologyAssignment.levels", where)]
    domains: list[TopologyDomain] = []
    for d in map_list(raw.get("domains"), "topologyAssignment.domains", where):
        vals = [str(v) for v in field_list(d.get("values"), "domain.values", where)]
        domains.append(TopologyDomain(values=vals, count=int(d.get("count", 1))))
    for s in map_list(raw.get("slices"), "topologyAssignment.slices", where):
        n = int(s.get("domainCount", 0))
        per_level: list[list[str]] = []
        for lv in map_list(s.get("valuesPerLevel"), "slice.valuesPerLevel", where):
            if lv.get("universal") is not None:
                per_level.append([str(lv["universal"])] * n)
            else:
                ind = field_map(lv.get("individual"), "valuesPerLevel[].individual", where)
                pre, suf = str(ind.get("prefix") or ""), str(ind.get("suffix") or "")
                roots = [f"{pre}{r}{suf}" for r in field_list(ind.get("roots"), "individual.roots", where)]
                if len(roots) != n:
                    raise ParseError(f"{where}: topology slice has {len(roots)} roots for domainCount {n}")
                per_level.append(roots)
        pc = field_map(s.get("podCounts"), "slice.podCounts", where)
        if pc.get("universal") is not None:
            counts = [int(pc["universal"])] * n
        else:
            counts = [int(c) for c in field_list(pc.get("individual"), "podCounts.individual", where)] or [
                1
            ] * n
        if len(per_level) != len(levels) or len(counts) != n:
            raise ParseError(f"{where}: topology slice does not match its levels/domainCount")
        for i in range(n):
            domains.append(TopologyDomain(values=[vals[i] for vals in per_level], count=counts[i]))
    return levels, domains


def _required_node_affinity(tspec: Mapping[str, Any], where: str) -> tuple[NodeSelectorTerm, ...] | None:
    """The template's required node affinity terms, None when it has none."""
    affinity = field_map(tspec.get("affinity"), "template.spec.affinity", where)
    node = field_map(affinity.get("nodeAffinity"), "affinity.nodeAffinity", where)
    raw = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if raw is None:
        return None
    what = "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    terms = field_list(
        field_map(raw, what, where).get("nodeSelectorTerms"), f"{what}.nodeSelectorTerms", where
    )
    return tuple(validate(NodeSelectorTerm, t, f"{where}: {what}.nodeSelectorTerms[]") for t in terms)


def _condition_true(conditions: list[Any], kind: str) -> bool:
    return any(
        isinstance(c, Mapping) and c.get("type") == kind and c.get("status") == "True" for c in conditions
    )


JOB_OWNER_GVK = "kueue.x-k8s.io/job-owner-gvk"


def _owner_kind(meta: Mapping[str, Any], where: str) -> str | None:
    """The kind Kueue built the Workload for: its first non-Pod owner reference, else the kind in
    Kueue's `job-owner-gvk` annotation ("leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet"), else
    Pod when pods own it (plain pod groups), else None."""
    owners = [
        o
        for o in field_list(meta.get("ownerReferences"), "metadata.ownerReferences", where)
        if isinstance(o, Mapping)
    ]
    kinds = [str(o.get("kind")) for o in owners if o.get("kind")]
    kind = next((k for k in kinds if k != "Pod"), None)
    if kind is not None:
        return kind
    gvk = str_map(meta.get("annotations"), "metadata.annotations", where).get(JOB_OWNER_GVK, "")
    if "Kind=" in gvk:
        return gvk.split("Kind=", 1)[1].strip() or None
    return "Pod" if kinds else None


def parse_workload(obj: Mapping[str, Any]) -> WorkloadInfo:
    """A kueue.x-k8s.io/v1beta2 Workload with its status (admission, conditions, admissionChecks)."""
    meta, where = meta_of(obj)
    if obj.get("kind") not in (None, "Workload"):
        raise ParseError(f"{where}: expected kind Workload")
    spec = field_map(obj.get("spec"), "spec", where)
    status = field_map(obj.get("status"), "status", where)
    pod_sets = []
    for ps in map_list(spec.get("podSets"), "spec.podSets", where):
        name = str(ps.get("name") or "main")
        pw = f"{where} podSet {name}"
        tmpl = field_map(ps.get("template"), "template", pw)
        tmeta = field_map(tmpl.get("metadata"), "template.metadata", pw)
        tspec = field_map(tmpl.get("spec"), "template.spec", pw)
        count = ps.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ParseError(f"{pw}: count must be a non-negative integer, got {count!r}")
        pod_sets.append(
            PodSetInfo(
                name=name,
                count=count,
                gpus_per_pod=pod_spec_gpus(tspec, pw),
                annotations=str_map(tmeta.get("annotations"), "template.metadata.annotations", pw),
                labels=str_map(tmeta.get("labels"), "template.metadata.labels", pw),
                node_selector=str_map(tspec.get("nodeSelector"), "template.spec.nodeSelector", pw),
                tolerations=tolerations_of(tspec.get("tolerations"), "template.spec.tolerations", pw),
                node_affinity=_required_node_affinity(tspec, pw),
            )
        )
    if not pod_sets:
        raise ParseError(f"{where}: spec.podSets is empty")
    conditions = field_list(status.get("conditions"), "status.conditions", where)
    admission = field_map(status.get("admission"), "status.admission", where)
    assignments = []
    for a in map_list(admission.get("podSetAssignments"), "status.admission.podSetAssignments", where):
        levels: list[str] = []
        domains: list[TopologyDomain] | None = None
        if a.get("topologyAssignment") is not None:
            levels, domains = _topology(
                field_map(a["topologyAssignment"], "topologyAssignment", where), where
            )
        assignments.append(
            PodSetAssignment(
                name=str(a.get("name") or "main"),
                flavors=str_map(a.get("flavors"), "podSetAssignments[].flavors", where),
                count=a.get("count"),
                topology_levels=levels,
                topology_domains=domains,
            )
        )
    checks = []
    for raw in map_list(status.get("admissionChecks"), "status.admissionChecks", where):
        c = dict(raw)
        c.setdefault("message", "")
        checks.append(validate(CheckEntry, c, f"{where}: status.admissionChecks[{c.get('name')}]"))
    return WorkloadInfo(
        namespace=str(meta.get("namespace") or "default"),
        name=meta["name"],
        uid=meta.get("uid"),
        generation=meta.get("generation"),
        queue_name=spec.get("queueName"),
        owner_kind=_owner_kind(meta, where),
        pod_sets=pod_sets,
        quota_reserved=_condition_true(conditions, "QuotaReserved") or bool(admission),
        evicted=_condition_true(conditions, "Evicted"),
        finished=_condition_true(conditions, "Finished"),
        cluster_queue=admission.get("clusterQueue"),
        assignments=assignments,
        checks=checks,
    )
