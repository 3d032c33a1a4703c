"""Telemetry adapters: Prometheus reader and the GPU/vLLM telemetry simulator.

The operator uses `PrometheusReader(url, policy.telemetry, metrics=default_metrics())` and
`reader.snapshot(identities_from_pods(pods))`; `join_acceptance` and `draft_identity` are pure.
"""
