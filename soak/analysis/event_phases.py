"""Explained phases from a run's events: the windows in which idle chips and missing
heartbeats are expected, shared by ``soak analyze RUN_ID`` and the daemon's own analysis.

* spans the events carry (``checkpoint``, ``phase``, ``restart``, ``resume``, ``gap`` with
  an ``end_ts``): a ``phase`` event is named by its ``detail["phase"]``;
* a restart's downtime: from a workload's ``crash`` or ``hang`` event until it runs again:
  its next ``resume``/``start`` event (it loaded its checkpoint), or the daemon's own
  ``resume``/``start``, else its ``restart``; plus a margin for the first heartbeat. The
  crash or hang is the daemon's own finding; the idle chips while the workload restarts
  (however slowly) are not a second one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from soak.analysis.profile import Phase

# Events whose [ts, end_ts] windows explain idle chips and slow steps.
SPAN_EVENTS = ("checkpoint", "phase", "restart", "resume", "gap")
# After the restart event the workload still loads its model before the first step.
RESTART_MARGIN_S = 60.0


def event_windows(
    events: Iterable[Any], *, restart_margin_s: float = RESTART_MARGIN_S
) -> dict[str, list[tuple[float, float]]]:
    """{phase name: [(start, end), ...]} from events in time order.

    ``events`` are ``soak.store.EventRecord``-like: ``ts``, ``end_ts``, ``kind``,
    ``workload``, ``detail``.
    """
    windows: dict[str, list[tuple[float, float]]] = {}
    # workload -> [ts of its crash/hang, ts of the restart or None]
    down: dict[str | None, list[float | None]] = {}

    def close(workload: str | None, end: float) -> None:
        start = down.pop(workload)[0]
        windows.setdefault("restart", []).append((float(start), end + restart_margin_s))  # type: ignore[arg-type]

    for ev in events:
        kind, wl, ts = ev.kind, ev.workload, float(ev.ts)
        if kind in SPAN_EVENTS and ev.end_ts is not None and ev.end_ts >= ev.ts:
            name = str((ev.detail or {}).get("phase") or kind) if kind == "phase" else kind
            windows.setdefault(name, []).append((ts, float(ev.end_ts)))
        if kind in ("crash", "hang"):
            if wl in down and down[wl][1] is not None:  # restarted, crashed again before resuming
                close(wl, float(down[wl][1]))  # type: ignore[arg-type]
            down.setdefault(wl, [ts, None])
        elif kind == "restart" and wl is not None and wl in down:
            down[wl][1] = ts  # down until the workload resumes (it loads its checkpoint first)
        elif kind in ("restart", "resume", "start"):
            # a workload's own resume/start ends its downtime; the daemon's (no workload) all
            for w in [w for w in down if wl is None or w == wl]:
                close(w, ts)
    for w, (_, restarted) in list(down.items()):
        if restarted is not None:  # restarted but never said it resumed
            close(w, restarted)
    return windows


def event_phases(events: Iterable[Any], *, restart_margin_s: float = RESTART_MARGIN_S) -> list[Phase]:
    """The windows of ``event_windows`` as analysis phases, one per name."""
    windows = event_windows(events, restart_margin_s=restart_margin_s)
    return [Phase(name=n, windows=tuple(w)) for n, w in sorted(windows.items())]
