"""`decide()`: the single entry point of the decision core (DESIGN.md §2-§4). Pure and deterministic.

    decide(request: AdmissionRequest, snapshot: ClusterSnapshot, policies: Policies, now) -> Decision

The operator and `sovereignspec decide` both call it: build the snapshot with
`sovereignspec.policy.parse` (or from kopf indexes with the same `parse_*` functions), find the check
and policies with `sovereignspec.policy.request.request_for`, then turn the Decision into writes with
`sovereignspec.policy.decision` and `sovereignspec.policy.admission_check`.

Hard rules first (`candidates`: sovereignty, flavor, TAS, template, taints, capacity, isolation, I1-I5),
then speculation (`speculation`, `budget`: only ever switched off by missing telemetry, I6), then
class-aware placement (`placement`), then additive podSetUpdates (I4). `Rejected` only when no node in
the cluster can ever pass the static rules, the tenant's policies contradict, or a template pins a
config the policy refuses, or a multi-node group's pod set holds pods that each need a whole node
(policy/group.py: only TAS can place those); anything that can change gives `Retry` after
`retryAfterSeconds`. Caches
live in `sovereignspec.policy.cache`, not here; docs/decision-core.md maps the modules.
"""

from __future__ import annotations

from datetime import datetime

from sovereignspec.model.cluster import ClusterSnapshot
from sovereignspec.policy.budget import batch_ranges
from sovereignspec.policy.cache.facts import Facts, batch_policies
from sovereignspec.policy.cache.index import index_of
from sovereignspec.policy.candidates import constraints_of, sovereign_candidates
from sovereignspec.policy.claims import read_claims
from sovereignspec.policy.group import plan_group
from sovereignspec.policy.pin import read_pins
from sovereignspec.policy.placement import choose, pod_set_updates
from sovereignspec.policy.record import Decision, ReasonType, Record, Refusal
from sovereignspec.policy.report import admitted_fields, admitted_reasons
from sovereignspec.policy.request import AdmissionRequest, Policies, not_actionable
from sovereignspec.policy.sovereignty import PolicyConflict, rules_for_namespace, tenant_of
from sovereignspec.policy.speculation import evaluate_candidates, placed_budget, speculation_gate


def decide(
    request: AdmissionRequest, snapshot: ClusterSnapshot, policies: Policies, now: datetime
) -> Decision:
    wl, policy = request.workload, policies.speculation
    record = Record.of(wl, request.check, snapshot.telemetry, now)
    if (why_not := not_actionable(request)) is not None:
        return record.pending(why_not)
    ns_labels = index_of(snapshot).ns_labels
    tenant = tenant_of(wl.namespace, ns_labels)
    try:
        rules = rules_for_namespace(wl.namespace, ns_labels, policies.sovereignty)
    except PolicyConflict as exc:
        return record.finish("Rejected", ReasonType.CONTRADICTORY_POLICIES, str(exc), tenant=tenant)

    # The workload's claims (every pod of a group must agree: policy/group.py), and what its templates
    # pin (a pin the policy forbids is refused).
    group = plan_group(wl, snapshot)
    if group.waiting is not None:
        return record.finish("Pending", ReasonType.WAITING_FOR_PODS, group.waiting)
    if group.refusal is not None:
        return record.refuse(group.refusal, tenant=tenant)
    wl = group.workload
    claims = read_claims(group.claims.annotations, policy, rules)
    pins = read_pins(wl.pod_sets, policy)
    if (refused := pins.refused) is not None:
        return record.finish("Rejected", refused.type, refused.message, tenant=tenant)

    # Hard rules (I1-I5): the sovereign candidates, or why there are none (a multi-node engine: whole nodes).
    retry = policy.retry_after_seconds
    constraints = group.fit(constraints_of(wl, snapshot.flavors, snapshot.nodes, rules, retry))
    if isinstance(constraints, Refusal):
        return record.refuse(constraints, tenant=tenant)
    facts = Facts(snapshot, batch_policies(snapshot, policies, claims), wl, rules, request.gpus_held)
    if isinstance(cands := sovereign_candidates(facts, constraints, retry), Refusal):
        return record.refuse(cands, tenant=tenant)

    # Speculation: allowed at all, and what it predicts on each candidate (S_real, slack, k*).
    gate = group.gate(speculation_gate(facts, claims, pins, now))
    ranges = batch_ranges(policy.batch_breakpoints, policy.max_batch)
    options = evaluate_candidates(facts, cands, claims, gate, ranges)

    # Placement (whole nodes for a multi-node engine), then k*(B) on the node(s) or the template's pin.
    tas = constraints.tas is not None
    place = group.place(choose(facts, options, gate.off is None, claims, tas), cands, rules, retry)
    if isinstance(place, Refusal):
        return record.refuse(place, tenant=tenant)
    chosen = cands.nodes[place.chosen]
    budget = placed_budget(options, place.placed, chosen.name, gate, ranges, claims, pins, policy)

    # The record: additive pod-set updates (I4), every reason, the figures, the message.
    node_of, placements, note = group.fields(cands, place)
    updates, conflicts = pod_set_updates(
        wl, rules, chosen, budget, tas, constraints.flavor_labels_by_set, pins, node_of
    )
    return record.finish(
        "Ready", tenant=tenant, gpus=constraints.need, pod_set_updates=updates, placements=placements,
        reasons=admitted_reasons(options, place, budget, claims, conflicts),
        **admitted_fields(facts, options, place, budget, claims, gate.estimate, note),
    )  # fmt: skip
