"""The burn-in clock: a run that ends only after a stretch without an unexpected failure.

Burn-in practice runs a fixed clock (say 72 h) that starts again on any unexpected failure or
reboot: the machine is accepted once it has run that long clean. With the profile's
``[evidence] restart_clock_on_failure = true`` and ``min_uninterrupted_h`` the daemon does the
same: at the planned end it looks at the run's accounting, and while fewer than
``min_uninterrupted_h`` hours have passed since the last unexpected failure of the machine (a
crash or hang not injected) or the daemon's own outage (a reboot), it moves the planned end to
where that stretch would complete, never past ``max_duration_h`` from the soak's start. The
plan's duration moves with it, so the run's planned window (``soak.runplan.planned_window``)
keeps its start, and an event says so. Single-node runs: a cluster run's end is its nodes'
agreement, which the clock does not move.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from soak.analysis import evidence as ev
from soak.analysis import reliability as rel


@dataclass(frozen=True)
class Extension:
    """Where the burn-in clock moves the planned end, and why (run time line)."""

    planned_end: float
    since: float  # the clock's start: the end of the last unexpected failure or outage, else the soak's start
    capped: bool  # the end is the soak's longest allowed duration, not a completed stretch


def cap_s(evidence: Any, duration_s: float) -> float:
    """The longest the soak may run with the burn-in clock on (its planned duration at least)."""
    if not getattr(evidence, "restart_clock_on_failure", False):
        return duration_s
    return max(duration_s, float(getattr(evidence, "max_duration_h", 0.0)) * 3600.0)


def extension(events: Sequence[Any], workloads: Sequence[str], *, planned_start: float, now: float,
              duration_s: float, evidence: Any, time_scale: float = 1.0) -> Extension | None:
    """The later planned end the clock asks for at ``now``; None when the run may end."""
    need_h = float(getattr(evidence, "min_uninterrupted_h", 0.0))
    if not getattr(evidence, "restart_clock_on_failure", False) or need_h <= 0:
        return None
    acc = ev.account(events, workloads, planned_start=planned_start, planned_end=now, ended=now,
                     time_scale=time_scale)
    stops = rel.failed(acc) + [i for i in acc.interruptions if i.cause == ev.DAEMON_DOWN]
    since = max((i.end for i in stops), default=planned_start)
    limit = planned_start + cap_s(evidence, duration_s)
    end = min(since + need_h * 3600.0, limit)
    if end <= now:
        return None
    return Extension(planned_end=end, since=since, capped=end >= limit)
