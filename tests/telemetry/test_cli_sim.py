"""`sovereignspec telemetry-sim` as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from sovereignspec.cli.main import main
from tests.telemetry.conftest import SCENARIOS
from tests.telemetry.promproc import free_port


def test_help_lists_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["telemetry-sim", "--help"])
    assert "--scenario" in capsys.readouterr().out


def test_bad_scenario_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [{name: a, gpus: -1}]\n")
    assert main(["telemetry-sim", "-f", str(bad)]) == 2
    assert "bad.yaml" in capsys.readouterr().err
    assert main(["telemetry-sim"]) == 2


def test_serves_metrics_and_writes_file_sd(tmp_path: Path) -> None:
    port = free_port()
    sd = tmp_path / "targets" / "sim.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sovereignspec", "telemetry-sim", "-f", str(SCENARIOS / "small.yaml"),
         "--port", str(port), "--file-sd", str(sd), "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        body = ""
        while time.monotonic() < deadline:  # the target file is written just after the server answers
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
                if sd.exists():
                    break
            except OSError:
                pass
            time.sleep(0.2)
        assert "vllm:spec_decode_num_accepted_tokens_per_pos_total{" in body
        assert "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{" in body
        assert json.loads(sd.read_text()) == [
            {"targets": [f"127.0.0.1:{port}"], "labels": {"job": "telemetry-sim"}}
        ]
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
