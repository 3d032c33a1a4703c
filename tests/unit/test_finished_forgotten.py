"""Issue 18: a Finished Workload's SpeculationDecision is not held in operator memory once no pod runs
under it (it reserves nothing and no decision reads it), whichever of the two the operator sees first,
so that a restart rebuilds the same state. Each test fails on the code before the change, which kept
every decision body in the kopf index and the mirror for as long as the decision existed."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from sovereignspec.model.cluster import PodInfo
from sovereignspec.operator.controller import Controller
from sovereignspec.operator.decision_metrics import DecisionCollector
from sovereignspec.operator.handlers import build_registry
from sovereignspec.operator.health import HealthState
from sovereignspec.operator.mirror import Mirror
from sovereignspec.operator.reservations import ReservationTable, reservation_of
from sovereignspec.operator.settings import OperatorSettings

NS = "shop"
DECISION = "sovereignspec.io/decision"


def _decision(name: str, uid: str, node: str = "kr-1") -> dict[str, Any]:
    return {
        "apiVersion": "sovereignspec.io/v1alpha1",
        "kind": "SpeculationDecision",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"app.kubernetes.io/managed-by": "sovereignspec"},
            "ownerReferences": [
                {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": name, "uid": uid,
                 "controller": True},
            ],
        },
        "spec": {"workload": name, "workloadUid": uid, "admissionCheck": "ss"},
        "status": {"state": "Ready", "node": node, "gpus": 1, "mode": "on", "predictedSpeedup": 1.5},
    }  # fmt: skip


def _workload(name: str, uid: str, *conditions: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": NS, "uid": uid},
        "status": {
            "conditions": [{"type": c, "status": "True"} for c in conditions],
            "admissionChecks": [{"name": "ss", "state": "Ready"}],
        },
    }


def _pod(name: str, decision: str) -> PodInfo:
    return PodInfo(namespace=NS, name=name, node="kr-1", gpu_request=1, annotations={DECISION: decision})


def test_a_finished_workloads_decision_is_dropped_in_either_order() -> None:
    m, table = Mirror(), ReservationTable(reservation_of)
    # the decision first (the Workload running), then the Workload finishes
    m.put_decision((NS, "a"), _decision("a", "uid-a"))
    table.update(m.decisions, m.holding)
    assert (NS, "a") in m.decisions.items and (NS, "a") in table.table
    m.put_finished((NS, "a"), "uid-a")
    table.update(m.decisions, m.holding)
    assert (NS, "a") not in m.decisions.items
    assert (NS, "a") not in table.table  # the reservation table forgets it too
    # a restart that lists the Finished Workload before its decision: never stored
    m.put_finished((NS, "b"), "uid-b")
    m.put_decision((NS, "b"), _decision("b", "uid-b"))
    assert (NS, "b") not in m.decisions.items
    # a later event of the decision (a condition written meanwhile) does not bring it back
    m.put_decision((NS, "a"), _decision("a", "uid-a"))
    assert not m.decisions.items


def test_a_decision_stays_while_a_pod_runs_under_it() -> None:
    m = Mirror()
    m.put_pod((NS, "a-0"), _pod("a-0", "a"))
    m.put_decision((NS, "a"), _decision("a", "uid-a"))
    m.put_finished((NS, "a"), "uid-a")
    assert (NS, "a") in m.decisions.items  # its pod still runs: the neighbour rule reads its record
    m.put_pod((NS, "a-0"), None)
    assert (NS, "a") not in m.decisions.items  # the last pod gone: dropped


def test_only_the_finished_workloads_own_decision_is_dropped() -> None:
    m = Mirror()
    # a Workload re-created under the same name (new uid) while the old one's decision is still there
    m.put_finished((NS, "a"), "uid-old")
    m.put_decision((NS, "a"), _decision("a", "uid-new"))
    assert (NS, "a") in m.decisions.items
    # the new Workload's events clear the name; a Workload that is not Finished keeps its decision
    m.put_finished((NS, "a"), None)
    m.put_decision((NS, "a"), _decision("a", "uid-new"))
    assert (NS, "a") in m.decisions.items
    m.put_decision((NS, "c"), _decision("c", "uid-c"))
    assert (NS, "c") in m.decisions.items


def _speedups(ctrl: Controller) -> list[Any]:
    """The decision metrics' speedup series, read from the controller's mirror."""
    return list(next(iter(DecisionCollector(lambda: ctrl.mirror.decisions.items).collect())).samples)


def test_the_operator_holds_nothing_of_a_finished_workload() -> None:
    """Through the kopf handlers: the decision index keeps no body at all (the mirror is the one
    holder), and after the Workload finishes neither the mirror nor the decision metrics have it."""
    ctrl = Controller(settings=OperatorSettings(), api=None, health=HealthState())  # type: ignore[arg-type]
    registry = build_registry(ctrl)
    fns = {h.id: h.fn for h in registry._indexing.get_all_handlers()}

    async def run() -> dict[Any, Any]:
        kept = await fns["ss_decisions"](body=kopf.Body(_decision("a", "uid-a")))  # type: ignore[call-arg]
        running = _workload("a", "uid-a", "QuotaReserved", "Admitted")
        await fns["ss_workloads"](namespace=NS, name="a", uid="uid-a", body=kopf.Body(running))  # type: ignore[call-arg]
        assert (NS, "a") in ctrl.mirror.decisions.items
        assert len(_speedups(ctrl)) == 1
        done = _workload("a", "uid-a", "QuotaReserved", "Admitted", "Finished")
        await fns["ss_workloads"](namespace=NS, name="a", uid="uid-a", body=kopf.Body(done))  # type: ignore[call-arg]
        return dict(kept)

    assert asyncio.run(run()) == {}
    assert not ctrl.mirror.decisions.items
    assert not ctrl.mirror.holding.items
    assert _speedups(ctrl) == []
