"""GPU/vLLM telemetry simulator: dcgm-exporter- and vLLM-shaped metrics from a small load model."""
