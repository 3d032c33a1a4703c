"""Whether speculation may run at all (I6: only missing telemetry switches it off unasked), and what it
predicts on each candidate node: S_real, slack and k* from the evaluation (`budget`), or why it is off
on that node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

import numpy as np
import numpy.typing as npt

from sovereignspec.api.meta import ANNOTATION_SPECULATIVE_CONFIG, LABEL_SPECULATIVE
from sovereignspec.api.speculation_decision import Reason
from sovereignspec.api.speculation_policy import DEFAULT_PRIORS, SpeculationPolicySpec
from sovereignspec.model.acceptance import AcceptanceEstimate, pool_samples
from sovereignspec.model.telemetry import AcceptanceSample, TelemetrySnapshot
from sovereignspec.policy.budget import (
    Budget,
    Evaluation,
    budget_on,
    evaluate_groups,
    pinned_budget,
    range_index,
)
from sovereignspec.policy.cache.facts import Facts
from sovereignspec.policy.cache.rows import GpuRows, gpu_rows
from sovereignspec.policy.cache.spec import SpecRows, evaluation_rows, neighbour_table_of, spec_rows
from sovereignspec.policy.candidates import Candidates
from sovereignspec.policy.claims import Claims
from sovereignspec.policy.node_state import NO_GPU_INFO, GpuInfo, Neighbours, NodeInput
from sovereignspec.policy.pin import Pins
from sovereignspec.policy.record import ReasonType

IntArray = npt.NDArray[np.int64]


def telemetry_state(tel: TelemetrySnapshot | None, now: datetime, staleness_s: float) -> ReasonType | None:
    """None when fresh, else why not: TelemetryMissing or TelemetryStale."""
    if tel is None or tel.time is None:
        return ReasonType.TELEMETRY_MISSING
    age = (now - tel.time).total_seconds()
    if age > staleness_s or age < -staleness_s:
        return ReasonType.TELEMETRY_STALE
    return None


@dataclass(frozen=True)
class Gate:
    """Speculation for the workload as a whole: off (and why) or allowed, with its acceptance estimate."""

    off: Reason | None
    telemetry: ReasonType | None
    """Why telemetry cannot be read (None: fresh)."""
    estimate: AcceptanceEstimate | None


def speculation_gate(facts: Facts, claims: Claims, pins: Pins, now: datetime) -> Gate:
    """The workload-wide reasons to run plain, in order of precedence."""
    wl, policy, tel = facts.wl, facts.policy, facts.snap.telemetry
    gpu_sets = [ps for ps in wl.pod_sets if ps.gpus_per_pod > 0]
    tstate = telemetry_state(tel, now, policy.telemetry.staleness_seconds)
    pin = pins.largest
    prior = policy.priors.get(claims.method or "") or DEFAULT_PRIORS.get(claims.method or "")
    estimate: AcceptanceEstimate | None = None
    if prior is not None and claims.method is not None:
        sample = acceptance_sample(tel if tstate is None else None, claims)
        estimate = facts.estimate(prior, sample, policy.k_max, policy.alpha_quantile)
    pair = f"target={claims.target_model} draft={claims.draft_model or claims.method}"
    why: tuple[ReasonType, str] | None
    if not gpu_sets:
        why = ReasonType.NO_GPU_REQUEST, "no pod set requests nvidia.com/gpu"
    elif pin is not None:
        why = (
            ReasonType.TEMPLATE_PINS_SPECULATION,
            (
                f"pod set(s) {', '.join(sorted(pins.by_set))} set {LABEL_SPECULATIVE} or "
                f"{ANNOTATION_SPECULATIVE_CONFIG} in the template; the template's choice stands "
                f"({pin.describe()})"
            ),
        )
    elif claims.malformed:
        return Gate(claims.malformed[0], tstate, estimate)
    elif claims.method is None:
        why = ReasonType.NOT_REQUESTED, "no spec-method or draft-model annotation"
    elif prior is None or estimate is None:
        why = ReasonType.NO_PRIOR, f"no acceptance prior for method {claims.method}"
    elif policy.allowed_pairs and not any(
        p.target_model == claims.target_model and p.draft_model == (claims.draft_model or claims.method)
        for p in policy.allowed_pairs
    ):
        why = ReasonType.PAIR_NOT_ALLOWED, f"pair {pair} is not in the policy's allowedPairs"
    elif tstate is not None:
        why = tstate, "telemetry is missing or stale: speculation off, placement unchanged"
    elif claims.workload_class == "batch" and policy.batch_class == "Plain":
        why = ReasonType.BATCH_CLASS, "batchClass Plain: batch workloads run plain and pack onto loaded nodes"
    elif estimate.alpha < policy.weak_acceptance:
        why = (
            ReasonType.WEAK_DRAFT,
            (
                f"decision acceptance alpha={estimate.alpha:.2f} is below {policy.weak_acceptance} "
                f"(source {estimate.source})"
            ),
        )
    else:
        why = None
    off = None if why is None else Reason(type=why[0], message=why[1])
    return Gate(off, tstate, estimate)


def acceptance_sample(tel: TelemetrySnapshot | None, claims: Claims) -> AcceptanceSample | None:
    """The acceptance counters of the workload's (method, target, draft), pooled over the engines that
    report them (`pool_samples`: their common positions)."""
    if tel is None or claims.method is None:
        return None
    found = [
        a
        for a in tel.acceptance
        if a.method == claims.method
        and a.target_model == (claims.target_model or a.target_model)
        and a.draft_model == (claims.draft_model or a.draft_model)
    ]
    return pool_samples(found) if found else None


@dataclass(frozen=True, eq=False)
class Options:
    """What speculation gives on each candidate c (indexes of `Candidates.nodes`)."""

    cands: Candidates
    gpu: GpuRows | None
    """The rows' GPU state (None: telemetry missing or stale)."""
    spec: SpecRows | None = None
    evaluation: Evaluation | None = None
    """Per evaluated candidate (row `at[c]`)."""
    at: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Candidate -> its row in `evaluation` (-1: not evaluated), by its canonical candidate."""
    judged: dict[int, Neighbours] = field(default_factory=dict)
    """Evaluation row -> the neighbours judged there where they are not the node's own (`NodeInput`):
    without the workload's own old pods, or on other GPUs than a new pod gets (`_judged_apart`)."""

    def gpu_info(self, c: int) -> GpuInfo:
        """Candidate c's GPU state (its free GPUs, load u, free framebuffer)."""
        return self.gpu.infos[int(self.cands.at[c])] if self.gpu is not None else NO_GPU_INFO

    def evaluated(self, c: int) -> bool:
        return self.evaluation is not None and int(self.at[c]) >= 0

    def outcome(self, c: int) -> tuple[float, float | None, int]:
        """(S_real, slack, largest k*) at the expected batch; (1, None, 0) where not evaluated."""
        i = int(self.at[c])
        if self.evaluation is not None and i >= 0:
            ev = self.evaluation
            return float(ev.speedup_expected[i]), float(ev.slack_expected[i]), int(ev.k_star[i].max())
        return 1.0, None, 0

    def node_off(self, c: int) -> Reason | None:
        """Why speculation is off on candidate c although it is requested (None: evaluated, or off
        for everyone)."""
        got = self.spec.got[int(self.cands.at[self.cands.canon[c]])] if self.spec is not None else None
        return got if isinstance(got, Reason) else None

    def neighbours(self, c: int) -> Neighbours:
        """The neighbours candidate c was evaluated with."""
        i = int(self.at[c])
        if i in self.judged:
            return self.judged[i]
        got = self.spec.got[int(self.cands.at[self.cands.canon[c]])] if self.spec is not None else None
        assert isinstance(got, NodeInput)
        return got.neighbours


def evaluate_candidates(
    facts: Facts, cands: Candidates, claims: Claims, gate: Gate, ranges: list[tuple[int, int]]
) -> Options:
    """S_real, slack and k* on every candidate where speculation can run (none when the gate is shut)."""
    n_cand = len(cands.nodes)
    gpu = gpu_rows(facts, cands.rows) if gate.telemetry is None else None
    if gate.off is not None or gate.estimate is None or gpu is None or claims.method is None:
        return Options(cands, gpu, at=np.full(n_cand, -1, dtype=np.int64)[cands.canon])
    spec = spec_rows(facts, cands.rows, gpu, claims.method, claims.target_model)
    full_at = spec.evaluated[cands.at]
    ev_c = np.flatnonzero(full_at >= 0)
    at = np.full(n_cand, -1, dtype=np.int64)
    if not ev_c.size:
        return Options(cands, gpu, spec, at=at[cands.canon])
    el = gate.estimate.expected_lengths
    t, full = evaluation_rows(
        facts, cands.rows, spec, el, ranges, claims.expected_batch, claims.method, claims.target_model
    )
    evaluation = full.take(full_at[ev_c])
    at[ev_c] = np.arange(ev_c.size)
    e_range = range_index(ranges, claims.expected_batch)

    def judge_again(rows: dict[int, Neighbours], arriving: bool) -> None:
        """Evaluate these rows again against the neighbours given for each."""
        redo = np.asarray(sorted(rows), dtype=np.int64)
        table = neighbour_table_of(facts, [rows[int(e)] for e in redo])
        gid = spec.gid[cands.at[ev_c[redo]]]
        evaluation.put(redo, evaluate_groups(t, gid, table, e_range, arriving=arriving))

    # Our own old pods (a re-decision) are no neighbours, and their load is in the neighbours' TPOT
    # already; elsewhere this request's pod may run beside other engines than a new one-GPU pod would.
    own = _without_own_pods(facts, cands, spec, gpu, at)
    if own:
        judge_again(own, arriving=False)
    apart = _judged_apart(facts, cands, spec, gpu, at, own)
    if apart:
        judge_again(apart, arriving=True)
    return Options(cands, gpu, spec, evaluation, at[cands.canon], {**own, **apart})


def _candidate_of_row(cands: Candidates) -> IntArray:
    """Static-filter row -> its candidate (-1: not a candidate)."""
    cand_of = np.full(len(cands.rows.nodes), -1, dtype=np.int64)
    cand_of[cands.at] = np.arange(len(cands.nodes))
    return cand_of


def _without_own_pods(
    facts: Facts, cands: Candidates, spec: SpecRows, gpu: GpuRows, at: IntArray
) -> dict[int, Neighbours]:
    """Evaluation row -> the candidate's neighbours without the workload's own old pods, where it has
    some there."""
    mine = spec.own.get(facts.wl.namespace)
    own: dict[int, Neighbours] = {}
    if not mine:
        return own
    cand_of = _candidate_of_row(cands)
    for r in mine:
        c = int(cand_of[r])
        memoised = spec.got[r]
        if c < 0 or at[c] < 0 or not isinstance(memoised, NodeInput):
            continue
        every = facts.neighbours(cands.nodes[c], gpu.infos[r][0], own=False)
        nbs = every.without_workload(facts.wl.namespace, facts.wl.name)
        if nbs is not every:  # its own pods are there (another workload of its namespace is not)
            own[int(at[c])] = nbs
    return own


def _judged_apart(
    facts: Facts,
    cands: Candidates,
    spec: SpecRows,
    gpu: GpuRows,
    at: IntArray,
    own: dict[int, Neighbours],
) -> dict[int, Neighbours]:
    """Evaluation row -> the neighbours this request judges there where a node's own (those of the GPUs
    the device plugin hands a new one-GPU pod, `node_state.handed_out`) are not its: on a re-decision
    the GPUs its pods hold (`Facts.holding`), and every free GPU where the plugin's choice is not known:
    the workload asks for several GPUs, or a workload admitted on the node has not started there (its
    pod may take the GPU first). Rows of the own-pods re-decision (`own`) keep theirs."""
    reserved = facts.idx.reservations_by_node
    if facts.holding or facts.several_gpus:
        cs = np.flatnonzero(at >= 0)
    else:
        rows = [r for n in reserved if (r := cands.rows.at.get(n)) is not None]
        if not rows:
            return {}
        cs = np.asarray([c for c in _candidate_of_row(cands)[rows] if c >= 0 and at[c] >= 0], dtype=np.int64)
    judged: Literal["free", "held"] = "held" if facts.holding else "free"
    out: dict[int, Neighbours] = {}
    for c in cs.tolist():
        i, r = int(at[c]), int(cands.at[c])
        memoised = spec.got[r]
        if i in own or not isinstance(memoised, NodeInput):
            continue
        nbs = facts.neighbours(cands.nodes[c], gpu.infos[r][0], judged=judged)
        if nbs is not memoised.neighbours:
            out[i] = nbs
    return out


def placed_budget(
    options: Options,
    placed: list[int],
    chosen: str,
    gate: Gate,
    ranges: Sequence[tuple[int, int]],
    claims: Claims,
    pins: Pins,
    policy: SpeculationPolicySpec,
) -> Budget:
    """k*(B) on the placed candidates (`budget_on`: the per-range minimum of k* over them) when every one
    was evaluated, else off with why (the gate's reason, a placed node's, or not evaluated); or what
    the template pins, with that reason. `chosen` names the node in the no-gain reason."""
    ev, off = options.evaluation, gate.off
    k_star = k_self = None
    if ev is not None and all(options.at[c] >= 0 for c in placed):
        rows = options.at[placed]
        k_star, k_self = ev.k_star[rows], ev.k_star_self[rows]
    elif off is None:
        bad = next((no for c in placed if (no := options.node_off(c)) is not None), None)
        off = bad or Reason(type=ReasonType.NO_GAIN, message="speculation not evaluated")
    no_gain = f"no draft budget reaches S_real ≥ {1 + policy.min_gain:.2f} on {chosen}"
    budget = budget_on(k_star, k_self, off, ranges, claims.method, claims.draft_model, no_gain)
    if pins.largest is not None:
        return pinned_budget(pins.largest, policy.max_batch, budget.off)
    return budget
