"""Steady-state engine load: batch, step time, TPOT and tensor share, vectorised over engines.

Self-contained on purpose (the decision core's step-time model is not a dependency of the
simulator): a step over T tokens takes t0 + perToken*T, other tenants' tensor load u stretches
the token part only, speculation with k drafts verifies B*(k+1) tokens and pays k*c_d target
steps of drafting, and yields E[L(k)] = 1 + sum p_i tokens per sequence and step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F = npt.NDArray[np.float64]
U_MAX = 0.95  # others never take the whole GPU: keeps every engine's step finite


@dataclass(frozen=True)
class EngineLoad:
    batch: F  # sequences running
    step: F  # seconds per engine step
    tpot: F  # seconds per output token
    share: F  # this engine's contribution to its GPUs' tensor-active
    saturated: npt.NDArray[np.bool_]
    throughput: F  # requests finished per second


def engine_load(
    *,
    rate: F,
    output_tokens: F,
    k: F,
    expected_len: F,
    draft_cost: F,
    t0: F,
    per_token: F,
    other_load: F,
    max_seqs: F,
    backlog: npt.NDArray[np.bool_],
) -> EngineLoad:
    """Little's law B = rate * output_tokens * TPOT(B), with TPOT linear in B, solved in closed form.

    An engine with a backlog, or whose arrivals exceed what `max_seqs` can serve, runs full.
    """
    u = np.clip(other_load, 0.0, U_MAX)
    a = t0 * (1.0 + k * draft_cost)  # token-independent part of a step (weights + drafting)
    b = per_token * (k + 1.0 + k * draft_cost) / (1.0 - u)  # seconds per sequence in the batch
    lam_n = rate * output_tokens
    denom = expected_len - lam_n * b
    with np.errstate(divide="ignore", invalid="ignore"):
        batch = np.where(denom > 0, lam_n * a / np.where(denom > 0, denom, 1.0), np.inf)
    saturated = backlog | (batch > max_seqs)
    batch = np.where(saturated, max_seqs, batch)
    step = a + b * batch
    tpot = step / expected_len
    compute = per_token * batch * (k + 1.0 + k * draft_cost)
    share = np.where(batch > 0, compute / step, 0.0)
    throughput = np.where(batch > 0, batch / (output_tokens * tpot), 0.0)
    return EngineLoad(
        batch=batch, step=step, tpot=tpot, share=share, saturated=saturated, throughput=throughput
    )


def expected_length(p: F) -> F:
    """E[L(k)] = 1 + sum_i p_i, rows of `p` padded with zeros beyond each engine's k."""
    return np.asarray(1.0 + p.sum(axis=1), dtype=np.float64)
