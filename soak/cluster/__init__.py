"""Cluster runs: one soak over many nodes, each running the same agent (``soak run``)."""
