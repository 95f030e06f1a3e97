"""A soak across several nodes: starting the agents (``launch``), reading the hostfile."""
