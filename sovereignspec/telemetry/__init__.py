"""Telemetry adapters: Prometheus reader and the GPU/vLLM telemetry simulator."""
