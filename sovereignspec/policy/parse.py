"""Pure parse step: raw Kubernetes objects (dicts as `kubectl get -o yaml` prints them) → typed objects.

Functions the operator calls on single objects from its kopf indexes (each pure, each raising
`ParseError` with a message that names the object and the field):

    parse_node(obj) -> NodeInfo                 parse_pod(obj) -> PodInfo
    parse_namespace(obj) -> NamespaceInfo        parse_resource_flavor(obj) -> FlavorInfo
    parse_admission_check(obj) -> AdmissionCheckInfo
    parse_workload(obj) -> WorkloadInfo          (Kueue v1beta2 Workload, status included)
    parse_speculation_policy(obj) -> SpeculationPolicy
    parse_sovereignty_policy(obj) -> SovereigntyPolicy
    parse_reservation(obj, live_workloads) -> Reservation | None   (SpeculationDecision)
    parse_telemetry(obj) -> TelemetrySnapshot

and `build_snapshot(objects, telemetry)`, which dispatches a mixed list by `kind` (what the CLI does).
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from pydantic import ValidationError

from sovereignspec.api.base import Model
from sovereignspec.api.meta import (
    LABEL_MANAGED_BY,
    MANAGED_BY_VALUE,
    RESOURCE_GPU,
    Toleration,
)
from sovereignspec.api.sovereignty_policy import SovereigntyPolicy
from sovereignspec.api.speculation_decision import DecisionReservation
from sovereignspec.api.speculation_policy import SpeculationPolicy
from sovereignspec.model.cluster import (
    AdmissionCheckInfo,
    ClusterSnapshot,
    FlavorInfo,
    NamespaceInfo,
    NodeInfo,
    PodInfo,
    Reservation,
    Taint,
    WorkloadRef,
)
from sovereignspec.model.telemetry import TelemetrySnapshot
from sovereignspec.model.workload import (
    CheckEntry,
    NodeSelectorTerm,
    PodSetAssignment,
    PodSetInfo,
    TopologyDomain,
    WorkloadInfo,
)

M = TypeVar("M", bound=Model)


class ParseError(ValueError):
    """A Kubernetes object that cannot be read; the message names the object and the field."""


def _where(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name", "?")
    ns = meta.get("namespace")
    return f"{obj.get('kind', 'object')} {f'{ns}/' if ns else ''}{name}"  # any type: fuzzed input


def _map(value: Any, what: str, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ParseError(f"{where}: {what} must be a mapping, got {type(value).__name__}")
    return value


def _list(value: Any, what: str, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ParseError(f"{where}: {what} must be a list, got {type(value).__name__}")
    return value


def _str_map(value: Any, what: str, where: str) -> dict[str, str]:
    m = _map(value, what, where)
    out: dict[str, str] = {}
    for k, v in m.items():
        if not isinstance(k, str) or isinstance(v, (dict, list)):
            raise ParseError(f"{where}: {what}[{k!r}] must be a string")
        out[k] = "" if v is None else (str(v).lower() if isinstance(v, bool) else str(v))
    return out


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    more = f" (+{exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "; ".join(parts) + more


def _validate(cls: type[M], data: Any, where: str) -> M:
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise ParseError(f"{where}: {_validation_message(exc)}") from None


_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_SUFFIX = {
    None: 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60,
}  # fmt: skip


def parse_quantity(value: Any, what: str = "quantity", where: str = "object") -> float:
    """A Kubernetes resource.Quantity ("2", 2, "500m", "1Gi") as a float."""
    if isinstance(value, bool):
        raise ParseError(f"{where}: {what} must be a quantity, got {value!r}")
    q: float | None = None
    if isinstance(value, (int, float)):
        try:
            q = float(value)
        except OverflowError:  # an int beyond float range
            q = math.inf
    elif isinstance(value, str):
        m = _QUANTITY.match(value.strip())
        if m:
            with contextlib.suppress(ValueError):
                q = float(m.group(1)) * _SUFFIX[m.group(2)]
    if q is not None and not math.isfinite(q):  # "1e309", NaN: int() of it would raise
        raise ParseError(f"{where}: {what} {value!r} is not a finite quantity")
    if q is None:
        raise ParseError(f"{where}: {what} {value!r} is not a quantity")
    return q


def _gpus(resources: Mapping[str, Any], where: str) -> int:
    req = _map(resources.get("requests"), "resources.requests", where)
    lim = _map(resources.get("limits"), "resources.limits", where)
    raw = req.get(RESOURCE_GPU, lim.get(RESOURCE_GPU, 0))
    return int(parse_quantity(raw, RESOURCE_GPU, where))


def pod_spec_gpus(spec: Mapping[str, Any], where: str) -> int:
    """GPUs a pod spec requests: sum over containers, at least the largest init container."""
    total = 0
    for c in _list(spec.get("containers"), "spec.containers", where):
        total += _gpus(_map(_map(c, "container", where).get("resources"), "resources", where), where)
    init = 0
    for c in _list(spec.get("initContainers"), "spec.initContainers", where):
        init = max(init, _gpus(_map(_map(c, "container", where).get("resources"), "resources", where), where))
    return max(total, init)


def _taints(raw: Any, what: str, where: str) -> list[Taint]:
    out = []
    for t in _list(raw, what, where):
        t = _map(t, what, where)
        if not isinstance(t.get("key"), str) or not isinstance(t.get("effect"), str):
            raise ParseError(f"{where}: {what} entries need key and effect")
        out.append(Taint(key=t["key"], value=t.get("value"), effect=t["effect"]))
    return out


def _tolerations(raw: Any, what: str, where: str) -> list[Toleration]:
    return [_validate(Toleration, t, f"{where}: {what}") for t in _list(raw, what, where)]


def _meta(obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    if not isinstance(obj, Mapping):
        raise ParseError(f"expected a Kubernetes object (mapping), got {type(obj).__name__}")
    where = _where(obj)
    meta = _map(obj.get("metadata"), "metadata", where)
    if not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ParseError(f"{where}: metadata.name is required")
    return meta, where


def parse_node(obj: Mapping[str, Any]) -> NodeInfo:
    meta, where = _meta(obj)
    spec = _map(obj.get("spec"), "spec", where)
    status = _map(obj.get("status"), "status", where)
    alloc = _map(status.get("allocatable"), "status.allocatable", where)
    ready = True
    for c in _list(status.get("conditions"), "status.conditions", where):
        c = _map(c, "condition", where)
        if c.get("type") == "Ready":
            ready = c.get("status") == "True"
    return NodeInfo(
        name=meta["name"],
        labels=_str_map(meta.get("labels"), "metadata.labels", where),
        taints=_taints(spec.get("taints"), "spec.taints", where),
        gpu_allocatable=int(parse_quantity(alloc.get(RESOURCE_GPU, 0), RESOURCE_GPU, where)),
        unschedulable=bool(spec.get("unschedulable", False)),
        ready=ready,
    )


def parse_pod(obj: Mapping[str, Any]) -> PodInfo:
    meta, where = _meta(obj)
    spec = _map(obj.get("spec"), "spec", where)
    status = _map(obj.get("status"), "status", where)
    owners = _list(meta.get("ownerReferences"), "metadata.ownerReferences", where)
    return PodInfo(
        namespace=str(meta.get("namespace") or "default"),
        name=meta["name"],
        node=spec.get("nodeName") or None,
        phase=str(status.get("phase") or "Pending"),
        gpu_request=pod_spec_gpus(spec, where),
        labels=_str_map(meta.get("labels"), "metadata.labels", where),
        annotations=_str_map(meta.get("annotations"), "metadata.annotations", where),
        daemonset=any(isinstance(o, Mapping) and o.get("kind") == "DaemonSet" for o in owners),
    )


def parse_namespace(obj: Mapping[str, Any]) -> NamespaceInfo:
    meta, where = _meta(obj)
    return NamespaceInfo(name=meta["name"], labels=_str_map(meta.get("labels"), "metadata.labels", where))


def parse_resource_flavor(obj: Mapping[str, Any]) -> FlavorInfo:
    meta, where = _meta(obj)
    spec = _map(obj.get("spec"), "spec", where)
    return FlavorInfo(
        name=meta["name"],
        node_labels=_str_map(spec.get("nodeLabels"), "spec.nodeLabels", where),
        node_taints=_taints(spec.get("nodeTaints"), "spec.nodeTaints", where),
        tolerations=_tolerations(spec.get("tolerations"), "spec.tolerations", where),
        topology_name=spec.get("topologyName") or None,
    )


def parse_admission_check(obj: Mapping[str, Any]) -> AdmissionCheckInfo:
    meta, where = _meta(obj)
    spec = _map(obj.get("spec"), "spec", where)
    params = _map(spec.get("parameters"), "spec.parameters", where)
    return AdmissionCheckInfo(
        name=meta["name"],
        controller_name=str(spec.get("controllerName") or ""),
        parameters_api_group=params.get("apiGroup"),
        parameters_kind=params.get("kind"),
        parameters_name=params.get("name"),
    )


def _topology(raw: Mapping[str, Any], where: str) -> tuple[list[str], list[TopologyDomain]]:
    """TAS assignment in the v1beta2 slice format (or the v1beta1 `domains` list) → explicit domains."""
    levels = [str(x) for x in _list(raw.get("levels"), "topologyAssignment.levels", where)]
    domains: list[TopologyDomain] = []
    for d in _list(raw.get("domains"), "topologyAssignment.domains", where):
        d = _map(d, "domain", where)
        vals = [str(v) for v in _list(d.get("values"), "domain.values", where)]
        domains.append(TopologyDomain(values=vals, count=int(d.get("count", 1))))
    for s in _list(raw.get("slices"), "topologyAssignment.slices", where):
        s = _map(s, "slice", where)
        n = int(s.get("domainCount", 0))
        per_level: list[list[str]] = []
        for lv in _list(s.get("valuesPerLevel"), "slice.valuesPerLevel", where):
            lv = _map(lv, "valuesPerLevel[]", where)
            if lv.get("universal") is not None:
                per_level.append([str(lv["universal"])] * n)
            else:
                ind = _map(lv.get("individual"), "valuesPerLevel[].individual", where)
                pre, suf = str(ind.get("prefix") or ""), str(ind.get("suffix") or "")
                roots = [f"{pre}{r}{suf}" for r in _list(ind.get("roots"), "individual.roots", where)]
                if len(roots) != n:
                    raise ParseError(f"{where}: topology slice has {len(roots)} roots for domainCount {n}")
                per_level.append(roots)
        pc = _map(s.get("podCounts"), "slice.podCounts", where)
        if pc.get("universal") is not None:
            counts = [int(pc["universal"])] * n
        else:
            counts = [int(c) for c in _list(pc.get("individual"), "podCounts.individual", where)] or [1] * n
        if len(per_level) != len(levels) or len(counts) != n:
            raise ParseError(f"{where}: topology slice does not match its levels/domainCount")
        for i in range(n):
            domains.append(TopologyDomain(values=[vals[i] for vals in per_level], count=counts[i]))
    return levels, domains


def _required_node_affinity(tspec: Mapping[str, Any], where: str) -> tuple[NodeSelectorTerm, ...] | None:
    """The template's required node affinity terms, None when it has none."""
    affinity = _map(tspec.get("affinity"), "template.spec.affinity", where)
    node = _map(affinity.get("nodeAffinity"), "affinity.nodeAffinity", where)
    raw = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if raw is None:
        return None
    what = "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    terms = _list(_map(raw, what, where).get("nodeSelectorTerms"), f"{what}.nodeSelectorTerms", where)
    return tuple(_validate(NodeSelectorTerm, t, f"{where}: {what}.nodeSelectorTerms[]") for t in terms)


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
        for o in _list(meta.get("ownerReferences"), "metadata.ownerReferences", where)
        if isinstance(o, Mapping)
    ]
    kinds = [str(o.get("kind")) for o in owners if o.get("kind")]
    kind = next((k for k in kinds if k != "Pod"), None)
    if kind is not None:
        return kind
    gvk = _str_map(meta.get("annotations"), "metadata.annotations", where).get(JOB_OWNER_GVK, "")
    if "Kind=" in gvk:
        return gvk.split("Kind=", 1)[1].strip() or None
    return "Pod" if kinds else None


def parse_workload(obj: Mapping[str, Any]) -> WorkloadInfo:
    """A kueue.x-k8s.io/v1beta2 Workload with its status (admission, conditions, admissionChecks)."""
    meta, where = _meta(obj)
    if obj.get("kind") not in (None, "Workload"):
        raise ParseError(f"{where}: expected kind Workload")
    spec = _map(obj.get("spec"), "spec", where)
    status = _map(obj.get("status"), "status", where)
    pod_sets = []
    for raw in _list(spec.get("podSets"), "spec.podSets", where):
        ps = _map(raw, "spec.podSets[]", where)
        name = str(ps.get("name") or "main")
        pw = f"{where} podSet {name}"
        tmpl = _map(ps.get("template"), "template", pw)
        tmeta = _map(tmpl.get("metadata"), "template.metadata", pw)
        tspec = _map(tmpl.get("spec"), "template.spec", pw)
        count = ps.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ParseError(f"{pw}: count must be a non-negative integer, got {count!r}")
        pod_sets.append(
            PodSetInfo(
                name=name,
                count=count,
                gpus_per_pod=pod_spec_gpus(tspec, pw),
                annotations=_str_map(tmeta.get("annotations"), "template.metadata.annotations", pw),
                labels=_str_map(tmeta.get("labels"), "template.metadata.labels", pw),
                node_selector=_str_map(tspec.get("nodeSelector"), "template.spec.nodeSelector", pw),
                tolerations=_tolerations(tspec.get("tolerations"), "template.spec.tolerations", pw),
                node_affinity=_required_node_affinity(tspec, pw),
            )
        )
    if not pod_sets:
        raise ParseError(f"{where}: spec.podSets is empty")
    conditions = _list(status.get("conditions"), "status.conditions", where)
    admission = _map(status.get("admission"), "status.admission", where)
    assignments = []
    for raw in _list(admission.get("podSetAssignments"), "status.admission.podSetAssignments", where):
        a = _map(raw, "podSetAssignments[]", where)
        levels: list[str] = []
        domains: list[TopologyDomain] | None = None
        if a.get("topologyAssignment") is not None:
            levels, domains = _topology(_map(a["topologyAssignment"], "topologyAssignment", where), where)
        assignments.append(
            PodSetAssignment(
                name=str(a.get("name") or "main"),
                flavors=_str_map(a.get("flavors"), "podSetAssignments[].flavors", where),
                count=a.get("count"),
                topology_levels=levels,
                topology_domains=domains,
            )
        )
    checks = []
    for raw in _list(status.get("admissionChecks"), "status.admissionChecks", where):
        c = dict(_map(raw, "status.admissionChecks[]", where))
        c.setdefault("message", "")
        checks.append(_validate(CheckEntry, c, f"{where}: status.admissionChecks[{c.get('name')}]"))
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


def parse_speculation_policy(obj: Mapping[str, Any]) -> SpeculationPolicy:
    _, where = _meta(obj)
    data = dict(obj)
    data.pop("status", None)
    data.setdefault("spec", {})
    return _validate(SpeculationPolicy, data, where)


def parse_sovereignty_policy(obj: Mapping[str, Any]) -> SovereigntyPolicy:
    _, where = _meta(obj)
    data = dict(obj)
    data.pop("status", None)
    return _validate(SovereigntyPolicy, data, where)


def parse_reservation(
    obj: Mapping[str, Any], live_workloads: Iterable[WorkloadRef] | None = None
) -> Reservation | None:
    """A SpeculationDecision as a reservation, or None when it reserves nothing (not Ready, no node).

    It is trusted only when labelled `app.kubernetes.io/managed-by: sovereignspec` (the operator sets
    it; tenants have read-only access to decisions) and controller-owned by a Workload of the same
    name that is live (its uid among `live_workloads`; None skips the liveness test).
    """
    _, where = _meta(obj)
    dec = _validate(DecisionReservation, dict(obj), where)
    st = dec.status
    if st is None or st.state != "Ready" or not st.node:
        return None
    ns = dec.metadata.namespace or "default"
    owner = next(
        (o for o in dec.metadata.owner_references if o.kind == "Workload" and o.controller),
        None,
    )
    trusted = dec.metadata.labels.get(LABEL_MANAGED_BY) == MANAGED_BY_VALUE and owner is not None
    if trusted and owner is not None and live_workloads is not None:
        trusted = any(
            w.namespace == ns and w.name == owner.name and w.uid == owner.uid for w in live_workloads
        )
    also: dict[str, int] = {}
    for p in st.placements:
        if p.node != st.node:
            also[p.node] = also.get(p.node, 0) + p.gpus
    return Reservation(
        namespace=ns, name=dec.metadata.name, node=st.node, gpus=st.gpus, trusted=trusted, also=also
    )


def parse_telemetry(obj: Any) -> TelemetrySnapshot:
    return _validate(TelemetrySnapshot, obj if obj is not None else {}, "telemetry")


def parse_time(value: Any, what: str) -> datetime:
    """An RFC 3339 timestamp (string or datetime, as YAML may already parse it); must carry a zone."""
    try:
        t = (
            value
            if isinstance(value, datetime)
            else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        )
    except ValueError:
        raise ParseError(f"{what}: {value!r} is not an RFC 3339 time") from None
    if t.tzinfo is None:
        raise ParseError(f"{what}: {value!r} needs a time zone (e.g. a trailing Z)")
    return t


_PARSERS = {
    "Node": parse_node,
    "Pod": parse_pod,
    "Namespace": parse_namespace,
    "ResourceFlavor": parse_resource_flavor,
    "AdmissionCheck": parse_admission_check,
    "SpeculationPolicy": parse_speculation_policy,
    "SovereigntyPolicy": parse_sovereignty_policy,
}


def build_snapshot(
    objects: Iterable[Mapping[str, Any]],
    telemetry: TelemetrySnapshot | None,
    extra_workloads: Iterable[WorkloadRef] = (),
) -> ClusterSnapshot:
    """Dispatch a mixed object list by kind. Unknown kinds (and `List` wrappers) are read through."""
    flat: list[Mapping[str, Any]] = []
    for o in objects:
        if not isinstance(o, Mapping):
            raise ParseError(f"objects: expected a Kubernetes object, got {type(o).__name__}")
        if o.get("kind") == "List" or (
            isinstance(o.get("items"), list) and "kind" in o and o["kind"].endswith("List")
        ):
            flat.extend(x for x in o.get("items", []) if isinstance(x, Mapping))
        else:
            flat.append(o)
    buckets: dict[str, list[Any]] = {k: [] for k in _PARSERS}
    decisions: list[Mapping[str, Any]] = []
    workloads: list[WorkloadRef] = list(extra_workloads)
    for o in flat:
        kind = o.get("kind")
        if kind in _PARSERS:
            buckets[str(kind)].append(_PARSERS[str(kind)](o))
        elif kind == "SpeculationDecision":
            decisions.append(o)
        elif kind == "Workload":
            w = parse_workload(o)
            workloads.append(WorkloadRef(namespace=w.namespace, name=w.name, uid=w.uid))
        elif not isinstance(kind, str):
            raise ParseError(f"{_where(o)}: missing kind")
    reservations = [r for r in (parse_reservation(d, workloads) for d in decisions) if r is not None]
    return ClusterSnapshot(
        nodes=buckets["Node"],
        pods=buckets["Pod"],
        namespaces=buckets["Namespace"],
        flavors=buckets["ResourceFlavor"],
        admission_checks=buckets["AdmissionCheck"],
        speculation_policies=buckets["SpeculationPolicy"],
        sovereignty_policies=buckets["SovereigntyPolicy"],
        reservations=reservations,
        workloads=workloads,
        telemetry=telemetry,
    )
