"""What a run's evidence covers: readings per chip and metric, training time, chip-hours.

A verdict is worth what its evidence covers. These functions measure it from the trace and
the run's events, on the run's time line:

- **coverage** of a (chip, metric): the share of the soak window that good readings cover. A
  reading covers the time to the next one, at most two ticks (a late tick is not a gap, a
  missing one is); the same two ticks at the start and the end of the window. A chip whose reader failed has no reading
  then (``up`` 0, values None), so an outage lowers its coverage;
- **interruptions**: every stretch in which a workload was not training, with its cause
  (start-up, a crash or hang, a node of a cluster lost, the daemon down, a stop), ending when the workload's rank 0
  starts again; **training time** is the soak window less their union;
- **chip-hours**: per accelerator chip, the time its readings cover *while training*, so
  gaps, downtime and the host pseudo-device never count.

Pure functions over plain arrays and records: the judge (``soak.judge``) feeds them from the
store, ``soak analyze TRACE.csv`` from a file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from soak.analysis._stats import sorted_union
from soak.device_names import HOST_DEVICE, device_key

CHIP_METRICS = ("util_pct", "hbm_used_bytes", "temp_c", "power_w")

# Causes of an interruption; ``excused`` ones do not count against availability: a workload
# must start somewhere, and an injected canary fault is expected by the plan.
STARTUP, CRASH, HANG, DAEMON_DOWN, STOPPED, GAVE_UP = "startup", "crash", "hang", "daemon down", "stopped", "gave up"
NODE_LOST = "node lost"


@dataclass(frozen=True)
class Interruption:
    """A stretch in which a workload did not train (run time line, unix seconds)."""

    start: float
    end: float
    cause: str
    workload: str | None = None
    injected: bool = False
    message: str | None = None
    node: str | None = None  # the node it happened on (a cluster run's crash, hang or lost node)
    # when soak knew: a hang's kill, a node's loss declared (the rest, until training again, is
    # the restart); None where the failure was seen as it happened (a crash's exit)
    detected: float | None = None
    during: str | None = None  # the collective a crash's timeout named ("link_test": a link failed)

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end - self.start)

    @property
    def excused(self) -> bool:
        return self.cause == STARTUP or self.injected

    @property
    def code(self) -> str:
        """``interruption.<cause>`` (a key of ``soak.analysis.messages.INTERRUPTIONS``)."""
        return "interruption." + self.cause.replace(" ", "_")

    @property
    def values(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "duration_s": self.duration_s, "workload": self.workload,
                "injected": self.injected, "message": self.message}

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "duration_s": self.duration_s, "cause": self.cause,
                "workload": self.workload, "injected": self.injected, "message": self.message, "node": self.node,
                "detected": self.detected, "during": self.during,
                "code": self.code, "values": self.values}


@dataclass(frozen=True)
class Accounting:
    """Where the planned time went."""

    planned_s: float
    window_start: float
    window_end: float  # the run's end, or its planned end when it ran past it
    reached_end: bool  # the run lasted to its planned end
    training_s: float
    unexcused_down_s: float  # downtime not explained by start-up or an injected fault
    longest_s: float  # the longest uninterrupted stretch of training
    interruptions: tuple[Interruption, ...] = ()
    training: tuple[tuple[float, float], ...] = field(default=(), repr=False)

    @property
    def availability(self) -> float | None:
        return None if self.planned_s <= 0 else min(1.0, self.training_s / self.planned_s)

    @property
    def judged_availability(self) -> float | None:
        """What the profile judges: the share of the time the run ran in which it trained,
        start-up and injected faults given back (a run that ended early fails on runtime)."""
        ran = self.window_end - self.window_start
        if ran <= 0:
            return None
        return max(0.0, min(1.0, (ran - self.unexcused_down_s) / ran))

    def to_dict(self) -> dict[str, Any]:
        return {
            "planned_s": self.planned_s, "window_start": self.window_start, "window_end": self.window_end,
            "reached_end": self.reached_end, "training_s": self.training_s,
            "availability": self.availability, "judged_availability": self.judged_availability,
            "unexcused_down_s": self.unexcused_down_s, "longest_s": self.longest_s,
            "interruptions": [i.to_dict() for i in self.interruptions],
        }


def least_covered(pair: tuple[str, str, float]) -> tuple[float, str, str]:
    """The order in which (chip, metric, share) pairs are least covered: the lowest share, a tie
    broken by chip then metric name, so every page and the app name the same one."""
    chip, metric, ratio = pair
    return ratio, chip, metric


def lowest_metric(ratios: Mapping[str, float]) -> str | None:
    """The least covered of one chip's metrics (``least_covered``'s tie rule); None for none."""
    return min(ratios, key=lambda m: (ratios[m], m), default=None)


@dataclass(frozen=True)
class Coverage:
    """Readings per chip and metric over the soak window."""

    window_s: float
    tick_s: float
    chips_expected: int
    ratios: Mapping[str, Mapping[str, float]]  # chip -> metric -> covered share
    metrics: tuple[str, ...]  # the metrics the backend provided (on any chip)
    outages: tuple[Mapping[str, Any], ...] = ()  # reader outages: start, end, reader, error

    @property
    def chips_seen(self) -> int:
        return len(self.ratios)

    @property
    def worst(self) -> tuple[str | None, str | None, float]:
        """(chip, metric, ratio) of the least covered pair; a never-read chip counts as 0."""
        if self.chips_expected > self.chips_seen or not self.ratios:
            return None, None, 0.0
        return min(((c, m, r) for c, ms in self.ratios.items() for m, r in ms.items()),
                   key=least_covered, default=(None, None, 0.0))

    def below(self, minimum: float) -> list[tuple[str, str, float]]:
        return sorted((c, m, r) for c, ms in self.ratios.items() for m, r in ms.items() if r < minimum)

    def to_dict(self) -> dict[str, Any]:
        chip, metric, ratio = self.worst
        return {
            "window_s": self.window_s, "tick_s": self.tick_s, "chips_expected": self.chips_expected,
            "chips_seen": self.chips_seen, "metrics": list(self.metrics),
            "min_ratio": ratio, "min_chip": chip, "min_metric": metric,
            "ratios": {c: dict(ms) for c, ms in self.ratios.items()},
            "outages": [dict(o) for o in self.outages],
        }


# how a cluster trace's series key of a node's host row ends (``device_key(node, "host")``)
_NODE_HOST = device_key("", HOST_DEVICE)


def is_host(device: str) -> bool:
    """The host pseudo-device, plain or a cluster trace's series key of a node's (``node-a/host``)."""
    return device == HOST_DEVICE or device.endswith(_NODE_HOST)


def chip_devices(devices: Iterable[str], metrics_of: Mapping[str, Iterable[str]]) -> list[str]:
    """The devices that are chips: they carry a chip metric and are not the host row."""
    return sorted(d for d in devices if not is_host(d) and set(metrics_of.get(d, ())) & set(CHIP_METRICS))


def covered_spans(t: np.ndarray, tick_s: float, start: float, end: float) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of what readings at times ``t`` cover inside [start, end]."""
    t = np.asarray(t, dtype=np.float64)
    t = t[(t >= start - tick_s) & (t <= end)]
    if t.size == 0 or end <= start:
        return np.empty(0), np.empty(0)
    nxt = np.append(t[1:], np.inf)
    lo = np.maximum(t, start)
    if t[0] - start <= 2.0 * tick_s:  # the first tick came late, not missing
        lo[0] = start
    hi = np.minimum(np.minimum(nxt, t + 2.0 * tick_s), end)
    keep = hi > lo
    return lo[keep], hi[keep]


def covered_s(t: np.ndarray, tick_s: float, start: float, end: float) -> float:
    lo, hi = covered_spans(t, tick_s, start, end)
    return float(np.sum(hi - lo))


def within(lo: np.ndarray, hi: np.ndarray, segments: Sequence[tuple[float, float]]) -> float:
    """Total length of the spans [lo, hi] inside the (sorted, disjoint) ``segments``."""
    if not len(lo) or not segments:
        return 0.0
    # F(x) = time in segments up to x, piecewise linear: the overlap of [a, b] is F(b) - F(a).
    xs, ys, acc = [], [], 0.0
    for a, b in segments:
        xs += [a, b]
        ys += [acc, acc + (b - a)]
        acc += b - a
    return float(np.sum(np.interp(hi, xs, ys) - np.interp(lo, xs, ys)))


def coverage(series: Mapping[tuple[str, str], np.ndarray], tick_s: float, start: float, end: float,
             chips_expected: int = 0, outages: Sequence[Mapping[str, Any]] = ()) -> Coverage:
    """Coverage of every (chip, metric) the backend provided, from reading times."""
    seconds = {k: covered_s(t, tick_s, start, end) for k, t in series.items()
               if not is_host(k[0]) and k[1] in CHIP_METRICS}
    return coverage_of(seconds, tick_s, start, end, chips_expected, outages)


def coverage_of(seconds: Mapping[tuple[str, str], float], tick_s: float, start: float, end: float,
                chips_expected: int = 0, outages: Sequence[Mapping[str, Any]] = ()) -> Coverage:
    """Coverage from the seconds of the window each (chip, metric) has readings for (a
    cluster's: summed by the store over its nodes' buckets)."""
    metrics_of: dict[str, set[str]] = {}
    for dev, metric in seconds:
        metrics_of.setdefault(dev, set()).add(metric)
    chips = chip_devices(metrics_of, metrics_of)
    provided = tuple(m for m in CHIP_METRICS if any(m in metrics_of[c] for c in chips))
    window = max(0.0, end - start)
    ratios: dict[str, dict[str, float]] = {}
    for chip in chips:
        ratios[chip] = {}
        for m in provided:
            got = 0.0 if window <= 0 else seconds.get((chip, m), 0.0) / window
            ratios[chip][m] = round(min(1.0, got), 6)
    return Coverage(window_s=window, tick_s=tick_s, chips_expected=max(chips_expected, len(chips)),
                    ratios=ratios, metrics=provided, outages=tuple(outages))


def union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted((a, b) for a, b in intervals if b > a):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def complement(intervals: Sequence[tuple[float, float]], start: float, end: float) -> list[tuple[float, float]]:
    out, at = [], start
    for a, b in union(intervals):
        a, b = max(a, start), min(b, end)
        if b <= a:
            continue
        if a > at:
            out.append((at, a))
        at = max(at, b)
    if end > at:
        out.append((at, end))
    return out


def _clip(i: Interruption, start: float, end: float) -> Interruption | None:
    a, b = max(i.start, start), min(i.end, end)
    if b <= a:
        return None
    return replace(i, start=a, end=b)


def account(events: Sequence[Any], workloads: Sequence[str], *, planned_start: float, planned_end: float,
            ended: float, time_scale: float = 1.0) -> Accounting:
    """Training time and interruptions from the run's events (``EventRecord``-like: ``ts``,
    ``end_ts``, ``kind``, ``workload``, ``rank``, ``message``, ``detail``).

    A workload trains from the ``start``/``resume`` heartbeat of its rank 0 until a crash,
    hang or stop; the daemon being down (a ``gap``) or a node of a cluster lost (``node_lost``)
    stops every workload until each starts again. A crash or hang that follows an ``inject`` event of the same workload since its
    last start is an injected canary.
    """
    planned_s = max(0.0, planned_end - planned_start)
    w_end = min(ended, planned_end)
    evs = sorted(events, key=lambda e: e.ts)
    names = list(workloads) or sorted({e.workload for e in evs if e.workload})
    ups: dict[str, list[float]] = {w: [] for w in names}
    for e in evs:
        if e.kind in ("start", "resume") and e.workload in ups and e.rank in (None, 0) and e.ts >= planned_start:
            ups[e.workload].append(e.ts)

    def back_up(w: str, t: float) -> float:
        return next((u for u in ups.get(w, []) if u >= t), w_end)

    raw: list[Interruption] = []
    for w in names:
        raw.append(Interruption(planned_start, back_up(w, planned_start), STARTUP, w, message="workload start-up"))
    armed: dict[str, bool] = {}
    timed_out: dict[str, str] = {}  # workload -> the collective its latest timeout named
    for e in evs:
        w = e.workload
        detail = e.detail if isinstance(e.detail, Mapping) else {}
        if e.kind == "inject" and w is not None and _kills(e.message):
            armed[w] = True
        elif e.kind in ("start", "resume") and w is not None and e.rank in (None, 0):
            armed.pop(w, None)
            timed_out.pop(w, None)
        elif e.kind == "comm_timeout" and w is not None:
            # "link_test at step 40: DistBackendError: ..." (the rank's watchdog)
            timed_out[w] = (e.message or "").split(" at step ", 1)[0]
        elif e.kind in ("crash", "hang") and w in ups:
            begin = e.ts
            if e.kind == "hang" and isinstance(detail.get("stalled_s"), int | float):
                begin = e.ts - float(detail["stalled_s"]) * time_scale  # it hung at its last step
            raw.append(Interruption(begin, back_up(w, e.ts), CRASH if e.kind == "crash" else HANG, w,
                                    injected=armed.pop(w, False), message=e.message, node=getattr(e, "node", None),
                                    detected=e.ts if e.kind == "hang" else None,
                                    during=timed_out.pop(w, None) if e.kind == "crash" else None))
        elif e.kind == "gap" and not getattr(e, "node", None):
            # (one node's agent down in a cluster run: the others trained on; its absence is
            # the cluster's "nodes" criterion)
            end = e.end_ts if e.end_ts is not None else e.ts
            for name in names:
                raw.append(Interruption(e.ts, max(end, back_up(name, end)), DAEMON_DOWN, name, message=e.message))
        elif e.kind == "node_lost":
            # a data-parallel job stops with any of its nodes: from the lost node's last sign of
            # life (on the store's clock, which the run's time line follows) until the job formed
            # again without it
            seen = detail.get("last_seen")
            begin = float(seen) if isinstance(seen, int | float) and seen <= e.ts else e.ts
            for name in names:
                raw.append(Interruption(begin, back_up(name, e.ts), NODE_LOST, name, message=e.message,
                                        node=detail.get("node") or getattr(e, "node", None), detected=e.ts))
        elif e.kind == "stop":
            cause = GAVE_UP if detail.get("gave_up") else STOPPED
            for name in [w] if w in ups else names:
                raw.append(Interruption(e.ts, w_end, cause, name, message=e.message))
    clipped = [c for c in (_clip(i, planned_start, w_end) for i in raw) if c is not None]
    down = union((i.start, i.end) for i in clipped)
    training = complement(down, planned_start, w_end)
    unexcused = union((i.start, i.end) for i in clipped if not i.excused)
    return Accounting(
        planned_s=planned_s, window_start=planned_start, window_end=w_end,
        reached_end=ended >= planned_end - max(2.0, 0.001 * planned_s),
        training_s=sum(b - a for a, b in training),
        unexcused_down_s=sum(b - a for a, b in unexcused),
        longest_s=max((b - a for a, b in training), default=0.0),
        interruptions=tuple(sorted(clipped, key=lambda i: (i.start, i.workload or ""))),
        training=tuple(training),
    )


def _kills(message: str | None) -> bool:
    """An inject heartbeat that ends or freezes the rank (not a leak, stall or slow rank)."""
    text = (message or "").lower()
    return text.startswith(("crash:", "hang:")) and ("exiting" in text or "stops stepping" in text)


def chip_hours(series: Mapping[tuple[str, str], np.ndarray], tick_s: float | None,
               start: float, end: float, training: Sequence[tuple[float, float]] | None = None) -> float:
    """Sum over chips of the hours their readings cover (while training, when given).

    A chip's readings are the union of its chip metrics' times; ``tick_s`` None takes each
    chip's median interval (a CSV trace). Gaps longer than two ticks are not counted.
    """
    times: dict[str, list[np.ndarray]] = {}
    for (dev, metric), t in series.items():
        if not is_host(dev) and metric in CHIP_METRICS:
            times.setdefault(dev, []).append(np.asarray(t, dtype=np.float64))
    total = 0.0
    for arrays in times.values():
        t = sorted_union(arrays)
        if t.size == 0:
            continue
        tick = tick_s
        if tick is None:
            tick = float(np.median(np.diff(t[: 100_000]))) if t.size > 1 else 0.0
        lo, hi = covered_spans(t, tick, start, end)
        total += within(lo, hi, training) if training is not None else float(np.sum(hi - lo))
    return total / 3600.0


def covered_per_bucket(t: np.ndarray, tick_s: float, edges: np.ndarray, end: float) -> np.ndarray:
    """Seconds of each bucket ``[edges[i], edges[i+1])`` that readings at times ``t`` cover
    (the rule of :func:`covered_spans`, from ``edges[0]`` to ``end``): summed over buckets,
    what :func:`covered_s` gives over the whole span."""
    lo, hi = covered_spans(t, tick_s, float(edges[0]), min(float(edges[-1]), end))
    if lo.size == 0:
        return np.zeros(edges.size - 1)
    # F(x) = covered time up to x, piecewise linear over the disjoint sorted spans
    xs = np.column_stack((lo, hi)).ravel()
    ys = np.concatenate(([0.0], np.cumsum(hi - lo))).repeat(2)[1:-1]
    return np.diff(np.interp(edges, xs, ys))


def chip_hours_of_buckets(totals: Sequence[tuple[float, float, int]], width_s: float, start: float, end: float,
                          training: Sequence[tuple[float, float]] | None = None) -> float:
    """Chip-hours from per-bucket sums ``(bucket start, covered seconds of all chips, chips)``
    (a cluster's, summed by the store). Inside a bucket the store no longer knows which
    seconds a chip was read, so the time read *while training* is bounded from below: a chip
    read ``c`` of a bucket's ``L`` seconds, ``w`` of which trained, was read at least
    ``c + w - L`` of them. Exact for a bucket trained throughout or not at all; otherwise
    understated, never overstated."""
    total = 0.0
    for ts, covered, n in totals:
        a, b = max(ts, start), min(ts + width_s, end)
        span = b - a
        if span <= 0 or n <= 0:
            continue
        trained = span if training is None else within(np.array([a]), np.array([b]), training)
        total += max(0.0, min(covered, n * span) + n * (trained - span))
    return total / 3600.0
