"""The operator takes its policies from `request_for` per decision: a new `Policies` with a new tuple of
the same SovereigntyPolicy objects each time, and the built-in defaults when no SpeculationPolicy is
named. The decision core's facts must still be found again on the next (patched) snapshot. Before
`keys.interned`, every operator decision rebuilt every node's evaluation input (21-23 ms against
0.6-0.7 ms on 500 nodes, docs/scale.md session 12), while benchmarks that passed one `Policies` object
never saw it."""

from __future__ import annotations

import pytest

from sovereignspec.api.meta import CONTROLLER_NAME
from sovereignspec.model.cluster import AdmissionCheckInfo, ClusterSnapshot
from sovereignspec.policy import node_state
from sovereignspec.policy.cache import carry_index, drop_index, index_of
from sovereignspec.policy.cache.keys import interned
from sovereignspec.policy.decide import decide
from sovereignspec.policy.request import request_for
from tests.unit.test_snapshot_reuse import NODES, NOW, _base, _request


def _with_check(snap: ClusterSnapshot) -> ClusterSnapshot:
    check = AdmissionCheckInfo(name="sovereignspec", controller_name=CONTROLLER_NAME)
    return snap.model_copy(update={"admission_checks": [check]})


def _patched(prev: ClusterSnapshot, i: int) -> ClusterSnapshot:
    """One pod moved to another node, as a binding would: the operator's patched snapshot."""
    pods = list(prev.pods)
    pods[0] = pods[0].model_copy(update={"node": NODES[i % len(NODES)]})
    nxt = prev.model_copy(update={"pods": pods, "sovereignty_policies": list(prev.sovereignty_policies)})
    drop_index(nxt)
    by_key = dict(index_of(prev).pod_by_key)
    by_key[(pods[0].namespace, pods[0].name)] = pods[0]
    carry_index(nxt, prev, (by_key, {(pods[0].namespace, pods[0].name)}))
    return nxt


def test_policies_from_request_for_keep_the_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    original = node_state.node_input

    def counted(node, *args, **kwargs):  # type: ignore[no-untyped-def]
        built.append(node.name)
        return original(node, *args, **kwargs)

    monkeypatch.setattr("sovereignspec.policy.cache.facts.node_input", counted)
    request = _request("shop", speculate=True)
    snap = _with_check(_base())
    req, pol = request_for(request.workload, snap)
    decide(req, snap, pol, NOW)
    assert sorted(set(built)) == NODES  # cold: every node's input once
    for i in range(1, 6):
        snap = _patched(snap, i)
        req, fresh = request_for(request.workload, snap)
        assert fresh is not pol and fresh.speculation is pol.speculation  # the defaults: one object
        built.clear()
        decide(req, snap, fresh, NOW)
        # Only the nodes the moved pod left and joined, and n0 (whose GPU sample names it), are
        # evaluated again, not all of them.
        assert set(built) <= {NODES[i - 1], NODES[i % len(NODES)], "n0"}, built


def test_interned_tuple_is_the_same_for_the_same_objects() -> None:
    a, b = object(), object()
    assert interned([a, b]) is interned((a, b))
    assert interned([a, b]) is not interned([b, a])
    assert interned([]) is interned(())
