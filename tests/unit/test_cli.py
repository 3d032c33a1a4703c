from __future__ import annotations

import subprocess
import sys

from sovereignspec import __version__


def test_version_and_help() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sovereignspec", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"sovereignspec {__version__}"
    helped = subprocess.run(
        [sys.executable, "-m", "sovereignspec", "--help"], capture_output=True, text=True, check=True
    )
    assert "usage: sovereignspec" in helped.stdout
