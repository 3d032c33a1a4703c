"""Issue 14, operator level, without a cluster: an error while deciding or recording one workload answers
it (Retry with a reason), releases its in-flight reservation, and is never raised into the sweep; writes
send non-BMP text as raw UTF-8; records bound every message before validation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kopf
import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError

from sovereignspec.api.speculation_decision import Condition, Reason, SpeculationDecisionStatus
from sovereignspec.api.speculation_policy import SpeculationPolicy
from sovereignspec.cli.decide import load_scenario
from sovereignspec.kube.ssa import apply_body
from sovereignspec.model.workload import CheckEntry
from sovereignspec.operator import controller as ctl
from sovereignspec.operator.controller import Controller
from sovereignspec.operator.health import HealthState
from sovereignspec.operator.settings import OperatorSettings
from sovereignspec.operator.views import Views
from sovereignspec.policy.parse import (
    parse_admission_check,
    parse_namespace,
    parse_node,
    parse_resource_flavor,
    parse_sovereignty_policy,
    parse_speculation_policy,
    parse_workload,
)

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "idle.yaml"


def _views(data: dict[str, Any]) -> Views:
    objs = data["objects"]

    def of(kind: str, fn: Callable[[Any], Any]) -> list[Any]:
        return [fn(o) for o in objs if o.get("kind") == kind]

    specs: dict[str, SpeculationPolicy | str] = {
        p.metadata.name: p for p in of("SpeculationPolicy", parse_speculation_policy)
    }
    return Views(
        nodes=of("Node", parse_node),
        namespaces=of("Namespace", parse_namespace),
        flavors=of("ResourceFlavor", parse_resource_flavor),
        checks=of("AdmissionCheck", parse_admission_check),
        speculation_policies=specs,
        sovereignty_policies=of("SovereigntyPolicy", parse_sovereignty_policy),
    )


class FakeApi:
    """Stands in for Controller._api_call: records each write, fails the ones `fail` says."""

    def __init__(self, fail: Callable[[str, dict[str, Any]], BaseException | None]) -> None:
        self.fail = fail
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, fn: Callable[..., Any], /, *args: Any, **kw: Any) -> Any:
        self.calls.append((fn.__name__, kw))
        exc = self.fail(fn.__name__, kw)
        if exc is not None:
            raise exc
        return {}


def _run(
    fail: Callable[[str, dict[str, Any]], BaseException | None], monkeypatch: pytest.MonkeyPatch
) -> tuple[Controller, FakeApi]:
    data = load_scenario(SCENARIO.read_text(encoding="utf-8"))
    wl = parse_workload(data["workload"])
    ctrl = Controller(settings=OperatorSettings(), api=None, health=HealthState())  # type: ignore[arg-type]
    fake = FakeApi(fail)
    monkeypatch.setattr(ctrl, "_api_call", fake)
    monkeypatch.setattr(ctl, "_post_event", lambda *a, **k: None)
    views = _views(data)
    try:
        asyncio.run(
            ctrl._decide_and_write(wl, data["workload"], lambda: views, f"{wl.uid}/sovereignspec", "m")
        )
    finally:
        asyncio.run(ctrl.close())
    return ctrl, fake


def _entries(fake: FakeApi) -> list[dict[str, Any]]:
    return [kw["entry"] for name, kw in fake.calls if name == "apply_workload_check"]


def test_an_error_in_decide_answers_retry_and_reserves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: Any) -> Any:
        raise ValueError("1 validation error for Condition: message too long")

    monkeypatch.setattr(ctl, "decide", boom)
    ctrl, fake = _run(lambda *_: None, monkeypatch)
    [entry] = _entries(fake)
    assert entry["name"] == "sovereignspec"
    assert entry["state"] == "Retry" and "could not decide" in entry["message"], entry
    assert entry["requeueAfterSeconds"] == 60
    record = next(kw["obj"] for name, kw in fake.calls if name == "apply_decision")
    assert record["status"]["reason"] == "DecisionError" and record["status"]["gpus"] == 0
    assert not ctrl._inflight


def test_a_refused_record_is_replaced_by_a_retry_and_releases_the_reservation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fail(name: str, kw: dict[str, Any]) -> BaseException | None:
        status = kw.get("obj", {}).get("status", {})
        if name == "apply_decision" and status.get("state") == "Ready":
            exc = ApiException(status=422, reason="Unprocessable Entity")
            exc.body = json.dumps({"message": "status.message: Too long"})
            return exc
        return None

    ctrl, fake = _run(fail, monkeypatch)
    [entry] = _entries(fake)  # the Ready entry was never applied: only the Retry that replaced it
    assert entry["state"] == "Retry" and "could not record it" in entry["message"]
    assert "422" in entry["message"] and "Too long" in entry["message"]
    assert not ctrl._inflight


def test_a_transient_failure_is_a_temporary_error_and_releases_the_reservation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def down(name: str, _: dict[str, Any]) -> BaseException | None:
        return MaxRetryError(None, "/apis", "connection refused") if name == "apply_workload_check" else None  # type: ignore[arg-type]

    data = load_scenario(SCENARIO.read_text(encoding="utf-8"))
    ctrl = Controller(settings=OperatorSettings(), api=None, health=HealthState())  # type: ignore[arg-type]
    fake = FakeApi(down)
    monkeypatch.setattr(ctrl, "_api_call", fake)
    wl = parse_workload(data["workload"])
    try:
        with pytest.raises(kopf.TemporaryError):
            asyncio.run(
                ctrl._decide_and_write(
                    wl, data["workload"], lambda: _views(data), f"{wl.uid}/sovereignspec", "m"
                )
            )
    finally:
        asyncio.run(ctrl.close())
    assert [name for name, _ in fake.calls] == ["apply_decision", "apply_workload_check"]  # it was Ready
    assert not ctrl._inflight  # and its reservation is released


def test_apply_body_sends_non_bmp_text_as_utf8_without_surrogate_escapes() -> None:
    body = apply_body({"status": {"message": "model \U0001f4a5 and \u00e9"}})
    assert b"\\ud83d" not in body and "\U0001f4a5".encode() in body
    assert json.loads(body.decode("utf-8"))["status"]["message"] == "model \U0001f4a5 and \u00e9"
    # the client's default, for the record: the surrogate-pair escapes YAML refuses
    assert "\\ud83d\\udca5" in json.dumps({"m": "\U0001f4a5"})


def test_records_cut_tenant_text_before_validation() -> None:
    huge = "\U0001f4a5" * 40_000
    cond = Condition(type="Drift", status="False", reason="NoDrift", message=huge)
    assert len(cond.message) == 32768 and cond.message.endswith("…")
    st = SpeculationDecisionStatus(message=huge, reasons=[Reason(type="X", message=huge)])
    assert len(st.message) == 32768 and len(st.reasons[0].message) == 4096
    assert len(CheckEntry(name="c", state="Retry", message=huge).message) == 32768


def test_a_failing_sweep_is_logged_and_the_next_one_runs(caplog: pytest.LogCaptureFixture) -> None:
    """The resync and drift loops (controller.every): nothing bound yet is skipped, a sweep that raises
    is logged as '<what> failed' (the hostile-tenant e2e test counts those), and the loop goes on."""
    calls: list[str] = []
    done = asyncio.Event()

    async def ok() -> None:
        calls.append("ok")
        done.set()

    async def boom() -> None:
        calls.append("boom")
        raise RuntimeError("sweep bug")

    script: list[Callable[[], Any]] = [lambda: None, boom, ok]

    def sweep() -> Any:
        return script.pop(0)() if script else None

    async def run() -> None:
        task = asyncio.create_task(ctl.every(0, sweep, "drift sweep"))
        await asyncio.wait_for(done.wait(), 5)
        task.cancel()

    asyncio.run(run())
    assert calls == ["boom", "ok"]
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == ["drift sweep failed"]
