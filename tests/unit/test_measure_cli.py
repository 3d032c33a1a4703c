"""`sovereignspec calibrate --measure / --samples`: refusals (exit 2, one line), refitting a saved run, and
the --measure wiring over a fake engine (this machine has no GPU)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from sovereignspec.api.speculation_policy import SpeculationPolicy
from sovereignspec.cli.main import main
from sovereignspec.evidence import vllm_step
from sovereignspec.evidence.measure import MeasuredRun, StepShape
from sovereignspec.evidence.vllm_step import METHOD, Preflight
from tests.unit.test_measure import GRID, roofline, samples_of


def no_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "nvidia-smi" else real(name))


def test_measure_refuses_without_a_gpu(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    no_smi(monkeypatch)
    assert main(["calibrate", "--measure", "--model", "meta-llama/Llama-3.1-8B-Instruct"]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err.count("\n") == 1 and "needs an NVIDIA GPU" in cap.err and "nothing measured" in cap.err


def test_measure_refuses_without_vllm(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(vllm_step, "gpu_present", lambda: "NVIDIA H200")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a)
    )
    assert main(["calibrate", "--measure", "--model", "m"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "NVIDIA H200" in err and "pip install vllm" in err


def test_measure_and_samples_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--measure", "--samples", "x.json"]) == 2
    assert "not both" in capsys.readouterr().err


def saved_run(tmp_path: Path, tokens: list[int], wrap: bool = True) -> Path:
    samples = samples_of(tokens)
    run = MeasuredRun(
        product="NVIDIA-H200",
        target_model="llama-3.1-8b",
        model="meta-llama/Llama-3.1-8B",
        vllm_version="0.11.0",
        load_format="dummy",
        method=METHOD,
        measured_at="2026-07-01T10:00:00+00:00",
        elapsed_s=312.0,
        samples=samples,
    )
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"run": run.wire()} if wrap else run.wire()))
    return path


def test_samples_refit_prints_a_valid_fragment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = saved_run(tmp_path, GRID)
    assert main(["calibrate", "--samples", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# measured NVIDIA-H200 / llama-3.1-8b: 14 points, table MAPE 0.0%")
    assert "#   T=8192   prefill" in out
    pol = SpeculationPolicy.model_validate(yaml.safe_load(out))
    (p,) = pol.spec.accelerator_profiles
    assert p.step_time is not None and p.step_time[-1].tokens == 8192
    assert p.step_time[-1].seconds == pytest.approx(roofline(8192), rel=1e-5)


def test_json_output_round_trips_through_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--samples", str(saved_run(tmp_path, GRID, wrap=False)), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fit"]["mape"] < 1e-4 and doc["fit"]["pooled"] == 0
    SpeculationPolicy.model_validate(doc["policy"])
    again = tmp_path / "again.json"
    again.write_text(json.dumps(doc))
    assert main(["calibrate", "--samples", str(again), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["policy"] == doc["policy"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("{not json", "cannot read"),
        ('{"run": {"product": ""}}', "is not a measured run"),
    ],
)
def test_samples_refuses_bad_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    assert main(["calibrate", "--samples", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_too_few_samples_fail_the_fit_but_keep_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["calibrate", "--samples", str(saved_run(tmp_path, [64]))]) == 1
    cap = capsys.readouterr()
    assert "at least 2" in cap.err
    assert MeasuredRun.model_validate(json.loads(cap.out)["run"]).samples[0].tokens == 64


class FakeTimer:
    """Stands in for VllmStepTimer.start: records the engine arguments, returns the roofline."""

    started: dict[str, Any] = {}

    @classmethod
    def start(cls, model: str, **kwargs: Any) -> FakeTimer:
        cls.started = {"model": model, **kwargs}
        return cls()

    def __call__(self, shape: StepShape) -> float:
        return roofline(shape.tokens)


def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_step, "preflight", lambda: Preflight("NVIDIA H200", "0.11.0", "2.8.0"))
    monkeypatch.setattr(vllm_step, "VllmStepTimer", FakeTimer)


def test_measure_wiring_over_a_fake_engine(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_gpu(monkeypatch)
    argv = [
        "calibrate",
        "--measure",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--decode-batches",
        "1,8,64",
        "--prefill-tokens",
        "256,1024",
        "--repeats",
        "1",
        "-o",
        "json",
    ]
    assert main(argv) == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    run = MeasuredRun.model_validate(doc["run"])
    assert run.product == "NVIDIA-H200" and run.target_model == "meta-llama/Llama-3.1-8B-Instruct"
    assert [s.tokens for s in run.samples] == [1, 8, 64, 256, 1024] and not run.skipped
    assert FakeTimer.started["load_format"] == "dummy" and FakeTimer.started["max_num_seqs"] == 64
    assert FakeTimer.started["max_num_batched_tokens"] == 2048
    assert FakeTimer.started["max_model_len"] >= 512 + 32
    SpeculationPolicy.model_validate(doc["policy"])
    assert "starting vLLM 0.11.0 on NVIDIA H200" in cap.err and "[5/5]" in cap.err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "needs --model"),
        (["--model", "m", "--prefill-tokens", "8"], "must exceed the largest decode batch"),
        (["--model", "m", "--repeats", "0"], "--repeats 0 must be >= 1"),
        (["--model", "m", "--gpu-memory-utilization", "1.5"], "(0, 1]"),
    ],
)
def test_measure_refuses_bad_arguments_before_starting_the_engine(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    fake_gpu(monkeypatch)
    FakeTimer.started = {}
    assert main(["calibrate", "--measure", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and FakeTimer.started == {}


def test_measure_reports_an_engine_that_does_not_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_gpu(monkeypatch)

    class Broken(FakeTimer):
        @classmethod
        def start(cls, model: str, **kwargs: Any) -> FakeTimer:
            raise OSError(f"We couldn't connect to 'https://huggingface.co' to load {model}\nmore")

    monkeypatch.setattr(vllm_step, "VllmStepTimer", Broken)
    assert main(["calibrate", "--measure", "--model", "meta-llama/Llama-3.1-8B-Instruct"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith(
        "calibrate --measure: vLLM could not start meta-llama/Llama-3.1-8B-Instruct: OSError"
    )
