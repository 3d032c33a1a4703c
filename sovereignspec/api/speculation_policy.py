"""SpeculationPolicy (cluster-scoped): thresholds, draft budget, priors, accelerator profiles.

It is the `parameters` object of the AdmissionCheck. Every field has a default, so
`spec: {}` is a complete policy. Cross-field rules are written twice on purpose: as pydantic
validators (the CLI and the operator reject a bad object with a message) and as CEL
`x-kubernetes-validations` (the API server rejects it at write time); `crdgen` copies the CEL rules
from each model's `json_schema_extra` into the CRD.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Literal

from pydantic import Field, model_validator

from sovereignspec.api.base import Model, cel_rules
from sovereignspec.api.meta import API_VERSION, ObjectMeta
from sovereignspec.api.telemetry_spec import TelemetrySpec

METHODS = ("eagle", "eagle3", "mtp", "ngram", "draft_model", "medusa", "mlp_speculator")
"""vLLM `--speculative-config` methods the decision core knows how to budget."""


class BetaPrior(Model):
    """Beta prior on the i.i.d. acceptance rate alpha: Beta(mean·strength, (1 - mean)·strength)."""

    mean: float = Field(gt=0, lt=1)
    strength: float = Field(gt=0, le=1e6, description="Pseudo-observations (conditional draft trials).")


# Defaults from DESIGN.md §4, in line with the published acceptance figures:
# EAGLE (Li et al. 2024, arXiv:2401.15077) and EAGLE-3 (Li et al. 2025, arXiv:2503.01840) report
# per-token acceptance around 0.7-0.8 on chat benchmarks; DeepSeek-V3's MTP module
# (arXiv:2412.19437 §5.4.3) reports 85-90 % acceptance of the second token; a separate small draft
# model (Leviathan et al. 2023, arXiv:2211.17192, Table 3) lands at alpha ≈ 0.5-0.8; prompt-lookup
# n-gram drafting depends on the task (high for summarising/editing, low for chat), hence 0.5.
DEFAULT_PRIORS: dict[str, BetaPrior] = {
    "eagle3": BetaPrior(mean=0.8, strength=20),
    "eagle": BetaPrior(mean=0.7, strength=20),
    "mtp": BetaPrior(mean=0.8, strength=20),
    "draft_model": BetaPrior(mean=0.65, strength=20),
    "ngram": BetaPrior(mean=0.5, strength=20),
}


class ModelPair(Model):
    target_model: str = Field(min_length=1)
    draft_model: str = Field(min_length=1)


class StepTimePoint(Model):
    tokens: int = Field(ge=0, le=10_000_000)
    seconds: float = Field(ge=0, le=3600)


class Roofline(Model):
    """Roofline parameters: t0 = weight bytes / (bandwidth·mbu), g(T) = T·2·params / (flops·mfu)."""

    peak_tflops: float = Field(gt=0, description="Dense tensor TFLOP/s at the serving precision.")
    memory_bandwidth_gbs: float = Field(gt=0, description="Memory bandwidth in GB/s (10^9 bytes).")
    params_b: float = Field(gt=0, description="Target model parameters, in billions.")
    bytes_per_param: float = Field(default=2.0, gt=0, le=8)
    mfu: float = Field(default=0.5, gt=0, le=1, description="Achieved fraction of peak FLOP/s.")
    mbu: float = Field(default=0.75, gt=0, le=1, description="Achieved fraction of peak bandwidth.")


class AcceleratorProfile(Model):
    """Step time of the target model on one GPU product, plus per-method draft cost and memory.

    `product` is matched against the node label `nvidia.com/gpu.product` and dcgm's `modelName`
    after normalising (case-insensitive, spaces and underscores as '-'); `aliases` adds more names.
    `targetModel` "*" matches any target. Exactly one of `stepTime` (a calibrated table, first point at
    0 tokens) or `roofline` must be set.
    """

    model_config = cel_rules(
        ("has(self.stepTime) != has(self.roofline)", "exactly one of stepTime or roofline must be set"),
        (
            "!has(self.stepTime) || (size(self.stepTime) >= 2 && self.stepTime[0].tokens == 0)",
            "stepTime needs at least two points, the first at tokens 0",
        ),
        (
            "!has(self.stepTime) || self.stepTime.map(p, p.tokens).all(t, "
            "self.stepTime.map(p, p.tokens).exists_one(u, u == t)) "
            "&& self.stepTime.map(p, p.tokens).isSorted()",
            "stepTime tokens must be strictly increasing",
        ),
        (
            "!has(self.stepTime) || self.stepTime.map(p, p.seconds).isSorted()",
            "stepTime seconds must be non-decreasing",
        ),
    )

    product: str = Field(min_length=1, max_length=128)
    aliases: list[str] = Field(default=[], max_length=16)
    target_model: str = Field(default="*", min_length=1, max_length=256)
    step_time: list[StepTimePoint] | None = Field(default=None, max_length=64)
    roofline: Roofline | None = None
    draft_cost: dict[str, float] = Field(
        default={}, description="Draft cost c_d per draft token, relative to one target step, per method."
    )
    draft_memory_mib: dict[str, float] = Field(
        default={}, alias="draftMemoryMiB", description="GPU memory the draft needs, per method, MiB."
    )
    source: str | None = Field(default=None, max_length=512, description="Where the figures come from.")

    @model_validator(mode="after")
    def _check(self) -> AcceleratorProfile:
        if (self.step_time is None) == (self.roofline is None):
            raise ValueError("exactly one of stepTime or roofline must be set")
        if self.step_time is not None:
            pts = self.step_time
            if len(pts) < 2 or pts[0].tokens != 0:
                raise ValueError("stepTime needs at least two points, the first at tokens 0")
            for a, b in pairwise(pts):
                if b.tokens <= a.tokens:
                    raise ValueError("stepTime tokens must be strictly increasing")
                if b.seconds < a.seconds:
                    raise ValueError("stepTime seconds must be non-decreasing")
            if pts[0].seconds <= 0:
                raise ValueError("stepTime at 0 tokens (t0) must be > 0")
        for name, cost in self.draft_cost.items():
            if not 0 <= cost < 10:
                raise ValueError(f"draftCost[{name}]={cost} must be in [0, 10)")
        for name, mib in self.draft_memory_mib.items():
            if mib < 0:
                raise ValueError(f"draftMemoryMiB[{name}]={mib} must be >= 0")
        return self


DEFAULT_BREAKPOINTS = [1, 2, 4, 8, 16, 32, 64, 128, 256]


class SpeculationPolicySpec(Model):
    """Thresholds and budgets of the speculation decision (DESIGN.md §2, §4).

    `placement` is opt-in: the default `RelativeSpeedup` is DESIGN.md's rule and decides exactly as
    before the field existed. S_real is relative to the node's own plain step, so on a mixed-generation
    pool it favours an idle slow card (an RTX 4090's S_real can beat an H100's while its tokens/s are
    far lower); `Throughput` ranks by what a closed-loop interactive client feels, the absolute decode
    rate S_real(k*, B) / t_u(B) (docs/evidence.md measures both on the simulator's mixed pool).
    """

    model_config = cel_rules(
        (
            "!has(self.batchBreakpoints) || (self.batchBreakpoints[0] == 1 "
            "&& self.batchBreakpoints.isSorted() && self.batchBreakpoints.all(b, "
            "self.batchBreakpoints.exists_one(c, c == b)))",
            "batchBreakpoints must start at 1 and be strictly increasing",
        ),
        (
            "!has(self.batchBreakpoints) || !has(self.maxBatch) || "
            "self.batchBreakpoints.all(b, b <= self.maxBatch)",
            "batchBreakpoints must not exceed maxBatch",
        ),
        ("!has(self.kMax) || self.kMax >= 1", "kMax must be >= 1"),
        (
            "!has(self.alphaQuantile) || (self.alphaQuantile > 0.0 && self.alphaQuantile < 1.0)",
            "alphaQuantile must be in (0, 1)",
        ),
        (
            "!has(self.defaultExpectedBatch) || !has(self.maxBatch) || "
            "self.defaultExpectedBatch <= self.maxBatch",
            "defaultExpectedBatch must not exceed maxBatch",
        ),
    )

    min_gain: float = Field(default=0.05, ge=0, le=10, description="Self-benefit threshold on S_real - 1.")
    safety: float = Field(default=0.1, ge=0, lt=1, description="Fraction of neighbour SLO margin kept.")
    k_max: int = Field(default=8, ge=1, le=32)
    batch_breakpoints: list[int] = Field(default=DEFAULT_BREAKPOINTS, min_length=1, max_length=32)
    max_batch: int = Field(default=1024, ge=1, le=65536, description="Upper end of the last batch range.")
    default_expected_batch: int = Field(default=8, ge=1)
    default_tpot_slo_ms: float = Field(default=100.0, gt=0)
    default_class: Literal["interactive", "batch"] = "interactive"
    slack_aggregation: Literal["min", "mean", "max"] = "min"
    placement: Literal["RelativeSpeedup", "Throughput"] = Field(
        default="RelativeSpeedup",
        description="How an interactive workload with a healthy draft picks among sovereign nodes: "
        "RelativeSpeedup (DESIGN.md §2) = highest predicted S_real at its expected batch; Throughput = "
        "highest predicted decode rate per sequence, S_real / t_u(B). Plain placement is the same in both.",
    )
    keep_capacity: bool = Field(
        default=True,
        description="Placement RelativeSpeedup (issue 16b): a workload whose expected batch is at most "
        "defaultExpectedBatch prefers, among the nodes whose predicted S_real is within minGain of the best, "
        "one where the pod does not take an empty GPU that could host several engines, slowest hardware "
        "first (docs/decision.md). False, or a larger workload: highest S_real, then slack.",
    )
    spare_whole_gpus: bool = Field(
        default=True,
        description="Placement RelativeSpeedup (issue 16, adopted in session 15): a workload whose expected "
        "batch is above defaultExpectedBatch ranks the nodes where its pod would take an empty GPU after the "
        "others when one of those predicts at least their decode rate S_real / t_u(B), and ranks the nodes "
        "by that rate rather than S_real (session 19); under keepCapacity a "
        "smaller workload's band also holds the nodes predicting at least the S_real-best node's rate, and "
        "takes the smallest share of hardware first (unloaded plain step times engines per GPU) "
        "(docs/decision.md). False: the session-8 rules.",
    )
    shared_gpu_allocation: Literal["Distributed", "Unknown"] = Field(
        default="Distributed",
        description="Which of a node's shared GPUs (time-slicing or MPS replicas) the device plugin hands "
        "a pod that asks for one: Distributed, the NVIDIA k8s-device-plugin's default "
        "(--shared-devices-allocation-policy=distributed), gives a replica of a GPU with the fewest "
        "allocated replicas, and the neighbour condition judges the engines on those GPUs and the "
        "predicted speed-up their load; Unknown judges every GPU with a free replica (set it for a plugin "
        "configured to pack, or any other). Either way every GPU with a free replica is judged while a "
        "bound pod is not yet in dcgm-exporter's samples, and on MIG; the neighbour condition judges them "
        "all also while an admitted pod has not started there and for a pod that asks for several GPUs.",
    )
    batch_class: Literal["Model", "Plain"] = Field(
        default="Model",
        description="Batch-class workloads: Model (issue 16b) = the model decides their speculation, judged "
        "on the GPU the pod gets, and they take an empty GPU on the fastest hardware, else pack; Plain = "
        "they run plain and pack onto the most loaded node (docs/decision.md).",
    )
    alpha_quantile: float = Field(default=0.25, gt=0, lt=1)
    weak_acceptance: float = Field(
        default=0.6, ge=0, le=1, description="A draft whose decision alpha is below this is weak: plain."
    )
    unknown_neighbour_slack: float = Field(default=0.5, ge=0, le=1)
    unknown_neighbour_margin: float = Field(
        default=0.5,
        ge=0,
        le=100,
        description="SLO margin (SLO / TPOT - 1) assumed for a co-located neighbour whose TPOT is not "
        "measured (an SLO claim or a vLLM engine but no TPOT sample): it neither blocks every neighbour "
        "at margin 0 nor counts as unconstrained.",
    )
    min_tpot_slo_ms: float = Field(
        default=20.0,
        gt=0,
        le=3_600_000,
        description="Global floor on TPOT SLO claims: a tenant's sovereignspec.io/tpot-slo-ms below it "
        "counts as it, unless the tenant's SovereigntyPolicies set limits.minTpotSloMs (that value "
        "then applies instead).",
    )
    system_namespaces: list[str] = Field(
        default=["kube-system", "kube-public", "kube-node-lease"],
        max_length=256,
        description="Namespaces whose pods never occupy a node for isolation (infrastructure an "
        "administrator vouches for). Every other pod counts, DaemonSet pods included; a namespace "
        "labelled sovereignspec.io/system=true (namespace labels are set by administrators) is exempt too.",
    )
    priors: dict[str, BetaPrior] = Field(default=DEFAULT_PRIORS)
    allowed_pairs: list[ModelPair] = Field(default=[], max_length=256)
    accelerator_profiles: list[AcceleratorProfile] = Field(default=[], max_length=64)
    builtin_profiles: bool = Field(default=True, description="Fall back to the built-in profiles.")
    reconfigure_on_drift: bool = Field(
        default=False,
        description="Re-admit a workload whenever its speculation drifts (k at its expected batch changes).",
    )
    reconfigure_on_neighbour_harm: bool = Field(
        default=True,
        description="Re-admit a speculating workload when its drift cuts the draft budget while an SLO-bound "
        "engine on its GPUs runs within `safety` of its SLO (load that grew after admission), even with "
        "reconfigureOnDrift off.",
    )
    drift_grace_seconds: int = Field(
        default=120,
        ge=0,
        le=86400,
        description="Drift must persist this long before reconfigureOnDrift re-admits the workload.",
    )
    neighbour_harm_grace_seconds: int = Field(
        default=0,
        ge=0,
        le=86400,
        description="Drift that is neighbour harm must persist this long before reconfigureOnNeighbourHarm "
        "re-admits the workload (0: at the drift sweep that finds it).",
    )
    retry_after_seconds: int = Field(default=60, ge=1, le=86400)
    telemetry: TelemetrySpec = TelemetrySpec()

    @model_validator(mode="after")
    def _check(self) -> SpeculationPolicySpec:
        bp = self.batch_breakpoints
        if bp[0] != 1:
            raise ValueError("batchBreakpoints must start at 1")
        if any(b <= a for a, b in pairwise(bp)):
            raise ValueError("batchBreakpoints must be strictly increasing")
        if bp[-1] > self.max_batch:
            raise ValueError("batchBreakpoints must not exceed maxBatch")
        if self.default_expected_batch > self.max_batch:
            raise ValueError("defaultExpectedBatch must not exceed maxBatch")
        return self


class SpeculationPolicy(Model):
    api_version: Literal["sovereignspec.io/v1alpha1"] = API_VERSION  # type: ignore[assignment]
    kind: Literal["SpeculationPolicy"] = "SpeculationPolicy"
    metadata: ObjectMeta = ObjectMeta()
    spec: SpeculationPolicySpec = SpeculationPolicySpec()
