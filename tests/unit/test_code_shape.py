"""The decision core stays readable: no function in sovereignspec/policy or sovereignspec/model is
longer than 80 lines, and no file there longer than 450 (a function that outgrows this wants named
steps; a file, a module per concept), and decide() itself no longer than 60."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "sovereignspec"
FILES = sorted(p for pkg in ("policy", "model") for p in (ROOT / pkg).rglob("*.py"))
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 450


def test_the_core_has_files_to_check() -> None:
    assert len(FILES) > 10


def test_no_file_is_longer_than_450_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n for p in FILES if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES
    }
    assert long == {}


def test_no_function_is_longer_than_80_lines() -> None:
    long = {}
    for p in FILES:
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{p.relative_to(ROOT)}:{node.name}"] = lines
    assert long == {}


MAX_DECIDE_LINES = 60


def test_decide_is_one_screen_of_named_steps() -> None:
    """decide() is a table of contents (STYLE.md, "shape of a good decision function"): a rule that
    grows goes into the module of its step, not into decide()."""
    tree = ast.parse((ROOT / "policy" / "decide.py").read_text())
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "decide"]
    assert (fn.end_lineno or fn.lineno) - fn.lineno + 1 <= MAX_DECIDE_LINES
