"""The names in a reading's ``device`` column that are not a chip: the host and a training rank.

A chip is named by its reader (``npu3-0``, ``cuda1``). Host-wide values of a tick (the
workload's RSS, communication timeouts) go under ``HOST_DEVICE``; a training rank's own series
(step time in traces, exports and charts) and its files (heartbeats, captures, injected faults)
under ``rank_device(workload, rank)``. The store, the analysis, the report and the workloads all
name them through here, so a reader finds what a writer wrote.
"""

from __future__ import annotations

HOST_DEVICE = "host"
"""Pseudo-device holding host-level values of a tick: the workload's RSS and comm timeouts."""


def rank_device(workload: str, rank: int) -> str:
    """The key of one training rank: ``lm-rank3``."""
    return f"{workload}-rank{rank}"
