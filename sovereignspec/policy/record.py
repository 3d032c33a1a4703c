"""The Decision and its reasons: every reason type the decision core writes (`ReasonType`), and the
record of a decision as `sovereignspec decide` prints it and the operator writes it."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from sovereignspec.api.base import Model
from sovereignspec.api.speculation_decision import (
    AcceptanceSummary,
    Candidate,
    CheckState,
    DecisionInputs,
    Message,
    NeighbourImpact,
    Placement,
    PodSetUpdate,
    Reason,
    ShortText,
    Speculative,
)
from sovereignspec.model.telemetry import TelemetrySnapshot
from sovereignspec.model.workload import WorkloadInfo


class ReasonType(StrEnum):
    """`Reason.type` and `Decision.reason`: CamelCase, stable (users and alerts match on them)."""

    # not decided
    NOT_ACTIONABLE = "NotActionable"
    # refused: sovereignty (I1-I5)
    CONTRADICTORY_POLICIES = "ContradictoryPolicies"
    FLAVOR_UNKNOWN = "FlavorUnknown"
    FLAVOR_CONFLICT = "FlavorConflict"
    TOPOLOGY_NOT_SOVEREIGN = "TopologyNotSovereign"
    NEVER_SOVEREIGN = "NeverSovereign"
    NO_SOVEREIGN_NODE = "NoSovereignNode"
    # admitted with speculation on
    SPECULATION_ON = "SpeculationOn"
    # speculation off for the workload
    NO_GPU_REQUEST = "NoGpuRequest"
    TEMPLATE_PINS_SPECULATION = "TemplatePinsSpeculation"
    NOT_REQUESTED = "NotRequested"
    NO_PRIOR = "NoPrior"
    PAIR_NOT_ALLOWED = "PairNotAllowed"
    TELEMETRY_MISSING = "TelemetryMissing"
    TELEMETRY_STALE = "TelemetryStale"
    BATCH_CLASS = "BatchClass"
    WEAK_DRAFT = "WeakDraft"
    # speculation off on a node
    NO_ACCELERATOR_PROFILE = "NoAcceleratorProfile"
    NODE_TELEMETRY_MISSING = "NodeTelemetryMissing"
    INSUFFICIENT_DRAFT_MEMORY = "InsufficientDraftMemory"
    NEIGHBOUR_SLO = "NeighbourSlo"
    NO_GAIN = "NoGain"
    # notes on the workload's claims and template
    MALFORMED_ANNOTATION = "MalformedAnnotation"
    CLASS_CLAMPED = "ClassClamped"
    SLO_CLAMPED = "SloClamped"
    METHOD_DEFAULTED = "MethodDefaulted"
    TEMPLATE_CONFLICT = "TemplateConflict"
    CLAIMS_DISAGREE = "ClaimsDisagree"
    # the operator's answers when it cannot decide or record (policy.decision.failed)
    DECISION_ERROR = "DecisionError"
    RECORD_REFUSED = "RecordRefused"
    # pod groups (policy/group.py)
    WAITING_FOR_PODS = "WaitingForPods"
    GROUP_DOES_NOT_FIT = "GroupDoesNotFit"
    GROUP_NEEDS_TOPOLOGY = "GroupNeedsTopology"
    # refused: what the template pins
    PINNED_CONFIG_INVALID = "PinnedConfigInvalid"
    PINNED_SPECULATION_OVER_K_MAX = "PinnedSpeculationOverKMax"


def fmt(x: float | None) -> str:
    """A figure in a message: two decimals, or n/a."""
    return "n/a" if x is None else f"{x:.2f}"


def round6(x: float | None) -> float | None:
    """A figure in the record: six decimals (None stays None)."""
    return None if x is None else round(x, 6)


class Decision(Model):
    namespace: str
    workload: str
    admission_check: str | None = None
    state: CheckState
    reason: ShortText
    message: Message
    node: str | None = None
    tenant: str | None = None
    gpus: int = 0
    workload_class: Literal["interactive", "batch"] | None = None
    speculative: Speculative = Speculative()
    predicted_speedup: float | None = None
    slack: float | None = None
    acceptance: AcceptanceSummary = AcceptanceSummary()
    neighbours: list[NeighbourImpact] = []
    pod_set_updates: list[PodSetUpdate] = []
    placements: list[Placement] = []
    reasons: list[Reason] = []
    requeue_after_seconds: int | None = None
    candidates: list[Candidate] = []
    inputs: DecisionInputs | None = None
    speedup_by_k: list[float] = []
    telemetry_time: datetime | None = None
    decided_at: datetime | None = None
    observed_generation: int | None = None

    def output(self) -> dict[str, Any]:
        """The CLI JSON: nulls kept for node/predictedSpeedup/slack so the shape is stable."""
        data = self.model_dump(mode="json", by_alias=True)
        data["podSetUpdates"] = [u.wire() for u in self.pod_set_updates]
        if not self.placements:  # only multi-node groups have them: other outputs keep their shape
            del data["placements"]
        return data


class Record:
    """The fields every decision of one request carries, and the ways a decision ends."""

    def __init__(self, **base: Any) -> None:
        self.base = base

    @classmethod
    def of(cls, wl: WorkloadInfo, check: str, tel: TelemetrySnapshot | None, now: datetime) -> Record:
        """The record of a decision about `wl` for our check `check`, made at `now` on `tel`."""
        return cls(
            namespace=wl.namespace, workload=wl.name, admission_check=check, decided_at=now,
            observed_generation=wl.generation, telemetry_time=tel.time if tel is not None else None,
        )  # fmt: skip

    def finish(self, state: CheckState, reason: str, message: str, **kw: Any) -> Decision:
        """The decision; its reasons start with (reason, message) unless they already hold the type."""
        reasons = list(kw.pop("reasons", []))
        if not any(r.type == reason for r in reasons):
            reasons.insert(0, Reason(type=reason, message=message))
        return Decision(state=state, reason=reason, message=message, reasons=reasons, **self.base, **kw)

    def pending(self, why: str) -> Decision:
        """Nothing to decide: the workload or our entry is not in a state we answer."""
        return self.finish("Pending", ReasonType.NOT_ACTIONABLE, why)

    def refuse(self, refusal: Refusal, **kw: Any) -> Decision:
        """Retry later, or Rejected for good."""
        retry = refusal.retry_after if refusal.state == "Retry" else None
        return self.finish(refusal.state, refusal.reason, refusal.message, requeue_after_seconds=retry, **kw)


class Refusal(Model):
    """No node for the workload: `Retry` after `retry_after` seconds, or `Rejected`."""

    state: Literal["Retry", "Rejected"]
    reason: ReasonType
    message: str
    retry_after: int | None = None
