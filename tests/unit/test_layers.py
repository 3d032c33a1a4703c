"""The dependency direction is part of the design: prove it on every run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_linter_contracts_hold() -> None:
    exe = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(exe), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout, proc.stdout


def test_pure_layers_do_not_load_kubernetes_clients() -> None:
    code = (
        "import sys, importlib, pkgutil, sovereignspec.model, sovereignspec.policy, sovereignspec.api\n"
        "for pkg in (sovereignspec.model, sovereignspec.policy, sovereignspec.api):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "banned = ('kubernetes', 'kopf', 'prometheus_api_client', 'prometheus_client')\n"
        "bad = sorted(n for n in banned if n in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"pure layers imported {out}"
