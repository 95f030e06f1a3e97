"""Peer comparison: a chip, rank or node that stays out of line with its peers.

Chips of one model doing the same work should agree on temperature at comparable power,
power, utilization, HBM growth and step time. A relative rule finds what no fixed threshold
can (SuperBench flags a node > 5 % below a fleet baseline; NVIDIA's straggler detection
scores each rank against its peers). Method (parameters in ``[peers]``):

1. **Buckets**: the median of every series in time-aligned ``bucket_s`` buckets (HBM: the
   minimum, the retained level under the allocator sawtooth), one matrix chips x buckets per
   metric. A chip is not compared in a bucket where it idles (``util_pct`` median below
   ``idle_util_pct``) or that overlaps a declared phase window; its temperature is not
   compared where its power is more than ``power_tol_frac`` away from its peers'.
2. **Peers**: chips of one model (the same ``hbm_total_bytes``); ranks (``step_time_s``,
   ``compute_s``, ``busbw_gbps``) are one group. The baseline of a chip in a bucket is the median of the
   *other* chips of its group on its node when there are ``min_peers`` of them, else of the
   others in the whole cluster (both baselines are reported).
3. **Deviation** from the baseline: temperature and utilization in their units; power, step
   time and bandwidth as a ratio (log); HBM as growth since the burn-in of the memory
   detector beyond the peers' growth, in bytes.
4. **Natural spread**: per bucket 1.4826 x MAD of the deviations across the group, median
   over buckets (nodes, when fewer than ``SMALL_GROUP``: of the other nodes' values, so a
   straggler among three does not widen the spread it is judged by).
   Out of line: deviation beyond max(metric floor, ``k_sigma`` x spread) in
   the direction that matters (hotter, more HBM growth, slower step time, lower bandwidth;
   both ways for power and utilization).
5. **Stays out of line**: stretches of out-of-line buckets (one bucket of respite
   bridged) lasting ``min_duration_s`` with ``min_share`` of their buckets out, and from
   the first stretch to the last the hourly medians of the deviation on the bad side
   often enough (one-sided sign test, confidence >= ``min_confidence``): a chip whose
   deviation swings with a daily cycle is not out of line. The finding gives the baseline,
   the deviation (median over the out-of-line buckets), since when, and that confidence.

The comparison runs on bucket matrices from either source: a raw trace (``soak analyze``, a
single-node run), reduced here by :func:`bucket_stats`, or the same statistics the node
agents of a cluster run computed with it and stored (``soak.analysis.buckets``).

Stragglers: a rank's step time, compute time (outside the collectives) or bandwidth out of
line with its peers is a ``straggler`` on that rank; in a cluster trace each node's median
over its ranks is also compared with the other nodes (``device`` None: the whole node is
slow; its summary and ``details["members"]`` name its ranks), and then its ranks are not
named again against the cluster. ``warn``, ``fail`` from ``straggler_fail_frac``.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from soak.analysis._stats import block_reduce
from soak.analysis.evidence import is_host
from soak.analysis.model import Finding
from soak.analysis.profile import PeersParams, Profile
from soak.analysis.trace import Trace

DETECTOR_VERSION = "peers/1.0"
GIB = 1 << 30
# compute_s, the time outside the collectives: under synchronous data parallelism every rank
# waits for the slowest in the all-reduce, so step times agree and only this names the slow one
STEP_METRICS = ("step_time_s", "compute_s")
BANDWIDTH_METRICS = ("busbw_gbps",)


@dataclass(frozen=True)
class _Spec:
    """How one metric is compared."""

    metric: str
    kind: str  # outlier | straggler
    scale: str  # abs | log | growth
    direction: int  # +1 high is bad, -1 low is bad, 0 both
    how: str  # bucket statistic
    floor: Callable[[PeersParams, float | None], float]  # in deviation units; arg: capacity
    unit: str


SPECS = (
    # A cooler chip at the same power is no defect; a hotter one is a cooling problem.
    _Spec("temp_c", "outlier", "abs", 1, "median", lambda p, c: p.temp_min_c, "C"),
    _Spec("power_w", "outlier", "log", 0, "median", lambda p, c: math.log1p(p.power_min_frac), "W"),
    _Spec("util_pct", "outlier", "abs", 0, "median", lambda p, c: p.util_min_pct, "%"),
    _Spec("hbm_used_bytes", "outlier", "growth", 1, "min",
          lambda p, c: p.hbm_growth_min_frac * c if c else math.inf, "MB"),
    _Spec("step_time_s", "straggler", "log", 1, "median", lambda p, c: math.log1p(p.step_min_frac), "s"),
    _Spec("compute_s", "straggler", "log", 1, "median", lambda p, c: math.log1p(p.step_min_frac), "s"),
    _Spec("busbw_gbps", "straggler", "log", -1, "median", lambda p, c: -math.log1p(-p.bw_min_frac), "GB/s"),
)


BUCKET_METRICS: dict[str, str] = {
    **{spec.metric: spec.how for spec in SPECS},
    "hbm_total_bytes": "median",  # the chip's model (its peers): capacity to the GiB
}


def grid_for(profile: Profile, origin: float, end: float) -> _Grid | None:
    """The time-aligned buckets from ``origin`` to ``end``; None when the span is too short to
    compare anything, or longer than any soak (a corrupt timestamp)."""
    p = profile.peers
    n_buckets = int(math.floor((end - origin) / p.bucket_s)) + 1
    if n_buckets * p.bucket_s < p.min_duration_s or n_buckets > MAX_BUCKETS:
        # (the per-chip detectors still run; a grid over decades would not fit in memory)
        return None
    return _Grid(origin, p.bucket_s, n_buckets)


def detect(trace: Trace, profile: Profile, run_start: float, run_end: float) -> list[Finding]:
    """Peer findings of a trace (one node, or a cluster trace with nodes)."""
    grid = grid_for(profile, run_start, run_end)
    if grid is None:
        return []
    return compare(TraceBuckets(trace, grid), profile, run_start)


def compare(src: Buckets, profile: Profile, run_start: float) -> list[Finding]:
    """The peer comparison over bucketed matrices, whichever source made them: a raw trace
    (:class:`TraceBuckets`) or the buckets the node agents of a cluster run stored
    (:class:`StoredBuckets`)."""
    p = profile.peers
    grid = src.grid
    skip = grid.phase_mask(profile)
    util = src.matrix("util_pct", skip)
    idle = {k: row < p.idle_util_pct for k, row in util.items()}
    out: list[Finding] = []
    for spec in SPECS:
        rows = src.matrix(spec.metric, skip)
        for k in rows:
            if k in idle:
                rows[k] = np.where(idle[k], np.nan, rows[k])
        if spec.metric == "temp_c":
            _comparable_power(src, skip, rows, p)
        for keys, cap in _groups(src, list(rows), spec):
            out.extend(_compare(src, grid, spec, {k: rows[k] for k in keys}, cap, profile, run_start))
    return out


class Buckets:
    """Bucket statistics as matrices (one row per chip or rank, one column per bucket)."""

    grid: _Grid

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
            ok = n >= max(2, 0.3 * float(np.median(n)))  # a bucket mostly in a gap is unreliable
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

    def __init__(self, trace: Trace, grid: _Grid) -> None:
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

    def __init__(self, load: Callable[[str], list[tuple[Any, ...]]], grid: _Grid) -> None:
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
            key = f"{node}/{dev}"
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
        for s in trace.series(metric):
            if is_host(s.device):
                continue
            t, v = s.t, s.v
            if start is not None:
                keep = t >= start
                t, v = t[keep], v[keep]
            tc, y, n = block_reduce(t, v, width, how, origin=origin)
            if tc.size:
                yield s.device, metric, tc - width / 2, y, n


def _out_of_line(spec: Any, t: np.ndarray, dev: np.ndarray, limit: float, p: Any) -> Any:
    """(valid mask, times, deviations, sign, selection, stretches) of a series that stays out
    of line with enough confidence; None otherwise. One rule for chips, ranks and nodes."""
    ok = np.isfinite(dev)
    if ok.sum() < 2:
        return None
    tv, dv = t[ok], dev[ok]
    f = _finding(spec, tv, dv, limit, p)
    if f is None:
        return None
    sign, sel, stretches = f
    if _confidence_of(tv, dv, stretches, sign) < p.min_confidence:
        return None
    return ok, tv, dv, sign, sel, stretches


MAX_BUCKETS = 1_000_000  # ~19 years of 600 s buckets


class _Grid:
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


def _comparable_power(src: Buckets, skip: np.ndarray, temps: dict[str, np.ndarray], p: PeersParams) -> None:
    """Blank each chip's temperature where its power is not comparable with its peers'."""
    power = src.matrix("power_w", skip)
    if len(power) < p.min_peers + 1:
        return
    keys = list(power)
    mat = np.vstack([power[k] for k in keys])
    others, _ = _medians_of_others(mat)
    with np.errstate(all="ignore"):
        for i, k in enumerate(keys):
            if k not in temps:
                continue
            off = np.abs(mat[i] / others[i] - 1.0) > p.power_tol_frac
            temps[k] = np.where(off, np.nan, temps[k])


def _groups(src: Buckets, keys: list[str], spec: _Spec) -> list[tuple[list[str], float | None]]:
    """Peers: chips of one model (HBM capacity, to the GiB); ranks are one group."""
    if spec.kind == "straggler":
        return [(sorted(keys), None)]
    by: dict[float | None, list[str]] = defaultdict(list)
    for k in keys:
        by[src.capacity(k)].append(k)
    return [(sorted(v), c) for c, v in by.items()]


def _nanmedian(mat: np.ndarray) -> np.ndarray:
    """Median over rows ignoring NaN, NaN where a column has none (no warning)."""
    if mat.shape[0] == 0:
        return np.full(mat.shape[1], np.nan)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmedian(mat, axis=0)


def _transform(spec: _Spec, rows: np.ndarray, profile: Profile, run_start: float, grid: _Grid) -> np.ndarray:
    if spec.scale == "log":
        with np.errstate(all="ignore"):
            return np.where(rows > 0, np.log(rows), np.nan)
    if spec.scale == "growth":
        # Growth since the memory detector's burn-in: warm-up and early allocator step-ups
        # differ from chip to chip and are not a defect.
        m = profile.memory
        span = grid.n * grid.width
        burn = run_start + max(m.burn_in_h * 3600.0, m.burn_in_frac * span)
        after = grid.centres() >= burn
        base = np.full(rows.shape[0], np.nan)
        for i in range(rows.shape[0]):
            first = rows[i, after][np.isfinite(rows[i, after])][:6]
            if first.size:
                base[i] = np.median(first)
        out = rows - base[:, None]
        out[:, ~after] = np.nan
        return out
    return rows


def _valid_count(mat: np.ndarray) -> np.ndarray:
    return np.isfinite(mat).sum(axis=0)


def _medians_of_others(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row i and column: the median of the *other* rows' values (NaN ignored; NaN where
    none) and how many there are. One sort per column instead of a median per row over all
    the others: 1024 chips of a cluster cost a sort, not 1024 medians of 1023 rows."""
    n_rows = x.shape[0]
    valid = np.isfinite(x)
    count = valid.sum(axis=0)
    order = np.argsort(np.where(valid, x, np.inf), axis=0, kind="stable")  # NaN sort last
    ordered = np.take_along_axis(x, order, axis=0)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(n_rows)[:, None], order.shape), axis=0)
    k = count[None, :] - valid  # the others with a value
    # the others' middle positions, moved past row i's own place in the sorted column
    lo, hi = (k - 1) // 2, k // 2
    lo = np.where(lo < rank, lo, lo + 1)
    hi = np.where(hi < rank, hi, hi + 1)
    top = max(n_rows - 1, 0)
    a = np.take_along_axis(ordered, np.clip(lo, 0, top), axis=0)
    b = np.take_along_axis(ordered, np.clip(hi, 0, top), axis=0)
    with np.errstate(all="ignore"):
        med = np.where(k > 0, (a + b) / 2.0, np.nan)
    return med, k


def _references(x: np.ndarray, members: list[int], min_peers: int) -> dict[int, np.ndarray | None]:
    """Per member: the median of the other members per bucket, NaN where fewer than
    ``min_peers`` of them have a value; None when the group has fewer than that at all."""
    if len(members) - 1 < min_peers:
        return dict.fromkeys(members)
    med, k = _medians_of_others(x[members])
    med[k < min_peers] = np.nan
    return {i: med[j] for j, i in enumerate(members)}


def _spread(dev: np.ndarray) -> float:
    """Natural spread: median over buckets of 1.4826 x MAD of the deviations across chips."""
    ok = _valid_count(dev) >= 3
    if not ok.any():
        return math.nan
    d = dev[:, ok]
    med = _nanmedian(d)
    mad = _nanmedian(np.abs(d - med))
    return float(np.nanmedian(1.4826 * mad))


SMALL_GROUP = 8  # fewer nodes than this: each is judged against the spread of the others


def _spread_of(values: np.ndarray) -> float:
    """Natural spread of values themselves: median over buckets of 1.4826 x MAD across rows
    (at least two rows valid in a bucket)."""
    ok = _valid_count(values) >= 2
    if not ok.any():
        return math.nan
    v = values[:, ok]
    med = _nanmedian(v)
    return float(np.nanmedian(1.4826 * _nanmedian(np.abs(v - med))))


def _stretches(t: np.ndarray, bad: np.ndarray, p: PeersParams) -> list[tuple[int, int]]:
    """(first, last) indices into ``t`` of stretches that stay out of line."""
    idx = np.flatnonzero(bad)
    if idx.size == 0:
        return []
    out = []
    a = b = int(idx[0])
    for j in idx[1:].tolist():
        if j - b <= 2:  # one bucket of respite is bridged
            b = j
            continue
        out.append((a, b))
        a = b = j
    out.append((a, b))
    keep = []
    for a, b in out:
        dur = t[b] - t[a] + p.bucket_s
        share = bad[a : b + 1].mean()
        if dur >= p.min_duration_s and share >= p.min_share:
            keep.append((a, b))
    return keep


def _confidence(t: np.ndarray, d: np.ndarray, sign: int) -> tuple[float, int]:
    """1 - p of a one-sided sign test on hourly medians of the deviation; hours used."""
    from scipy.stats import binom

    hours = np.floor((t - t[0]) / 3600.0)
    meds = np.array([np.median(d[hours == h]) for h in np.unique(hours)])
    meds = meds[meds != 0]
    if meds.size == 0:
        return 0.0, 0
    k = int((np.sign(meds) == sign).sum())
    return float(1.0 - binom.sf(k - 1, meds.size, 0.5)), int(meds.size)


def _confidence_of(tv: np.ndarray, dv: np.ndarray, stretches: list[tuple[int, int]], sign: int) -> float:
    a, b = stretches[0][0], stretches[-1][1] + 1
    return _confidence(tv[a:b], dv[a:b], sign)[0]


def _compare(
    src: Buckets, grid: _Grid, spec: _Spec, rows: dict[str, np.ndarray], cap: float | None,
    profile: Profile, run_start: float,
) -> list[Finding]:
    p = profile.peers
    keys = list(rows)
    if len(keys) < p.min_peers + 1:
        return []
    x = _transform(spec, np.vstack([rows[k] for k in keys]), profile, run_start, grid)
    nodes: dict[str | None, list[int]] = defaultdict(list)
    for i, k in enumerate(keys):
        nodes[src.place(k)[0]].append(i)
    everyone = list(range(len(keys)))
    floor = spec.floor(p, cap)
    out: list[Finding] = []
    slow_nodes: set[str] = set()
    if spec.kind == "straggler" and len(nodes) >= p.min_peers + 1 and None not in nodes:
        out += _node_stragglers(grid, spec, x, nodes, floor, profile, slow_nodes,
                                [src.place(k)[1] for k in keys])
    # Each chip against its node's other chips when there are enough, else the cluster's.
    refs, cluster_refs = {}, {}
    local_refs: dict[int, np.ndarray | None] = {}
    for members in nodes.values():
        local_refs.update(_references(x, members, p.min_peers))
    wide_refs = _references(x, everyone, p.min_peers)
    for i, k in enumerate(keys):
        node = src.place(k)[0]
        local, wide = local_refs[i], wide_refs[i]
        cluster_refs[i] = wide
        if local is not None:
            refs[i] = (local, "node")
        elif wide is not None and node not in slow_nodes:
            refs[i] = (wide, "cluster")
    if not refs:
        return out
    dev = np.full_like(x, np.nan)
    for i, (ref, _) in refs.items():
        dev[i] = x[i] - ref
    spread = _spread(dev)
    if not math.isfinite(spread):
        return out
    limit = max(floor, p.k_sigma * spread)
    t = grid.centres()
    for i, (ref, scope) in refs.items():
        judged = _out_of_line(spec, t, dev[i], limit, p)
        if judged is None:
            continue
        ok, tv, dv, sign, sel, stretches = judged
        base_raw = _raw(spec, ref[ok][sel], rows[keys[i]][ok][sel])
        wide = cluster_refs[i]
        wide_raw = None if wide is None else _raw(spec, wide[ok][sel], rows[keys[i]][ok][sel])
        node, device = src.place(keys[i])
        out.append(_make(spec, device, node, tv, dv, sel, stretches, sign, base_raw, wide_raw,
                         scope, spread, limit, profile, cap))
    return out


def _finding(
    spec: _Spec, tv: np.ndarray, dv: np.ndarray, limit: float, p: PeersParams
) -> tuple[int, np.ndarray, list[tuple[int, int]]] | None:
    for sign in ((spec.direction,) if spec.direction else (1, -1)):
        bad = sign * dv > limit
        stretches = _stretches(tv, bad, p)
        if stretches:
            sel = np.zeros(tv.size, bool)
            for a, b in stretches:
                sel[a : b + 1] = True
            return sign, sel & bad, stretches
    return None


def _raw(spec: _Spec, ref: np.ndarray, own: np.ndarray) -> float:
    """The baseline in metric units over the chosen buckets."""
    if spec.scale == "log":
        return float(math.exp(float(np.nanmedian(ref))))
    if spec.scale == "growth":
        return float(np.nanmedian(ref))  # the peers' growth, bytes
    return float(np.nanmedian(ref))


def _node_stragglers(
    grid: _Grid, spec: _Spec, x: np.ndarray, nodes: dict[str | None, list[int]], floor: float,
    profile: Profile, slow_nodes: set[str], keys: list[str],
) -> list[Finding]:
    p = profile.peers
    names = sorted(n for n in nodes if n is not None)
    per_node = np.vstack([_nanmedian(x[nodes[n]]) for n in names])
    all_nodes = list(range(len(names)))
    dev = np.full_like(per_node, np.nan)
    for j, ref in _references(per_node, all_nodes, p.min_peers).items():
        if ref is not None:
            dev[j] = per_node[j] - ref
    spread = _spread(dev)
    if not math.isfinite(spread):
        return []
    limit = max(floor, p.k_sigma * spread)
    t = grid.centres()
    out = []
    for j, node in enumerate(names):
        if len(names) < SMALL_GROUP:
            # A few nodes: one straggler is a third of the deviations whose MAD is the natural
            # spread, and each peer's deviation is half its lead. Measure the spread among the
            # others alone (their values around their median) for judging this one.
            spread = _spread_of(np.delete(per_node, j, axis=0))
            if not math.isfinite(spread):
                continue
            limit = max(floor, p.k_sigma * spread)
        judged = _out_of_line(spec, t, dev[j], limit, p)
        if judged is None:
            continue
        ok, tv, dv, sign, sel, stretches = judged
        ref = per_node[j, ok][sel] - dv[sel]
        base_raw = _raw(spec, ref, per_node[j, ok][sel])
        slow_nodes.add(node)
        out.append(_make(spec, None, node, tv, dv, sel, stretches, sign, base_raw, None, "cluster",
                         spread, limit, profile, None, members=[keys[i] for i in nodes[node]]))
    return out


def _make(
    spec: _Spec, key: str | None, node: str | None, tv: np.ndarray, dv: np.ndarray, sel: np.ndarray,
    stretches: list[tuple[int, int]], sign: int, baseline: float, cluster_baseline: float | None,
    scope: str, spread: float, limit: float, profile: Profile, cap: float | None,
    members: list[str] | None = None,
) -> Finding:
    p = profile.peers
    d = float(np.median(dv[sel]))
    if spec.scale == "log":
        deviation = baseline * math.expm1(d)
        pct = math.expm1(d) * 100.0
    else:
        deviation = d
        pct = d / baseline * 100.0 if baseline else None
    start = float(tv[stretches[0][0]]) - p.bucket_s / 2
    end = float(tv[stretches[-1][1]]) + p.bucket_s / 2
    conf, n_hours = _confidence(tv[stretches[0][0] : stretches[-1][1] + 1],
                                dv[stretches[0][0] : stretches[-1][1] + 1], sign)
    z = abs(d) / spread if spread > 0 else math.inf
    who = f"node {node}" if key is None else "it"
    if members:  # a slow node: name its ranks (a few; else how many)
        who += f" ({', '.join(members)})" if len(members) <= 4 else f" ({len(members)} ranks)"
    if spec.kind == "straggler":
        frac = abs(math.expm1(d))
        severity = "fail" if frac >= p.straggler_fail_frac else "warn"
        what = "slower" if spec.direction > 0 else "lower"
        summary = (f"{spec.metric} {abs(pct):.1f}% {what} than its {scope} peers' {_fmt(baseline, spec)} "
                   f"{spec.unit} for {(end - start) / 3600:.1f} h")
        if key is None:
            summary = f"{who}: " + summary
    else:
        severity = p.outlier_severity
        growth = " growth" if spec.scale == "growth" else ""
        summary = (f"{spec.metric}{growth} {'+' if deviation >= 0 else ''}{_fmt(deviation, spec)} {spec.unit} "
                   f"off its {scope} peers' {_fmt(baseline, spec)} {spec.unit}"
                   + ("" if pct is None or spec.scale != "log" else f" ({pct:+.1f}%)")
                   + f" for {(end - start) / 3600:.1f} h")
        if spec.metric == "temp_c":
            summary += " at comparable power"
    summary += f"; {z:.1f} x the natural spread, confidence {conf:.2f}"
    return Finding(
        kind=spec.kind,
        device=key,
        node=node,
        metric=spec.metric,
        start=start,
        end=end,
        severity=profile.cap(spec.kind, severity),
        summary=summary,
        onset=start,
        baseline=baseline,
        deviation=deviation,
        details={
            "deviation_pct": pct,
            "compared_with": scope,
            "cluster_baseline": cluster_baseline,
            "natural_spread": spread if spec.scale != "log" else math.expm1(spread) * 100.0,
            "natural_spread_unit": spec.unit if spec.scale != "log" else "%",
            "limit": limit if spec.scale != "log" else math.expm1(limit) * 100.0,
            "z": z,
            "confidence": conf,
            "hours_tested": n_hours,
            "share_out_of_line": float(sel[stretches[0][0] : stretches[-1][1] + 1].mean()),
            "stretches": [[float(tv[a]) - p.bucket_s / 2, float(tv[b]) + p.bucket_s / 2] for a, b in stretches[:20]],
            "capacity": cap,
            "ranks": None if members is None else len(members),
            "members": members,
            "method": "median of peers per time bucket, deviation beyond max(floor, k x 1.4826 MAD), persistent",
            "version": DETECTOR_VERSION,
        },
    )


def _fmt(v: float, spec: _Spec) -> str:
    if spec.unit == "MB":
        return f"{v / 1e6:.0f}"
    if spec.metric in STEP_METRICS:
        return f"{v:.4g}"
    return f"{v:.1f}"

