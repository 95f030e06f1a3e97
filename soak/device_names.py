"""The names in a reading's ``device`` column that are not a chip, and the key people read.

A chip is named by its reader (``npu3-0``, ``cuda1``). Host-wide values of a tick (the
workload's RSS, communication timeouts) go under ``HOST_DEVICE``; a training rank's own series
(step time in traces, exports and charts) and its files (heartbeats, captures, injected faults)
under ``rank_device(workload, rank)``. The store, the analysis, the report and the workloads all
name them through here, so a reader finds what a writer wrote.

A cluster run keeps a reading's node and device apart (the store's columns, the analysis'
places); ``device_key`` is the one place they are joined into the ``node/device`` people read
(and the label of a cluster trace's series). Nothing takes a key apart again: code that needs
the node reads it where it is kept.
"""

from __future__ import annotations

HOST_DEVICE = "host"
"""Pseudo-device holding host-level values of a tick: the workload's RSS and comm timeouts."""


def rank_device(workload: str, rank: int) -> str:
    """The key of one training rank: ``lm-rank3``."""
    return f"{workload}-rank{rank}"


def device_key(node: str | None, device: str) -> str:
    """``device`` as people name it: ``node-1/npu0`` on a cluster node, ``npu0`` without one."""
    return device if node is None else f"{node}/{device}"
