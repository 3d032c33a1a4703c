"""Typed cluster objects the decision core reads, and the ClusterSnapshot that bundles them.

The operator builds these from its kopf indexes, `sovereignspec decide` from a scenario file; both
through the pure parse functions in `sovereignspec.policy.parse` (`parse_node`, `parse_pod`, ...,
`build_snapshot`). Only decision-relevant fields are kept. The per-node index the decision core
derives from a snapshot lives in `sovereignspec.policy.cache`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sovereignspec.api.base import Model
from sovereignspec.api.meta import Toleration
from sovereignspec.api.sovereignty_policy import SovereigntyPolicy
from sovereignspec.api.speculation_policy import SpeculationPolicy
from sovereignspec.model.telemetry import TelemetrySnapshot


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


class PodInfo(Model):
    namespace: str
    name: str
    node: str | None = None
    phase: str = "Pending"
    gpu_request: int = 0
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    daemonset: bool = False
    recorded: dict[str, str] | None = None
    """The claims its workload's SpeculationDecision recorded at admission (annotation keys, values as
    decided), which the neighbour rule reads instead of the pod's live annotations; None when the pod
    has no such decision (see `policy.parse.recorded_claims`)."""

    @property
    def active(self) -> bool:
        """Bound and not terminated: it holds GPUs and counts for isolation."""
        return self.node is not None and self.phase not in ("Succeeded", "Failed")


class RecordedClaims(Model):
    """A SpeculationDecision's record of its workload's claims (annotation keys, values as decided) and
    the nodes it placed the workload's pods on."""

    nodes: frozenset[str]
    claims: dict[str, str] = {}


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


class ParametersRef(Model):
    """An AdmissionCheck's `spec.parameters`: the object that configures the check (ours: a
    SpeculationPolicy). Each part None when the check leaves it out."""

    api_group: str | None = None
    kind: str | None = None
    name: str | None = None


class AdmissionCheckInfo(Model):
    name: str
    controller_name: str
    parameters: ParametersRef = ParametersRef()


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
    also: dict[str, int] = {}
    """A group over several nodes: the GPUs held on each of its other nodes."""
    per_node_share: bool = False
    """One node's share of a group over several nodes: only pods bound on this node consume it (a
    single-node reservation is consumed by its pods wherever they bound)."""

    def per_node(self) -> list[Reservation]:
        """One reservation per node it holds (itself alone for a single-node decision)."""
        if not self.also:
            return [self]
        first = self.model_copy(update={"also": {}, "per_node_share": True})
        return [
            first,
            *(first.model_copy(update={"node": n, "gpus": g}) for n, g in sorted(self.also.items())),
        ]


class WorkloadRef(Model):
    namespace: str
    name: str
    uid: str | None = None


def same_items(a: Sequence[object], b: Sequence[object]) -> bool:
    """The same objects in the same order: compared by identity first, then by value."""
    return a is b or (len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True)))


class ClusterSnapshot(Model):
    """Everything the decision reads besides the request and the clock."""

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

    @classmethod
    def one_check(
        cls,
        check: AdmissionCheckInfo,
        tenants: Iterable[str],
        *,
        nodes: list[NodeInfo],
        pods: list[PodInfo],
        flavor: str = "gpu",
        speculation_policies: Sequence[SpeculationPolicy] = (),
        sovereignty_policies: Sequence[SovereigntyPolicy] = (),
        telemetry: TelemetrySnapshot | None = None,
    ) -> ClusterSnapshot:
        """A cluster whose workloads all go through one ResourceFlavor without labels and one
        AdmissionCheck, with a namespace per tenant (no labels): the simulator's cluster."""
        return cls(
            nodes=nodes,
            pods=pods,
            namespaces=[NamespaceInfo(name=t) for t in tenants],
            flavors=[FlavorInfo(name=flavor)],
            admission_checks=[check],
            speculation_policies=list(speculation_policies),
            sovereignty_policies=list(sovereignty_policies),
            telemetry=telemetry,
        )
