"""What sampling each detector needs, and which are blind at a given sampling interval.

A detector fed readings further apart than it needs says nothing, and "nothing found" would
read as a clean result: an 800 MB/h leak sampled once per 20 simulated minutes leaves the
memory envelope without a single block of two readings. So each detector declares what it
needs (``needs``); a run (its tick x time scale, ``run_interval_s``) or a trace (its median
spacing, ``trace_interval_s``) whose interval it cannot see at makes that detector *blind*
(``blind``): its criterion is not judged, with the reason, and the verdict cannot claim it
(``soak.criteria.kind_criteria``, ``soak.judge``).

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from soak.analysis.hang import effective_threshold
from soak.analysis.messages import say
from soak.analysis.profile import Profile

_CHIP_METRICS = ("util_pct", "hbm_used_bytes", "temp_c", "power_w")
"""The readings of every tick a trace's sampling interval is taken from."""


@dataclass(frozen=True)
class Need:
    """What one detector needs of the sampling."""

    kind: str
    readings_per_window: int | None  # readings needed in each window_s; None: no such rule
    window_s: float | None
    max_interval_s: float | None  # longest interval it works at; None: any
    shortest_event_s: float | None  # shortest event it is sure to see at max_interval_s (or its floor)


@dataclass(frozen=True)
class Blind:
    """A detector that cannot see at ``interval_s``: it needs one reading per ``max_interval_s``."""

    kind: str
    interval_s: float
    max_interval_s: float

    def values(self) -> dict[str, Any]:
        """The values of its reason (``reason.blind``) and of its criterion."""
        return {"kind": self.kind, "interval_s": self.interval_s, "max_interval_s": self.max_interval_s}


def needs(profile: Profile | None = None) -> dict[str, Need]:
    """What each detector with a sampling limit needs, from the profile's parameters."""
    p = profile or Profile.default()
    window = p.memory.envelope_window_s
    return {
        "memory_creep": Need("memory_creep", 2, window, window / 2, None),
        "utilization_dropouts": Need("utilization_dropouts", None, None, p.hang.threshold_s,
                                     p.utilization.min_duration_s),
        "hang": Need("hang", None, None, None, p.hang.threshold_s),
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
    return None


def limited_s(kind: str, interval_s: float | None, profile: Profile | None = None) -> float | None:
    """The shortest event of ``kind`` seen at ``interval_s`` when the sampling, not the
    detector's own floor, sets it (None otherwise): what its criterion states."""
    shortest = shortest_event_s(kind, interval_s, profile)
    need = needs(profile).get(kind)
    if shortest is None or need is None or need.shortest_event_s is None:
        return None
    return shortest if shortest > need.shortest_event_s * (1 + 1e-9) else None


def blind(interval_s: float | None, profile: Profile | None = None) -> tuple[Blind, ...]:
    """The detectors that cannot see at one reading per ``interval_s`` (none when unknown)."""
    if interval_s is None or not math.isfinite(interval_s) or interval_s <= 0:
        return ()
    return tuple(Blind(n.kind, float(interval_s), n.max_interval_s) for n in needs(profile).values()
                 if n.max_interval_s is not None and interval_s > n.max_interval_s * (1 + 1e-9))


def run_interval_s(interval_s: float, time_scale: float | None) -> float:
    """A run's sampling interval in simulated seconds: its tick times its time scale."""
    return float(interval_s) * float(time_scale or 1.0)


def trace_interval_s(trace: Any) -> float | None:
    """A trace's sampling interval: the median spacing of its chips' readings (None when no
    series has two readings)."""
    dts = [s.median_dt_s() for m in _CHIP_METRICS for s in trace.series(m)]
    dts = [d for d in dts if d is not None and d > 0]
    if not dts:
        return None
    dts.sort()
    return float(dts[len(dts) // 2])


def run_fix(b: Blind, tick_s: float, time_scale: float | None) -> dict[str, float]:
    """What makes the detector see again: the longest ``--interval`` (wall seconds) at this
    time scale, and the highest ``--time-scale`` at this tick."""
    scale = float(time_scale or 1.0)
    return {"interval_s": b.max_interval_s / scale, "time_scale": max(1.0, b.max_interval_s / tick_s)}


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
