"""Per-pod speculative-decoding counter increases of one refresh; a doubtful pod is dropped with a Gap."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from sovereignspec.telemetry.assemble_engines import engine_values
from sovereignspec.telemetry.gaps import Gap, GapCode
from sovereignspec.telemetry.parse import checked_value
from sovereignspec.telemetry.queries import Query
from sovereignspec.telemetry.reading import PodAcceptance
from sovereignspec.telemetry.results import EngineKey, QueryResult, engine_key, failed, number, rows

MAX_COUNTER = 1e15
# increase() extrapolates each counter on its own: allow this much accepted-above-drafts noise.
ACCEPT_TOLERANCE = 0.05
POSITIONS = Query.SPEC_ACCEPTED_PER_POSITION


def acceptance(
    results: Mapping[Query, QueryResult], fresh: set[EngineKey], gaps: list[Gap]
) -> list[PodAcceptance]:
    """Without both the drafts and the per-position answers, no estimate: the query gap says why."""
    if failed(results, Query.SPEC_DRAFTS) or failed(results, POSITIONS):
        return []
    models: dict[EngineKey, str] = {}
    drafts = engine_values(results, Query.SPEC_DRAFTS, 0.0, MAX_COUNTER, gaps, models)
    tokens = engine_values(results, Query.SPEC_DRAFT_TOKENS, 0.0, MAX_COUNTER, gaps, models)
    positions, bad = _positions(results, gaps)

    out: list[PodAcceptance] = []
    for k in sorted(drafts.keys() | positions.keys()):
        subject = f"{k[0]}/{k[1]}"
        d = drafts.get(k)
        if k in bad or d is None or k not in fresh:
            if k not in fresh and d is not None and k not in bad:
                gaps.append(Gap(POSITIONS.value, GapCode.NOT_FRESH, f"{subject}: engine telemetry not fresh"))
            elif k not in drafts:
                gaps.append(
                    Gap(Query.SPEC_DRAFTS.value, GapCode.INCONSISTENT, f"{subject}: positions, no drafts")
                )
            continue
        per_pos = positions.get(k, {})
        if not per_pos:
            if d > 0:
                detail = f"{subject}: drafts but no per-position counts"
                gaps.append(Gap(POSITIONS.value, GapCode.INCONSISTENT, detail))
            continue
        k_len = max(per_pos) + 1
        if len(per_pos) != k_len:
            detail = f"{subject}: positions {sorted(per_pos)} not 0..{k_len - 1}"
            gaps.append(Gap(POSITIONS.value, GapCode.INCONSISTENT, detail))
            continue
        accepted = [per_pos[i] for i in range(k_len)]
        if any(a > d * (1 + ACCEPT_TOLERANCE) + 1 for a in accepted):
            detail = f"{subject}: accepted {max(accepted):g} > drafts {d:g}"
            gaps.append(Gap(POSITIONS.value, GapCode.OUT_OF_RANGE, detail))
            continue
        out.append(
            PodAcceptance(
                namespace=k[0],
                pod=k[1],
                drafts=d,
                draft_tokens=tokens.get(k),
                accepted_per_position=tuple(min(a, d) for a in accepted),
                model_name=models.get(k),
            )
        )
    return out


def _positions(
    results: Mapping[Query, QueryResult], gaps: list[Gap]
) -> tuple[dict[EngineKey, dict[int, float]], set[EngineKey]]:
    """Accepted drafts per position per pod, and the pods with a doubtful series."""
    positions: dict[EngineKey, dict[int, float]] = defaultdict(dict)
    bad: set[EngineKey] = set()
    for s in rows(results, POSITIONS):
        m = s["metric"]
        k = engine_key(POSITIONS, m, gaps)
        if k is None:
            continue
        ns, pod = k
        pos_text = m.get("position", "")
        if not pos_text.isdigit():
            detail = f"{ns}/{pod}: position label {pos_text!r} not an index"
            gaps.append(Gap(POSITIONS.value, GapCode.MISSING_LABEL, detail))
            bad.add(k)
            continue
        text = s["value"][1]
        v = number(text)
        if not 0.0 <= v <= MAX_COUNTER:
            subject = f"{ns}/{pod} position {pos_text}"
            checked = checked_value(POSITIONS.value, subject, text, 0.0, MAX_COUNTER)
            if isinstance(checked, Gap):
                gaps.append(checked)
                bad.add(k)
                continue
            v = checked
        positions[k][int(pos_text)] = v
    return positions, bad
