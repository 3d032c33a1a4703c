"""The scale bench with the operator from another source tree: an A/B of operator versions under ONE
bench script (docs/scale.md, session 8).

    cd "$(mktemp -d)"   # an empty directory: `python -m sovereignspec` puts the working directory first
    SCALE_BENCH_ROOT=/tmp/bench-tree OPERATOR_SRC=/tmp/arm-tree \\
        /path/to/.venv/bin/python /path/to/bench/scale_ab.py --quick

SCALE_BENCH_ROOT: the checkout whose bench/scale_bench.py, test harness, CRDs and simulator run (default:
this one); OPERATOR_SRC: the checkout whose `sovereignspec` the operator process imports (set as its
PYTHONPATH only). Arguments go to scale_bench.py unchanged.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

root = Path(os.environ.get("SCALE_BENCH_ROOT", Path(__file__).resolve().parents[1]))
src = os.environ["OPERATOR_SRC"]
sys.path[:0] = [str(root), str(root / "bench")]
import scale_bench  # noqa: E402

_operator = scale_bench.operator


def operator(*args: Any, extra_env: dict[str, str] | None = None, **kw: Any) -> Any:
    print(f"[scale_ab] bench from {root}, operator from {src}", file=sys.stderr, flush=True)
    return _operator(*args, extra_env={**(extra_env or {}), "PYTHONPATH": src}, **kw)


scale_bench.operator = operator
sys.exit(scale_bench.main())
