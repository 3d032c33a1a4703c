"""Batch ranges, the k*(B) schedule, and vLLM's `--speculative-config` JSON.

The config JSON is compact (`,` and `:` separators, no spaces) with keys in this fixed order:
`method`, `model` (the draft; omitted for ngram or when unknown), `num_speculative_tokens`,
`num_speculative_tokens_per_batch_size` (a list of inclusive [start, end, k] ranges). Same
decision, same bytes: the annotation never flaps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence


def batch_ranges(breakpoints: Sequence[int], max_batch: int) -> list[tuple[int, int]]:
    """[1, 2, 4] with max 16 → [(1, 1), (2, 3), (4, 16)]: each range ends where the next starts."""
    ends = [b - 1 for b in breakpoints[1:]] + [max_batch]
    return list(zip(breakpoints, ends, strict=True))


def range_index(ranges: Sequence[tuple[int, int]], batch: int) -> int:
    """The range holding `batch` (clamped into the covered span)."""
    for i, (start, end) in enumerate(ranges):
        if start <= batch <= end:
            return i
    return len(ranges) - 1 if batch > ranges[-1][1] else 0


def merge_schedule(ranges: Sequence[tuple[int, int]], ks: Sequence[int]) -> list[list[int]]:
    """Adjacent ranges with equal k merge: [[1,1,3],[2,3,3],[4,7,1]] → [[1,3,3],[4,7,1]]."""
    out: list[list[int]] = []
    for (start, end), k in zip(ranges, ks, strict=True):
        if out and out[-1][2] == int(k) and out[-1][1] + 1 == start:
            out[-1][1] = end
        else:
            out.append([start, end, int(k)])
    return out


def schedule_errors(schedule: Sequence[Sequence[int]], num_speculative_tokens: int) -> list[str]:
    """vLLM's rules for num_speculative_tokens_per_batch_size; empty list when valid."""
    errs = []
    if not schedule:
        return ["empty schedule"]
    if schedule[0][0] != 1:
        errs.append("first range must start at 1")
    for i, row in enumerate(schedule):
        if len(row) != 3:
            errs.append(f"row {i} is not [start, end, k]")
            continue
        start, end, k = row
        if end < start:
            errs.append(f"row {i}: end < start")
        if not 0 <= k <= num_speculative_tokens:
            errs.append(f"row {i}: k={k} outside [0, {num_speculative_tokens}]")
        if i and start <= schedule[i - 1][1]:
            errs.append(f"row {i} overlaps the previous range")
    return errs


def speculative_config(method: str, draft_model: str | None, schedule: Sequence[Sequence[int]]) -> str:
    """The exact `--speculative-config` JSON string for a schedule whose max k is > 0."""
    num = max(int(row[2]) for row in schedule)
    cfg: dict[str, object] = {"method": method}
    if draft_model and method != "ngram":
        cfg["model"] = draft_model
    cfg["num_speculative_tokens"] = num
    cfg["num_speculative_tokens_per_batch_size"] = [[int(a), int(b), int(c)] for a, b, c in schedule]
    return json.dumps(cfg, separators=(",", ":"))
