"""The discrete-time simulator: per tick, every placed engine runs a fluid number of steps whose true
duration comes from the shared-GPU fixed point (`truth.solve`, in the scenario's sharing model), with
step noise, acceptance drawn per position, and everything recorded for metrics and for the lagged,
noisy telemetry the policies see.

Determinism: demand paths, step noise and acceptance drift are pre-drawn from the seed; the binomial
acceptance draws use a generator keyed by (seed, tick), so the same seed gives the same run and two
policies see the same demand and noise (common random numbers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from sovereignspec.evidence.scenario import Scenario, batch_paths
from sovereignspec.evidence.truth import (
    GPU_TYPES,
    Contention,
    StepParts,
    expected_length,
    sample_accepted,
    solve,
    step_parts,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
K_MAX = 8
STEP_NOISE = 0.05
"""Lognormal sigma of per-tick step time noise (co-scheduling jitter, sequence mix)."""
SOLVER_ITERS = 30


class Policy(Protocol):
    name: str

    def admit(self, sim: Simulation, e: int) -> int | None:
        """GPU index for arriving subject e (None: no room, try again later); may set sim.schedule[e]."""
        ...

    def choose_k(self, sim: Simulation, tick: int, batch: FloatArray) -> IntArray:
        """Draft budget per engine for this tick (background engines are forced to 0)."""
        ...


def schedule_k(schedule: list[list[int]] | None, batch: float) -> int:
    if not schedule:
        return 0
    for start, end, k in schedule:
        if start <= batch <= end:
            return int(k)
    return 0


@dataclass
class Gpu:
    node: str
    index: int
    kind: str
    jurisdiction: str


class Simulation:
    def __init__(self, sc: Scenario, seed: int) -> None:
        self.sc = sc
        self.seed = seed
        rng = np.random.default_rng([seed, 1])
        self.gpus = [Gpu(n.name, i, n.gpu, n.jurisdiction) for n in sc.nodes for i in range(n.gpus)]
        self.gpu_id = {(g.node, g.index): j for j, g in enumerate(self.gpus)}
        n_t, n_e, n_g = sc.ticks, len(sc.engines), len(self.gpus)
        self.batch_path = batch_paths(sc, rng)
        self.noise = np.exp(rng.normal(0.0, STEP_NOISE, (n_t, n_e)))
        drift = np.cumsum(rng.normal(0.0, 0.01, (n_t, n_e)), axis=0)
        self.a0_path = np.zeros((n_t, n_e))
        for e, eng in enumerate(sc.engines):
            if eng.draft is not None:
                self.a0_path[:, e] = np.clip(
                    eng.draft.a0 * np.exp(drift[:, e] - drift[:, e].mean()), 0.05, 0.99
                )
        self.decay_pow = np.zeros((n_e, K_MAX))
        for e, eng in enumerate(sc.engines):
            if eng.draft is not None:
                self.decay_pow[e] = eng.draft.decay ** np.arange(K_MAX, dtype=np.float64)
        self.arrival_tick = np.array([round(eng.arrival_s / sc.dt_s) for eng in sc.engines])
        self.subject = np.array([eng.subject for eng in sc.engines])
        self.slo = np.array([eng.slo_ms / 1000.0 for eng in sc.engines])
        self.ctx = np.array([eng.ctx for eng in sc.engines])
        self.prefill_ratio = np.array([eng.prefill_ratio for eng in sc.engines])
        self.gpu_of = np.full(n_e, -1, dtype=np.int64)
        self.down_until = np.zeros(n_e, dtype=np.int64)  # restart after a reconfiguration: no tokens
        self.pod_start = np.zeros(n_e, dtype=np.int64)  # the tick the engine's current pod started
        self.schedule: list[list[list[int]] | None] = [None] * n_e
        self.decisions: dict[int, object] = {}
        gt = [GPU_TYPES[g.kind] for g in self.gpus]
        self.g_tflops = np.array([g.tflops for g in gt])
        self.g_bw = np.array([g.bandwidth_gbs for g in gt])
        self.g_mfu = np.array([g.mfu for g in gt])
        self.g_mbu = np.array([g.mbu for g in gt])
        self.g_over = np.array([g.overhead_s for g in gt])
        self.g_replicas = np.array([n.slots for n in sc.nodes for _ in range(n.gpus)])
        # history
        self.tokens = np.zeros((n_t, n_e))
        self.tpot = np.zeros((n_t, n_e))
        self.k = np.zeros((n_t, n_e), dtype=np.int64)
        self.active = np.zeros((n_t, n_e), dtype=bool)
        self.batch = np.zeros((n_t, n_e))
        self.drafts = np.zeros((n_t, n_e), dtype=np.int64)
        self.accepted = np.zeros((n_t, n_e, K_MAX), dtype=np.int64)
        self.tensor = np.zeros((n_t, n_g))
        self.placement = np.full((n_t, n_e), -1, dtype=np.int64)
        self.started = np.zeros((n_t, n_e), dtype=np.int64)  # pod_start at each tick
        self.step_true = np.zeros((n_t, n_e))
        self.floor = np.zeros((n_t, n_e))
        self.tick = 0

    def solve(self, p: StepParts, onehot: FloatArray) -> Contention:
        return solve(p, onehot, SOLVER_ITERS, self.sc.sharing, self.sc.timeslice_s)

    # -- helpers used by policies -------------------------------------------------------------------
    def onehot(self, gpu_of: IntArray) -> FloatArray:
        oh = np.zeros((gpu_of.shape[-1], len(self.gpus)))
        placed = gpu_of >= 0
        oh[np.nonzero(placed)[0], gpu_of[placed]] = 1.0
        return oh

    def engines_on(self, g: int) -> int:
        return int(np.sum(self.gpu_of == g))

    def free_gpus(self, e: int) -> list[int]:
        allowed = self.sc.jurisdictions.get(self.sc.engines[e].tenant)
        return [
            j
            for j, g in enumerate(self.gpus)
            if (allowed is None or g.jurisdiction in allowed) and self.engines_on(j) < self.g_replicas[j]
        ]

    def parts(self, gpu_of: IntArray, batch: FloatArray, k: IntArray, a0: FloatArray) -> StepParts:
        """Uncontended step parts for engines on gpu_of (any leading shape); unplaced engines idle."""
        g = np.where(gpu_of >= 0, gpu_of, 0)
        b = np.where(gpu_of >= 0, batch, 0.0)
        cond = self.conditional(a0)
        el = expected_length(np.broadcast_to(cond, (*k.shape, K_MAX)), k)
        return step_parts(
            self.g_tflops[g], self.g_bw[g], self.g_mfu[g], self.g_mbu[g], self.g_over[g],
            b, k, self.ctx, b * el * self.prefill_ratio,
        )  # fmt: skip

    def conditional(self, a0: FloatArray) -> FloatArray:
        """True conditional acceptance rates [E, K] for the engines' drafts at drift level a0 [E]."""
        out: FloatArray = np.clip(a0[:, None] * self.decay_pow, 0.0, 0.995)
        return out

    def evaluate(
        self, gpu_of: IntArray, batch: FloatArray, k: IntArray, a0: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        """True noiseless (tokens/s, TPOT) for configurations [R, E] (gpu_of and k per row)."""
        p = self.parts(gpu_of, batch, k, a0)
        if gpu_of.ndim == 1:
            c = self.solve(p, self.onehot(gpu_of))
            t = c.t
        else:  # rows may differ in placement only in one engine; solve row by row when they do
            same = bool(np.all(gpu_of == gpu_of[0]))
            if same:
                t = self.solve(p, self.onehot(gpu_of[0])).t
            else:
                t = np.stack([
                    self.solve(StepParts(*(x[r] for x in (p.fixed, p.mem, p.comp, p.d_mem, p.d_comp))),
                               self.onehot(gpu_of[r])).t
                    for r in range(gpu_of.shape[0])
                ])  # fmt: skip
        el = expected_length(np.broadcast_to(self.conditional(a0), (*k.shape, K_MAX)), k)
        safe = np.where(t > 0, t, 1.0)
        rate = np.where(t > 0, np.where(gpu_of >= 0, batch, 0.0) * el / safe, 0.0)
        return rate, np.where(t > 0, t / el, 0.0)

    # -- the loop -----------------------------------------------------------------------------------
    def place_arrivals(self, policy: Policy, t: int) -> None:
        for e, eng in enumerate(self.sc.engines):
            if self.gpu_of[e] >= 0 or t < self.arrival_tick[e]:
                continue
            if eng.node is not None:
                if eng.subject:
                    policy.admit(self, e)  # sets the schedule; the placement is fixed by the scenario
                self.gpu_of[e] = self.gpu_id[(eng.node, eng.gpu_index)]
                self.pod_start[e] = t
                continue
            if (t - self.arrival_tick[e]) % 10:
                continue  # a workload that found no room is retried every 10 ticks
            g = policy.admit(self, e)
            if g is not None:
                self.gpu_of[e] = g
                self.pod_start[e] = t

    def step(self, policy: Policy, t: int) -> None:
        self.tick = t
        self.place_arrivals(policy, t)
        placed = (self.gpu_of >= 0) & (t >= self.down_until)
        batch = np.where(placed, self.batch_path[t], 0.0)
        k = np.where(placed & self.subject, policy.choose_k(self, t, batch), 0).astype(np.int64)
        a0 = self.a0_path[t]
        p = self.parts(self.gpu_of, batch, k, a0)
        oh = self.onehot(self.gpu_of)
        c = self.solve(p, oh)
        t_obs = c.t * self.noise[t]
        safe = np.where(t_obs > 0, t_obs, 1.0)
        steps = np.where(placed, self.sc.dt_s / safe, 0.0)
        drafts = np.where(k > 0, np.round(batch * steps), 0).astype(np.int64)
        rng = np.random.default_rng([self.seed, 2, t])
        acc = sample_accepted(rng, drafts, self.conditional(a0), k)
        length = 1.0 + np.where(drafts > 0, acc.sum(axis=1) / np.maximum(drafts, 1), 0.0)
        self.tokens[t] = batch * steps * length
        self.tpot[t] = np.where(placed, t_obs / length, 0.0)
        self.k[t] = k
        self.active[t] = placed
        self.batch[t] = batch
        self.drafts[t] = drafts
        self.accepted[t] = acc
        self.tensor[t] = c.gpu_sum(oh)
        self.placement[t] = self.gpu_of
        self.started[t] = self.pod_start
        self.step_true[t] = c.t
        self.floor[t] = np.where(placed, p.fixed + p.mem, 0.0)

    def run(self, policy: Policy) -> Simulation:
        for t in range(self.sc.ticks):
            self.step(policy, t)
        return self


def simulate(sc: Scenario, policy: Policy, seed: int) -> Simulation:
    return Simulation(sc, seed).run(policy)
