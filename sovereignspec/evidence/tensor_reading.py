"""A GPU's tensor-active as the operator's default query reads it, from the simulator's per-tick history.

The operator asks Prometheus for `max by (GPU, namespace, pod) (avg_over_time(DCGM_FI_PROF_PIPE_TENSOR_
ACTIVE[window]))`. dcgm-exporter labels a GPU's series with the pod it serves (one series per pod on a
time-sliced GPU), so a pod's series begins when the pod does, and `avg_over_time` averages the samples
that series has: a pod that started inside the window is read over its own life, not diluted by the
ticks before it. The GPU's value is the largest of its series. A GPU that serves no pod has one series
without pod labels, over the whole window.
"""

from __future__ import annotations

import numpy as np

from sovereignspec.evidence.sim import FloatArray, IntArray


def tensor_as_read(tensor: FloatArray, window: slice, pods_started: IntArray) -> float:
    """One GPU's reading: `tensor` its per-tick history, `window` the ticks the query's range covers,
    `pods_started` the tick each pod on the GPU at the window's end started (empty: no pod)."""
    if pods_started.size == 0:
        return float(tensor[window].mean())
    # Each pod's series averages from its own start; the largest of those means is the GPU's value.
    starts = np.unique(np.clip(pods_started, window.start, window.stop - 1))
    return max(float(tensor[int(s) : window.stop].mean()) for s in starts)
