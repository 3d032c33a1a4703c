"""Evidence for the model: a multi-tenant GPU cluster simulator, policy comparison, claims, calibration.

The simulator's ground truth (`truth`) is deliberately richer than the decision core's model: a
roofline hinge instead of a linear step time, a KV-cache/attention term that grows with context,
bandwidth as well as compute contention between co-located engines, batch-dependent draft cost,
per-position acceptance that decays with depth and drifts over time, step noise, and telemetry that
is lagged and noisy. SovereignSpec is run through the real `sovereignspec.policy.decide.decide()` on
snapshots built from that noisy telemetry only.
"""
