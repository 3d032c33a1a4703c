"""Placement: which candidate gets the workload, and the additive pod-set updates that pin it there.

- Interactive with speculation allowed: highest S_real at the expected batch, then more slack, then
  node name. With `keepCapacity` (the default), for a small workload (expected batch at most the
  policy's defaultExpectedBatch) the nodes whose S_real is within minGain of the best (when the best
  reaches 1 + minGain) come first: among them, the nodes where the pod does not take an empty GPU that
  could host several engines, slowest hardware first (largest unloaded plain step at the expected
  batch), then the band's other nodes by S_real. A gain the self-benefit threshold calls insignificant
  does not spend the whole GPU or the fast card a later, larger workload needs; a larger workload would
  lose its own absolute rate on slow hardware and is placed by S_real (docs/decision.md, issue 16b).
  Placement `Throughput` (opt-in, `spec.placement`) ranks by S_real(k*, B) / t_u(B) instead, the
  predicted decode tokens/s per sequence (S = 1 where speculation is off on the node; 0 when the node's
  profile or load is unknown).
- `spareWholeGpus` (RelativeSpeedup; the default since session 15): a workload above
  defaultExpectedBatch ranks the nodes where its pod would take an empty GPU after the others when one
  of those predicts at least their decode rate S_real / t_u(B) (an idle slow card's higher relative
  speed-up does not justify a whole GPU that a loaded fast one beats in tokens/s), and within each part
  by that predicted rate, not by S_real (since session 19: a large workload's tokens/s on a fast card
  beat a slow card's higher relative speed-up; docs/decision.md, "Large workloads by predicted rate");
  in a small workload's band the nodes predicting at least the S_real-best node's rate join it, and
  the hardware key is the share of hardware the slot holds, the unloaded plain step times the engines
  per GPU (a whole H100 costs more than a third of an H200) (docs/decision.md, issue 16 part 3).
- Batch class under `batchClass: Model` (the default): a node where the pod gets an empty GPU, fastest
  hardware first (highest unloaded plain rate at the expected batch); where no candidate has one, the
  highest predicted plain rate B / t_u(B) on the GPU the pod gets (since session 21; before, the most
  loaded node).
- Plain (speculation off for the workload, or batch under `batchClass: Plain`): the most
  loaded node that fits (background tensor load u when known, else the allocated GPU fraction), then name.
- Keys are compared rounded to 1e-9 so that float noise never breaks a tie the name should break.
- Updates are additive (I4): a key the template (or the flavor) already sets to another value is
  dropped with a TemplateConflict reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sovereignspec.api.meta import (
    ANNOTATION_DECISION,
    ANNOTATION_SPECULATIVE_CONFIG,
    LABEL_HOSTNAME,
    LABEL_SPECULATIVE,
)
from sovereignspec.api.speculation_decision import PodSetUpdate, Reason
from sovereignspec.model.cluster import NodeInfo
from sovereignspec.model.speedup import slack_scalar
from sovereignspec.model.steptime import compute_part, stretched
from sovereignspec.model.workload import WorkloadInfo
from sovereignspec.policy.budget import Budget, FloatArray, IntArray
from sovereignspec.policy.cache.facts import Facts
from sovereignspec.policy.claims import Claims, shown
from sovereignspec.policy.node_state import GpuInfo, plain_inputs, replicas
from sovereignspec.policy.pin import Pins
from sovereignspec.policy.record import ReasonType
from sovereignspec.policy.sovereignty import TenantRules
from sovereignspec.policy.speculation import Options


@dataclass(frozen=True)
class Placement:
    order: list[int]
    """Candidates, best first."""
    placed: list[int]
    """The candidates the pods go to: the best one, or every candidate under TAS."""
    rate: FloatArray | None
    """Placement Throughput's key per candidate (None: the other placement)."""

    @property
    def chosen(self) -> int:
        return self.order[0]

    def rate_of(self, options: Options, c: int) -> float | None:
        r = None if self.rate is None else float(self.rate[options.cands.canon[c]])
        return r if r is not None and r > 0 else None


def choose(facts: Facts, options: Options, speculating: bool, claims: Claims, tas: bool) -> Placement:
    """Rank the candidates (see the module docstring); `speculating`: the workload may speculate."""
    cands = options.cands
    n_cand = len(cands.nodes)
    rate: FloatArray | None = None
    name_rank = cands.rows.rank[cands.at]
    if claims.workload_class == "batch" and facts.policy.batch_class == "Model":
        key1, key2 = _batch_keys(facts, options, claims, _plain_keys(options))
        order = np.lexsort((name_rank, -np.round(key2, 9), -key1)).tolist()
        return Placement(order, order if tas else [order[0]], None)
    spared = np.zeros(n_cand)
    if speculating:
        key1, key2 = np.ones(n_cand), np.full(n_cand, -1.0)
        hit = options.at >= 0
        ev = options.evaluation
        if ev is not None:
            key1[hit] = ev.speedup_expected[options.at[hit]]
            key2[hit] = ev.slack_expected[options.at[hit]]
        small = claims.expected_batch <= facts.policy.default_expected_batch
        if facts.policy.placement == "Throughput":
            key1 = rate = _predicted_rates(facts, options, claims)
        elif facts.policy.keep_capacity and small:
            order = _keep_capacity(facts, options, claims, key1, key2, name_rank)
            return Placement(order, order if tas else [order[0]], rate)
        elif facts.policy.spare_whole_gpus:
            predicted = _predicted_rates(facts, options, claims)
            spared = _whole_gpu_dominated(options, predicted).astype(np.float64)
            if not small:
                key1 = predicted
    else:
        key1, key2 = _plain_keys(options)
    order = np.lexsort((name_rank, -np.round(key2, 9), -np.round(key1, 9), spared)).tolist()
    return Placement(order, order if tas else [order[0]], rate)


def _plain_keys(options: Options) -> tuple[FloatArray, FloatArray]:
    """Plain packing: (background load u, else the allocated GPU fraction; the allocated fraction)."""
    cands = options.cands
    alloc_n = cands.rows.alloc[cands.at]
    alloc = np.zeros(len(cands.nodes))
    np.divide(cands.free, alloc_n, out=alloc, where=alloc_n != 0)
    alloc = np.where(alloc_n != 0, 1.0 - alloc, 0.0)
    gpu = options.gpu
    u_c = gpu.u[cands.at[cands.canon]] if gpu is not None else np.full(len(cands.nodes), np.nan)
    return np.where(np.isnan(u_c), alloc, u_c), alloc


def _gpu_flags(options: Options) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Per candidate: the GPU the device plugin hands the pod (the free GPU with the fewest pods) is
    empty; the node's GPUs take several pods each. (False, False) without GPU telemetry."""
    gpu, cands = options.gpu, options.cands
    if gpu is None:
        none = np.zeros(len(cands.nodes), dtype=bool)
        return none, none
    rows = cands.at[cands.canon]
    return gpu.empty[rows], gpu.shared[rows]


def _unloaded_step(facts: Facts, options: Options, claims: Claims, c: int) -> float:
    """The plain step at the expected batch on candidate c's hardware with no other load, t0 + g(B)
    (0 when its profile or load is unknown)."""
    got = plain_inputs(
        options.cands.nodes[c], options.gpu_info(c), facts.profiles(), claims.target_model,
        claims.expected_batch, facts.curve,
    )  # fmt: skip
    return 0.0 if got is None else got[0] + got[1]


def _unloaded_steps(options: Options) -> FloatArray:
    """t0 + g(B) per evaluated candidate (0 elsewhere), from the evaluation's plain step t_u(B), its slack
    sigma = t0 / t_u(B) and the node's load u: t0 = sigma t_u, g(B) = `compute_part(t_u, t0, u)`."""
    ev, at, gpu, cands = options.evaluation, options.at, options.gpu, options.cands
    out = np.zeros(len(cands.nodes))
    hit = at >= 0
    if ev is None or gpu is None or not hit.any():
        return out
    step, sigma = ev.step_expected[at[hit]], ev.slack_expected[at[hit]]
    t0 = sigma * step
    out[hit] = t0 + compute_part(step, t0, np.nan_to_num(gpu.u[cands.at[cands.canon]][hit]))
    return out


def _keep_capacity(
    facts: Facts,
    options: Options,
    claims: Claims,
    speedup: FloatArray,
    slack: FloatArray,
    name_rank: IntArray,
) -> list[int]:
    """Candidates, best first, under `keepCapacity`: the band of S_real within minGain of the best (when
    the best reaches 1 + minGain) first; in it, the nodes where the pod keeps whole GPUs free, slowest
    hardware first, then slack and name; then the band's other nodes, and after the band every other
    node, by S_real, slack and name. With `spareWholeGpus` the band also holds the nodes that speculate
    and predict at least the S_real-best node's decode rate, and "slowest" is the unloaded plain step
    times the engines per GPU (the smallest share of hardware first)."""
    s = np.round(speedup, 9)
    best = float(s.max()) if s.size else 1.0
    gain = 1.0 + facts.policy.min_gain
    band = (s >= best / gain) & (best >= gain)
    spare = facts.policy.spare_whole_gpus
    if spare and best >= gain:
        rate = np.round(_predicted_rates(facts, options, claims), 9)
        band |= (rate >= rate[int(np.argmax(s))]) & (s >= gain)
    empty, shared = _gpu_flags(options)
    keep = (band & ~(empty & shared)).astype(np.float64)  # the pod does not take a whole multi-pod GPU
    share = _engines_per_gpu(facts, options) if spare else 1.0
    slow = np.where(keep > 0, _unloaded_steps(options) * share, 0.0)
    by_speedup = np.where(keep > 0, 0.0, s)
    keys = (name_rank, -np.round(slack, 9), -by_speedup, -np.round(slow, 12), -keep, -band.astype(np.float64))
    order: list[int] = np.lexsort(keys).tolist()
    return order


def _engines_per_gpu(facts: Facts, options: Options) -> FloatArray:
    """Pods per GPU each candidate advertises (time-slicing replicas; 1 for whole GPUs)."""
    by_node = facts.idx.gpus_by_node
    return np.array([replicas(n, by_node.get(n.name, [])) for n in options.cands.nodes], dtype=np.float64)


def _whole_gpu_dominated(options: Options, predicted: FloatArray) -> npt.NDArray[np.bool_]:
    """Candidates where the pod would take an empty GPU while a candidate where it shares an occupied
    one predicts at least their decode rate S_real / t_u(B) (`predicted`; all False without GPU
    telemetry)."""
    empty = _gpu_flags(options)[0]
    if not empty.any() or empty.all():
        return np.zeros(len(empty), dtype=bool)
    rate = np.round(predicted, 9)
    best_shared = float(rate[~empty].max())
    return empty & (rate <= best_shared) & (best_shared > 0)


def _batch_keys(
    facts: Facts, options: Options, claims: Claims, plain: tuple[FloatArray, FloatArray]
) -> tuple[FloatArray, FloatArray]:
    """Batch class under `batchClass: Model`: (the pod gets an empty GPU; there, the unloaded plain rate
    B / (t0 + g(B)), fastest first; elsewhere the packing key, most loaded first). Where the pod gets no
    empty GPU on any candidate, the predicted plain rate B / t_u(B) on the GPU it gets, highest first
    (0 where unknown): packing a large batch job onto the most loaded GPU slows both it and the engine
    there (docs/decision.md, "Batch work where no GPU is empty")."""
    empty = _gpu_flags(options)[0]
    if not empty.any():
        step = _plain_steps(facts, options, claims)
        key2 = np.divide(claims.expected_batch, step, out=np.zeros(len(step)), where=step > 0)
        return empty.astype(np.float64), key2
    key2 = plain[0].copy()
    evaluated = _unloaded_steps(options)
    for c in np.flatnonzero(empty).tolist():
        unloaded = evaluated[c] if evaluated[c] > 0 else _unloaded_step(facts, options, claims, c)
        key2[c] = claims.expected_batch / unloaded if unloaded > 0 else 0.0
    return empty.astype(np.float64), key2


def _predicted_rates(facts: Facts, options: Options, claims: Claims) -> FloatArray:
    """Placement Throughput's key: decode tokens/s per sequence at the expected batch, S_real(k*, B) /
    t_u(B). Evaluated nodes in one vectorised step; a node where speculation is off (no draft memory,
    ...) runs plain, S = 1, at 1 / t_u(B) when its profile and load are known; otherwise 0 (last)."""
    ev, at = options.evaluation, options.at
    step = _plain_steps(facts, options, claims)
    rate = np.divide(1.0, step, out=np.zeros(len(step)), where=step > 0)
    if ev is not None and (hit := at >= 0).any():
        rate[hit] = ev.speedup_expected[at[hit]] / step[hit]
    return rate


def _plain_steps(facts: Facts, options: Options, claims: Claims) -> FloatArray:
    """t_u(B) at the expected batch on the GPU the pod gets, per candidate (0 where unknown): the
    evaluation's plain step where the node was evaluated (one vectorised read), the model elsewhere."""
    ev, at = options.evaluation, options.at
    step = np.zeros(len(options.cands.nodes))
    hit = at >= 0
    if ev is not None and hit.any():
        step[hit] = ev.step_expected[at[hit]]
    for c in np.flatnonzero(~hit).tolist():
        step[c] = plain_step(facts, options.cands.nodes[c], claims, options.gpu_info(c)) or 0.0
    return step


def plain_step(facts: Facts, node: NodeInfo, claims: Claims, info: GpuInfo) -> float | None:
    """t_u(B) at the expected batch on a node that was not evaluated, when computable."""
    got = plain_inputs(node, info, facts.profiles(), claims.target_model, claims.expected_batch, facts.curve)
    return None if got is None else float(stretched(*got))


def plain_slack(facts: Facts, node: NodeInfo, claims: Claims, info: GpuInfo) -> float | None:
    """sigma at the expected batch on a node that was not evaluated (speculation off), when computable."""
    got = plain_inputs(node, info, facts.profiles(), claims.target_model, claims.expected_batch, facts.curve)
    return None if got is None else slack_scalar(*got)


def pod_set_updates(
    wl: WorkloadInfo,
    rules: TenantRules,
    node: NodeInfo,
    budget: Budget,
    tas: bool,
    flavor_labels_by_set: Mapping[str, Mapping[str, str]],
    pins: Pins,
    node_of: Mapping[str, NodeInfo] | None = None,
) -> tuple[list[PodSetUpdate], list[Reason]]:
    """Pin the pods to `node` (its jurisdiction labels, the tenant's nodeSelector, its hostname unless
    TAS placed them) and label them with the speculation, additively. A pod set whose template pins its
    speculation gets the label and config of its own pin. `node_of` pins pod sets of a multi-node group
    to nodes of their own."""
    conflicts: list[Reason] = []

    def selector_for(n: NodeInfo) -> dict[str, str]:
        selector: dict[str, str] = {key: n.labels[key] for key in sorted(rules.jurisdictions)}
        selector.update(rules.node_selector)
        if not tas:
            selector[LABEL_HOSTNAME] = n.labels.get(LABEL_HOSTNAME, n.name)
        return selector

    def additive(ps_name: str, kind: str, want: dict[str, str], have: Mapping[str, str]) -> dict[str, str]:
        kept = {}
        for k, v in sorted(want.items()):
            if k in have and have[k] != v:
                msg = f"pod set {ps_name}: {kind} {k}={shown(have[k])} in the template; not overriding"
                conflicts.append(Reason(type=ReasonType.TEMPLATE_CONFLICT, message=msg))
            else:
                kept[k] = v
        return kept

    out = []
    for ps in wl.pod_sets:
        gpu = ps.gpus_per_pod > 0
        own = pins.by_set.get(ps.name)
        on, cfg = (own.k > 0, own.config) if own is not None else (budget.enabled, budget.config)
        labels = {LABEL_SPECULATIVE: "on" if on else "off"} if gpu else {}
        annotations = {ANNOTATION_DECISION: wl.name}
        if gpu:
            annotations[ANNOTATION_SPECULATIVE_CONFIG] = cfg
        if own is not None:  # what the template pins stays the template's: only what it lacks is added
            labels = {k: v for k, v in labels.items() if ps.labels.get(k) != v}
            annotations = {k: v for k, v in annotations.items() if ps.annotations.get(k) != v}
        fixed = {**flavor_labels_by_set.get(ps.name, {}), **ps.node_selector}
        out.append(
            PodSetUpdate(
                name=ps.name,
                labels=additive(ps.name, "label", labels, ps.labels),
                annotations=additive(ps.name, "annotation", annotations, ps.annotations),
                node_selector=additive(
                    ps.name, "nodeSelector", selector_for((node_of or {}).get(ps.name, node)), fixed
                ),
                tolerations=[t for t in rules.tolerations if t not in ps.tolerations],
            )
        )
    return out, conflicts
