"""Typed cluster objects the decision core reads, and the ClusterSnapshot that bundles them.

The operator builds these from its kopf indexes, `sovereignspec decide` from a scenario file; both
through the pure parse functions in `sovereignspec.policy.parse` (`parse_node`, `parse_pod`, ...,
`build_snapshot`). Only decision-relevant fields are kept. `ClusterSnapshot.index` groups pods,
reservations and telemetry per node once, so deciding many workloads against one snapshot pays the
grouping once.
"""

from __future__ import annotations

from functools import cached_property

from pydantic import ConfigDict

from sovereignspec.api.base import Model
from sovereignspec.api.meta import Toleration
from sovereignspec.api.sovereignty_policy import SovereigntyPolicy
from sovereignspec.api.speculation_policy import SpeculationPolicy
from sovereignspec.model.telemetry import EngineSample, GpuSample, TelemetrySnapshot


class Taint(Model):
    key: str
    value: str | None = None
    effect: str


class NodeInfo(Model):
    name: str
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    gpu_allocatable: int = 0
    unschedulable: bool = False
    ready: bool = True

    @property
    def gpu_product(self) -> str | None:
        return self.labels.get("nvidia.com/gpu.product")


class PodInfo(Model):
    namespace: str
    name: str
    node: str | None = None
    phase: str = "Pending"
    gpu_request: int = 0
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    daemonset: bool = False

    @property
    def active(self) -> bool:
        """Bound and not terminated: it holds GPUs and counts for isolation."""
        return self.node is not None and self.phase not in ("Succeeded", "Failed")


class NamespaceInfo(Model):
    name: str
    labels: dict[str, str] = {}


class FlavorInfo(Model):
    """A Kueue ResourceFlavor: the nodes it denotes and the taints/tolerations Kueue adds."""

    name: str
    node_labels: dict[str, str] = {}
    node_taints: list[Taint] = []
    tolerations: list[Toleration] = []
    topology_name: str | None = None


class AdmissionCheckInfo(Model):
    name: str
    controller_name: str
    parameters_api_group: str | None = None
    parameters_kind: str | None = None
    parameters_name: str | None = None


class Reservation(Model):
    """A SpeculationDecision in state Ready: `gpus` GPUs held on `node` until the workload's pods bind.

    `trusted` is False for a decision not written by the operator or not owned by a live Workload;
    such a decision is ignored (a forged decision must not fence off a node).
    """

    namespace: str
    name: str
    node: str
    gpus: int = 0
    trusted: bool = True


class WorkloadRef(Model):
    namespace: str
    name: str
    uid: str | None = None


class SnapshotIndex:
    """Per-node groupings derived once from a snapshot (pure; rebuilt only with a new snapshot)."""

    def __init__(self, snap: ClusterSnapshot) -> None:
        self.memo: dict[object, object] = {}
        """Request-independent derived facts (e.g. a node's neighbours under one policy), memoised by
        the decision core for the life of this snapshot."""
        self.node_by_name: dict[str, NodeInfo] = {n.name: n for n in snap.nodes}
        self.ns_labels: dict[str, dict[str, str]] = {n.name: n.labels for n in snap.namespaces}
        self.pods_by_node: dict[str, list[PodInfo]] = {}
        self.gpu_used: dict[str, int] = {}
        self.pod_by_key: dict[tuple[str, str], PodInfo] = {}
        bound_by_decision: dict[tuple[str, str], int] = {}
        for p in snap.pods:
            self.pod_by_key[(p.namespace, p.name)] = p
            if not p.active or p.node is None:
                continue
            self.pods_by_node.setdefault(p.node, []).append(p)
            self.gpu_used[p.node] = self.gpu_used.get(p.node, 0) + p.gpu_request
            dec = p.annotations.get("sovereignspec.io/decision")
            if dec:
                key = (p.namespace, dec)
                bound_by_decision[key] = bound_by_decision.get(key, 0) + p.gpu_request
        # A reservation is consumed by the pods already bound under its decision name.
        self.reservations_by_node: dict[str, list[tuple[Reservation, int]]] = {}
        for r in snap.reservations:
            if not r.trusted:
                continue
            left = max(0, r.gpus - bound_by_decision.get((r.namespace, r.name), 0))
            self.reservations_by_node.setdefault(r.node, []).append((r, left))
        self.gpus_by_node: dict[str, list[GpuSample]] = {}
        self.engine_by_pod: dict[tuple[str, str], EngineSample] = {}
        if snap.telemetry is not None:
            for g in snap.telemetry.gpus:
                self.gpus_by_node.setdefault(g.node, []).append(g)
            for e in snap.telemetry.engines:
                self.engine_by_pod[(e.namespace, e.pod)] = e


class ClusterSnapshot(Model):
    """Everything the decision reads besides the request and the clock."""

    model_config = ConfigDict(ignored_types=(cached_property,))

    nodes: list[NodeInfo] = []
    pods: list[PodInfo] = []
    namespaces: list[NamespaceInfo] = []
    flavors: list[FlavorInfo] = []
    admission_checks: list[AdmissionCheckInfo] = []
    speculation_policies: list[SpeculationPolicy] = []
    sovereignty_policies: list[SovereigntyPolicy] = []
    reservations: list[Reservation] = []
    workloads: list[WorkloadRef] = []
    telemetry: TelemetrySnapshot | None = None

    @cached_property
    def index(self) -> SnapshotIndex:
        return SnapshotIndex(self)
