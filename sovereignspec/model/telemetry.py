"""The telemetry snapshot: what the decision core knows about live GPUs and engines.

Built by the Prometheus reader in the operator and read verbatim from a scenario file by
`sovereignspec decide`, so the CLI and the controller decide on the same shape. A value that is
unknown is None (never 0); why it is unknown is recorded in `missing`.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from sovereignspec.api.base import Model


class PodRef(Model):
    namespace: str
    name: str


class GpuSample(Model):
    """One physical GPU, or one MIG instance (then `mig_profile` and `gpu_instance_id` are set)."""

    node: str
    uuid: str
    model_name: str | None = None
    tensor_active: float | None = Field(default=None, ge=0, le=1, description="Smoothed ratio, all tenants.")
    fb_free_mib: float | None = Field(default=None, ge=0, alias="fbFreeMiB")
    mig_profile: str | None = None
    gpu_instance_id: str | None = None
    pods: list[PodRef] = []


class EngineSample(Model):
    """One vLLM engine (serving pod)."""

    namespace: str
    pod: str
    tpot_seconds: float | None = Field(default=None, gt=0)
    running: float | None = Field(default=None, ge=0)
    running_min: float | None = Field(
        default=None, ge=0, description="The fewest running requests over the telemetry window."
    )
    waiting: float | None = Field(default=None, ge=0)
    model_name: str | None = None


class AcceptanceSample(Model):
    """Speculative-decoding counters for one (target, draft, method) pair, increases over the window.

    `accepted_per_position[i]` counts drafts whose position i (0-based) was accepted; its length is
    the k the engines ran with.
    """

    target_model: str
    draft_model: str
    method: str
    drafts: float = Field(ge=0)
    draft_tokens: float = Field(default=0.0, ge=0)
    accepted_per_position: list[float] = []
    accepted: float | None = Field(
        default=None, ge=0, description="Total accepted tokens, when per-position counters are absent."
    )


class TelemetryGap(Model):
    """Why some telemetry is missing: the source (query name) and a human reason."""

    source: str
    reason: str


class TelemetrySnapshot(Model):
    time: datetime | None = None
    gpus: list[GpuSample] = []
    engines: list[EngineSample] = []
    acceptance: list[AcceptanceSample] = []
    missing: list[TelemetryGap] = []
