"""workloads."""
