"""Benchmark of the drift sweep's per-workload cost: what the operator spends, every
`driftIntervalSeconds`, on each admitted workload (parse its SpeculationDecision, re-decide on its node).

    .venv/bin/python bench/drift_bench.py

On the cluster of bench/decide_bench.py (500 nodes, 4 neighbours per node). Prints median and p99 CPU
per workload and the sweep's cost per 1,000 admitted workloads. Figures, not a timed test; one core.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from decide_bench import NOW, _p99, build, measure

from sovereignspec.api.meta import CONTROLLER_NAME
from sovereignspec.api.speculation_decision import SpeculationDecision
from sovereignspec.model.cluster import AdmissionCheckInfo
from sovereignspec.model.workload import CheckEntry
from sovereignspec.policy.decide import decide
from sovereignspec.policy.decision import speculation_decision_object
from sovereignspec.policy.drift import evaluate_drift


def main() -> int:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    request, snapshot, policies = build()
    snapshot = snapshot.model_copy(
        update={"admission_checks": [AdmissionCheckInfo(name=request.check, controller_name=CONTROLLER_NAME)]}
    )
    d = decide(request, snapshot, policies, NOW)
    assert d.state == "Ready" and d.node, d.message
    raw = speculation_decision_object(d, request.workload.uid)
    raw["metadata"]["generation"] = 1
    decision = SpeculationDecision.model_validate(raw)
    admitted = request.workload.model_copy(update={"checks": [CheckEntry(name=request.check, state="Ready")]})
    result = evaluate_drift(admitted, request.check, decision, snapshot, NOW)
    assert result is not None, "nothing compared"
    print(f"drift of a workload admitted on {d.node} with {d.speculative.config!r}: {result.message}")

    for _ in range(5):
        evaluate_drift(admitted, request.check, decision, snapshot, NOW)
    _, parse_cpu = measure(lambda: SpeculationDecision.model_validate(raw), 300)
    _, eval_cpu = measure(lambda: evaluate_drift(admitted, request.check, decision, snapshot, NOW), 300)
    for label, cpu in (("parse SpeculationDecision", parse_cpu), ("evaluate_drift", eval_cpu)):
        med, p99 = statistics.median(cpu), _p99(cpu)
        print(f"{label:<28} cpu median {med:6.3f} ms  p99 {p99:6.3f} ms  (n={len(cpu)})")
    per = statistics.median(parse_cpu) + statistics.median(eval_cpu)
    print(f"sweep over 1,000 admitted workloads: about {per:.2f} s of CPU (median sum x 1,000)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
