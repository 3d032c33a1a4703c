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
The Workload parser lives in `parse_workload`, the helpers every parser shares in `parse_common`; both
are re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sovereignspec.api.meta import (
    ANNOTATION_DECISION,
    ANNOTATION_EXPECTED_BATCH,
    ANNOTATION_TARGET_MODEL,
    ANNOTATION_TPOT_SLO_MS,
    LABEL_MANAGED_BY,
    MANAGED_BY_VALUE,
    RESOURCE_GPU,
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
    ParametersRef,
    PodInfo,
    RecordedClaims,
    Reservation,
    WorkloadRef,
)
from sovereignspec.model.telemetry import TelemetrySnapshot
from sovereignspec.policy.parse_common import (
    ParseError,
    field_list,
    field_map,
    gpu_count,
    map_list,
    meta_of,
    parse_quantity,
    pod_spec_gpus,
    str_map,
    taints_of,
    tolerations_of,
    validate,
    where_of,
)
from sovereignspec.policy.parse_workload import parse_workload

__all__ = [
    "ParseError",
    "build_snapshot",
    "parse_admission_check",
    "parse_namespace",
    "parse_node",
    "parse_pod",
    "parse_quantity",
    "parse_reservation",
    "parse_resource_flavor",
    "parse_sovereignty_policy",
    "parse_speculation_policy",
    "parse_telemetry",
    "parse_time",
    "parse_workload",
    "pod_spec_gpus",
    "recorded_claims",
    "with_recorded_claims",
]


def parse_node(obj: Mapping[str, Any]) -> NodeInfo:
    meta, where = meta_of(obj)
    spec = field_map(obj.get("spec"), "spec", where)
    status = field_map(obj.get("status"), "status", where)
    alloc = field_map(status.get("allocatable"), "status.allocatable", where)
    ready = True
    for c in map_list(status.get("conditions"), "status.conditions", where):
        if c.get("type") == "Ready":
            ready = c.get("status") == "True"
    return NodeInfo(
        name=meta["name"],
        labels=str_map(meta.get("labels"), "metadata.labels", where),
        taints=taints_of(spec.get("taints"), "spec.taints", where),
        gpu_allocatable=gpu_count(alloc.get(RESOURCE_GPU, 0), where),
        unschedulable=bool(spec.get("unschedulable", False)),
        ready=ready,
    )


def parse_pod(obj: Mapping[str, Any]) -> PodInfo:
    meta, where = meta_of(obj)
    spec = field_map(obj.get("spec"), "spec", where)
    status = field_map(obj.get("status"), "status", where)
    owners = field_list(meta.get("ownerReferences"), "metadata.ownerReferences", where)
    return PodInfo(
        namespace=str(meta.get("namespace") or "default"),
        name=meta["name"],
        node=spec.get("nodeName") or None,
        phase=str(status.get("phase") or "Pending"),
        gpu_request=pod_spec_gpus(spec, where),
        labels=str_map(meta.get("labels"), "metadata.labels", where),
        annotations=str_map(meta.get("annotations"), "metadata.annotations", where),
        daemonset=any(isinstance(o, Mapping) and o.get("kind") == "DaemonSet" for o in owners),
    )


def parse_namespace(obj: Mapping[str, Any]) -> NamespaceInfo:
    meta, where = meta_of(obj)
    return NamespaceInfo(name=meta["name"], labels=str_map(meta.get("labels"), "metadata.labels", where))


def parse_resource_flavor(obj: Mapping[str, Any]) -> FlavorInfo:
    meta, where = meta_of(obj)
    spec = field_map(obj.get("spec"), "spec", where)
    return FlavorInfo(
        name=meta["name"],
        node_labels=str_map(spec.get("nodeLabels"), "spec.nodeLabels", where),
        node_taints=taints_of(spec.get("nodeTaints"), "spec.nodeTaints", where),
        tolerations=tolerations_of(spec.get("tolerations"), "spec.tolerations", where),
        topology_name=spec.get("topologyName") or None,
    )


def parse_admission_check(obj: Mapping[str, Any]) -> AdmissionCheckInfo:
    meta, where = meta_of(obj)
    spec = field_map(obj.get("spec"), "spec", where)
    params = field_map(spec.get("parameters"), "spec.parameters", where)
    return AdmissionCheckInfo(
        name=meta["name"],
        controller_name=str(spec.get("controllerName") or ""),
        parameters=ParametersRef(
            api_group=params.get("apiGroup"), kind=params.get("kind"), name=params.get("name")
        ),
    )


def parse_speculation_policy(obj: Mapping[str, Any]) -> SpeculationPolicy:
    _, where = meta_of(obj)
    data = dict(obj)
    data.pop("status", None)
    data.setdefault("spec", {})
    return validate(SpeculationPolicy, data, where)


def parse_sovereignty_policy(obj: Mapping[str, Any]) -> SovereigntyPolicy:
    _, where = meta_of(obj)
    data = dict(obj)
    data.pop("status", None)
    return validate(SovereigntyPolicy, data, where)


def parse_reservation(
    obj: Mapping[str, Any], live_workloads: Iterable[WorkloadRef] | None = None
) -> Reservation | None:
    """A SpeculationDecision as a reservation, or None when it reserves nothing (not Ready, no node).

    It is trusted only when labelled `app.kubernetes.io/managed-by: sovereignspec` (the operator sets
    it; tenants have read-only access to decisions) and controller-owned by a Workload of the same
    name that is live (its uid among `live_workloads`; None skips the liveness test).
    """
    _, where = meta_of(obj)
    dec = validate(DecisionReservation, dict(obj), where)
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


def recorded_claims(obj: Mapping[str, Any]) -> RecordedClaims | None:
    """What a SpeculationDecision recorded of its workload's claims at admission, as its pods count as
    neighbours of later decisions: the SLO as decided (when the workload claimed one), the target
    model and the expected batch as decided (an engine not measured yet is priced at it,
    `unmeasured_load`), valid on the nodes the decision placed the pods on. None when the operator did
    not write it (label `app.kubernetes.io/managed-by`) or it records no inputs or no node."""
    meta = obj.get("metadata")
    status = obj.get("status")
    if not isinstance(meta, Mapping) or not isinstance(status, Mapping):
        return None
    labels = meta.get("labels")
    if not isinstance(labels, Mapping) or labels.get(LABEL_MANAGED_BY) != MANAGED_BY_VALUE:
        return None
    inputs = status.get("inputs")
    if not isinstance(inputs, Mapping):
        return None
    placements = status.get("placements")
    nodes = [status.get("node")]
    nodes += (
        [p.get("node") for p in placements if isinstance(p, Mapping)] if isinstance(placements, list) else []
    )
    on = frozenset(n for n in nodes if isinstance(n, str) and n)
    if not on:
        return None
    claims: dict[str, str] = {}
    slo, claimed = inputs.get("tpotSloMs"), inputs.get("tpotSloClaimed")
    # A record older than tpotSloClaimed counts as claimed: SLO-bound is the safe side for neighbours.
    if isinstance(slo, int | float) and not isinstance(slo, bool) and claimed is not False:
        claims[ANNOTATION_TPOT_SLO_MS] = repr(float(slo))
    target = inputs.get("targetModel")
    if isinstance(target, str) and target:
        claims[ANNOTATION_TARGET_MODEL] = target
    batch = inputs.get("expectedBatch")
    if isinstance(batch, int) and not isinstance(batch, bool) and batch > 0:
        claims[ANNOTATION_EXPECTED_BATCH] = str(batch)
    return RecordedClaims(nodes=on, claims=claims)


def with_recorded_claims(pod: PodInfo, recorded: RecordedClaims | None) -> PodInfo:
    """The pod with its decision's recorded claims when the decision placed it where it runs (else as
    it is, claims unrecorded). `recorded` is the decision the pod was first seen under."""
    claims = recorded.claims if recorded is not None and pod.node in recorded.nodes else None
    if pod.recorded == claims:
        return pod
    return pod.model_copy(update={"recorded": claims})


def decision_of(pod: PodInfo) -> tuple[str, str] | None:
    """(namespace, name) of the SpeculationDecision the pod says it runs under (the annotation Kueue
    copies from our podSetUpdate), None without one. Only the pod's own namespace is searched."""
    name = pod.annotations.get(ANNOTATION_DECISION)
    return (pod.namespace, name) if name else None


def parse_telemetry(obj: Any) -> TelemetrySnapshot:
    return validate(TelemetrySnapshot, obj if obj is not None else {}, "telemetry")


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
            raise ParseError(f"{where_of(o)}: missing kind")
    reservations = [r for r in (parse_reservation(d, workloads) for d in decisions) if r is not None]
    recorded: dict[tuple[str, str], RecordedClaims] = {}
    for d in decisions:
        rec = recorded_claims(d)
        if rec is not None:
            meta, _ = meta_of(d)
            recorded[(str(meta.get("namespace") or "default"), meta["name"])] = rec
    pods = [
        with_recorded_claims(p, recorded.get(key)) if (key := decision_of(p)) is not None else p
        for p in buckets["Pod"]
    ]
    return ClusterSnapshot(
        nodes=buckets["Node"],
        pods=pods,
        namespaces=buckets["Namespace"],
        flavors=buckets["ResourceFlavor"],
        admission_checks=buckets["AdmissionCheck"],
        speculation_policies=buckets["SpeculationPolicy"],
        sovereignty_policies=buckets["SovereigntyPolicy"],
        reservations=reservations,
        workloads=workloads,
        telemetry=telemetry,
    )
