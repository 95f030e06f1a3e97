"""Stale telemetry: readings that stopped changing while the chip's peers' did.

A sensor that died, a driver that answers from a cache, a counter that never moves: each
gives readings that look clean and are not evidence. A series is stale over its longest run
of identical consecutive readings when that run

* lasts ``stale.min_unchanged_s`` or longer, and ``stale.peer_factor`` times the median of
  the peers' longest runs (what the metric's natural variation allows: chips under the same
  load move), and
* (a counter, ``COUNTERS``) lasts as long as the peers' median rate of moving would take to
  move ``stale.counter_quiet_moves`` times (a Poisson count that quiet by chance: e^-15);
* while at least ``stale.min_peers_moving_frac`` of the peers (``stale.min_peers`` at least)
  changed in it.

Peers are the other chips' series of the same metric (the whole hall in a cluster trace). A
hall where every chip holds still (an idle job's integer temperatures, a counter nobody
moves) gives no finding: the peers' own runs are as long. The finding (kind
``stale_telemetry``: node, chip, metric, since when, the value) takes the frozen readings out
of the evidence (``without_stale``). It warns: the run is not failed by a dead sensor, but the
detectors do not see them, the coverage figure counts
them as missing, and the criteria of the kinds that read the metric say the chip is not
judged on it (``not_judged``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from soak.analysis.evidence import is_host
from soak.analysis.messages import say
from soak.analysis.model import Finding
from soak.analysis.profile import Profile
from soak.analysis.trace import Series, Trace

DETECTOR_VERSION = "stale/1.0"
METRICS = ("temp_c", "power_w", "comm_timeouts_total")
"""The readings watched: the chips' sensors and their counters. Utilization and HBM in use
hold still for real reasons (an idle or hung chip reads 0 with its memory held, a saturated
one 100, an allocator keeps its pool): the hang, dropout and memory detectors judge those, and
taking them out of the evidence would hide a hang."""
COUNTERS = ("comm_timeouts_total",)
"""The counters among them: they move now and then, not with every reading."""
KINDS_OF = {
    "temp_c": ("thermal", "outlier"),
    "power_w": ("outlier",),
    "comm_timeouts_total": ("comm_timeouts",),
}
"""The finding kinds whose detectors read each metric: a chip stale on it is not judged there."""


def longest_run(s: Series) -> tuple[int, int]:
    """Indices (first, last) of the longest run of identical consecutive readings (by time)."""
    v = s.v
    if v.size == 0:
        return 0, 0
    change = np.flatnonzero(v[1:] != v[:-1]) + 1  # where a new value begins
    starts = np.concatenate(([0], change))
    ends = np.concatenate((change - 1, [v.size - 1]))
    k = int(np.argmax(s.t[ends] - s.t[starts]))
    return int(starts[k]), int(ends[k])


def _moved_in(s: Series, a: float, b: float) -> bool:
    i0, i1 = np.searchsorted(s.t, [a, b], side="left")
    seg = s.v[i0:i1 + 1]
    return seg.size >= 2 and bool(np.any(seg[1:] != seg[:-1]))


def detect(trace: Trace, profile: Profile, t0: float, t1: float) -> list[Finding]:
    p = profile.stale
    out: list[Finding] = []
    for metric in METRICS:
        # the chips only: the host's own row is no chip's peer
        series = [s for s in trace.series(metric) if len(s) >= 2 and not is_host(s.device)]
        if len(series) < p.min_peers + 1:
            continue
        runs = [longest_run(s) for s in series]
        lengths = np.array([float(s.t[b] - s.t[a]) for s, (a, b) in zip(series, runs, strict=True)])
        # each series' changes per hour (a counter's rate of moving)
        moves = np.array([np.count_nonzero(s.v[1:] != s.v[:-1]) / max(1e-9, (s.end - s.start) / 3600.0)
                          for s in series])
        for k, (s, (a, b)) in enumerate(zip(series, runs, strict=True)):
            length = lengths[k]
            if length < p.min_unchanged_s or b - a + 1 < p.min_readings:
                continue
            peers = [x for j, x in enumerate(series) if j != k]
            natural = float(np.median(np.delete(lengths, k)))
            if metric in COUNTERS:
                # a counter moves now and then: its peers' rate says how long a quiet one may be
                rate = float(np.median(np.delete(moves, k)))
                allowed = max(p.min_unchanged_s, p.counter_quiet_moves / rate * 3600.0) if rate > 0 else np.inf
            else:
                allowed = max(p.min_unchanged_s, p.peer_factor * natural)
            if length < allowed:
                continue
            start, end = float(s.t[a]), float(s.t[b])
            moving = sum(1 for x in peers if _moved_in(x, start, end))
            if moving < max(p.min_peers, p.min_peers_moving_frac * len(peers)):
                continue
            node, chip = trace.place(s.device)
            values = {"metric": metric, "value": float(s.v[a]), "unchanged_h": length / 3600.0,
                      "readings": b - a + 1, "peers_moving": moving, "peers": len(peers),
                      "peer_median_h": natural / 3600.0, "ongoing": end >= float(s.t[-1]) and b == len(s) - 1,
                      "since": start}
            code = "stale_telemetry.frozen"
            out.append(Finding(
                kind="stale_telemetry", device=chip, node=node, metric=metric, start=start, end=end,
                severity="warn", summary=say(code, values),
                onset=start, count=b - a + 1,
                details={"series": s.device, "first_index": a, "last_index": b,
                         "allowed_s": allowed, "peer_median_s": natural, "value": float(s.v[a])},
                code=code, values=values,
            ))
    return out


def without_stale(trace: Trace, findings: Iterable[Finding]) -> Trace:
    """The trace with every stale finding's frozen readings left out: they are not evidence."""
    cut: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for f in findings:
        if f.kind != "stale_telemetry":
            continue
        key = (str(f.details.get("series") or f.device), f.metric)
        cut.setdefault(key, []).append((f.start, f.end))
    if not cut:
        return trace
    return trace.without(cut)


def not_judged(findings: Iterable[object]) -> dict[str, list[str]]:
    """Per finding kind, the chips (``node/chip`` in a cluster) not judged by it because the
    metric it reads was stale (findings as objects or dicts)."""
    out: dict[str, list[str]] = {}
    for f in findings:
        get = f.get if isinstance(f, Mapping) else (lambda k, f=f: getattr(f, k, None))
        if get("kind") != "stale_telemetry":
            continue
        node, device = get("node"), get("device")
        name = f"{node}/{device}" if node else str(device)
        for kind in KINDS_OF.get(str(get("metric")), ()):
            names = out.setdefault(kind, [])
            if name not in names:
                names.append(name)
    return {k: sorted(v) for k, v in out.items()}
