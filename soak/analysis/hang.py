"""Hangs: a chip or rank that stops making progress for longer than ``threshold_s``.

Two signatures, because a hung collective can look idle or busy:

* **idle hang**: ``util_pct`` below the dropout level for ``threshold_s`` or more while
  HBM is still held (above ``hbm_held_frac`` of its median). Idle with memory given back is
  a restart or the end of the job, not a hang; idle with no HBM series is not judged.
* **busy hang**: the rank's progress signal stops: no ``step_time_s`` heartbeat (or a flat
  ``step`` counter) for ``threshold_s`` while telemetry keeps arriving. A gap in *all* data
  is a collection gap, not evidence of a hang. Utilization may read 100 % meanwhile
  (spinning in a collective).

The threshold is at least three sampling intervals (heartbeat spacing for the busy
signature), so a slowly sampled or time-accelerated run does not turn one missing sample
into a hang. A rank's start-up (before it has stepped a few times, so its spacing is known)
has its own bound: twice the threshold, and at least three of the chips' reading intervals. Onset is the first idle sample or the last heartbeat, so it is within one sampling interval
of the true stop. A hang still going at ``now`` (the end of data unless given) is reported
with ``details.ongoing``.
"""

from __future__ import annotations

import numpy as np

from soak.analysis._stats import episodes, sorted_union
from soak.analysis.messages import say
from soak.analysis.model import Finding
from soak.analysis.profile import Profile
from soak.analysis.trace import Trace
from soak.analysis.utilization import explain_by_phase

DETECTOR_VERSION = "hang/1.0"
_ALIVE_BIN_S = 10.0
_CADENCE_GAPS = 3  # step rows' gaps before their spacing sets the threshold
STARTUP_FACTOR = 2.0  # the start-up's bound: this many thresholds before the rank's cadence is known


def _alive_bins(trace: Trace, exclude: tuple[str, ...], device: str | None = None) -> np.ndarray:
    """Sorted 10 s bins in which telemetry (other than ``exclude`` metrics) arrived.

    With ``device``, only that device's own series count.
    """
    parts = []
    # one device's series looked up by name: a scan of every series per rank was quadratic
    # in the chips (2 M skips at 512)
    chosen = trace.series() if device is None else (trace.get(device, m) for m in trace.metrics)
    for s in chosen:
        if s is None or s.metric in exclude:
            continue
        b = np.floor(s.t / _ALIVE_BIN_S).astype(np.int64)
        parts.append(b[np.concatenate(([True], np.diff(b) != 0))])
    if not parts:
        return np.empty(0, dtype=np.int64)
    return sorted_union(parts)


def effective_threshold(threshold_s: float, dt_s: float) -> float:
    """The hang threshold, but at least 3 sampling intervals: one or two missing or idle
    samples (common on accelerated or slowly sampled runs) are not evidence of a hang."""
    return max(threshold_s, 3.0 * dt_s)


def _coverage(alive: np.ndarray, start: float, end: float) -> float:
    """Share of [start, end) during which telemetry was arriving."""
    lo, hi = int(np.floor(start / _ALIVE_BIN_S)) + 1, int(np.floor(end / _ALIVE_BIN_S))
    if hi <= lo:
        return 1.0
    n = np.searchsorted(alive, hi) - np.searchsorted(alive, lo)
    return float(n) / (hi - lo)


def detect(
    trace: Trace, profile: Profile, run_start: float, run_end: float, now: float
) -> list[Finding]:
    p = profile.hang
    low = profile.utilization.low_pct
    found: dict[str, list[tuple[float, float, str, bool]]] = {}

    for s in trace.series("util_pct"):
        dt = s.median_dt_s() or 1.0
        thr = effective_threshold(p.threshold_s, dt)
        eps = episodes(s.t, s.v < low, dt, profile.utilization.merge_gap_s, thr)
        if not eps:
            continue
        names = explain_by_phase(eps, profile.phases)
        hbm = trace.get(s.device, "hbm_used_bytes")
        if hbm is None or not hbm.v.size:
            continue  # idle without memory evidence may be a finished or absent job
        busy_level = float(np.median(hbm.v))
        for (a, b), name in zip(eps, names, strict=True):
            if name is not None:
                continue
            i0, i1 = np.searchsorted(hbm.t, [a, b])
            inside = hbm.v[i0:i1]
            if not inside.size or float(np.median(inside)) < p.hbm_held_frac * busy_level:
                continue  # memory released: restart or job end, not a hang
            ongoing = b >= s.end - 1e-6 and now - a >= thr
            end = max(b, now) if ongoing else b
            found.setdefault(s.device, []).append((a, end, "idle", ongoing))

    progress = [m for m in ("step_time_s", "step") if any(True for _ in trace.series(m))]
    if progress:
        exclude = ("step_time_s", "compute_s", "step")  # a rank's heartbeat, not telemetry
        alive_all: np.ndarray | None = None
        for metric in progress:
            for s in trace.series(metric):
                # A rank's heartbeats are judged against its own chip's telemetry when the
                # trace names them alike: a reader gap on that chip is then not a hang.
                own = any(m not in exclude for m in trace.metrics if trace.get(s.device, m))
                if own:
                    alive = _alive_bins(trace, exclude, s.device)
                else:
                    if alive_all is None:
                        alive_all = _alive_bins(trace, exclude)
                    alive = alive_all
                t = s.t
                if metric == "step":
                    moved = np.concatenate(([True], np.diff(s.v) > 0))
                    t = t[moved]
                gaps = np.diff(t)
                # Heartbeats are irregular: judge gaps against their typical spacing. Until the
                # rank has stepped a few times its spacing is not known (the first steps of a
                # process are its slowest: allocation, compilation, the first collective): then
                # the start-up is held to its own bound, twice the threshold and at least three
                # of the chips' reading intervals (rows come no closer on an accelerated run).
                if gaps.size >= _CADENCE_GAPS:
                    thr = effective_threshold(p.threshold_s, float(np.median(gaps)))
                else:
                    thr = effective_threshold(STARTUP_FACTOR * p.threshold_s, _reading_interval_s(trace))
                for i in np.flatnonzero(gaps >= thr):
                    a, b = float(t[i]), float(t[i + 1])
                    if _coverage(alive, a, b) >= 0.5 and not _in_phase((a, b), profile):
                        found.setdefault(s.device, []).append((a, b, "busy", False))
                tail_end = max(now, run_end)
                last = float(t[-1])
                if tail_end - last >= thr and _coverage(alive, last, run_end) >= 0.5:
                    if run_end - last >= thr or now > run_end:
                        found.setdefault(s.device, []).append((last, tail_end, "busy", True))

    out: list[Finding] = []
    for dev, items in sorted(found.items()):
        for a, b, how, ongoing in _merge(items):
            mins = (b - a) / 60.0
            code = ("hang.idle_hbm_held" if how == "idle" else "hang.heartbeats_stopped" if how == "busy"
                    else "hang.no_progress")
            values = {"duration_min": mins, "ongoing": ongoing}
            out.append(
                Finding(
                    kind="hang",
                    device=dev,
                    metric="util_pct" if how == "idle" else "step_time_s",
                    start=a,
                    end=b,
                    severity=profile.cap("hang", "fail"),
                    summary=say(code, values),
                    code=code,
                    values=values,
                    onset=a,
                    details={
                        "signature": how,
                        "duration_s": b - a,
                        "ongoing": ongoing,
                        "threshold_s": p.threshold_s,
                        "version": DETECTOR_VERSION,
                    },
                )
            )
    return out


_CHIP_METRICS = ("util_pct", "hbm_used_bytes", "temp_c", "power_w")


def _reading_interval_s(trace: Trace) -> float:
    """The chips' median spacing of readings (0 when no chip has two)."""
    dts = sorted(d for m in _CHIP_METRICS for s in trace.series(m) if (d := s.median_dt_s()) is not None and d > 0)
    return float(dts[len(dts) // 2]) if dts else 0.0


def _in_phase(interval: tuple[float, float], profile: Profile) -> bool:
    return explain_by_phase([interval], profile.phases)[0] is not None


def _merge(items: list[tuple[float, float, str, bool]]) -> list[tuple[float, float, str, bool]]:
    """Overlapping idle and busy evidence of one device is one hang, onset the earliest."""
    items = sorted(items)
    out: list[list] = []
    for a, b, how, ongoing in items:
        if out and a <= out[-1][1] + 60:
            last = out[-1]
            last[1] = max(last[1], b)
            last[2] = last[2] if last[2] == how else "both"
            last[3] = last[3] or ongoing
        else:
            out.append([a, b, how, ongoing])
    return [tuple(x) for x in out]  # type: ignore[misc]
