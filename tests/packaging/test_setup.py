"""The newcomer's path: `make setup` (deploy/local/setup.sh) names every Debian package and every binary
set a fresh machine lacks, with the apt step stubbed so nothing is installed. Runs without a cluster."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "deploy" / "local" / "setup.sh"
PACKAGES = [
    "prometheus",
    "openssl",
    "ca-certificates",
    "curl",
    "iproute2",
    "util-linux",
    "make",
    "python3-venv",
]
SETS = ["kubernetes", "kwok", "kueue", "helm", "etcd"]


def _stub(bindir: Path, name: str, body: str) -> None:
    path = bindir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _run(
    tmp_path: Path, *args: str, missing: list[str], uid: int = 0
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """setup.sh with dpkg-query answering 'not installed' for `missing`, apt-get and id stubbed."""
    bindir, calls = tmp_path / "stub-bin", tmp_path / "apt-calls.log"
    bindir.mkdir()
    # the last argument is the package; a missing one prints no status, as dpkg-query does
    dpkg = 'for a; do p=$a; done\ncase " $STUB_MISSING " in *" $p "*) exit 1;; esac\n'
    _stub(bindir, "dpkg-query", dpkg + 'printf "install ok installed"\n')
    _stub(bindir, "apt-get", f'echo "apt-get $*" >>{calls}\n')
    _stub(bindir, "id", f"echo {uid}\n")
    env = {
        **os.environ,
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "SOVEREIGNSPEC_CACHE": str(tmp_path / "empty-cache"),
        "STUB_MISSING": " ".join(missing),
    }
    out = subprocess.run(["bash", str(SETUP), *args], env=env, capture_output=True, text=True, timeout=120)
    return out, calls


def test_dry_run_on_an_empty_cache_lists_every_package_and_binary_set(tmp_path: Path) -> None:
    out, calls = _run(tmp_path, "--dry-run", missing=PACKAGES)
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    would_install = re.search(r"would install: (.*)", text)
    assert would_install, text
    assert would_install.group(1).split() == PACKAGES
    for s in SETS:
        assert re.search(rf"\[\d+/\d+\] {s} \S+: would build", text), (s, text)
    assert not calls.exists(), "a dry run called apt-get"
    assert not any((tmp_path / "empty-cache" / "bin").iterdir()), "a dry run built something"


def test_only_the_missing_packages_are_named(tmp_path: Path) -> None:
    out, _ = _run(tmp_path, "--dry-run", missing=["prometheus"])
    assert out.returncode == 0, out.stderr
    assert re.search(r"would install: prometheus$", out.stderr, re.M), out.stderr


def test_without_root_it_names_the_one_command_and_stops(tmp_path: Path) -> None:
    out, calls = _run(tmp_path, missing=["prometheus", "curl"], uid=1000)
    assert out.returncode == 1
    lines = [line for line in out.stderr.splitlines() if "apt-get install" in line]
    assert len(lines) == 1
    assert "apt-get install -y --no-install-recommends prometheus curl" in lines[0], out.stderr
    assert not calls.exists(), "apt-get ran without root"
    assert "would build" not in out.stderr and "go build" not in out.stderr


def test_ci_demo_and_test_share_the_one_setup() -> None:
    """CI exercises the newcomer's path: no set-up step of its own beside `make setup`."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make setup" in ci and "apt-get" not in ci and "build.sh" not in ci
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo: setup$", makefile, re.M) and re.search(r"^test: setup$", makefile, re.M)
