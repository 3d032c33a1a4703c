"""The simulator's metrics in dcgm-exporter and vLLM shapes, as a prometheus_client collector."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from sovereignspec.model.tpot_histogram import TPOT_BUCKETS
from sovereignspec.telemetry.sim.simulator import Device, Engine, Simulator

_DCGM = {
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "Ratio of cycles the tensor (HMMA) pipe is active.",
    "DCGM_FI_PROF_SM_ACTIVE": "The ratio of cycles an SM has at least 1 warp assigned.",
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_DEV_FB_FREE": "Framebuffer memory free (in MiB).",
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used (in MiB).",
}
_LE = [repr(b) for b in TPOT_BUCKETS] + ["+Inf"]


class SimCollector(Collector):
    """Reads the simulator under its lock at scrape time; `overrides` replace matching values."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim

    def collect(self) -> Iterator[Metric]:
        with self.sim.lock:
            yield from self._dcgm()
            yield from self._vllm()

    def _put(self, m: Metric, name: str, labels: dict[str, str], value: float) -> None:
        for o in self.sim.overrides:
            if o.metric == name and all(labels.get(k) == v for k, v in o.match.items()):
                value = o.value
        m.add_sample(name, labels, value)

    def _dcgm(self) -> Iterator[Metric]:
        fams = {name: Metric(name, doc, "gauge") for name, doc in _DCGM.items()}
        engines = self.sim.engines
        for d in self.sim.devices:
            values = _gpu_values(d, engines, self.sim.scenario.defaults.memory_fraction)
            # dcgm-exporter's Kubernetes mode: one series per pod on the GPU (time-slicing), else one.
            pods: list[Engine | None] = [engines[k] for k in d.pods if k in engines] or [None]
            for e in pods:
                labels = d.labels()
                if e is not None:
                    labels |= {"container": "vllm", "namespace": e.spec.namespace, "pod": e.spec.name}
                for name, v in values.items():
                    self._put(fams[name], name, labels, v)
        yield from fams.values()

    def _vllm(self) -> Iterator[Metric]:
        running = Metric(
            "vllm:num_requests_running", "Number of requests in model execution batches.", "gauge"
        )
        waiting = Metric("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "gauge")
        kv = Metric("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "gauge")
        gen = Metric("vllm:generation_tokens", "Number of generation tokens processed.", "counter")
        drafts = Metric("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", "counter")
        dtok = Metric("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", "counter")
        acc = Metric("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", "counter")
        per_pos = Metric(
            "vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.", "counter"
        )
        tpot = Metric(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            "histogram",
        )
        max_seqs = float(self.sim.scenario.defaults.max_num_seqs)
        default_model = self.sim.scenario.defaults.model
        for key in sorted(self.sim.engines):
            e = self.sim.engines[key]
            if not e.devices:
                continue
            labels = {
                "model_name": e.model or default_model,
                "engine": "0",
                "namespace": key[0],
                "pod": key[1],
            }
            self._put(running, running.name, labels, float(round(e.batch)))
            self._put(waiting, waiting.name, labels, float(int(e.waiting)))
            self._put(kv, kv.name, labels, min(1.0, 0.9 * e.batch / max_seqs))
            self._put(gen, gen.name + "_total", labels, e.generation_tokens)
            cum = 0.0
            for le, count in zip(_LE, e.hist, strict=True):
                cum += float(count)
                self._put(tpot, tpot.name + "_bucket", labels | {"le": le}, cum)
            self._put(tpot, tpot.name + "_count", labels, cum)
            self._put(tpot, tpot.name + "_sum", labels, e.hist_sum)
            if e.accepted:  # counters exist once the engine has speculated
                self._put(drafts, drafts.name + "_total", labels, e.drafts)
                self._put(dtok, dtok.name + "_total", labels, e.draft_tokens)
                self._put(acc, acc.name + "_total", labels, sum(e.accepted))
                for pos, v in enumerate(e.accepted):
                    self._put(per_pos, per_pos.name + "_total", labels | {"position": str(pos)}, v)
        yield from (running, waiting, kv, gen, tpot, drafts, dtok, acc, per_pos)


def _gpu_values(d: Device, engines: dict[tuple[str, str], Engine], mem_fraction: float) -> dict[str, float]:
    """Each vLLM pod takes `gpu_memory_utilization` of its share of the device, drafts included."""
    used = d.base_memory_mib
    for k in d.pods:
        if k in engines:
            used += mem_fraction * d.memory_mib / d.replicas
    used = min(used, d.memory_mib)
    util = 100.0 if d.busy else min(100.0, 100.0 * d.base_load * 2)
    return {
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": d.tensor_active,
        "DCGM_FI_PROF_SM_ACTIVE": min(1.0, d.tensor_active * 1.25 + (0.1 if d.busy else 0.0)),
        "DCGM_FI_DEV_GPU_UTIL": round(util),
        "DCGM_FI_DEV_FB_FREE": round(d.memory_mib - used),
        "DCGM_FI_DEV_FB_USED": round(used),
    }
