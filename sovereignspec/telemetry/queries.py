"""The fixed set of PromQL queries one refresh issues, with their defaults and overrides.

The set does not depend on how many workloads wait: every query returns all GPUs or all engines
at once, and the reader joins the results in Python.
"""

from __future__ import annotations

from enum import StrEnum

from sovereignspec.api.telemetry_spec import TelemetrySpec

# Labels that identify one GPU (or MIG instance) across dcgm-exporter builds and relabelings.
GPU_LABELS = "Hostname, hostname, node, UUID, modelName, GPU_I_ID, GPU_I_PROFILE"
ENGINE_LABELS = "namespace, pod"


class Query(StrEnum):
    """Query names; each is also the field of `QueryOverrides` that replaces its PromQL."""

    TENSOR_ACTIVE = "tensor_active"
    FB_FREE = "fb_free"
    GPU_FRESHNESS = "gpu_freshness"
    TPOT = "tpot"
    RUNNING = "running"
    RUNNING_MIN = "running_min"
    WAITING = "waiting"
    ENGINE_FRESHNESS = "engine_freshness"
    SPEC_DRAFTS = "spec_drafts"
    SPEC_DRAFT_TOKENS = "spec_draft_tokens"
    SPEC_ACCEPTED_PER_POSITION = "spec_accepted_per_position"


def default_queries(spec: TelemetrySpec) -> dict[Query, str]:
    """Built-in PromQL for every query, parameterised by the policy's window and TPOT statistic."""
    w = spec.window
    return {
        # One series per (GPU, pod): time-sliced GPUs carry one series per pod, same value.
        Query.TENSOR_ACTIVE: (
            f"max by ({GPU_LABELS}, namespace, pod) (avg_over_time(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE[{w}]))"
        ),
        Query.FB_FREE: f"max by ({GPU_LABELS}) (DCGM_FI_DEV_FB_FREE)",
        # When each GPU was last scraped: a smoothed value outlives its source by a window.
        Query.GPU_FRESHNESS: f"max by ({GPU_LABELS}) (timestamp(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE))",
        # TPOT from the per-request histogram, not inter-token latency (distorted by speculation).
        Query.TPOT: _tpot(spec),
        Query.RUNNING: f"sum by ({ENGINE_LABELS}, model_name) (vllm:num_requests_running)",
        # The batch the engine dipped to in the window: where its schedule drafted the most.
        Query.RUNNING_MIN: (
            f"sum by ({ENGINE_LABELS}, model_name) (min_over_time(vllm:num_requests_running[{w}]))"
        ),
        Query.WAITING: f"sum by ({ENGINE_LABELS}, model_name) (vllm:num_requests_waiting)",
        Query.ENGINE_FRESHNESS: f"max by ({ENGINE_LABELS}) (timestamp(vllm:num_requests_running))",
        Query.SPEC_DRAFTS: (
            f"sum by ({ENGINE_LABELS}, model_name) (increase(vllm:spec_decode_num_drafts_total[{w}]))"
        ),
        Query.SPEC_DRAFT_TOKENS: (
            f"sum by ({ENGINE_LABELS}, model_name) (increase(vllm:spec_decode_num_draft_tokens_total[{w}]))"
        ),
        Query.SPEC_ACCEPTED_PER_POSITION: (
            f"sum by ({ENGINE_LABELS}, model_name, position) "
            f"(increase(vllm:spec_decode_num_accepted_tokens_per_pos_total[{w}]))"
        ),
    }


def _tpot(spec: TelemetrySpec) -> str:
    """The TPOT query for the policy's `tpotStatistic` (api/telemetry_spec.py says why each)."""
    hist = "vllm:request_time_per_output_token_seconds"
    if spec.tpot_statistic == "Quantile":
        return (
            f"histogram_quantile({spec.tpot_quantile}, sum by ({ENGINE_LABELS}, le) "
            f"(rate({hist}_bucket[{spec.window}])))"
        )
    span = round(spec.tpot_peak_seconds)
    mean = (
        f"sum by ({ENGINE_LABELS}) (rate({hist}_sum[{span}s])) "
        f"/ sum by ({ENGINE_LABELS}) (rate({hist}_count[{span}s]))"
    )
    return f"max_over_time(({mean})[{spec.window}:{max(1, span // 2)}s])"


def effective_queries(spec: TelemetrySpec) -> dict[Query, str]:
    """Defaults with the policy's overrides applied (an empty override keeps the default)."""
    queries = default_queries(spec)
    for name in Query:
        override = getattr(spec.queries, name.value, None)
        if override:
            queries[name] = override
    return queries
