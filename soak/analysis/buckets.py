"""Time buckets: the statistics the peer comparison reads, and what a cluster node agent
tells its leader about its own chips.

The peer comparison (``soak.analysis.peers``) works on one matrix chips x buckets per
metric, whichever source made it: a raw trace (``soak analyze``, a single-node run),
reduced here by :func:`bucket_stats` (:class:`TraceBuckets`), or the same statistics the
node agents of a cluster run computed with it and stored (:class:`StoredBuckets`).

In a cluster run every node agent analyses its own chips and ranks; the leader compares
them with their peers and judges the cluster from these summaries, never from every node's
raw samples. Per chip or rank, per metric of the peer comparison, per time bucket of the
comparison (``[peers] bucket_s``, aligned on the run's planned start so that every node's
buckets line up):

- the bucket statistic the comparison uses (:data:`BUCKET_METRICS`: median; HBM: minimum)
  and the readings behind it (the comparison leaves out a bucket mostly in a gap);
- the seconds of the bucket those readings cover (``soak.analysis.evidence``): coverage and
  chip-hours are sums of these, computed by the store.

Metric ``any`` is a chip's readings of any chip metric: what its chip-hours count.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from soak.analysis._stats import block_reduce_many, median_of_counts
from soak.analysis.evidence import CHIP_METRICS, covered_per_bucket, is_host
from soak.analysis.profile import Profile
from soak.analysis.tails import TAIL_METRICS, base_metric, tails_of_blocks
from soak.analysis.trace import Trace
from soak.device_names import device_key

ANY = "any"
GIB = 1 << 30
# The statistic of each metric per bucket. HBM: the minimum, the retained level under the
# allocator sawtooth; hbm_total_bytes: the chip's model (its peers), capacity to the GiB.
BUCKET_METRICS: dict[str, str] = {
    "temp_c": "median",
    "power_w": "median",
    "util_pct": "median",
    "hbm_used_bytes": "min",
    "step_time_s": "median",
    "compute_s": "median",
    "busbw_gbps": "median",
    "hbm_total_bytes": "median",
    # a rank's stalls: the share of its readings beyond 1.5x the bucket's median, and their size
    **{m: m.split(":")[1] for m in TAIL_METRICS},
}

Row = tuple[str, str, float, float | None, int, float]  # device, metric, ts, value, n, covered_s


MAX_BUCKETS = 1_000_000  # ~19 years of 600 s buckets
MIN_READINGS = 2  # a bucket of fewer readings is left out of the comparison (one reading is no median)


class Grid:
    """Time-aligned buckets: ``n`` of ``width`` seconds from ``origin``."""


    def __init__(self, origin: float, width: float, n: int) -> None:
        self.origin, self.width, self.n = origin, width, n

    def centres(self) -> np.ndarray:
        return self.origin + (np.arange(self.n) + 0.5) * self.width

    def phase_mask(self, profile: Profile) -> np.ndarray:
        """Buckets overlapping an explicit phase window (a declared reason to differ)."""
        mask = np.zeros(self.n, bool)
        lo = self.origin + np.arange(self.n) * self.width
        for ph in profile.phases:
            for a, b in ph.windows:
                mask |= (lo < b) & (lo + self.width > a)
        return mask


def grid_for(profile: Profile, origin: float, end: float) -> Grid | None:
    """The time-aligned buckets from ``origin`` to ``end``; None when the span is too short to
    compare anything, or longer than any soak (a corrupt timestamp)."""
    p = profile.peers
    n_buckets = int(math.floor((end - origin) / p.bucket_s)) + 1
    if n_buckets * p.bucket_s < p.min_duration_s or n_buckets > MAX_BUCKETS:
        # (the per-chip detectors still run; a grid over decades would not fit in memory)
        return None
    return Grid(origin, p.bucket_s, n_buckets)


class Buckets:
    """Bucket statistics as matrices (one row per chip or rank, one column per bucket)."""

    grid: Grid

    def series(self, metric: str) -> Iterator[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
        """(key, bucket starts, statistic, readings) of every series of ``metric``."""
        raise NotImplementedError

    def place(self, key: str) -> tuple[str | None, str]:
        raise NotImplementedError

    def matrix(self, metric: str, skip: np.ndarray) -> dict[str, np.ndarray]:
        out = {}
        for key, ts, y, n in self.series(metric):
            if ts.size == 0:
                continue
            ok = n >= max(MIN_READINGS, 0.3 * median_of_counts(n))  # a bucket mostly in a gap is unreliable
            idx = np.floor((ts[ok] - self.grid.origin) / self.grid.width + 0.5).astype(np.int64)
            row = np.full(self.grid.n, np.nan)
            inside = (idx >= 0) & (idx < self.grid.n)
            row[idx[inside]] = y[ok][inside]
            row[skip] = np.nan
            out[key] = row
        return out

    def capacity(self, key: str) -> float | None:
        """HBM capacity to the GiB (the chip's model), None where not read."""
        if not hasattr(self, "_capacity"):
            self._capacity = {k: float(round(float(np.median(y)) / GIB) * GIB)
                              for k, _, y, _ in self.series("hbm_total_bytes") if y.size}
        return self._capacity.get(key)


class TraceBuckets(Buckets):
    """Buckets computed from a trace's raw samples (``soak analyze``, a single-node run)."""

    def __init__(self, trace: Trace, grid: Grid) -> None:
        self.trace, self.grid = trace, grid

    def series(self, metric: str) -> Iterator[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
        for dev, _m, ts, y, n in bucket_stats(self.trace, self.grid.origin, self.grid.width, (metric,)):
            yield dev, ts, y, n

    def place(self, key: str) -> tuple[str | None, str]:
        return self.trace.place(key)


class StoredBuckets(Buckets):
    """Buckets the node agents of a cluster run wrote (``Store.load_buckets``), read one
    metric at a time: the leader never holds every node's raw samples, nor more than one
    metric's rows (what it keeps is a few MB of arrays a metric)."""

    def __init__(self, load: Callable[[str], list[tuple[Any, ...]]], grid: Grid) -> None:
        self._load, self.grid = load, grid
        self._places: dict[str, tuple[str | None, str]] = {}
        self._cache: dict[str, list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]] = {}

    def series(self, metric: str) -> Iterator[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
        if metric not in self._cache:
            self._cache[metric] = list(self._read(metric))
        yield from self._cache[metric]

    def _read(self, metric: str) -> Iterator[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
        rows = self._load(metric)  # (node, device, metric, ts, value, n), sorted by node, device, ts
        for (node, dev), block in itertools.groupby(rows, key=operator.itemgetter(0, 1)):
            values = np.array([r[3:6] for r in block], dtype=np.float64)
            key = device_key(node, dev)
            self._places[key] = (node, dev)
            yield key, values[:, 0], values[:, 1], values[:, 2]

    def place(self, key: str) -> tuple[str | None, str]:
        return self._places.get(key, (None, key))


def bucket_stats(trace: Trace, origin: float, width: float, metrics: Iterable[str] = tuple(BUCKET_METRICS),
                 start: float | None = None) -> Iterator[tuple[str, str, np.ndarray, np.ndarray, np.ndarray]]:
    """(device, metric, bucket starts, statistic, readings) of every chip and rank series of
    ``metrics`` (the host row is no chip): what the comparison reads, and what a cluster
    node agent stores for its leader. ``start`` leaves out the buckets before it."""
    for metric in metrics:
        how = BUCKET_METRICS[metric]
        devices, ts, vs = [], [], []
        for s in trace.series(base_metric(metric)):
            if is_host(s.device):
                continue
            t, v = s.t, s.v
            if start is not None:
                keep = t >= start
                t, v = t[keep], v[keep]
            devices.append(s.device)
            ts.append(t)
            vs.append(v)
        if metric in TAIL_METRICS:  # the stalls beside each bucket's median
            medians = block_reduce_many(ts, vs, width, "median", origin)
            reduced = [tails_of_blocks(v, *m, how) for v, m in zip(vs, medians, strict=True)]
        else:
            reduced = block_reduce_many(ts, vs, width, how, origin)
        for dev, (tc, y, n) in zip(devices, reduced, strict=True):
            if tc.size:
                yield dev, metric, tc - width / 2, y, n


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
        s = trace.get(dev, base_metric(metric))
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
