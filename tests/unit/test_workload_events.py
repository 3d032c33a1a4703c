"""Issue 18: a Workload event with no check entry Pending costs kopf no event-handler invocation. Its
bookkeeping (our answer seen, quota released) happens in the index handler, which kopf calls for every
event anyway. Each test fails on the code before the change, whose filter let through every body with
check entries and whose index handler did no bookkeeping."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from sovereignspec.operator.controller import Controller
from sovereignspec.operator.handlers import acts_on_workload, build_registry
from sovereignspec.operator.health import HealthState
from sovereignspec.operator.settings import OperatorSettings

NS = "shop"


def _workload(uid: str, *conditions: str, state: str = "Ready", other: str | None = None) -> dict[str, Any]:
    checks = [{"name": "ss", "state": state}]
    if other is not None:
        checks.append({"name": "someone-else", "state": other})
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "a", "namespace": NS, "uid": uid},
        "status": {
            "conditions": [{"type": c, "status": "True"} for c in conditions],
            "admissionChecks": checks,
        },
    }


def _registry() -> tuple[Controller, kopf.OperatorRegistry]:
    ctrl = Controller(settings=OperatorSettings(), api=None, health=HealthState())  # type: ignore[arg-type]
    return ctrl, build_registry(ctrl)


def test_the_workload_event_handler_is_filtered_to_deletions_and_pending_entries() -> None:
    _, registry = _registry()
    [handler] = [h for h in registry._watching.get_all_handlers() if h.id.endswith(".on_workload")]
    assert handler.when is acts_on_workload

    admitted = _workload("u", "QuotaReserved", "Admitted")
    assert not acts_on_workload(type="MODIFIED", body=admitted)
    assert not acts_on_workload(type="MODIFIED", body=_workload("u", "QuotaReserved", state="Retry"))
    assert not acts_on_workload(type="ADDED", body={"metadata": {"name": "a"}})  # no status yet
    assert acts_on_workload(type="DELETED", body=admitted)
    assert acts_on_workload(type="MODIFIED", body=_workload("u", "QuotaReserved", state="Pending"))
    # another controller's entry Pending: the controller is called and filters by name
    assert acts_on_workload(type="MODIFIED", body=_workload("u", "QuotaReserved", other="Pending"))


def test_the_index_handler_keeps_the_books_of_events_that_ask_for_no_decision() -> None:
    ctrl, registry = _registry()
    fns = {h.id: h.fn for h in registry._indexing.get_all_handlers()}

    async def event(body: dict[str, Any]) -> None:
        await fns["ss_workloads"](namespace=NS, name="a", uid=body["metadata"]["uid"], body=kopf.Body(body))  # type: ignore[call-arg]

    # our answer seen: a later Pending entry means a requeue, not a stale event
    ctrl._answered["u1/ss"] = "marker"
    asyncio.run(event(_workload("u1", "QuotaReserved", "Admitted")))
    assert "u1/ss" not in ctrl._answered
    # a Pending body is the event handler's: the index handler leaves its books alone
    ctrl._answered["u2/ss"] = "marker"
    asyncio.run(event(_workload("u2", "QuotaReserved", state="Pending")))
    assert ctrl._answered["u2/ss"] == "marker"
    # evicted (quota released) with our entry Retry: everything tracked for it is forgotten
    ctrl._pending_seen["u3/ss"] = 1.0
    asyncio.run(event(_workload("u3", "QuotaReserved", "Evicted", state="Retry")))
    assert "u3/ss" not in ctrl._pending_seen
    # still holding: what is tracked stays
    ctrl._pending_seen["u4/ss"] = 1.0
    asyncio.run(event(_workload("u4", "QuotaReserved", "Admitted")))
    assert ctrl._pending_seen["u4/ss"] == 1.0
