"""Simulated GPUs and vLLM engines: device assignment, one tick of the load model, the counters.

Deterministic for a seed: ticks advance simulated time by `dt`, never by the wall clock, and
every random draw comes from one seeded generator in a fixed (sorted) order.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid as uuidlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sovereignspec.model.tpot_histogram import REQUEST_TPOT_JITTER, TPOT_BUCKETS
from sovereignspec.telemetry.sim.loadmodel import engine_load, expected_length
from sovereignspec.telemetry.sim.scenario import (
    AcceptanceCurve,
    NodeSpec,
    Override,
    PodSpec,
    Scenario,
    product_profile,
)

log = logging.getLogger(__name__)

SPECULATIVE_CONFIG = "sovereignspec.io/speculative-config"
TARGET_MODEL = "sovereignspec.io/target-model"
DRAFT_MODEL = "sovereignspec.io/draft-model"
SPEC_METHOD = "sovereignspec.io/spec-method"
_UUID_NS = uuidlib.UUID("5b0c3f7e-5e2a-4c1d-9a51-0d6f0e7c2a11")


@dataclass(frozen=True)
class SpecConfig:
    """The part of vLLM's --speculative-config the simulator acts on."""

    method: str
    draft: str
    k: int
    schedule: tuple[tuple[int, int, int], ...] = ()

    def k_at(self, batch: float) -> int:
        b = max(1, round(batch))
        for start, end, k in self.schedule:
            if start <= b <= end:
                return k
        return self.k


def parse_spec_config(annotations: dict[str, str]) -> SpecConfig | None:
    """None when speculation is off (absent/empty annotation) or the JSON is unusable (logged)."""
    raw = annotations.get(SPECULATIVE_CONFIG, "")
    if not raw.strip():
        return None
    try:
        cfg = json.loads(raw)
        k = int(cfg["num_speculative_tokens"])
        method = str(cfg.get("method") or annotations.get(SPEC_METHOD) or "draft_model")
        draft = str(cfg.get("model") or annotations.get(DRAFT_MODEL) or method)
        sched = tuple(
            (int(s), int(e), int(kk)) for s, e, kk in cfg.get("num_speculative_tokens_per_batch_size") or ()
        )
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring malformed %s: %s", SPECULATIVE_CONFIG, exc)
        return None
    if k < 1 or k > 32 or any(kk < 0 or kk > k for _, _, kk in sched):
        log.warning("ignoring %s with k=%s", SPECULATIVE_CONFIG, k)
        return None
    return SpecConfig(method=method, draft=draft, k=k, schedule=sched)


@dataclass
class Device:
    """One allocatable GPU (or MIG instance) as the device plugin sees it."""

    node: str
    index: int
    uuid: str
    product: str
    memory_mib: float
    base_load: float
    base_memory_mib: float
    noise: float | None
    replicas: int
    hostname_label: str
    mig_profile: str | None = None
    gi_id: str | None = None
    pods: list[tuple[str, str]] = field(default_factory=list)
    tensor_active: float = 0.0
    busy: bool = False

    def labels(self) -> dict[str, str]:
        out = {
            "gpu": str(self.index),
            "UUID": self.uuid,
            "device": f"nvidia{self.index}",
            "modelName": self.product.replace("-", " "),
            self.hostname_label: self.node,
        }
        if self.gi_id is not None and self.mig_profile is not None:
            out["GPU_I_ID"] = self.gi_id
            out["GPU_I_PROFILE"] = self.mig_profile
        return out


def gpu_uuid(node: str, index: int) -> str:
    return "GPU-" + str(uuidlib.uuid5(_UUID_NS, f"{node}/{index}"))


def devices_for(node: NodeSpec, scenario: Scenario) -> list[Device]:
    prof = product_profile(scenario, node.product)
    out: list[Device] = []
    for i in range(node.gpus):
        common = dict(
            node=node.name,
            index=i,
            uuid=gpu_uuid(node.name, i),
            product=node.product,
            base_load=node.base_load,
            noise=node.noise,
            replicas=node.time_slicing_replicas,
            hostname_label=node.hostname_label,
        )
        if node.mig is None:
            out.append(Device(memory_mib=prof.memory_mib, base_memory_mib=node.base_memory_mib, **common))  # type: ignore[arg-type]
        else:
            for j in range(node.mig.instances_per_gpu):
                out.append(
                    Device(
                        memory_mib=node.mig.memory_mib,
                        base_memory_mib=0.0,
                        mig_profile=node.mig.profile,
                        gi_id=str(j + 1),
                        **common,  # type: ignore[arg-type]
                    )
                )
    return out


@dataclass
class Engine:
    """One serving pod's vLLM engine and its monotone counters."""

    spec: PodSpec
    devices: list[Device] = field(default_factory=list)
    batch: float = 0.0
    waiting: float = 0.0
    tpot: float = 0.0
    step: float = 0.0
    share: float = 0.0
    generation_tokens: float = 0.0
    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: list[float] = field(default_factory=list)
    hist: np.ndarray[Any, np.dtype[np.float64]] = field(
        default_factory=lambda: np.zeros(len(TPOT_BUCKETS) + 1)
    )
    hist_sum: float = 0.0

    @property
    def key(self) -> tuple[str, str]:
        return self.spec.key

    @property
    def model(self) -> str | None:
        return self.spec.model or self.spec.annotations.get(TARGET_MODEL)


class Simulator:
    """Thread-safe simulated cluster telemetry; `tick()` advances it, `exposition()` reads it."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.lock = threading.RLock()
        self._rng = np.random.default_rng(scenario.seed)
        self.nodes: dict[str, NodeSpec] = {}
        self.devices: list[Device] = []
        self.engines: dict[tuple[str, str], Engine] = {}
        self._waiting: set[tuple[str, str]] = set()  # engines without devices: all `_assign` looks at
        self.overrides: list[Override] = list(scenario.overrides)
        self.sim_time = 0.0
        self.set_nodes(scenario.nodes)
        for pod in scenario.pods:
            self.upsert_pod(pod)

    # ---- cluster state ------------------------------------------------------------------------

    def set_nodes(self, nodes: Iterable[NodeSpec]) -> None:
        """Replace the GPU nodes; pods on vanished or changed nodes are reassigned."""
        with self.lock:
            new = {n.name: n for n in nodes}
            changed = {
                name for name in new.keys() | self.nodes.keys() if new.get(name) != self.nodes.get(name)
            }
            if not changed:
                return
            kept = [d for d in self.devices if d.node not in changed]
            added = [
                d for name in sorted(changed) if name in new for d in devices_for(new[name], self.scenario)
            ]
            self.nodes = new
            self.devices = sorted(kept + added, key=lambda d: (d.node, d.index, int(d.gi_id or 0)))
            for e in self.engines.values():
                if e.spec.node in changed:
                    self._release(e)
            for d in self.devices:
                d.pods = [p for p in d.pods if p in self.engines and self.engines[p].devices]
            self._assign()

    def upsert_pod(self, pod: PodSpec) -> None:
        with self.lock:
            self._upsert(pod)
            self._assign()

    def remove_pod(self, key: tuple[str, str]) -> None:
        with self.lock:
            if self._remove(key):
                self._assign()  # a pod waiting for a slot gets it

    def set_pods(self, pods: Iterable[PodSpec]) -> None:
        """Replace all pods (a re-list from the API server): one allocation pass at the end, not one
        per pod (a pass per pod made a re-list of 2,000 pods quadratic, and it holds the lock that
        every scrape waits for)."""
        with self.lock:
            wanted = {p.key: p for p in pods}
            for key in sorted(self.engines.keys() - wanted.keys()):
                self._remove(key)
            for key in sorted(wanted):
                self._upsert(wanted[key])
            self._assign()

    def _upsert(self, pod: PodSpec) -> None:
        e = self.engines.get(pod.key)
        if e is None:
            self.engines[pod.key] = Engine(spec=pod)
            self._waiting.add(pod.key)
        elif e.spec != pod:
            moved = e.spec.node != pod.node or e.spec.gpus != pod.gpus
            e.spec = pod
            if moved:
                self._release(e)

    def _remove(self, key: tuple[str, str]) -> bool:
        e = self.engines.pop(key, None)
        if e is None:
            return False
        self._release(e)
        self._waiting.discard(key)
        return True

    def _release(self, e: Engine) -> None:
        for d in e.devices:
            d.pods = [p for p in d.pods if p != e.key]
        e.devices = []
        self._waiting.add(e.key)

    def _assign(self) -> None:
        """Device-plugin allocation: distinct devices on the pod's node, least shared first.

        A device offers `replicas` slots (time-slicing); a pod that doesn't fit stays unassigned
        (the scheduler would not have bound it) and exports nothing.
        """
        if not self._waiting:
            return
        by_node: dict[str, list[Device]] = {}
        for d in self.devices:
            by_node.setdefault(d.node, []).append(d)
        for key in sorted(self._waiting):
            e = self.engines[key]
            free = [d for d in by_node.get(e.spec.node, []) if len(d.pods) < d.replicas]
            if len(free) < e.spec.gpus:
                continue
            chosen = sorted(free, key=lambda d: (len(d.pods), d.index, int(d.gi_id or 0)))[: e.spec.gpus]
            for d in chosen:
                d.pods.append(key)
            e.devices = chosen
            self._waiting.discard(key)

    # ---- load model ---------------------------------------------------------------------------

    def _curve(self, cfg: SpecConfig) -> AcceptanceCurve:
        sc = self.scenario
        return (
            sc.acceptance.get(cfg.draft) or sc.method_acceptance.get(cfg.method) or AcceptanceCurve(alpha=0.6)
        )

    def tick(self, dt: float | None = None) -> None:
        """Advance simulated time by dt seconds (default: the scenario's tick)."""
        dt = self.scenario.tick_seconds if dt is None else dt
        with self.lock:
            self._tick(dt)
            self.sim_time += dt

    def _tick(self, dt: float) -> None:
        sc, rng = self.scenario, self._rng
        engines = [self.engines[k] for k in sorted(self.engines) if self.engines[k].devices]
        dev_index = {id(d): i for i, d in enumerate(self.devices)}
        n, g = len(engines), len(self.devices)
        base = np.array([d.base_load for d in self.devices], dtype=np.float64)
        if n:
            cfgs = [parse_spec_config(e.spec.annotations) for e in engines]
            ks = np.array(
                [c.k_at(e.batch) if c else 0 for c, e in zip(cfgs, engines, strict=True)], dtype=np.int64
            )
            kmax = int(ks.max(initial=0))
            p = np.zeros((n, kmax))
            for i, c in enumerate(cfgs):
                if c is not None and ks[i] > 0:
                    p[i, : ks[i]] = self._curve(c).p(int(ks[i]))
            el = expected_length(p)
            cd = np.array([sc.draft_cost.get(c.method, 0.05) if c else 0.0 for c in cfgs])
            profs = [product_profile(sc, e.devices[0].product) for e in engines]
            tp = np.array([len(e.devices) for e in engines], dtype=np.float64)
            scale = np.array([e.spec.step_scale for e in engines])
            t0 = np.array([pr.t0 for pr in profs]) * scale / tp
            per_token = np.array([pr.per_token for pr in profs]) * scale / tp
            rate = np.array(
                [
                    e.spec.request_rate if e.spec.request_rate is not None else sc.defaults.request_rate
                    for e in engines
                ]
            )
            out_tok = np.array(
                [float(e.spec.output_tokens or sc.defaults.output_tokens) for e in engines], dtype=np.float64
            )
            backlog = np.array([e.waiting >= 1.0 for e in engines])
            pair_e = np.array([i for i, e in enumerate(engines) for _ in e.devices], dtype=np.int64)
            pair_g = np.array([dev_index[id(d)] for e in engines for d in e.devices], dtype=np.int64)
            share = np.array([e.share for e in engines])
            for _ in range(4):  # engines on one GPU stretch each other: a few fixed-point sweeps
                on_gpu = base + np.bincount(pair_g, weights=share[pair_e], minlength=g)
                other = np.zeros(n)
                np.maximum.at(other, pair_e, on_gpu[pair_g] - share[pair_e])
                load = engine_load(
                    rate=rate,
                    output_tokens=out_tok,
                    k=ks.astype(np.float64),
                    expected_len=el,
                    draft_cost=cd,
                    t0=t0,
                    per_token=per_token,
                    other_load=other,
                    max_seqs=np.full(n, float(sc.defaults.max_num_seqs)),
                    backlog=backlog,
                )
                share = load.share
            on_gpu = base + np.bincount(pair_g, weights=share[pair_e], minlength=g)
            busy = np.bincount(pair_g, weights=(load.batch[pair_e] > 0).astype(np.float64), minlength=g) > 0
            self._count(engines, load, ks, p, rate, dt)
        else:
            on_gpu, busy = base, np.zeros(g, dtype=bool)
        scale = np.array([sc.noise if d.noise is None else d.noise for d in self.devices], dtype=np.float64)
        noise = rng.normal(0.0, 1.0, size=g) * scale
        tensor = np.clip(on_gpu + noise, 0.0, 1.0)
        for i, d in enumerate(self.devices):
            d.tensor_active = float(tensor[i])
            d.busy = bool(busy[i])

    def _count(self, engines: list[Engine], load: Any, ks: Any, p: Any, rate: Any, dt: float) -> None:
        rng = self._rng
        completions = rng.poisson(load.throughput * dt)
        tokens = rng.poisson(load.batch / load.tpot * dt)
        drafts = np.where(ks > 0, rng.poisson(np.where(ks > 0, load.batch / load.step * dt, 0.0)), 0)
        bounds = np.array(TPOT_BUCKETS)
        for i, e in enumerate(engines):
            e.batch, e.tpot, e.step, e.share = (
                float(load.batch[i]),
                float(load.tpot[i]),
                float(load.step[i]),
                float(load.share[i]),
            )
            e.waiting = max(0.0, e.waiting + (float(rate[i]) - float(load.throughput[i])) * dt)
            e.generation_tokens += float(tokens[i])
            c = int(completions[i])
            if c:
                obs = e.tpot * np.exp(rng.normal(0.0, REQUEST_TPOT_JITTER, size=c))
                e.hist += np.bincount(np.searchsorted(bounds, obs, side="left"), minlength=len(bounds) + 1)
                e.hist_sum += float(obs.sum())
            k = int(ks[i])
            if k <= 0:
                continue
            d = int(drafts[i])
            e.drafts += d
            e.draft_tokens += d * k
            if len(e.accepted) < k:
                e.accepted.extend([0.0] * (k - len(e.accepted)))
            reached, prev = d, 1.0
            for pos in range(k):  # position i accepted only if all before it were
                cond = float(p[i, pos]) / prev if prev > 0 else 0.0
                reached = int(rng.binomial(reached, min(1.0, cond))) if reached else 0
                prev = float(p[i, pos])
                e.accepted[pos] += reached
