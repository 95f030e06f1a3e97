"""Tails compared with peers: ranks that stall briefly but often.

A node whose ranks are 1.9x slower outside the collectives in 7 % of the readings (a noisy
host, OS jitter, a retrying PCIe link) leaves every bucket median where it was, so the peer
comparison of medians (``soak.analysis.peers``) cannot see it; yet under synchronous data
parallelism every rank waits for the slowest, and the job's mean step time is about 5 %
worse. So, beside the median, each rank's bucket also carries its tail:

- ``METRIC:tail_share``: the share of the bucket's readings beyond ``TAIL_FACTOR`` (1.5) x
  the rank's own median of that bucket (0 when none is);
- ``METRIC:tail_x``: the stall size, the median of those readings over that median (only in
  buckets that have such readings).

They are bucket statistics like the medians (``buckets.BUCKET_METRICS``): a cluster node
agent stores them for its leader, and the comparison reads them from either source.

The comparison is the peers' natural-spread rule on the share of stalled readings over the
last ``tail_window_s`` (2 h: one 10-min bucket holds 20 readings, too few to tell 3 % from
0), for ``compute_s`` and ``step_time_s``: each node's median over its ranks against the
other nodes', each rank against its node's other ranks (else the cluster's); out of line
beyond max(``tail_min_share``, ``k_sigma`` x the spread), for ``min_duration_s`` with
``min_share`` of the buckets, and a sign test on hourly medians. Under synchronous data
parallelism every rank's step time stalls with the slowest rank, so step-time tails are
shared by every rank and only ``compute_s`` names the one that stalls.

The finding (``straggler.node.tail.METRIC``, ``straggler.tail.METRIC``) states the share,
the stall size and the job time they cost: every rank waits for a stalled one, so a step in
which it stalls takes the job's median step time plus the stalled rank's extra time
(median x (size - 1)); the job's mean step time is longer by share x that extra over the
median step. It warns; it fails from ``tail_fail_cost_frac`` (10 %) of job time.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from soak.analysis._stats import block_reduce, medians_of_others, nanmedian_rows
from soak.analysis.messages import say
from soak.analysis.model import Finding
from soak.analysis.profile import PeersParams, Profile

DETECTOR_VERSION = "tails/1.0"
TAIL_FACTOR = 1.5  # a reading beyond this x its bucket's median is a stall
TAIL_OF = ("compute_s", "step_time_s")
SHARE, SIZE = "tail_share", "tail_x"
TAIL_METRICS: dict[str, str] = {f"{m}:{s}": m for m in TAIL_OF for s in (SHARE, SIZE)}
"""Tail bucket metric -> the metric whose readings it is made from."""


def base_metric(metric: str) -> str:
    """The metric whose readings a bucket metric is made from (itself for a median)."""
    return TAIL_METRICS.get(metric, metric)


def block_tails(t: np.ndarray, v: np.ndarray, width_s: float, stat: str,
                origin: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(block centres, statistic, readings) of a sorted series: ``tail_share`` in every
    non-empty block, ``tail_x`` only in the blocks with a stalled reading."""
    return tails_of_blocks(v, *block_reduce(t, v, width_s, "median", origin=origin), stat)


def tails_of_blocks(v: np.ndarray, tc: np.ndarray, med: np.ndarray, n: np.ndarray,
                    stat: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``block_tails`` of a series ``v`` from its block medians (``block_reduce``'s centres,
    medians and readings, every block: none left out), which ``bucket_stats`` reduces for
    every rank at once."""
    if tc.size == 0:
        return tc, med, n
    block = np.repeat(np.arange(tc.size), n)
    with np.errstate(all="ignore"):
        ratio = v / med[block]
    stalled = (med[block] > 0) & (ratio > TAIL_FACTOR)
    if stat == SHARE:
        return tc, np.bincount(block[stalled], minlength=tc.size) / n, n
    idx = np.flatnonzero(stalled)
    if idx.size == 0:
        e = np.empty(0)
        return e, e, np.empty(0, dtype=np.int64)
    blocks, starts = np.unique(block[idx], return_index=True)
    sizes = np.array([float(np.median(g)) for g in np.split(ratio[idx], starts[1:])])
    return tc[blocks], sizes, n[blocks]


def trailing_mean(rows: np.ndarray, width: int) -> np.ndarray:
    """Per row, the mean over the last ``width`` buckets (NaN-aware), NaN where fewer than
    half of them have a value or the bucket itself has none."""
    ok = np.isfinite(rows)
    v = np.where(ok, rows, 0.0)
    c = np.cumsum(np.pad(v, ((0, 0), (1, 0))), axis=1)
    k = np.cumsum(np.pad(ok.astype(float), ((0, 0), (1, 0))), axis=1)
    lo = np.maximum(np.arange(rows.shape[1]) + 1 - width, 0)
    hi = np.arange(rows.shape[1]) + 1
    s, cnt = c[:, hi] - c[:, lo], k[:, hi] - k[:, lo]
    with np.errstate(all="ignore"):
        out = s / cnt
    out[(cnt < width / 2) | ~ok] = np.nan
    return out


@dataclass(frozen=True)
class Rule:
    """The peers' rule, handed over by ``soak.analysis.peers`` (which calls :func:`compare`):
    one rule for medians and tails."""

    spec: Callable[..., Any]  # (metric, kind, scale, direction, floor, unit) -> a spec
    out_of_line: Callable[..., Any]
    spread: Callable[[np.ndarray], float]
    confidence: Callable[..., tuple[float, int]]
    members: Callable[..., dict[str, Any]]


def compare(src: Any, profile: Profile, run_start: float, skip: np.ndarray,
            job_step: np.ndarray | None, rule: Rule) -> list[Finding]:
    """Tail findings over bucket matrices (``buckets.Buckets``), as ``peers.compare`` reads them."""
    p = profile.peers
    out: list[Finding] = []
    t = src.grid.centres()
    width = max(1, int(round(p.tail_window_s / p.bucket_s)))
    for metric in TAIL_OF:
        share = src.matrix(f"{metric}:{SHARE}", skip)
        if len(share) < p.min_peers + 1:
            continue
        size, med = src.matrix(f"{metric}:{SIZE}", skip), src.matrix(metric, skip)
        keys = sorted(share)
        raw = np.vstack([share[k] for k in keys])
        x = trailing_mean(raw, width)
        sizes = np.vstack([size.get(k, np.full(t.size, np.nan)) for k in keys])
        meds = np.vstack([med.get(k, np.full(t.size, np.nan)) for k in keys])
        spec = rule.spec(metric, "straggler", "abs", 1, lambda q, c: q.tail_min_share, "%")
        ctx = _Context(metric, t, p, profile, job_step, rule)
        nodes: dict[str | None, list[int]] = defaultdict(list)
        for i, k in enumerate(keys):
            nodes[src.place(k)[0]].append(i)
        slow: set[str] = set()
        if len(nodes) >= p.min_peers + 1 and None not in nodes:
            names = sorted(n for n in nodes if n is not None)
            per_node = np.vstack([nanmedian_rows(x[nodes[n]]) for n in names])
            dev = _deviations(per_node, list(range(len(names))), p.min_peers)
            limit = _limit(dev, p, rule)
            for j, node in enumerate(names):
                rs = nodes[node]
                f = _judged(spec, ctx, dev[j], limit, nanmedian_rows(raw[rs]), nanmedian_rows(sizes[rs]),
                            nanmedian_rows(meds[rs]), node, None, [src.place(keys[i])[1] for i in rs])
                if f is not None:
                    slow.add(node)
                    out.append(f)
        dev = np.full_like(x, np.nan)
        for members in nodes.values():
            local = _deviations(x, members, p.min_peers)
            dev[members] = local[members]
        wide = _deviations(x, list(range(len(keys))), p.min_peers)
        for i, k in enumerate(keys):
            node = src.place(k)[0]
            if not np.isfinite(dev[i]).any() and node not in slow:
                dev[i] = wide[i]
        limit = _limit(dev, p, rule)
        for i, k in enumerate(keys):
            node, device = src.place(k)
            f = _judged(spec, ctx, dev[i], limit, raw[i], sizes[i], meds[i], node, device, None)
            if f is not None:
                out.append(f)
    return out


def _deviations(x: np.ndarray, members: list[int], min_peers: int) -> np.ndarray:
    """Each member's value minus the median of the other members (NaN where fewer than
    ``min_peers`` of them have one); rows outside ``members`` are NaN."""
    dev = np.full_like(x, np.nan)
    if len(members) - 1 < min_peers:
        return dev
    ref, k = medians_of_others(x[members])
    ref[k < min_peers] = np.nan
    dev[members] = x[members] - ref
    return dev


def _limit(dev: np.ndarray, p: PeersParams, rule: Rule) -> float:
    spread = rule.spread(dev)
    return max(p.tail_min_share, p.k_sigma * spread) if math.isfinite(spread) else p.tail_min_share


@dataclass(frozen=True)
class _Context:
    """What every judgement of one metric shares."""

    metric: str
    t: np.ndarray  # bucket centres
    p: PeersParams
    profile: Profile
    job_step: np.ndarray | None  # the job's step time per bucket
    rule: Rule


def _judged(spec: Any, ctx: _Context, dev: np.ndarray, limit: float, share: np.ndarray, size: np.ndarray,
            med: np.ndarray, node: str | None, device: str | None, members: list[str] | None) -> Finding | None:
    p = ctx.p
    judged = ctx.rule.out_of_line(spec, ctx.t, dev, limit, p)
    if judged is None:
        return None
    ok, tv, dv, sign, sel, stretches, _rule = judged
    a, b = stretches[0][0], stretches[-1][1] + 1
    window = np.zeros(tv.size, bool)
    window[a:b] = True
    # the readings themselves over the stretches (not the trailing means the rule judged)
    share_v = float(np.nanmean(share[ok][window]))
    size_v = float(np.nanmedian(size[ok][window])) if np.isfinite(size[ok][window]).any() else math.nan
    med_v = float(np.nanmedian(med[ok][window])) if np.isfinite(med[ok][window]).any() else math.nan
    step = ctx.job_step[ok][window] if ctx.job_step is not None else np.empty(0)
    step_v = float(np.nanmedian(step)) if np.isfinite(step).any() else math.nan
    extra = med_v * (size_v - 1.0)
    cost = share_v * extra / step_v if step_v > 0 and math.isfinite(extra) else None
    start, end = float(tv[a]) - p.bucket_s / 2, float(tv[b - 1]) + p.bucket_s / 2
    conf, hours = ctx.rule.confidence(tv[a:b], dv[a:b], sign)
    peer_share = share_v - float(np.median(dv[sel]))
    severity = "fail" if cost is not None and cost >= p.tail_fail_cost_frac else "warn"
    values: dict[str, Any] = {
        "metric": ctx.metric, "share_pct": 100.0 * share_v, "peers_share_pct": 100.0 * max(0.0, peer_share),
        "stall_x": size_v if math.isfinite(size_v) else None, "duration_h": (end - start) / 3600.0,
        "step_in_stalls_s": step_v + extra if cost is not None else None,
        "step_outside_s": step_v if cost is not None else None,
        "cost_pct": None if cost is None else 100.0 * cost, "confidence": conf,
    }
    if device is None:
        values.update(ctx.rule.members(node, members, "ranks"))
        code = f"straggler.node.tail.{ctx.metric}"
    else:
        code = f"straggler.tail.{ctx.metric}"
    return Finding(
        kind="straggler", device=device, node=node, metric=ctx.metric, start=start, end=end,
        severity=ctx.profile.cap("straggler", severity), summary=say(code, values), code=code, values=values,
        onset=start, baseline=max(0.0, peer_share), deviation=share_v - max(0.0, peer_share),
        details={
            "rule": "tail", "tail_factor": TAIL_FACTOR, "window_s": p.tail_window_s,
            "share_of_readings": share_v, "stall_x": values["stall_x"], "median_s": med_v,
            "job_step_time_s": step_v, "job_time_cost_frac": cost, "limit_share": limit,
            "confidence": conf, "hours_tested": hours, "compared_with": "cluster" if device is None else "peers",
            "members": members, "ranks": None if members is None else len(members),
            "stretches": [[float(tv[s]) - p.bucket_s / 2, float(tv[e]) + p.bucket_s / 2] for s, e in stretches[:20]],
            "method": f"share of readings beyond {TAIL_FACTOR}x the bucket median over {p.tail_window_s / 3600:g} h, "
                      "against the peers' by max(floor, k x 1.4826 MAD), persistent, sign test",
            "version": DETECTOR_VERSION,
        },
    )
