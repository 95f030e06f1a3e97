"""Prometheus exporters over the latest soak telemetry snapshot."""
