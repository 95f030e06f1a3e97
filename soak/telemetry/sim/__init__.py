"""telemetry/sim."""
