"""Plain-text rendering of a SpeculationDecision for `sovereignspec explain` (pure, no I/O)."""

from __future__ import annotations

from sovereignspec.api.speculation_decision import SpeculationDecision, SpeculationDecisionStatus

# Reasons that switch speculation off before any node is evaluated: placement then packs plainly.
_PLAIN = (
    "plain decoding: the most loaded sovereign node that fits (tensor load u, else allocated GPUs), then name"
)
_SPEC = (
    "interactive with a healthy draft: the highest predicted S_real at the expected batch, "
    "then slack, then name"
)


def _f(x: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _k_at(schedule: list[list[int]], batch: int | None) -> int | None:
    if batch is None:
        return None
    for row in schedule:
        if len(row) == 3 and row[0] <= batch <= row[1]:
            return row[2]
    return None


def render(decision: SpeculationDecision, target: str) -> str:
    st = decision.status
    if st is None:
        return f"{target}: decision has no status yet (the operator has not answered)."
    out: list[str] = []
    out.append(f"SpeculationDecision {target}")
    out.append(f"  state {st.state}, reason {st.reason or '-'}, speculation {st.mode}, node {st.node or '-'}")
    out.append(f"  {st.message}" if st.message else "  (no message)")
    out.append(
        f"  decided {st.decided_at.isoformat() if st.decided_at else '-'}; telemetry from "
        f"{st.telemetry_time.isoformat() if st.telemetry_time else 'none (speculation off)'}"
    )
    out += ["", *_inputs(st), "", *_speedup(st), "", *_schedule(st), "", *_neighbours(st), "", *_why(st)]
    if st.reasons:
        out += ["", "Reasons"] + [f"  - {r.type}: {r.message}" for r in st.reasons]
    return "\n".join(out)


def _inputs(st: SpeculationDecisionStatus) -> list[str]:
    i, a = st.inputs, st.acceptance
    lines = ["Inputs"]
    if i is None:
        lines.append("  (not recorded: decided by an operator older than this CLI)")
    else:
        draft = i.draft_model or "-"
        lines += [
            f"  tenant            {st.tenant or '-'}",
            f"  class             {i.workload_class or '-'}",
            f"  target model      {i.target_model or '-'}",
            f"  draft / method    {draft} / {i.method or '-'}",
            f"  TPOT SLO          {_f(i.tpot_slo_ms, '{:.0f}')} ms",
            f"  expected batch    {i.expected_batch if i.expected_batch is not None else '-'}",
            f"  GPUs              {st.gpus}",
        ]
    lines.append(
        f"  acceptance        alpha {_f(a.alpha)} (source {a.source}, "
        f"posterior quantile {_f(a.quantile, '{:.2f}')}, "
        f"{a.drafts:.0f} drafts observed), E[L(k)] {_f(a.expected_length)}"
    )
    if a.per_position:
        lines.append("  p_i (i = 1..)     " + " ".join(f"{p:.3f}" for p in a.per_position))
    return lines


def _speedup(st: SpeculationDecisionStatus) -> list[str]:
    batch = st.inputs.expected_batch if st.inputs else None
    head = (
        f"S_real(k) at batch {batch if batch is not None else '-'} on {st.node or '-'} (slack {_f(st.slack)})"
    )
    if not st.speedup_by_k:
        return [head, "  not evaluated: speculation was off before any node was modelled (see Reasons)"]
    chosen = _k_at(st.speculative.schedule, batch) if st.mode == "on" else 0
    best = max(range(len(st.speedup_by_k)), key=lambda k: (st.speedup_by_k[k], -k))
    rows = [
        ["k"] + [str(k) for k in range(len(st.speedup_by_k))],
        ["S_real"] + [f"{s:.3f}" for s in st.speedup_by_k],
    ]
    marks = ["", *("*" if k == chosen else ("^" if k == best else "") for k in range(len(st.speedup_by_k)))]
    rows.append(marks)
    note = "  * = budget chosen at this batch"
    if best != chosen:
        note += (
            f"; ^ = maximum at this batch (k={best}): each batch range is judged at its upper end "
            "(speculation must pay on all of it) and under the neighbour-SLO condition"
        )
    return [head, *_table(rows), note]


def _schedule(st: SpeculationDecisionStatus) -> list[str]:
    sp = st.speculative
    lines = ["Schedule (vLLM num_speculative_tokens_per_batch_size: [first batch, last batch, k])"]
    if not sp.enabled:
        lines.append("  speculation off: vLLM runs plain (empty --speculative-config)")
        return lines
    lines += _table([["batch", "k"]] + [[f"{r[0]}-{r[1]}", str(r[2])] for r in sp.schedule if len(r) == 3])
    lines.append(f"  num_speculative_tokens {sp.num_speculative_tokens}")
    lines.append(f"  --speculative-config {sp.config}")
    return lines


def _neighbours(st: SpeculationDecisionStatus) -> list[str]:
    lines = [f"Neighbours on {st.node or '-'} (margin = SLO/TPOT - 1; the slowdown must stay within it)"]
    if not st.neighbours:
        return [*lines, "  none: no other engine shares the GPUs this workload gets"]
    rows = [["NAMESPACE/POD", "MARGIN", "SLOWDOWN", "MARGIN LEFT"]]
    for n in st.neighbours:
        left = None if n.margin_before is None or n.slowdown is None else n.margin_before - n.slowdown
        rows.append(
            [
                f"{n.namespace}/{n.pod}",
                "not SLO-bound" if n.margin_before is None else f"{n.margin_before:.3f}",
                _f(n.slowdown),
                _f(left),
            ]
        )
    return lines + _table(rows)


def _why(st: SpeculationDecisionStatus) -> list[str]:
    lines = ["Why this node"]
    if st.state != "Ready":
        return [*lines, f"  no node: {st.message}"]
    lines.append(
        "  hard rules first: jurisdiction, isolation, flavor, TAS and capacity filter the candidates;"
    )
    lines.append(f"  then placement: {_SPEC if st.speedup_by_k else _PLAIN}")
    if not st.candidates:
        return lines
    rows = [["RANK", "NODE", "S_REAL", "SLACK", "LOAD", "K", "FREE GPUS"]]
    for i, c in enumerate(st.candidates, 1):
        rows.append(
            [
                f"{i}{' *' if c.node == st.node else ''}",
                c.node,
                _f(c.predicted_speedup),
                _f(c.slack),
                _f(c.load),
                str(c.k),
                str(c.free_gpus),
            ]
        )
    lines += _table(rows)
    if len(st.candidates) > 1:
        a, b = st.candidates[0], st.candidates[1]
        if st.speedup_by_k and a.predicted_speedup is not None and b.predicted_speedup is not None:
            lines.append(
                f"  {a.node} beats {b.node} by S_real {a.predicted_speedup - b.predicted_speedup:+.3f}"
                + (f" (slack {_f(a.slack)} vs {_f(b.slack)})" if a.slack is not None else "")
            )
        elif a.load is not None and b.load is not None:
            lines.append(
                f"  {a.node} is the more loaded (u {a.load:.3f} vs {b.load:.3f}): slack stays free elsewhere"
            )
    return lines
