"""What ``/metrics`` knows beyond the latest snapshot, kept from every tick (a sampler sink).

- **The slow views' last reads.** A tick's snapshot holds a chip's ECC counts, port state and
  fault codes only when that tick read them (``soak.telemetry.backends``); a scrape serves
  the last read of each, so a series does not come and go between reads, and a read that fell
  between two scrapes is still served.
- **How long each sensor reading has not changed** (``soak_device_reading_unchanged_seconds``) and
  whether that is stale (``soak_device_reading_stale``): the rule of
  ``soak.analysis.stale`` online, on what the chips' current stretches are. A chip's reading is
  stale when it has held still for ``stale.min_unchanged_s`` and ``stale.peer_factor`` times
  the peers' median current stretch, while at least ``stale.min_peers_moving_frac`` of them
  (``stale.min_peers`` at least) changed since it last did. Times are the snapshots' (the
  run's time line).
"""

from __future__ import annotations

import statistics
import threading
from dataclasses import replace
from typing import Any

from soak.analysis.profile import StaleParams
from soak.telemetry.records import DeviceSample, Snapshot

DETAIL_FIELDS = (
    "ecc_single_bit_errors", "ecc_double_bit_errors", "ecc_single_bit_isolated_pages",
    "ecc_double_bit_isolated_pages", "link_up", "link_up_count", "fault_codes", "fault_texts",
    "aicpu_util_pct", "mem_bw_util_pct",
)
"""The slow views' fields (``npu-smi info -t``, ``hccn_tool``): served from their last read."""
WATCHED = ("temp_c", "power_w")
"""The readings whose unchanged stretch is served: the sensors (``soak.analysis.stale.METRICS``;
utilization and HBM hold still for real reasons)."""


class ReadingTracker:
    """A sampler sink (``__call__(snapshot)``); ``fill`` and ``unchanged`` for the collector.

    The sampler thread calls it, a scrape reads it: one lock around both."""

    def __init__(self, params: StaleParams | None = None) -> None:
        self.params = params or StaleParams()
        self._lock = threading.Lock()
        self._details: dict[str, dict[str, Any]] = {}
        self._since: dict[tuple[str, str], tuple[float, float]] = {}  # (device, metric) -> (value, since)
        self._ts: float | None = None

    def __call__(self, snap: Snapshot) -> None:
        with self._lock:
            self._ts = snap.ts
            for d in snap.devices:
                if not d.up:
                    continue
                read = {k: getattr(d, k) for k in DETAIL_FIELDS if getattr(d, k) is not None}
                if read:
                    self._details.setdefault(d.device, {}).update(read)
                for metric in WATCHED:
                    v = getattr(d, metric)
                    if v is None:
                        continue
                    was = self._since.get((d.device, metric))
                    if was is None or was[0] != float(v):
                        self._since[(d.device, metric)] = (float(v), snap.ts)

    def fill(self, d: DeviceSample) -> DeviceSample:
        """``d`` with the slow views' fields of their last read where this tick read none."""
        if not d.up:
            return d
        with self._lock:
            known = self._details.get(d.device)
            if not known:
                return d
            missing = {k: v for k, v in known.items() if getattr(d, k) is None}
        return replace(d, **missing) if missing else d

    def unchanged(self) -> list[tuple[str, str, float, bool]]:
        """(device, metric, seconds unchanged, stale) of every watched reading."""
        p = self.params
        with self._lock:
            now = self._ts
            since = dict(self._since)
        if now is None:
            return []
        out = []
        by_metric: dict[str, dict[str, float]] = {}
        for (device, metric), (_v, t) in since.items():
            by_metric.setdefault(metric, {})[device] = max(0.0, now - t)
        for metric, held in sorted(by_metric.items()):
            for device, seconds in sorted(held.items()):
                peers = [s for dev, s in held.items() if dev != device]
                stale = False
                if len(peers) >= p.min_peers and seconds >= p.min_unchanged_s:
                    moved = sum(1 for s in peers if s < seconds)
                    stale = (seconds >= p.peer_factor * statistics.median(peers)
                             and moved >= max(p.min_peers, p.min_peers_moving_frac * len(peers)))
                out.append((device, metric, seconds, stale))
        return out
