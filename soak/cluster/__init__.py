"""A soak across several nodes: the agent's part of a cluster run (``member``, ``node``), its
state (``status``), starting the agents (``launch``) and reading the hostfile."""
