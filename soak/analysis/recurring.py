"""Recurring episodes: a chip, rank or node out of line with its peers in short episodes
that come back (a background job, a thermal cycle, a flapping NIC).

The peer comparison (``soak.analysis.peers``) reports a series that *stays* out of line
(two hours, 80 % of buckets). A fault that comes and goes — one node 25 % slower for 12
minutes of every hour — never does, yet it slows the whole job for a fifth of the time.
This module looks at the same deviations, on the same buckets, against the same limit
(max(floor, k x natural spread)), for episodes:

1. A bucket is in an episode when its deviation is beyond the limit on the bad side, and
   beyond the limit from the series' own usual level too: the median of its deviation over
   the ``EPISODE_CONTEXT_S`` either side. A chip whose natural offset sits near the limit
   flickers across it, and chips with their own day-night cycle swing against each other
   by a few degrees, but neither rises a whole limit above its own level of the hours
   around. (Short episodes are a minority of that context, so its median is the level
   outside them; a series out of line for hours on end is the persistent rule's.)
2. Episodes are runs of such buckets (a bucket left out of the comparison, such as a
   checkpoint window, does not split one).
3. Reported when there are at least ``episodes_min_count`` of them and either
   ``episodes_many``, or they cover ``episodes_min_share`` of the compared time, or their
   starts are periodic (the periodicity test of the utilization dropouts, with a looser
   spread for starts that are known only to a bucket).

A single short episode, or two, stays unreported unless it is large: every bucket beyond
``large_factor`` x the limit for ``large_min_s`` (``peers``; then it is an ordinary
out-of-line finding with its duration).

The job's throughput lost to the episodes is stated from the step time of every rank:
its median inside the episodes against outside them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from soak.analysis._stats import index_runs, nanmedian_each_row
from soak.analysis.profile import PeersParams
from soak.analysis.utilization import periodicity

DETECTOR_VERSION = "recurring/1.0"
# Starts known to one bucket (600 s) scatter an hourly period by a sixth: a CV of 0.15 (the
# dropouts' rule, on starts known to a sample) would call a steady hourly cycle irregular.
EPISODE_MAX_CV = 0.25
EPISODE_TOL = 0.25
EPISODE_MIN_SHARE_ON_PERIOD = 0.6
EPISODE_MIN_EVENTS = 4
# Random episodes at the same rate look this periodic less often than this.
EPISODE_MAX_P = 1e-3
# A series' own level is its median over this much time either side: long against
# episodes of minutes to an hour or two, short against a day-night cycle.
EPISODE_CONTEXT_S = 3 * 3600.0


@dataclass(frozen=True)
class Episodes:
    """A series' recurring episodes out of line."""

    count: int
    typical_s: float  # median length of an episode
    period_s: float | None  # None when the starts are not periodic
    share: float  # of the compared time (first to last compared bucket)
    windows: tuple[tuple[float, float], ...]  # (start, end) unix seconds
    deviation: float  # median deviation in the episodes, in the comparison's units
    selected: np.ndarray = field(repr=False, compare=False)  # episode buckets, as indices into the valid ones


def own_level(dev: np.ndarray, bucket_s: float) -> np.ndarray:
    """Per bucket of the grid, the median of the series' deviation over
    ``EPISODE_CONTEXT_S`` either side (NaN ignored)."""
    half = max(1, int(round(EPISODE_CONTEXT_S / bucket_s)))
    padded = np.concatenate([np.full(half, np.nan), dev, np.full(half, np.nan)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    return nanmedian_each_row(windows)


def find(t: np.ndarray, dev: np.ndarray, sign: int, limit: float, p: PeersParams) -> Episodes | None:
    """Recurring episodes of one series (``t`` the grid's bucket centres, ``dev`` its
    deviations there, NaN where not compared), or None when there are none to report."""
    ok = np.isfinite(dev)
    if ok.sum() < 4:
        return None
    own = own_level(dev, p.bucket_s)[ok]
    tv, dv = t[ok], dev[ok]
    bad = (sign * dv > limit) & (sign * (dv - own) > limit)
    idx = np.flatnonzero(bad)
    if idx.size == 0:
        return None
    # the next compared bucket, with at most one bucket left out between
    runs = index_runs(idx, tv, 2.5 * p.bucket_s)
    windows = tuple((float(tv[a]) - p.bucket_s / 2, float(tv[b]) + p.bucket_s / 2) for a, b in runs)
    lengths = np.array([e - s for s, e in windows])
    span = float(tv[-1] - tv[0]) + p.bucket_s
    share = float(lengths.sum()) / span
    starts = np.array([s for s, _ in windows])
    period = periodicity(starts, EPISODE_MIN_EVENTS, EPISODE_MAX_CV, EPISODE_TOL, EPISODE_MIN_SHARE_ON_PERIOD,
                         EPISODE_MAX_P).period_s
    count = len(runs)
    if count < p.episodes_min_count:
        return None
    if count < p.episodes_many and share < p.episodes_min_share and period is None:
        return None
    return Episodes(count=count, typical_s=float(np.median(lengths)), period_s=period, share=share,
                    windows=windows, deviation=float(np.median(dv[bad])), selected=idx)


def step_time_in_episodes(centres: np.ndarray, job_step_s: np.ndarray | None,
                          windows: tuple[tuple[float, float], ...]) -> tuple[float, float] | None:
    """The job's step time (median over its ranks per bucket) inside the episodes and outside
    them, over the buckets that have one; None without step times on both sides."""
    if job_step_s is None:
        return None
    inside = np.zeros(centres.size, bool)
    for s, e in windows:
        inside |= (centres > s) & (centres < e)
    ok = np.isfinite(job_step_s)
    a, b = job_step_s[ok & inside], job_step_s[ok & ~inside]
    if a.size == 0 or b.size == 0:
        return None
    return float(np.median(a)), float(np.median(b))


def throughput_values(steps: tuple[float, float] | None, share: float) -> dict[str, float | None]:
    """``slowdown_pct``: the job's step time in the episodes against outside; ``lost_pct``:
    the share of the run's training time lost to them (in an episode a step takes
    ``inside`` instead of ``outside``)."""
    if steps is None or steps[1] <= 0:
        return {"slowdown_pct": None, "lost_pct": None}
    inside, outside = steps
    slowdown = inside / outside - 1.0
    lost = share * max(0.0, 1.0 - outside / inside)
    return {"slowdown_pct": slowdown * 100.0, "lost_pct": lost * 100.0}
