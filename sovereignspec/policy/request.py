"""Which check we answer, with which policies: the glue between a Workload and `decide()`.

- `find_our_check(workload, snapshot)` → the AdmissionCheckInfo of the workload's entry whose
  AdmissionCheck has controllerName `sovereignspec.io/admission`;
- `select_policies(check, snapshot)` → Policies: the SpeculationPolicy its `parameters` name (a check
  without parameters uses the policy named `default` if present, else built-in defaults) and every
  SovereigntyPolicy;
- `AdmissionRequest`: the workload and the check name, the first argument of `decide()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sovereignspec.api.base import Model
from sovereignspec.api.meta import CONTROLLER_NAME, GROUP
from sovereignspec.api.sovereignty_policy import SovereigntyPolicy
from sovereignspec.api.speculation_policy import SpeculationPolicySpec
from sovereignspec.model.cluster import AdmissionCheckInfo, ClusterSnapshot
from sovereignspec.model.workload import WorkloadInfo


class RequestError(ValueError):
    """Nothing can be decided: no check of ours on the workload, or its policy is missing."""


class AdmissionRequest(Model):
    workload: WorkloadInfo
    check: str
    gpus_held: frozenset[str] = frozenset()
    """On a re-decision of a running workload (the drift sweep), the UUIDs of the GPUs its pods hold:
    its neighbours are the engines there, not those of the GPU a new pod would get."""


@dataclass(frozen=True)
class Policies:
    speculation: SpeculationPolicySpec = field(default_factory=SpeculationPolicySpec)
    speculation_name: str | None = None
    sovereignty: Sequence[SovereigntyPolicy] = ()
    neighbour_condition: bool = True
    """The neighbour-SLO admission condition (DESIGN.md §2, condition 2) in force. Evidence only: the
    simulator's ablation `sovereignspec-no-neighbour-condition` (claim C6) sets it False to measure what
    the condition prevents on the same snapshot. `select_policies` never sets it, so the operator and
    the CLI always run with the condition; it is not a SpeculationPolicy field (no user should run
    without it)."""


DEFAULT_SPEC = SpeculationPolicySpec()
"""The built-in defaults, one object (frozen): the decision core keeps its facts per policy object."""


def find_our_check(
    workload: WorkloadInfo, snapshot: ClusterSnapshot, controller_name: str = CONTROLLER_NAME
) -> AdmissionCheckInfo:
    ours = {c.name: c for c in snapshot.admission_checks if c.controller_name == controller_name}
    for entry in workload.checks:
        if entry.name in ours:
            return ours[entry.name]
    names = ", ".join(sorted(ours)) or "none among the objects"
    raise RequestError(
        f"Workload {workload.namespace}/{workload.name} has no status.admissionChecks entry for an "
        f"AdmissionCheck with controllerName {controller_name} (such checks: {names})"
    )


def select_policies(check: AdmissionCheckInfo, snapshot: ClusterSnapshot) -> Policies:
    by_name = {p.metadata.name: p for p in snapshot.speculation_policies}
    params = check.parameters
    name = params.name
    if name is not None:
        if (params.api_group or GROUP, params.kind or "SpeculationPolicy") != (GROUP, "SpeculationPolicy"):
            raise RequestError(
                f"AdmissionCheck {check.name}: parameters must reference {GROUP} SpeculationPolicy, got "
                f"{params.api_group}/{params.kind}"
            )
        if name not in by_name:
            raise RequestError(f"AdmissionCheck {check.name}: SpeculationPolicy {name!r} not found")
        spec = by_name[name].spec
    elif "default" in by_name:
        name, spec = "default", by_name["default"].spec
    else:
        spec = DEFAULT_SPEC
    return Policies(speculation=spec, speculation_name=name, sovereignty=tuple(snapshot.sovereignty_policies))


def request_for(
    workload: WorkloadInfo, snapshot: ClusterSnapshot, controller_name: str = CONTROLLER_NAME
) -> tuple[AdmissionRequest, Policies]:
    """`controller_name`: the operator's configured one (several controllers may share a cluster)."""
    check = find_our_check(workload, snapshot, controller_name)
    return AdmissionRequest(workload=workload, check=check.name), select_policies(check, snapshot)


def not_actionable(request: AdmissionRequest) -> str | None:
    """Why there is nothing to decide now (None: decide). Decisions happen only when quota is reserved,
    the workload is neither evicted nor finished, and our entry is Pending."""
    wl = request.workload
    entry = wl.check(request.check)
    if entry is None:
        return f"workload has no admission check entry {request.check}"
    if not wl.quota_reserved:
        return "quota is not reserved (QuotaReserved is not True)"
    if wl.evicted:
        return "workload is evicted"
    if wl.finished:
        return "workload is finished"
    if entry.state != "Pending":
        return f"admission check entry is {entry.state}, not Pending"
    return None
