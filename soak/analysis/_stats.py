"""Small robust-statistics functions shared by the detectors.

Rule from our measurements: reduce a 1 Hz series to about a thousand robust block
statistics before any O(n^2) estimator (Theil-Sen) runs; everything here is vectorised.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def block_reduce(
    t: np.ndarray, v: np.ndarray, width_s: float, how: str, origin: float | None = None,
    min_count: int = 1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reduce a sorted series to fixed-width time blocks.

    Returns (block centre times, block statistic, samples per block) for non-empty blocks
    with at least ``min_count`` samples. ``how`` is ``min``, ``max``, ``mean`` or ``median``.
    """
    if t.size == 0:
        e = np.empty(0)
        return e, e, np.empty(0, dtype=np.int64)
    t0 = float(t[0]) if origin is None else origin
    idx = np.floor((t - t0) / width_s).astype(np.int64)
    starts = np.flatnonzero(np.diff(idx)) + 1
    starts = np.concatenate(([0], starts))
    counts = np.diff(np.concatenate((starts, [t.size])))
    blocks = idx[starts]
    stat = _block_stat(v, starts, counts, how)
    centres = t0 + (blocks + 0.5) * width_s
    ok = counts >= min_count
    return centres[ok], stat[ok], counts[ok]


def _block_stat(v: np.ndarray, starts: np.ndarray, counts: np.ndarray, how: str) -> np.ndarray:
    if how == "min":
        return np.minimum.reduceat(v, starts)
    if how == "max":
        return np.maximum.reduceat(v, starts)
    if how == "mean":
        return np.add.reduceat(v, starts) / counts
    if how == "median":
        return _block_median(v, starts, counts)
    raise ValueError(how)  # pragma: no cover - programming error


def block_reduce_many(
    ts: list[np.ndarray], vs: list[np.ndarray], width_s: float, how: str, origin: float,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``block_reduce(t, v, width_s, how, origin=origin)`` of every series (``ts[i]``,
    ``vs[i]``) in one NumPy pass over them all: the same values, without a call per series
    (a 512-chip trace has thousands, and the calls' overhead was most of their time)."""
    sizes = np.array([t.size for t in ts], dtype=np.int64)
    empty = (np.empty(0), np.empty(0), np.empty(0, dtype=np.int64))
    if sizes.sum() == 0:
        return [empty for _ in ts]
    t = np.concatenate(ts)
    v = np.concatenate(vs)
    idx = np.floor((t - origin) / width_s).astype(np.int64)
    change = np.diff(idx) != 0
    firsts = np.cumsum(sizes) - sizes  # each series' first row
    inner = firsts[(firsts > 0) & (sizes > 0)]
    change[inner - 1] = True  # a block never spans two series
    starts = np.concatenate(([0], np.flatnonzero(change) + 1))
    counts = np.diff(np.concatenate((starts, [t.size])))
    stat = _block_stat(v, starts, counts, how)
    centres = origin + (idx[starts] + 0.5) * width_s
    # each series' blocks: from the block of its first row to the next series'
    lo = np.searchsorted(starts, firsts)
    hi = np.searchsorted(starts, firsts + sizes)
    return [(centres[a:b], stat[a:b], counts[a:b]) if n else empty
            for a, b, n in zip(lo.tolist(), hi.tolist(), sizes.tolist(), strict=True)]


def _block_median(v: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Median per block, as ``np.median`` gives it; equal-size blocks (the usual case) go
    through one 2-D call, the rest through one sort by (block, value)."""
    out = np.empty(starts.size)
    n = int(np.bincount(counts).argmax()) if counts.size else 0
    same = counts == n
    if same.any() and n > 0:
        # the gathered rows are a fresh copy: let the median partition them in place
        rows = sliding_window_view(v, n)[starts[same]]
        out[same] = np.median(rows, axis=1, overwrite_input=True)
    odd = np.flatnonzero(~same)
    if odd.size == 0:
        return out
    c = counts[odd]
    # Gather the odd-sized blocks, sort each one's values, take its middle one or two.
    block = np.repeat(np.arange(odd.size), c)
    first = np.cumsum(c) - c
    idx = np.repeat(starts[odd] - first, c) + np.arange(block.size)
    vals = v[idx]
    if np.isnan(vals).any():  # np.median's NaN rule: a block with a NaN has median NaN
        for i in odd:
            out[i] = np.median(v[starts[i] : starts[i] + counts[i]])
        return out
    vals = vals[np.lexsort((vals, block))]
    lo, hi = vals[first + (c - 1) // 2], vals[first + c // 2]
    out[odd] = np.where(c % 2 == 1, lo, (lo + hi) / 2.0)
    return out


def _median_of_sorted(s: np.ndarray) -> float:
    """``float(np.median(s))`` of sorted values without NaN: the middle one, or the mean of the
    middle two, without ``np.median``'s per-call overhead (thousands of short rows)."""
    m = s.size // 2
    return float(s[m]) if s.size % 2 else float((s[m - 1] + s[m]) / 2.0)


def median_of_counts(n: np.ndarray) -> float:
    """``float(np.median(n))`` of counts (no NaN), from one sort."""
    return _median_of_sorted(np.sort(n))


@dataclass(frozen=True)
class Slope:
    """Theil-Sen slope per hour with a two-sided CI, and the intercept at t_ref."""

    per_hour: float
    low: float
    high: float
    n: int


def _repeat_term(v: np.ndarray) -> float:
    """sum of k(k-1)(2k+5) over the sizes k of ``v``'s groups of equal values (Sen's ties)."""
    s = np.sort(v)
    change = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1], [True])))
    k = np.diff(change)
    k = k[k > 1].astype(float)
    return float(np.sum(k * (k - 1) * (2 * k + 5)))


@functools.lru_cache(maxsize=8)
def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(n, 1)`` as 32-bit indices, read-only, kept for the few sizes that
    recur (every chip's fit window has the same number of blocks): making them was a third
    of a call. A thousand points are 2 MB of pairs each, eight sizes at most."""
    i, j = (a.astype(np.int32) for a in np.triu_indices(n, 1))
    i.flags.writeable = False
    j.flags.writeable = False
    return i, j


def sen_slope(x: np.ndarray, y: np.ndarray, alpha: float | None = None) -> tuple[float, float, float]:
    """(median pairwise slope, CI low, CI high) of ``y`` against ``x``: exactly what
    ``scipy.stats.theilslopes(y, x, alpha)`` gives (the same pairs, the same order statistics
    for Sen's CI with ties), without its per-call argument handling, which was most of the
    memory detector's time (6,000 calls on a 512-chip trace). CI is nan without ``alpha``.
    ``x`` and ``y`` finite."""
    i, j = _pairs(x.size)
    dx = x[j] - x[i]
    keep = dx != 0  # a pair of equal times has no slope; either order of a pair is the same slope
    slopes = (y[j] - y[i])[keep] / dx[keep]
    if slopes.size == 0:
        return float("nan"), float("nan"), float("nan")
    slopes.sort()
    med = _median_of_sorted(slopes)
    if alpha is None:
        return med, float("nan"), float("nan")
    from scipy.special import ndtri

    a = 1.0 - alpha if alpha > 0.5 else alpha
    z = float(ndtri(a / 2.0))
    n, nt = y.size, slopes.size
    sigsq = 1 / 18.0 * (n * (n - 1) * (2 * n + 5) - _repeat_term(x) - _repeat_term(y))
    if not sigsq >= 0:
        return med, float("nan"), float("nan")
    sigma = np.sqrt(sigsq)
    ru = min(int(np.round((nt - z * sigma) / 2.0)), nt - 1)
    rl = max(int(np.round((nt + z * sigma) / 2.0)) - 1, 0)
    return med, float(slopes[rl]), float(slopes[ru])


def theil_sen(t_s: np.ndarray, y: np.ndarray, ci: float = 0.90) -> Slope | None:
    """Theil-Sen slope of y against time in hours, with Sen's exact-pairs CI (``sen_slope``)."""
    if t_s.size < 4:
        return None
    x = (t_s - t_s[0]) / 3600.0
    if np.ptp(x) == 0:
        return None
    if not np.all(np.isfinite(y)):  # what scipy's nan policy gives: no slope
        return Slope(float("nan"), float("nan"), float("nan"), int(t_s.size))
    slope, low, high = sen_slope(x, np.asarray(y, dtype=float), ci)
    return Slope(slope, low, high, int(t_s.size))


def quarter_slopes(t_s: np.ndarray, y: np.ndarray) -> list[float]:
    """Theil-Sen slope (per hour) in each quarter of the window; nan where too short."""
    out: list[float] = []
    for part_t, part_y in zip(np.array_split(t_s, 4), np.array_split(y, 4), strict=True):
        if part_t.size < 3 or np.ptp(part_t) == 0 or not np.all(np.isfinite(part_y)):
            out.append(float("nan"))
            continue
        out.append(sen_slope((part_t - part_t[0]) / 3600.0, np.asarray(part_y, dtype=float))[0])
    return out


def sorted_union(arrays: list[np.ndarray]) -> np.ndarray:
    """Sorted distinct values of the arrays (``np.unique`` of their concatenation).

    A chip's metrics are usually read at the same ticks, so most arrays repeat the first:
    comparing is linear, while sorting 8 x 260 k timestamps of a 72 h chip is not (1.6 s of
    a 4 s analysis went to that). The distinct ones are sorted runs, which a stable sort
    merges.
    """
    if not arrays:
        return np.empty(0)
    first = arrays[0]
    rest = [a for a in arrays[1:] if not np.array_equal(a, first)]
    if not rest:
        if first.size < 2 or bool(np.all(first[1:] > first[:-1])):
            return first
        return np.unique(first)
    t = np.concatenate([first, *rest])
    t.sort(kind="stable")
    return t[np.concatenate(([True], t[1:] != t[:-1]))]


def robust_sigma(x: np.ndarray) -> float:
    """1.4826 x MAD: a standard deviation that ignores outliers."""
    if x.size == 0:
        return float("nan")
    return float(1.4826 * np.median(np.abs(x - np.median(x))))


def runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive) indices of the True runs of a boolean array."""
    if mask.size == 0:
        e = np.empty(0, dtype=np.int64)
        return e, e
    m = np.concatenate(([False], mask, [False])).astype(np.int8)
    d = np.diff(m)
    return np.flatnonzero(d == 1), np.flatnonzero(d == -1)


def index_runs(idx: np.ndarray, t: np.ndarray, max_step_s: float) -> list[tuple[int, int]]:
    """The indexes ``idx`` (ascending, into ``t``) grouped into (first, last) runs of
    neighbours: the next index, at most ``max_step_s`` after the one before it."""
    if idx.size == 0:
        return []
    out: list[tuple[int, int]] = []
    a = b = int(idx[0])
    for j in idx[1:].tolist():
        if j == b + 1 and t[j] - t[b] <= max_step_s:
            b = j
            continue
        out.append((a, b))
        a = b = j
    out.append((a, b))
    return out


def episodes(
    t: np.ndarray, low: np.ndarray, dt_s: float, merge_gap_s: float, min_duration_s: float
) -> list[tuple[float, float]]:
    """Episodes where ``low`` holds, as (start, end) unix seconds.

    Low samples closer than ``merge_gap_s`` of non-low time are one episode; a stretch with
    no samples (a data gap) longer than that splits episodes, because we cannot know what
    happened inside it. An episode lasts from its first low sample to its last plus one
    sampling interval, and is kept when that is at least ``min_duration_s``.
    """
    tl = t[low]
    if tl.size == 0:
        return []
    brk = np.flatnonzero(np.diff(tl) > merge_gap_s + dt_s * 1.01) + 1
    s_idx = np.concatenate(([0], brk))
    e_idx = np.concatenate((brk, [tl.size])) - 1
    starts = tl[s_idx]
    ends = tl[e_idx] + dt_s
    keep = (ends - starts) >= min_duration_s
    return list(zip(starts[keep].tolist(), ends[keep].tolist(), strict=True))


def poisson_upper(k: int, exposure: float, conf: float = 0.95) -> float:
    """Exact one-sided upper confidence bound on a Poisson rate (k events in ``exposure``)."""
    if exposure <= 0:
        return float("inf")
    from soak.analysis._dist import chi2_ppf

    return chi2_ppf(conf, 2 * k + 2) / 2.0 / exposure


def nanmedian_each_row(mat: np.ndarray) -> np.ndarray:
    """``np.nanmedian(mat, axis=1)``, the same values, NaN where a row has none (no warning):
    one sort of the whole matrix (NaN sorts last) and each row's middle one or two, where
    NumPy takes a masked-array path per call for short rows (1.4 s of a 512-chip analysis)."""
    if mat.size == 0:
        return np.full(mat.shape[0], np.nan)
    srt = np.sort(mat, axis=1)
    k = (~np.isnan(srt)).sum(axis=1)  # the values of each row (an infinity is one), first after the sort
    rows = np.arange(mat.shape[0])
    lo = srt[rows, np.maximum(k - 1, 0) // 2]
    hi = srt[rows, np.maximum(k, 1) // 2]
    with np.errstate(invalid="ignore"):
        out = np.where(k % 2 == 1, lo, (lo + hi) / 2.0)
    out[k == 0] = np.nan
    return out


def nanmedian_rows(mat: np.ndarray) -> np.ndarray:
    """Median over rows ignoring NaN, NaN where a column has none (no warning)."""
    return nanmedian_each_row(mat.T)


def valid_count(mat: np.ndarray) -> np.ndarray:
    """Per column: how many rows hold a finite value."""
    return np.isfinite(mat).sum(axis=0)


def medians_of_others(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
