"""The policies compared: off, always-on (EAGLE-3, k=5), a hand-written static batch-size schedule,
an in-engine goodput policy blind to neighbours (in the spirit of SmartSpec), the oracle, and the
replay used for counterfactuals. SovereignSpec itself lives in `sovereign.py` (it calls decide()).

Baselines place like kube-scheduler's default LeastAllocated scoring: the sovereign node with the
largest free fraction of GPU slots, then the name; on a node, the GPU with the fewest engines.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from sovereignspec.evidence.sim import K_MAX, STEP_NOISE, FloatArray, IntArray, Simulation, schedule_k
from sovereignspec.evidence.truth import expected_length, step_parts, step_time

STATIC_SCHEDULE = [[1, 4, 5], [5, 16, 3], [17, 32, 2], [33, 1024, 0]]
"""What a user following vLLM's docs writes by hand: long drafts for small batches, off above 32."""
SEED000_RECIPE = [[1, 8, 5], [9, 1024, 0]]
"""The seed-000 recipe: EAGLE-3, k=5, off above batch 8."""


def spread_place(sim: Simulation, e: int, pin_node: str | None = None) -> int | None:
    free = sim.free_gpus(e)
    if pin_node is not None:
        free = [g for g in free if sim.gpus[g].node == pin_node]
    if not free:
        return None

    def node_free_fraction(node: str) -> float:
        ids = [j for j, g in enumerate(sim.gpus) if g.node == node]
        slots = sum(int(sim.g_replicas[j]) for j in ids)
        used = sum(sim.engines_on(j) for j in ids)
        return (slots - used) / slots

    nodes = sorted({sim.gpus[g].node for g in free}, key=lambda n: (-node_free_fraction(n), n))
    on_node = [g for g in free if sim.gpus[g].node == nodes[0]]
    return min(on_node, key=lambda g: (sim.engines_on(g), sim.gpus[g].index))


def gpu_on_node(sim: Simulation, e: int, node: str) -> int | None:
    """A GPU with a free slot on `node` (fewest engines, then index): what the device plugin hands out."""
    return spread_place(sim, e, pin_node=node)


class Scheduled:
    """Spread placement, a fixed per-batch-size schedule for every subject."""

    def __init__(self, name: str, schedule: list[list[int]] | None) -> None:
        self.name = name
        self.fixed = schedule

    def admit(self, sim: Simulation, e: int) -> int | None:
        sim.schedule[e] = self.fixed
        return spread_place(sim, e)

    def choose_k(self, sim: Simulation, tick: int, batch: FloatArray) -> IntArray:
        return np.array([schedule_k(sim.schedule[e], b) for e, b in enumerate(batch)], dtype=np.int64)


def off() -> Scheduled:
    return Scheduled("off", None)


class AlwaysOn(Scheduled):
    """Every subject speculates at its configured k (EngineSpec.k, 5 unless the pool says otherwise)."""

    def __init__(self) -> None:
        super().__init__("always-on", None)

    def admit(self, sim: Simulation, e: int) -> int | None:
        g = super().admit(sim, e)
        sim.schedule[e] = [[1, 1024, sim.sc.engines[e].k]]
        return g


def always_on() -> Scheduled:
    return AlwaysOn()


def fixed_k(k: int) -> Scheduled:
    return Scheduled(f"fixed-k{k}", [[1, 1024, k]] if k > 0 else None)


def seed000_recipe() -> Scheduled:
    return Scheduled("seed000-recipe", SEED000_RECIPE)


def static_schedule() -> Scheduled:
    return Scheduled("static-schedule", STATIC_SCHEDULE)


class Replay(Scheduled):
    """Counterfactual: the placements of a finished run, with speculation off everywhere."""

    def __init__(self, placed: IntArray) -> None:
        super().__init__("replay-plain", None)
        self.placed = placed

    def admit(self, sim: Simulation, e: int) -> int | None:
        g = int(self.placed[e])
        return g if g >= 0 else None


class InEngineGoodput(Scheduled):
    """Each engine maximises its own goodput B·E[L(k)]/t(B, k) every tick, from its own acceptance
    estimate (an EMA of its i.i.d. acceptance, prior 0.8) and its own step-time profile measured alone
    on an idle GPU. It never looks at the GPU's other tenants."""

    def __init__(self) -> None:
        super().__init__("in-engine-goodput", None)
        self.alpha: dict[int, float] = {}

    def choose_k(self, sim: Simulation, tick: int, batch: FloatArray) -> IntArray:
        if tick > 0:  # learn from the last tick's own counters
            for e in np.nonzero(sim.drafts[tick - 1] > 0)[0]:
                acc = sim.accepted[tick - 1, e]
                trials = np.concatenate([[sim.drafts[tick - 1, e]], acc[:-1]])
                kk = int(sim.k[tick - 1, e])
                s, n = float(acc[:kk].sum()), float(trials[:kk].sum())
                if n > 0:
                    self.alpha[int(e)] = 0.9 * self.alpha.get(int(e), 0.8) + 0.1 * s / n
        out = np.zeros(len(batch), dtype=np.int64)
        subj = np.nonzero((sim.gpu_of >= 0) & sim.subject)[0]
        if subj.size == 0:
            return out
        ks = np.arange(K_MAX + 1)
        g = sim.gpu_of[subj]
        b = batch[subj][:, None]
        alpha = np.array([self.alpha.get(int(e), 0.8) for e in subj])[:, None]
        el = (1.0 - alpha ** (ks + 1)) / (1.0 - alpha)
        p = step_parts(
            sim.g_tflops[g][:, None], sim.g_bw[g][:, None], sim.g_mfu[g][:, None], sim.g_mbu[g][:, None],
            sim.g_over[g][:, None], b, ks[None, :], sim.ctx[subj][:, None],
            b * el * sim.prefill_ratio[subj][:, None],
        )  # fmt: skip
        rate = b * el / step_time(p, 0.0, 0.0)
        out[subj] = np.argmax(rate, axis=1)
        return out


def _expected_slo_goodput(rate: FloatArray, tpot: FloatArray, slo: FloatArray) -> FloatArray:
    """Tokens/s expected to meet the SLO under lognormal step noise: rate·Φ(ln(slo/tpot)/sigma)."""
    from math import erf, sqrt

    z = np.log(np.maximum(slo, 1e-9) / np.maximum(tpot, 1e-9)) / STEP_NOISE
    phi = 0.5 * (1.0 + np.vectorize(lambda x: erf(x / sqrt(2.0)))(z))
    out: FloatArray = np.where(tpot > 0, rate * phi, 0.0)
    return out


class Oracle:
    """Knows the true acceptance and the true shared-GPU step times. Places each subject where the
    cluster's expected SLO-goodput is highest, and every tick gives each subject the k that maximises
    the expected SLO-goodput of its GPU (neighbours included), the others' k held fixed."""

    name = "oracle"

    def __init__(self, rounds: int = 1) -> None:
        self.last: IntArray | None = None
        self.rounds = rounds  # best-response passes per tick (coordinate ascent over the subjects' k)

    def admit(self, sim: Simulation, e: int) -> int | None:
        free = sim.free_gpus(e)
        if not free:
            return None
        t = sim.tick
        batch = np.where(sim.gpu_of >= 0, sim.batch_path[t], 0.0)
        batch[e] = sim.batch_path[t, e]
        base_k = self.last if self.last is not None else np.zeros(len(batch), dtype=np.int64)
        rows_g, rows_k = [], []
        for g in free:
            for kk in range(K_MAX + 1):
                go = sim.gpu_of.copy()
                go[e] = g
                kr = base_k.copy()
                kr[e] = kk
                rows_g.append(go)
                rows_k.append(kr)
        gof, kof = np.stack(rows_g), np.stack(rows_k)
        rate, tpot = sim.evaluate(gof, batch, kof, sim.a0_path[t])
        score = _expected_slo_goodput(rate, tpot, sim.slo).sum(axis=1)
        best = int(np.argmax(score.reshape(len(free), K_MAX + 1).max(axis=1)))
        return free[best]

    def choose_k(self, sim: Simulation, tick: int, batch: FloatArray) -> IntArray:
        n = len(batch)
        base = self.last if self.last is not None else np.zeros(n, dtype=np.int64)
        base = np.where((sim.gpu_of >= 0) & sim.subject, base, 0)
        subj = np.nonzero((sim.gpu_of >= 0) & sim.subject)[0]
        if subj.size == 0:
            self.last = base
            return base
        ks = np.arange(K_MAX + 1)
        rows = np.repeat(base[None, :], subj.size * ks.size, axis=0)
        rows[np.arange(rows.shape[0]), np.repeat(subj, ks.size)] = np.tile(ks, subj.size)
        rate, tpot = sim.evaluate(sim.gpu_of, batch, rows, sim.a0_path[tick])
        good = _expected_slo_goodput(rate, tpot, sim.slo)
        oh = sim.onehot(sim.gpu_of)
        per_gpu = good @ oh  # [R, G]
        g_of = sim.gpu_of[subj]
        score = per_gpu[np.arange(rows.shape[0]), np.repeat(g_of, ks.size)].reshape(subj.size, ks.size)
        out = base.copy()
        out[subj] = np.argmax(score, axis=1)  # ties → smaller k
        for _ in range(self.rounds - 1):  # again, from this tick's answer (a fixed point in a few rounds)
            rows = np.repeat(out[None, :], subj.size * ks.size, axis=0)
            rows[np.arange(rows.shape[0]), np.repeat(subj, ks.size)] = np.tile(ks, subj.size)
            rate, tpot = sim.evaluate(sim.gpu_of, batch, rows, sim.a0_path[tick])
            per_gpu = _expected_slo_goodput(rate, tpot, sim.slo) @ oh
            score = per_gpu[np.arange(rows.shape[0]), np.repeat(g_of, ks.size)].reshape(subj.size, ks.size)
            nxt = out.copy()
            nxt[subj] = np.argmax(score, axis=1)
            if np.array_equal(nxt, out):
                break
            out = nxt
        self.last = out
        return out


class Placed(Scheduled):
    """Diagnostic: a given placement (GPU per engine, from another run) with a fixed schedule."""

    def __init__(self, placed: IntArray, schedule: list[list[int]] | None, name: str) -> None:
        super().__init__(name, schedule)
        self.placed = placed

    def admit(self, sim: Simulation, e: int) -> int | None:
        sim.schedule[e] = self.fixed
        g = int(self.placed[e])
        return g if g >= 0 else None


class PlacedOracle(Oracle):
    """Diagnostic: a given placement with the oracle's per-tick budget (placement vs budget split)."""

    def __init__(self, placed: IntArray, rounds: int = 1) -> None:
        super().__init__(rounds)
        self.placed = placed

    def admit(self, sim: Simulation, e: int) -> int | None:
        g = int(self.placed[e])
        return g if g >= 0 else None


class DesignRuleTruth(Oracle):
    """Diagnostic: DESIGN.md's placement rule fed the *true* S_real (perfect estimates) — an interactive
    subject with a healthy draft goes to the node with the highest true relative speed-up at its expected
    batch (on the GPU the device plugin hands out; ties: name), a batch one or a weak draft to the most
    loaded node — and the oracle's per-tick budget. What the rule itself costs, estimation aside.
    With `absolute`, the same for placement Throughput: the highest true decode rate instead."""

    absolute = False

    def admit(self, sim: Simulation, e: int) -> int | None:
        eng = sim.sc.engines[e]
        t = sim.tick
        best: tuple[tuple[float, str], int] | None = None
        for node in sorted({sim.gpus[g].node for g in sim.free_gpus(e)}):
            g = gpu_on_node(sim, e, node)
            if g is None:
                continue
            if eng.workload_class == "batch" or eng.draft is None or eng.draft.a0 < 0.6:
                on_node = [j for j, x in enumerate(sim.gpus) if x.node == node]
                key = (float(sim.tensor[max(0, t - 1), on_node].max()), node)
            else:
                batch = np.where(sim.gpu_of >= 0, sim.batch_path[t], 0.0)
                batch[e] = float(eng.expected_batch or 8)
                go = sim.gpu_of.copy()
                go[e] = g
                rows = np.zeros((K_MAX + 1, len(batch)), dtype=np.int64)
                rows[:, e] = np.arange(K_MAX + 1)
                a0 = np.full(len(batch), eng.draft.a0)
                rate, _ = sim.evaluate(np.repeat(go[None, :], K_MAX + 1, axis=0), batch, rows, a0)
                best_k = rate[:, e] if self.absolute else rate[:, e] / rate[0, e]
                key = (float(best_k.max()), node)
            if best is None or key > best[0]:
                best = (key, g)
        return None if best is None else best[1]


class ThroughputRuleTruth(DesignRuleTruth):
    """Diagnostic: placement Throughput fed the true decode rate (perfect estimates), oracle's budget."""

    absolute = True


def expected_len(sim: Simulation, e: int, k: int, tick: int) -> float:
    return float(expected_length(sim.conditional(sim.a0_path[tick])[e], np.array(k)))


ArrayLike = npt.ArrayLike
