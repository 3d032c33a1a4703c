"""What an admitted workload's decision reports besides the node: the predicted figures, each
neighbour's margin and predicted slowdown, the ranked candidates, the acceptance estimate, and the
one-line message."""

from __future__ import annotations

from typing import Any

import numpy as np

from sovereignspec.api.speculation_decision import (
    AcceptanceSummary,
    Candidate,
    DecisionInputs,
    NeighbourImpact,
    Reason,
    Speculative,
)
from sovereignspec.model.acceptance import AcceptanceEstimate
from sovereignspec.model.speedup import bandwidth_slowdown, neighbour_slowdown
from sovereignspec.policy.budget import Budget
from sovereignspec.policy.cache.facts import Facts
from sovereignspec.policy.claims import Claims
from sovereignspec.policy.placement import Placement, plain_slack
from sovereignspec.policy.record import ReasonType, fmt, round6
from sovereignspec.policy.speculation import Options


def neighbour_impacts(
    facts: Facts, options: Options, place: Placement, budget: Budget
) -> list[NeighbourImpact]:
    """The chosen node's neighbours: their SLO margin, and our predicted slowdowns of each, those the
    neighbour condition judged: through compute, our arrival and speculation at the expected batch (0
    when we run plain), and through memory bandwidth, our plain steps where we arrive. None listed when
    telemetry is missing."""
    c = place.chosen
    ev = options.evaluation
    if ev is not None and options.evaluated(c):
        i = int(options.at[c])
        nbs = options.neighbours(c)
        load = ev.load_increase_expected[i] + ev.arrival_expected[i]
        slowdown = neighbour_slowdown(nbs.sigma, load, nbs.u_total)
        memory = bandwidth_slowdown(nbs.memory, ev.memory_expected[i])
        out = []
        for j, nb in enumerate(nbs.items):
            slow = float(slowdown[j]) if budget.enabled else 0.0
            finite = bool(np.isfinite(slow))
            out.append(
                NeighbourImpact(
                    namespace=nb.namespace,
                    pod=nb.pod,
                    margin_before=round6(nb.margin),
                    slowdown=round(slow, 6) if finite else None,
                    memory_slowdown=round(float(memory[j]), 6),
                )
            )
        return out
    if options.gpu is None:
        return []
    node = options.cands.nodes[c]
    found = facts.neighbours(node, options.gpu_info(int(options.cands.canon[c]))[0], judged="handed")
    return [
        NeighbourImpact(namespace=nb.namespace, pod=nb.pod, margin_before=nb.margin, slowdown=0.0)
        for nb in found.items
    ]


def ranked_candidates(options: Options, place: Placement) -> list[Candidate]:
    """The ten best candidates as placement ranked them."""
    cands = options.cands
    out = []
    for c in place.order[:10]:
        sp, sig, kk = options.outcome(c)
        load = options.gpu_info(int(cands.canon[c]))[1]
        out.append(
            Candidate(
                node=cands.nodes[c].name,
                predicted_speedup=round(sp, 6),
                slack=round6(sig),
                load=None if load is None else round(float(load or 0.0), 6),
                k=kk,
                free_gpus=int(cands.free[c]),
                predicted_rate=round6(place.rate_of(options, c)),
            )
        )
    return out


def acceptance_summary(estimate: AcceptanceEstimate | None, quantile: float, k: int) -> AcceptanceSummary:
    """The estimate the budget was chosen on, with E[L] at the budget run (the last one a pin's larger
    k reaches)."""
    if estimate is None:
        return AcceptanceSummary()
    return AcceptanceSummary(
        source=estimate.source,
        alpha=round(estimate.alpha, 6),
        quantile=quantile,
        drafts=estimate.drafts,
        per_position=[round(float(x), 6) for x in estimate.p],
        expected_length=round(
            float(estimate.expected_lengths[min(k, len(estimate.expected_lengths) - 1)]), 6
        ),
    )


RECORDED_CLAIMS = (
    "workload_class", "target_model", "draft_model", "method", "tpot_slo_ms", "tpot_slo_claimed",
    "expected_batch",
)  # fmt: skip
"""The Claims fields a record's `inputs` carries under the same names."""


def admitted_fields(
    facts: Facts,
    options: Options,
    place: Placement,
    budget: Budget,
    claims: Claims,
    estimate: AcceptanceEstimate | None,
    note: str = "",
) -> dict[str, Any]:
    """The Decision's fields for an admitted workload, but its pod-set updates and reasons; `note` ends
    the message (where a group's pod sets went)."""
    policy, c = facts.policy, place.chosen
    node = options.cands.nodes[c]
    ev = options.evaluation
    sigma = options.outcome(c)[1]
    if sigma is None:
        sigma = plain_slack(facts, node, claims, options.gpu_info(int(options.cands.canon[c])))
    predicted: float | None = 1.0
    if budget.pin is not None:
        predicted = None if budget.enabled else 1.0  # the template's config: not predicted
    elif budget.enabled and ev is not None:
        predicted = float(min(ev.speedup_expected[options.at[p]] for p in place.placed))
    reason: str
    if budget.pin is not None and budget.off is not None:
        reason = budget.off.type
        message = f"node {node.name}: speculation pinned by the template ({budget.pin.describe()})"
    elif budget.enabled:
        reason = ReasonType.SPECULATION_ON
        message = (
            f"node {node.name}: speculation on ({claims.method}, k≤{budget.num}), predicted S_real "
            f"{fmt(predicted)} at batch {claims.expected_batch}, slack {fmt(sigma)}"
        )
    else:
        assert budget.off is not None
        reason, message = (
            budget.off.type,
            f"node {node.name}: speculation off ({budget.off.type}: {budget.off.message})",
        )
    if place.rate is not None:
        message += f"; placement Throughput: {fmt(place.rate_of(options, c))} tok/s per sequence"
    if len(place.placed) > 1:  # TAS
        message += f"; TAS places pods on {len(place.placed)} nodes"
    message += note
    speculative = Speculative(
        enabled=budget.enabled,
        method=budget.method,
        draft_model=budget.draft_model,
        num_speculative_tokens=budget.num if budget.enabled else 0,
        schedule=budget.schedule if budget.enabled else [[1, policy.max_batch, 0]],
        config=budget.config,
    )
    inputs = DecisionInputs(
        **{f: getattr(claims, f) for f in RECORDED_CLAIMS},
        placement=None if policy.placement == "RelativeSpeedup" else policy.placement,
    )
    return {
        "reason": reason,
        "message": message,
        "node": node.name,
        "workload_class": claims.workload_class,
        "speculative": speculative,
        "predicted_speedup": round6(predicted),
        "slack": round6(sigma),
        "acceptance": acceptance_summary(
            estimate if budget.pin is None or budget.pin.method == claims.method else None,
            policy.alpha_quantile,
            budget.num if budget.enabled else 0,
        ),
        "neighbours": neighbour_impacts(facts, options, place, budget),
        "candidates": ranked_candidates(options, place),
        "inputs": inputs,
        "speedup_by_k": (
            [round(float(x), 6) for x in ev.speedup_by_k[options.at[c]]]
            if ev is not None and options.evaluated(c)
            else []
        ),
    }


def admitted_reasons(
    options: Options, place: Placement, budget: Budget, claims: Claims, conflicts: list[Reason]
) -> list[Reason]:
    """The reasons an admitted decision carries beside its own: why speculation is off (and on which
    placed node), the claims' malformed annotations after the first and their notes, and the pod-set
    updates that conflict with the template."""
    reasons = [*([budget.off] if budget.off else []), *claims.malformed[1:], *claims.notes, *conflicts]
    if not budget.enabled:
        reasons += [why for c in place.placed if (why := options.node_off(c)) is not None]
    return reasons
