"""The evidence simulator's tensor-active reading against a real Prometheus running the operator's own
query: dcgm-exporter's series per (GPU, pod) begin with their pod, `avg_over_time` averages what a series
has, and the reader keeps the largest. Synthetic series (subqueries over `time()`) stand in for
dcgm-exporter, so no scrape is needed."""

from __future__ import annotations

import time

import numpy as np
import pytest

from sovereignspec.api.telemetry_spec import TelemetrySpec
from sovereignspec.evidence.tensor_reading import tensor_as_read
from sovereignspec.telemetry.queries import Query, default_queries
from tests.telemetry.promproc import PrometheusProcess

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(120)]

METRIC = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"


def _labelled(expr: str, uuid: str, pod: str) -> str:
    out = f'label_replace({expr}, "UUID", "{uuid}", "", "")'
    if pod:
        out = f'label_replace(label_replace({out}, "namespace", "t", "", ""), "pod", "{pod}", "", "")'
    return out


def _load(t: np.ndarray, young: int, base: float) -> np.ndarray:
    """One GPU's load at the Unix seconds `t`: `base`, plus a young pod's 0.40-0.49 from `young` on."""
    return base + (t >= young) * (0.4 + (t % 10) / 100)


def _load_promql(young: int, base: float) -> str:
    """`_load` in PromQL, evaluated at each step of a subquery."""
    now = "vector(time())"
    return f"(vector({base}) + ({now} >= bool {young}) * (vector(0.4) + ({now} % 10) / 100))"


IDLE = "(vector(0.2) + (vector(time()) % 3) / 10)"


def _want(ticks: np.ndarray, young: int) -> dict[str, float]:
    """The simulator's readings of the three GPUs over the window `ticks`."""
    window, started = slice(0, len(ticks)), young - int(ticks[0])
    return {
        "GPU-whole": tensor_as_read(_load(ticks, young, 0.0), window, np.array([started])),
        "GPU-sliced": tensor_as_read(_load(ticks, young, 0.3), window, np.array([-100, started])),
        "GPU-idle": tensor_as_read(0.2 + (ticks % 3) / 10, window, np.array([], dtype=np.int64)),
    }


def test_the_operators_query_reads_each_pod_over_its_own_life(empty_prometheus: PrometheusProcess) -> None:
    spec = TelemetrySpec(window="2m")
    at = int(time.time()) - 5  # whole seconds: the subquery's steps fall on them
    young = at - 37  # a pod that started 37 s before the query, inside the window
    before, after = f" and on() (vector(time()) < {young})", f" and on() (vector(time()) >= {young})"
    series = [  # (GPU, pod, value): dcgm-exporter's series as the operator's query finds them
        # A whole GPU idle until its pod started: the pod-less series before, the pod's after.
        ("GPU-whole", "", _load_promql(young, 0.0) + before),
        ("GPU-whole", "p-new", _load_promql(young, 0.0) + after),
        # A time-sliced GPU: an old pod's series all window, a young pod's since it started, same value.
        ("GPU-sliced", "p-old", _load_promql(young, 0.3)),
        ("GPU-sliced", "p-young", _load_promql(young, 0.3) + after),
        # A GPU without pods: one series without pod labels.
        ("GPU-idle", "", IDLE),
    ]
    synthetic = " or ".join(_labelled(f"({expr})", uuid, pod) for uuid, pod, expr in series)
    default = default_queries(spec)[Query.TENSOR_ACTIVE]
    query = default.replace(f"{METRIC}[{spec.window}]", f"({synthetic})[{spec.window}:1s]")
    assert query != default
    read: dict[str, float] = {}
    for r in empty_prometheus.query(query, at=float(at)):  # the reader's assembly: the largest per GPU
        uuid = r["metric"]["UUID"]
        read[uuid] = max(read.get(uuid, 0.0), float(r["value"][1]))

    # Prometheus 2.x ranges hold both ends (Debian ships 2.42), 3.x leaves the first out: the pods'
    # series read the same either way, the GPU without pods one sample apart.
    n = round(spec.window_seconds)
    closed, left_open = np.arange(at - n, at + 1), np.arange(at - n + 1, at + 1)
    assert read == pytest.approx(_want(closed, young), abs=1e-9) or read == pytest.approx(
        _want(left_open, young), abs=1e-9
    )
    # The GPU's mean over the window (the simulator's reading until session 36) is not what it returns.
    assert read["GPU-whole"] > float(np.mean(_load(closed, young, 0.0))) + 0.2
