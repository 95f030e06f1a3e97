"""HBM creep against the peers across restarts: a node, or a chip, whose memory climbs
faster than its peers' in every run between restarts.

The peers' HBM rule (``peers``) compares growth since the burn-in, which a restart resets:
a leak of tens of MB an hour restarted every few hours never grows ``hbm_growth_min_frac``
of the capacity in one run. Here each chip's HBM bucket minima (the retained level) are cut
into runs at the restarts (the run's ``restart`` windows, else the buckets that fall below
``memory.restart_drop_frac`` of their neighbours) and its slope is the one the memory
detector pools over them (Sen's slope within the runs, ``memory.across_restarts``). Then,
among chips of one model:

- **a node** whose median chip slope is above the other nodes' median by more than
  max(tau, ``k_sigma`` x their natural spread: 1.4826 MAD of the other nodes' medians), and
  ``memory.segments_rising_share`` of its chips with their own CI's lower end above that
  median: ``outlier.node.restarts.hbm_used_bytes``, its chips named;
- **a chip** (on a node not named) above its node siblings' median slope by the same rule
  (the spread: of every chip's deviation from its siblings): ``outlier.restarts.hbm_used_bytes``.

Those chips are then left out of the growth rule: growth since the burn-in across restarts
is each start's own allocation, not a leak.

tau is the memory detector's smallest slope worth a finding (``memory.tau_for``). Nothing is
compared where fewer than ``memory.segments_min`` runs are seen.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from soak.analysis import memory
from soak.analysis.buckets import Buckets
from soak.analysis.messages import say
from soak.analysis.model import Finding
from soak.analysis.profile import Profile

DETECTOR_VERSION = "creep_peers/1.0"
METRIC = "hbm_used_bytes"


def _chip_slope(t: np.ndarray, y: np.ndarray, cuts: list[tuple[float, float]], start: float, end: float,
                profile: Profile) -> dict[str, Any] | None:
    """The pooled slope of one chip's runs between restarts (per hour), its CI and runs."""
    p = profile.memory
    ok = np.isfinite(y)
    runs = [r for r in memory.runs_between(t[ok], y[ok], cuts, start, end, p) if r[2].size >= p.segment_min_points]
    if len(runs) < p.segments_min:
        return None
    pooled = memory.pooled_sen([(rt, ry) for _, _, rt, ry in runs], p.ci)
    if pooled is None:
        return None
    slope = pooled[0]
    grown = [float(np.median(ry[-3:]) - np.median(ry - slope * (rt - a) / 3600.0)) for a, _, rt, ry in runs]
    return {"slope": slope, "low": pooled[1], "high": pooled[2], "segments": len(runs), "grown": grown,
            "start": float(runs[0][2][0]), "end": float(runs[-1][2][-1])}


def compare(src: Buckets, profile: Profile, run_start: float, skip: np.ndarray) -> tuple[list[Finding], set[str]]:
    """(findings, the chips restarted into ``memory.segments_min`` runs or more: judged here,
    not by their growth since the burn-in)."""
    p, m = profile.peers, profile.memory
    grid = src.grid
    rows = src.matrix(METRIC, skip)
    if not rows:
        return [], set()
    t = grid.centres()
    end = float(grid.origin + grid.n * grid.width)
    events = memory.restart_windows(profile)
    slopes: dict[str, dict[str, Any]] = {}
    for key, y in rows.items():
        cuts = events or memory.drops(t, y, grid.width, m.restart_drop_frac)
        if len(cuts) + 1 < m.segments_min:
            continue
        s = _chip_slope(t, y, cuts, run_start, end, profile)
        if s is not None:
            slopes[key] = s
    if not slopes:
        return [], set()
    out: list[Finding] = []
    by_model: dict[float | None, list[str]] = defaultdict(list)
    for k in slopes:
        by_model[src.capacity(k)].append(k)
    for cap, keys in by_model.items():
        tau = memory.tau_for(METRIC, cap, m)
        nodes: dict[str | None, list[str]] = defaultdict(list)
        for k in sorted(keys):
            nodes[src.place(k)[0]].append(k)
        named: set[str | None] = set()
        # a node against the other nodes of this model
        values = {n: float(np.median([slopes[k]["slope"] for k in ks])) for n, ks in nodes.items() if n is not None}
        for node, v in values.items():
            others = np.array([w for n, w in values.items() if n != node])
            if others.size < p.min_peers:
                continue
            base = float(np.median(others))
            spread = 1.4826 * float(np.median(np.abs(others - base)))
            limit = max(tau, p.k_sigma * spread)
            ks = nodes[node]
            above = sum(1 for k in ks if slopes[k]["low"] > base)
            if v - base > limit and above >= m.segments_rising_share * len(ks):
                named.add(node)
                out.append(_finding(src, profile, node, None, ks, slopes, base, v, spread, limit, cap, "cluster"))
        # a chip against its siblings on its node
        devs: dict[str, tuple[float, float]] = {}
        for ks in nodes.values():
            if len(ks) - 1 < p.min_peers:
                continue
            for k in ks:
                base = float(np.median([slopes[o]["slope"] for o in ks if o != k]))
                devs[k] = (slopes[k]["slope"] - base, base)
        if len(devs) < p.min_peers + 1:
            continue
        d = np.array([x for x, _ in devs.values()])
        spread = 1.4826 * float(np.median(np.abs(d - np.median(d))))
        limit = max(tau, p.k_sigma * spread)
        for k, (dev, base) in devs.items():
            node = src.place(k)[0]
            if node in named or dev <= limit or slopes[k]["low"] - base <= tau:
                continue
            out.append(_finding(src, profile, None, k, [k], slopes, base, slopes[k]["slope"], spread, limit, cap,
                                "node"))
    return out, set(slopes)


def _finding(src: Buckets, profile: Profile, node: str | None, key: str | None, members: list[str], slopes: dict[str, Any],
             base: float, value: float, spread: float, limit: float, cap: float | None, scope: str) -> Finding:
    scale = 1e6
    segs = [slopes[k]["segments"] for k in members]
    grown = [g for k in members for g in slopes[k]["grown"]]
    few = len(members) <= 4
    place = [src.place(k)[1] for k in members]
    values: dict[str, Any] = {
        "metric": METRIC, "scope": scope, "slope_mb_per_h": value / scale, "baseline_mb_per_h": base / scale,
        "deviation_mb_per_h": (value - base) / scale, "limit_mb_per_h": limit / scale,
        "segments": int(np.median(segs)), "growth_min_mb": min(grown) / scale, "growth_max_mb": max(grown) / scale,
    }
    if key is None:
        values.update({"node": node, "members": place if few else None, "chips": None if few else len(members)})
        code = "outlier.node.restarts.hbm_used_bytes"
    else:
        code = "outlier.restarts.hbm_used_bytes"
    p = profile.peers
    return Finding(
        kind="outlier",
        device=key,
        node=node,
        metric=METRIC,
        start=min(slopes[k]["start"] for k in members),
        end=max(slopes[k]["end"] for k in members),
        severity=profile.cap("outlier", p.outlier_severity),
        summary=say(code, values),
        code=code,
        values=values,
        baseline=base,
        deviation=value - base,
        slope_per_hour=value,
        details={
            "compared_with": scope,
            "natural_spread": spread,
            "natural_spread_unit": "MB/h",
            "limit": limit,
            "capacity": cap,
            "members": place,
            "chip_slopes_per_hour": {c: slopes[k]["slope"] for c, k in zip(place, members, strict=True)},
            "segments": segs,
            "method": "Sen's slope pooled over the runs between restarts per chip; node median against the other "
                      "nodes', chip against its siblings; beyond max(tau, k x 1.4826 MAD)",
            "version": DETECTOR_VERSION,
        },
    )

