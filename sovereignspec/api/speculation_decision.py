"""SpeculationDecision (namespaced, named after and owned by its Workload): the decision on record.

`kubectl get speculationdecisions` shows mode, k, predicted speed-up, slack, node, state and reason.
The status carries every input summary and reason of the decision, and the exact podSetUpdates
written to Kueue, so that the operator can re-assert identical updates while the check stays Ready.
A decision in state Ready whose pods are not yet bound counts as a reservation of `gpus` GPUs on
`node` (DESIGN.md §3) -- but only when written by the operator (label
`app.kubernetes.io/managed-by: sovereignspec`) and owned by a live Workload.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from sovereignspec.api.base import Model, cel_rules, cut_to
from sovereignspec.api.meta import ObjectMeta, Toleration

CheckState = Literal["Pending", "Ready", "Retry", "Rejected"]

MESSAGE_CHARS = 32768
"""Kueue's maxLength for an admission-check message; our decision and condition messages use it too."""
REASON_MESSAGE_CHARS = 4096
MODEL_CHARS = 1024
CONFIG_CHARS = 16384

Message = Annotated[str, cut_to(MESSAGE_CHARS), Field(max_length=MESSAGE_CHARS)]
ReasonMessage = Annotated[str, cut_to(REASON_MESSAGE_CHARS), Field(max_length=REASON_MESSAGE_CHARS)]
ModelName = Annotated[str, cut_to(MODEL_CHARS), Field(max_length=MODEL_CHARS)]
ShortText = Annotated[str, cut_to(1024), Field(max_length=1024)]
ConfigText = Annotated[str, cut_to(CONFIG_CHARS), Field(max_length=CONFIG_CHARS)]


class Reason(Model):
    """One reason behind the decision: CamelCase type, human message."""

    type: ShortText
    message: ReasonMessage


class NeighbourImpact(Model):
    """A co-located engine: its SLO margin before our workload, our predicted slowdown of it through
    compute (`slowdown`), and, where we arrive, through the memory bandwidth our plain steps take
    (`memorySlowdown`; 0 where our pods already run there). Each must stay within the margin."""

    namespace: str
    pod: str
    margin_before: float | None = None
    slowdown: float | None = None
    memory_slowdown: float | None = None


class AcceptanceSummary(Model):
    """What the decision believed about the draft: source, decision alpha, per-position curve."""

    source: Literal["observed", "aggregate", "prior", "none"] = "none"
    alpha: float | None = None
    quantile: float | None = None
    drafts: float = 0.0
    per_position: list[float] = []
    expected_length: float | None = Field(default=None, description="E[L(k)] at the chosen k.")


class Speculative(Model):
    """The speculation outcome; `config` is the exact `--speculative-config` JSON, "" when off."""

    model_config = cel_rules(
        ("!has(self.schedule) || self.schedule.all(r, size(r) == 3)", "schedule rows are [start, end, k]"),
    )

    enabled: bool = False
    method: ModelName | None = None
    draft_model: ModelName | None = None
    num_speculative_tokens: int = Field(default=0, ge=0)
    schedule: list[list[int]] = Field(default=[], max_length=64)
    config: ConfigText = ""


class Condition(Model):
    """A Kubernetes-style condition (e.g. `Drift`), CamelCase reason and a human message."""

    type: str = Field(min_length=1, max_length=316)
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(min_length=1, max_length=1024)
    message: Message = ""
    last_transition_time: datetime | None = None
    last_update_time: datetime | None = Field(
        default=None,
        description="When the message was last rewritten (as in a Deployment's conditions). A Drift=False "
        "verdict rewrites the live figures in its message at most every driftMessageRefreshSeconds of the "
        "operator; a new status, and a drifted verdict's new message, are written at once. Absent: "
        "lastTransitionTime.",
    )
    observed_generation: int | None = None


class DecisionInputs(Model):
    """The workload's claims as the decision read them (after clamping by the tenant's policy)."""

    workload_class: Literal["interactive", "batch"] | None = None
    target_model: ModelName | None = None
    draft_model: ModelName | None = None
    method: ModelName | None = None
    tpot_slo_ms: float | None = None
    tpot_slo_claimed: bool | None = Field(
        default=None,
        description="Whether the workload's pods claim an SLO (tpot-slo-ms present): as a neighbour of later "
        "decisions it then counts as SLO-bound even without engine metrics. Absent in older records.",
    )
    expected_batch: int | None = None
    placement: Literal["RelativeSpeedup", "Throughput"] | None = Field(
        default=None,
        description="The policy's placement mode when it is not the default RelativeSpeedup (absent: "
        "RelativeSpeedup, so default decisions read as before the mode existed).",
    )


class Candidate(Model):
    """A node that passed the hard filters, with its predicted outcome (ranked as placement chose)."""

    node: str
    predicted_speedup: float | None = None
    slack: float | None = None
    load: float | None = Field(
        default=None,
        description="Other tenants' tensor load u, when known: the measured tensor-active, or, where the "
        "measurement has not caught up with engines that started within its window, what the engines on "
        "the GPU compute alone at their running (else claimed) batch.",
    )
    k: int = 0
    free_gpus: int = 0
    predicted_rate: float | None = Field(
        default=None,
        description="Placement Throughput's ranking value: predicted decode tokens/s per sequence at the "
        "expected batch, S_real(k*, B) / t_u(B) (S_real = 1 where speculation is off).",
    )


class PodSetUpdate(Model):
    """One entry of Kueue's `podSetUpdates`, exactly as written (additive to the pod template)."""

    name: str
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = []


class Placement(Model):
    """Where one pod set of a multi-node group goes, and the GPUs it holds there until its pods bind."""

    pod_set: str = Field(min_length=1)
    node: str = Field(min_length=1)
    gpus: int = Field(default=0, ge=0)


class SpeculationDecisionSpec(Model):
    workload: str = Field(min_length=1, description="Name of the Workload this decision answers.")
    workload_uid: str | None = None
    admission_check: str | None = None


class SpeculationDecisionStatus(Model):
    model_config = cel_rules(
        ("self.state != 'Ready' || has(self.node)", "a Ready decision names its node"),
    )

    state: CheckState = "Pending"
    reason: ShortText = ""
    message: Message = ""
    mode: Literal["on", "off"] = "off"
    node: str | None = None
    tenant: str | None = None
    gpus: int = Field(default=0, ge=0, description="GPUs reserved on the node until the pods bind.")
    speculative: Speculative = Speculative()
    predicted_speedup: float | None = None
    slack: float | None = None
    acceptance: AcceptanceSummary = AcceptanceSummary()
    neighbours: list[NeighbourImpact] = Field(default=[], max_length=1024)
    reasons: list[Reason] = Field(default=[], max_length=256)
    pod_set_updates: list[PodSetUpdate] = Field(default=[], max_length=8)
    placements: list[Placement] | None = Field(
        default=None,
        max_length=8,
        description="A group over several nodes: each pod set's node and the GPUs reserved there "
        "(the node field names the first).",
    )
    inputs: DecisionInputs | None = None
    speedup_by_k: list[float] = Field(
        default=[], max_length=65, description="S_real(k) for k = 0..kMax at the expected batch on the node."
    )
    candidates: list[Candidate] = Field(default=[], max_length=10, description="Best first.")
    telemetry_time: datetime | None = None
    decided_at: datetime | None = None
    observed_generation: int | None = None
    conditions: list[Condition] = Field(
        default=[],
        max_length=8,
        description="Written by the drift checker (field manager sovereignspec-drift).",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


class SpeculationDecision(Model):
    api_version: Literal["sovereignspec.io/v1alpha1"] = "sovereignspec.io/v1alpha1"
    kind: Literal["SpeculationDecision"] = "SpeculationDecision"
    metadata: ObjectMeta = ObjectMeta()
    spec: SpeculationDecisionSpec
    status: SpeculationDecisionStatus | None = None


class ReservationStatus(Model):
    """The part of a decision's status a reservation reads."""

    model_config = ConfigDict(extra="ignore")

    state: CheckState = "Pending"
    node: str | None = None
    gpus: int = Field(default=0, ge=0)
    placements: list[Placement] = []


class DecisionReservation(Model):
    """A SpeculationDecision read only for the GPUs it reserves. The rest of the record (inputs,
    candidates, reasons) is not validated: parsing it whole was 7 % of the operator's main-thread CPU in
    a burst, and a status field added by a newer operator must not make a reservation vanish."""

    model_config = ConfigDict(extra="ignore")

    api_version: Literal["sovereignspec.io/v1alpha1"] = "sovereignspec.io/v1alpha1"
    kind: Literal["SpeculationDecision"] = "SpeculationDecision"
    metadata: ObjectMeta = ObjectMeta()
    status: ReservationStatus | None = None
