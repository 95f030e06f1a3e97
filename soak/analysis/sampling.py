"""What sampling each detector needs, and which are blind at a given sampling interval.

A detector fed readings further apart than it needs says nothing, and "nothing found" would
read as a clean result: an 800 MB/h leak sampled once per 20 simulated minutes leaves the
memory envelope without a single block of two readings. So each detector declares what it
needs (``needs``); a run (its tick x time scale, ``run_interval_s``) or a trace (its median
spacing, ``trace_interval_s``) whose interval it cannot see at makes that detector *blind*
(``blind``): its criterion is not judged, with the reason, and the verdict cannot claim it
(``soak.criteria.kind_criteria``, ``soak.judge``). A detector that reads the ranks' step rows
(``Need.reads``) is judged on their spacing instead (``run_step_interval_s``,
``trace_step_interval_s``).

Blind is kept for a detector that cannot work at all. One that only sees less says what it
sees instead (``shortest_event_s``): the hang detector waits at least three sampling
intervals (``soak.analysis.hang.effective_threshold``), so at one reading per 5 min it sees
hangs of 15 min and more, and its criterion says so.

The needs (defaults; docs/analysis.md has the table):

- **memory_creep**: two readings per ``memory.envelope_window_s`` block (the envelope drops
  a block of one, ``soak.analysis.memory.envelope``): blind above half the window (300 s).
- **utilization_dropouts**: a dropout lasts ``utilization.min_duration_s`` up to the hang
  threshold (longer is a hang). A drop is sure to hold a reading only when it lasts one
  interval, so above ``hang.threshold_s`` (300 s) even the longest dropout can fall between
  two readings: blind. Below it, drops of one interval or more are seen.
- **hang**: never blind; sees hangs of ``max(hang.threshold_s, 3 x interval)`` or longer.
- **thermal**: an excursion lasts from its first reading above the threshold to its last
  plus one interval (``soak.analysis._stats.episodes``), so it is kept when it holds
  ``ceil(thermal.min_duration_s / T)`` readings; one of ``k`` intervals is sure to hold ``k``
  of them: excursions of ``max(min_duration_s, k x T)`` and longer are seen (throttle flags
  likewise, ``throttle_min_s``). Drift is fitted to hourly medians, at least
  ``drift_short_min_hours`` (20) of them, 48 from ``drift_min_hours`` on: only a reading in
  every hour gives a 20-h or a 48-h run its medians, so above 3600 s it is blind (a day's
  run has its 20 readings up to 24 h / 19: 0.4 C/h is found at 4500 s, not at 4600 s).
- **comm_timeouts**: never blind and never limited: the counters are cumulative, so a rise
  between two readings is still counted (in the later one), and the rate rule compares
  thirds of the run, not buckets.
- **throughput_degradation**: works on the step rows the ranks' heartbeats give the daemon
  (at most one per rank per step window, ``STEP_WINDOW_S``), not on the sampler's tick: at
  time scale 1 a row every 10 s whatever the tick; on an accelerated time line the window
  is no wider than the tick (``step_window_s``), so rows come as far apart as the readings.
  Its baseline (``throughput.baseline_len_h``) needs ten one-minute medians: blind above one
  step row per 720 s (2 h / 10).
- **outlier**: the peers are compared on ``peers.bucket_s`` medians of a bucket of two
  readings or more (a bucket of one is left out, ``soak.analysis.buckets.Buckets.matrix``):
  blind above half the bucket (300 s), the chips' readings.
- **straggler**: the same rule on the step rows (``step_time_s``, ``compute_s``): blind above
  one step row per 300 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from soak.analysis.buckets import MIN_READINGS
from soak.analysis.hang import effective_threshold
from soak.analysis.messages import say
from soak.analysis.profile import Profile
from soak.analysis.thermal import DRIFT_BLOCK_S
from soak.analysis.throughput import BASELINE_MIN_BLOCKS

_CHIP_METRICS = ("util_pct", "hbm_used_bytes", "temp_c", "power_w")
"""The readings of every tick a trace's sampling interval is taken from."""
_STEP_METRICS = ("step_time_s",)
"""The step rows a trace's step interval is taken from."""
CHIPS, STEPS = "chips", "steps"
"""What a detector reads: the sampler's readings of the chips, or the ranks' step rows."""
STEP_WINDOW_S = 10.0
"""The step rows' window (wall seconds): at most one row per rank per window."""


@dataclass(frozen=True)
class Need:
    """What one detector needs of the sampling."""

    kind: str
    readings_per_window: int | None  # readings needed in each window_s; None: no such rule
    window_s: float | None
    max_interval_s: float | None  # longest interval it works at; None: any
    shortest_event_s: float | None  # shortest event it is sure to see at max_interval_s (or its floor)
    reads: str = CHIPS  # CHIPS: the sampler's readings; STEPS: the ranks' step rows


@dataclass(frozen=True)
class Blind:
    """A detector that cannot see at ``interval_s``: it needs one reading per ``max_interval_s``."""

    kind: str
    interval_s: float
    max_interval_s: float
    reads: str = CHIPS  # what interval_s is the spacing of (Need.reads)

    def values(self) -> dict[str, Any]:
        """The values of its reason (``reason.blind``) and of its criterion (``steps``: the
        intervals are the step rows' spacing, not the readings')."""
        return {"kind": self.kind, "interval_s": self.interval_s, "max_interval_s": self.max_interval_s,
                **({"steps": True} if self.reads == STEPS else {})}


def needs(profile: Profile | None = None) -> dict[str, Need]:
    """What each detector with a sampling limit needs, from the profile's parameters."""
    p = profile or Profile.default()
    window = p.memory.envelope_window_s
    bucket = p.peers.bucket_s
    baseline_s = p.throughput.baseline_len_h * 3600.0
    excursion_s = min(p.thermal.min_duration_s, p.thermal.throttle_min_s)
    return {
        "memory_creep": Need("memory_creep", 2, window, window / 2, None),
        "utilization_dropouts": Need("utilization_dropouts", None, None, p.hang.threshold_s,
                                     p.utilization.min_duration_s),
        "hang": Need("hang", None, None, None, p.hang.threshold_s),
        # drift: a reading in every hourly block; excursions are only seen from longer at coarse sampling
        "thermal": Need("thermal", 1, DRIFT_BLOCK_S, DRIFT_BLOCK_S, excursion_s),
        "comm_timeouts": Need("comm_timeouts", None, None, None, None),
        # the baseline's one-minute medians, of the step rows
        "throughput_degradation": Need("throughput_degradation", BASELINE_MIN_BLOCKS, baseline_s,
                                       baseline_s / BASELINE_MIN_BLOCKS, None, STEPS),
        "outlier": Need("outlier", MIN_READINGS, bucket, bucket / MIN_READINGS, None),
        "straggler": Need("straggler", MIN_READINGS, bucket, bucket / MIN_READINGS, None, STEPS),
    }


def shortest_event_s(kind: str, interval_s: float | None, profile: Profile | None = None) -> float | None:
    """The shortest event of ``kind`` the detector is sure to see at one reading per
    ``interval_s`` (None: no such limit, or the interval unknown)."""
    p = profile or Profile.default()
    if interval_s is None or interval_s <= 0:
        return None
    if kind == "hang":
        return effective_threshold(p.hang.threshold_s, interval_s)
    if kind == "utilization_dropouts":
        # a drop shorter than an interval may hold no reading at all
        return max(p.utilization.min_duration_s, interval_s)
    if kind == "thermal":
        # an excursion is measured from its readings: it needs ceil(min / T) of them, and
        # only an excursion of that many intervals is sure to hold them
        need = needs(p)["thermal"].shortest_event_s or 0.0
        return max(need, math.ceil(need / interval_s - 1e-9) * interval_s)
    return None


def limited_s(kind: str, interval_s: float | None, profile: Profile | None = None) -> float | None:
    """The shortest event of ``kind`` seen at ``interval_s`` when the sampling, not the
    detector's own floor, sets it (None otherwise): what its criterion states."""
    shortest = shortest_event_s(kind, interval_s, profile)
    need = needs(profile).get(kind)
    if shortest is None or need is None or need.shortest_event_s is None:
        return None
    return shortest if shortest > need.shortest_event_s * (1 + 1e-9) else None


def blind(interval_s: float | None, profile: Profile | None = None,
          step_interval_s: float | None = None) -> tuple[Blind, ...]:
    """The detectors that cannot see at one reading per ``interval_s``, or (those that read
    the step rows) one step row per ``step_interval_s``; none where its interval is unknown."""
    out = []
    for n in needs(profile).values():
        at = step_interval_s if n.reads == STEPS else interval_s
        if at is None or not math.isfinite(at) or at <= 0 or n.max_interval_s is None:
            continue
        if at > n.max_interval_s * (1 + 1e-9):
            out.append(Blind(n.kind, float(at), n.max_interval_s, n.reads))
    return tuple(out)


def run_interval_s(interval_s: float, time_scale: float | None) -> float:
    """A run's sampling interval in simulated seconds: its tick times its time scale."""
    return float(interval_s) * float(time_scale or 1.0)


def step_window_s(base_s: float, time_scale: float, interval_s: float) -> float:
    """The step rows' window, wall seconds: ``base_s``, but on an accelerated time line no
    wider than the sampling interval. There 10 s of wall are hours of run time, and the
    per-rank statistics (stragglers) need several rows where the chips have many samples."""
    return base_s if time_scale <= 1 else min(base_s, interval_s)


def run_step_interval_s(interval_s: float, time_scale: float | None, window_s: float = STEP_WINDOW_S) -> float:
    """A run's step rows' spacing in simulated seconds (the closest they come): the step
    window (``step_window_s``) times the time scale."""
    scale = float(time_scale or 1.0)
    return step_window_s(window_s, scale, float(interval_s)) * scale


def trace_interval_s(trace: Any) -> float | None:
    """A trace's sampling interval: the median spacing of its chips' readings (None when no
    series has two readings)."""
    return _median_spacing(trace, _CHIP_METRICS)


def trace_step_interval_s(trace: Any) -> float | None:
    """A trace's step interval: the median spacing of its ranks' step rows (None when none
    has two)."""
    return _median_spacing(trace, _STEP_METRICS)


def _median_spacing(trace: Any, metrics: tuple[str, ...]) -> float | None:
    dts = [s.median_dt_s() for m in metrics for s in trace.series(m)]
    dts = [d for d in dts if d is not None and d > 0]
    if not dts:
        return None
    dts.sort()
    return float(dts[len(dts) // 2])


def run_fix(b: Blind, tick_s: float, time_scale: float | None) -> dict[str, float]:
    """What makes the detector see again: the longest ``--interval`` (wall seconds) at this
    time scale, and the highest ``--time-scale`` at this tick."""
    scale = float(time_scale or 1.0)
    # step rows come once per step window, no wider than the tick (step_window_s)
    spacing_s = min(STEP_WINDOW_S, tick_s) if b.reads == STEPS else tick_s
    return {"interval_s": b.max_interval_s / scale, "time_scale": max(1.0, b.max_interval_s / spacing_s)}


def run_note(b: Blind, tick_s: float, time_scale: float | None) -> tuple[str, dict[str, Any]]:
    """The line a run prints at its start for a blind detector, and its ``note`` event's
    detail: the reason and the way out (``run_fix``)."""
    fix = run_fix(b, tick_s, time_scale)
    scaled = float(time_scale or 1.0) > 1
    # the terminal's line names the detector in words, the note's detail by its kind
    line = (say("reason.blind", {**b.values(), "kind": b.kind.replace("_", " ")}) + f"; use --interval {fix['interval_s']:g}s or less"
            + (f" or --time-scale {math.floor(fix['time_scale']):g} or less" if scaled else ""))
    return line, {**b.values(), "blind": True, "fix_interval_s": fix["interval_s"],
                  "fix_time_scale": fix["time_scale"] if scaled else None}
