"""What a cluster node agent tells its leader about its own chips: bucket summaries.

In a cluster run every node agent analyses its own chips and ranks; the leader compares
them with their peers (``soak.analysis.peers``) and judges the cluster from these summaries,
never from every node's raw samples. Per chip or rank, per metric of the peer comparison,
per time bucket of the comparison (``[peers] bucket_s``, aligned on the run's planned
start so that every node's buckets line up):

- the bucket statistic the comparison uses (median; HBM: minimum) and the readings behind
  it (the comparison leaves out a bucket mostly in a gap);
- the seconds of the bucket those readings cover (``soak.analysis.evidence``): coverage and
  chip-hours are sums of these, computed by the store.

Metric ``any`` is a chip's readings of any chip metric: what its chip-hours count.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from soak.analysis.evidence import CHIP_METRICS, covered_per_bucket, is_host
from soak.analysis.peers import bucket_stats
from soak.analysis.trace import Trace

ANY = "any"

Row = tuple[str, str, float, float | None, int, float]  # device, metric, ts, value, n, covered_s


def bucket_edges(origin: float, width: float, start: float, stop: float) -> np.ndarray:
    """Starts of the buckets from the one holding ``start`` to the last that starts before
    ``stop``, and the end of that last one."""
    first = math.floor((start - origin) / width + 1e-9)
    last = math.ceil((stop - origin) / width - 1e-9)
    return origin + np.arange(first, max(first, last) + 1) * width


def node_rows(trace: Trace, origin: float, width: float, tick_s: float, start: float, stop: float,
              end: float) -> Iterator[Row]:
    """The bucket rows of one node's trace for the buckets from ``start`` (a bucket start)
    up to ``stop`` (exclusive; a bucket end). ``end`` bounds what readings cover (the run's
    planned end: a node that ran on for a few seconds adds nothing past it)."""
    edges = bucket_edges(origin, width, start, stop)
    if edges.size < 2:
        return
    lo, hi = float(edges[0]), float(edges[-1])
    chips: dict[str, list[np.ndarray]] = {}
    for s in trace.series():
        if not is_host(s.device) and s.metric in CHIP_METRICS:
            chips.setdefault(s.device, []).append(s.t)
    for dev, metric, ts, y, n in bucket_stats(trace, origin, width, start=lo):
        keep = ts < hi - 1e-9
        s = trace.get(dev, metric)
        cov = covered_per_bucket(s.t, tick_s, edges, end)
        idx = np.floor((ts[keep] - lo) / width + 0.5).astype(np.int64)
        for b, v, k in zip(idx.tolist(), y[keep].tolist(), n[keep].tolist(), strict=True):
            yield dev, metric, float(edges[b]), v, int(k), float(cov[b])
    for dev, times in chips.items():
        t = np.unique(np.concatenate(times))
        cov = covered_per_bucket(t, tick_s, edges, end)
        counts = np.histogram(t, bins=edges)[0]
        for b in np.flatnonzero((cov > 0) | (counts > 0)).tolist():
            yield dev, ANY, float(edges[b]), None, int(counts[b]), float(cov[b])
