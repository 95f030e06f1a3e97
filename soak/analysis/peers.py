"""Peer comparison: a chip, rank or node that stays out of line with its peers.

Chips of one model doing the same work should agree on temperature at comparable power,
power, utilization, HBM growth and step time. A relative rule finds what no fixed threshold
can (SuperBench flags a node > 5 % below a fleet baseline; NVIDIA's straggler detection
scores each rank against its peers). Method (parameters in ``[peers]``):

1. **Buckets**: the median of every series in time-aligned ``bucket_s`` buckets (HBM: the
   minimum, the retained level under the allocator sawtooth), one matrix chips x buckets per
   metric. A chip is not compared in a bucket where it idles (``util_pct`` median below
   ``idle_util_pct``) or that overlaps a declared phase window; its temperature is not
   compared where its power is more than ``power_tol_frac`` away from its peers'.
2. **Peers**: chips of one model (the same ``hbm_total_bytes``); ranks (``step_time_s``,
   ``compute_s``, ``busbw_gbps``) are one group. The baseline of a chip in a bucket is the median of the
   *other* chips of its group on its node when there are ``min_peers`` of them, else of the
   others in the whole cluster (both baselines are reported).
3. **Deviation** from the baseline: temperature and utilization in their units; power, step
   time and bandwidth as a ratio (log); HBM as growth since the burn-in of the memory
   detector beyond the peers' growth, in bytes.
4. **Natural spread**: per bucket 1.4826 x MAD of the deviations across the group, median
   over buckets (nodes, when fewer than ``SMALL_GROUP``: of the other nodes' values, so a
   straggler among three does not widen the spread it is judged by).
   Out of line: deviation beyond max(metric floor, ``k_sigma`` x spread) in
   the direction that matters (hotter, more HBM growth, slower step time, lower bandwidth;
   both ways for power and utilization).
5. **Stays out of line**: stretches of out-of-line buckets (one bucket of respite
   bridged) lasting ``min_duration_s`` with ``min_share`` of their buckets out, and from
   the first stretch to the last the hourly medians of the deviation on the bad side
   often enough (one-sided sign test, confidence >= ``min_confidence``): a chip whose
   deviation swings with a daily cycle is not out of line. The finding gives the baseline,
   the deviation (median over the out-of-line buckets), since when, and that confidence.

The comparison runs on bucket matrices from either source (``soak.analysis.buckets``): a
raw trace (``soak analyze``, a single-node run), reduced by ``bucket_stats``, or the same
statistics the node agents of a cluster run computed with it and stored.

Stragglers: a rank's step time, compute time (outside the collectives) or bandwidth out of
line with its peers is a ``straggler`` on that rank; in a cluster trace each node's median
over its ranks is also compared with the other nodes (``device`` None: the whole node is
slow; its summary and ``details["members"]`` name its ranks), and then its ranks are not
named again against the cluster. ``warn``, ``fail`` from ``straggler_fail_frac``.

Nodes against nodes for the chip metrics too (``outlier.node.*``, from ``SMALL_GROUP`` nodes
of a model): a fault every chip of a node shares leaves its chips in line with each other.
A node's temperature is judged against the other nodes' spread (``node_k_sigma``, floor
``node_temp_min_c``); nodes hot together are one finding of their group
(``outlier.group.temp_c``: a facility cause).

Severity (the profile's severity policy): a straggler ``straggler_fail_frac`` slower, or a
chip, node or group ``temp_fail_c`` hotter at comparable power, fails once out of line for
``fail_min_s``; any other outlier has ``outlier_severity`` (warn).

Each series is judged by three rules in turn: out of line for long (above), out of line in
short episodes that come back (``soak.analysis.recurring``, codes ``*.episodes.*``), or out
of line by far for a short while (every bucket beyond ``large_factor`` x the limit for
``large_min_s``: what names a large fault soon after its onset).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from soak.analysis import creep_peers, recurring, tails
from soak.analysis._stats import index_runs, medians_of_others, nanmedian_rows, valid_count
from soak.analysis.buckets import Buckets, Grid, TraceBuckets, grid_for
from soak.analysis.messages import say
from soak.analysis.model import SEVERITIES, Finding
from soak.analysis.profile import PeersParams, Profile
from soak.analysis.trace import Trace

DETECTOR_VERSION = "peers/1.1"
# compute_s, the time outside the collectives: under synchronous data parallelism every rank
# waits for the slowest in the all-reduce, so step times agree and only this names the slow one
STEP_METRICS = ("step_time_s", "compute_s")
_UNIT_KEYS = {"C": "c", "W": "w", "%": "pct", "MB": "mb", "s": "s", "GB/s": "gbps"}
"""A unit as the suffix of a value's key in a finding's ``values``."""
BANDWIDTH_METRICS = ("busbw_gbps",)


@dataclass(frozen=True)
class _Spec:
    """How one metric is compared (its bucket statistic: ``buckets.BUCKET_METRICS``)."""

    metric: str
    kind: str  # outlier | straggler
    scale: str  # abs | log | growth
    direction: int  # +1 high is bad, -1 low is bad, 0 both
    floor: Callable[[PeersParams, float | None], float]  # in deviation units; arg: capacity
    unit: str
    # a node's median over its chips is far less noisy than one chip: its own floor (None: the chip's)
    node_floor: Callable[[PeersParams], float] | None = None


SPECS = (
    # A cooler chip at the same power is no defect; a hotter one is a cooling problem.
    _Spec("temp_c", "outlier", "abs", 1, lambda p, c: p.temp_min_c, "C", lambda p: p.node_temp_min_c),
    _Spec("power_w", "outlier", "log", 0, lambda p, c: math.log1p(p.power_min_frac), "W"),
    _Spec("util_pct", "outlier", "abs", 0, lambda p, c: p.util_min_pct, "%"),
    _Spec("hbm_used_bytes", "outlier", "growth", 1, lambda p, c: p.hbm_growth_min_frac * c if c else math.inf, "MB"),
    _Spec("step_time_s", "straggler", "log", 1, lambda p, c: math.log1p(p.step_min_frac), "s"),
    _Spec("compute_s", "straggler", "log", 1, lambda p, c: math.log1p(p.step_min_frac), "s"),
    _Spec("busbw_gbps", "straggler", "log", -1, lambda p, c: -math.log1p(-p.bw_min_frac), "GB/s"),
)


def detect(trace: Trace, profile: Profile, run_start: float, run_end: float) -> list[Finding]:
    """Peer findings of a trace (one node, or a cluster trace with nodes)."""
    grid = grid_for(profile, run_start, run_end)
    if grid is None:
        return []
    return compare(TraceBuckets(trace, grid), profile, run_start)


def compare(src: Buckets, profile: Profile, run_start: float) -> list[Finding]:
    """The peer comparison over bucketed matrices, whichever source made them: a raw trace
    (:class:`TraceBuckets`) or the buckets the node agents of a cluster run stored
    (:class:`StoredBuckets`)."""
    p = profile.peers
    grid = src.grid
    skip = grid.phase_mask(profile)
    util = src.matrix("util_pct", skip)
    idle = {k: row < p.idle_util_pct for k, row in util.items()}
    job_step = job_step_time(src, skip)
    # a member that reports compute_s is compared on it, not on its step time: that is the
    # job's, and where it differs between ranks it is where each one's step rows fell against
    # the others' slow steps (a node named by its step time in "episodes" of another node's)
    computed = {k for k, row in src.matrix("compute_s", skip).items() if np.isfinite(row).any()}
    # HBM of a job restarted again and again: its growth since the burn-in spans restarts that
    # reset it; each run's slope against the peers' instead (creep_peers)
    creep, restarted = creep_peers.compare(src, profile, run_start, skip)
    out: list[Finding] = []
    for spec in SPECS:
        rows = src.matrix(spec.metric, skip)
        if spec.metric == "hbm_used_bytes" and restarted:
            rows = {k: v for k, v in rows.items() if k not in restarted}
        if spec.metric == "step_time_s":
            rows = {k: v for k, v in rows.items() if k not in computed}
        for k in rows:
            if k in idle:
                rows[k] = np.where(idle[k], np.nan, rows[k])
        if spec.metric == "temp_c":
            _comparable_power(src, skip, rows, p)
        found: list[Finding] = []
        for keys, cap in _groups(src, list(rows), spec):
            found.extend(_compare(src, grid, spec, {k: rows[k] for k in keys}, cap, profile, run_start, job_step))
        out.extend(_grouped(found, p) if spec.metric == "temp_c" else found)
    return out + creep + tails.compare(src, profile, run_start, skip, job_step, _TAIL_RULE)


def _grouped(found: list[Finding], p: PeersParams) -> list[Finding]:
    """Whole nodes hotter than the others at the same time, ``group_min_nodes`` or more (of
    either chip model): one finding of the group, a facility cause (the cooling of their rack
    or row), not one per node; its severity the worst of theirs."""
    nodes = sorted((f for f in found if f.code == "outlier.node.temp_c"), key=lambda f: f.start)
    groups: list[list[Finding]] = []
    for f in nodes:
        if groups and f.start < max(g.end for g in groups[-1]):
            groups[-1].append(f)
        else:
            groups.append([f])
    out = [f for f in found if f.code != "outlier.node.temp_c"]
    for g in groups:
        if len(g) < p.group_min_nodes:
            out.extend(g)
            continue
        g = sorted(g, key=lambda f: -(f.deviation or 0.0))
        start, end = min(f.start for f in g), max(f.end for f in g)
        deviation = float(np.median([f.deviation for f in g]))
        baseline = float(np.median([f.baseline for f in g]))
        severity = max((f.severity for f in g), key=SEVERITIES.index)
        values = {"metric": "temp_c", "members": sorted(f.node for f in g), "nodes": len(g),
                  "deviation_c": deviation, "baseline_c": baseline, "worst_c": g[0].deviation,
                  "duration_h": (end - start) / 3600.0}
        out.append(Finding(
            kind="outlier", device=None, node=None, metric="temp_c", start=start, end=end, severity=severity,
            summary=say("outlier.group.temp_c", values), code="outlier.group.temp_c", values=values, onset=start,
            baseline=baseline, deviation=deviation,
            details={"cause": "facility", "members": values["members"],
                     "nodes": [{"node": f.node, "deviation_c": f.deviation, "start": f.start, "end": f.end,
                                "severity": f.severity, "limit": f.details.get("limit")} for f in g],
                     "method": "whole nodes out of line together on temperature: one finding of the group",
                     "version": DETECTOR_VERSION}))
    return out


def compare_tails(src: Buckets, profile: Profile, run_start: float) -> list[Finding]:
    """The tails alone (``soak.analysis.tails``), by this module's rule."""
    skip = src.grid.phase_mask(profile)
    return tails.compare(src, profile, run_start, skip, job_step_time(src, skip), _TAIL_RULE)


def job_step_time(src: Buckets, skip: np.ndarray) -> np.ndarray | None:
    """The job's step time per bucket (every rank's median): what episodes and stalls cost the job."""
    steps = src.matrix("step_time_s", skip)
    return nanmedian_rows(np.vstack(list(steps.values()))) if steps else None


def _out_of_line(spec: Any, t: np.ndarray, dev: np.ndarray, limit: float, p: Any, rule: str = "persistent") -> Any:
    """(valid mask, times, deviations, sign, selection, stretches, rule) of a series that
    stays out of line with enough confidence (rule ``persistent``), or that is out of line by
    far for a short while (``large``); None otherwise. One rule for chips, ranks and nodes."""
    ok = np.isfinite(dev)
    if ok.sum() < 2:
        return None
    tv, dv = t[ok], dev[ok]
    if rule == "large":
        f = _large(spec, tv, dv, limit, p)
        return None if f is None else (ok, tv, dv, *f, rule)
    f = _finding(spec, tv, dv, limit, p)
    if f is None:
        return None
    sign, sel, stretches = f
    if _confidence_of(tv, dv, stretches, sign) < p.min_confidence:
        return None
    return ok, tv, dv, sign, sel, stretches, rule


def _judge(spec: _Spec, t: np.ndarray, dev: np.ndarray, limit: float, p: PeersParams) -> Any:
    """The rules in order: out of line for long (``persistent``), in episodes that come back
    (a tuple of ``_recurring``'s), or by far for a short while (``large``: what names a big
    fault early; a recurring one is named as such once it has come back)."""
    judged = _out_of_line(spec, t, dev, limit, p)
    if judged is not None:
        return judged
    rec = _recurring(spec, t, dev, limit, p)
    if rec is not None:
        return rec
    return _out_of_line(spec, t, dev, limit, p, "large")


def _large(
    spec: _Spec, tv: np.ndarray, dv: np.ndarray, limit: float, p: PeersParams
) -> tuple[int, np.ndarray, list[tuple[int, int]]] | None:
    """Stretches of consecutive buckets each beyond ``large_factor`` x the limit, lasting
    ``large_min_s`` and three buckets: a fault this large needs no two hours to be told from the natural
    spread, and the online analysis names it within a few buckets of its onset. No sign test:
    the stretch is too short for hourly medians, and its size is the evidence. Not for HBM
    growth: it only accumulates (a leak), and each chip refills at its own pace after a
    restart."""
    if spec.scale == "growth":
        return None
    for sign in ((spec.direction,) if spec.direction else (1, -1)):
        bad = sign * dv > p.large_factor * limit
        idx = np.flatnonzero(bad)
        if idx.size == 0:
            continue
        runs = index_runs(idx, tv, 1.5 * p.bucket_s)
        # three buckets at least: a run's last bucket or two, which its nodes leave at
        # different moments (a slow rank still stepping alone), are no evidence
        keep = [(a, b) for a, b in runs if b - a >= 2 and tv[b] - tv[a] + p.bucket_s >= p.large_min_s]
        if keep:
            sel = np.zeros(tv.size, bool)
            for a, b in keep:
                sel[a : b + 1] = True
            return sign, sel, keep
    return None


def _recurring(spec: _Spec, t: np.ndarray, dev: np.ndarray, limit: float,
               p: PeersParams) -> tuple[np.ndarray, np.ndarray, int, recurring.Episodes] | None:
    """(valid mask, times, sign, episodes) of a series out of line in recurring episodes. Not
    HBM growth: retained memory does not come and go (a restart's refill would look so)."""
    if spec.scale == "growth":
        return None
    ok = np.isfinite(dev)
    for sign in ((spec.direction,) if spec.direction else (1, -1)):
        eps = recurring.find(t, dev, sign, limit, p)
        if eps is not None:
            return ok, t[ok], sign, eps
    return None


def _comparable_power(src: Buckets, skip: np.ndarray, temps: dict[str, np.ndarray], p: PeersParams) -> None:
    """Blank each chip's temperature where its power is not comparable with its peers' (the
    chips of its model: another model draws other power by design)."""
    power = src.matrix("power_w", skip)
    models: dict[float | None, list[str]] = defaultdict(list)
    for k in power:
        models[src.capacity(k)].append(k)
    for keys in models.values():
        if len(keys) < p.min_peers + 1:
            continue
        mat = np.vstack([power[k] for k in keys])
        others, _ = medians_of_others(mat)
        with np.errstate(all="ignore"):
            for i, k in enumerate(keys):
                if k not in temps:
                    continue
                off = np.abs(mat[i] / others[i] - 1.0) > p.power_tol_frac
                temps[k] = np.where(off, np.nan, temps[k])


def _groups(src: Buckets, keys: list[str], spec: _Spec) -> list[tuple[list[str], float | None]]:
    """Peers: chips of one model (HBM capacity, to the GiB); ranks are one group."""
    if spec.kind == "straggler":
        return [(sorted(keys), None)]
    by: dict[float | None, list[str]] = defaultdict(list)
    for k in keys:
        by[src.capacity(k)].append(k)
    return [(sorted(v), c) for c, v in by.items()]


def _transform(spec: _Spec, rows: np.ndarray, profile: Profile, run_start: float, grid: Grid) -> np.ndarray:
    if spec.scale == "log":
        with np.errstate(all="ignore"):
            return np.where(rows > 0, np.log(rows), np.nan)
    if spec.scale == "growth":
        # Growth since the memory detector's burn-in: warm-up and early allocator step-ups
        # differ from chip to chip and are not a defect.
        m = profile.memory
        span = grid.n * grid.width
        burn = run_start + max(m.burn_in_h * 3600.0, m.burn_in_frac * span)
        after = grid.centres() >= burn
        base = np.full(rows.shape[0], np.nan)
        for i in range(rows.shape[0]):
            first = rows[i, after][np.isfinite(rows[i, after])][:6]
            if first.size:
                base[i] = np.median(first)
        out = rows - base[:, None]
        out[:, ~after] = np.nan
        return out
    return rows


def _references(x: np.ndarray, members: list[int], min_peers: int) -> dict[int, np.ndarray | None]:
    """Per member: the median of the other members per bucket, NaN where fewer than
    ``min_peers`` of them have a value; None when the group has fewer than that at all."""
    if len(members) - 1 < min_peers:
        return dict.fromkeys(members)
    med, k = medians_of_others(x[members])
    med[k < min_peers] = np.nan
    return {i: med[j] for j, i in enumerate(members)}


def _spread(dev: np.ndarray) -> float:
    """Natural spread: median over buckets of 1.4826 x MAD of the deviations across chips."""
    ok = valid_count(dev) >= 3
    if not ok.any():
        return math.nan
    d = dev[:, ok]
    med = nanmedian_rows(d)
    mad = nanmedian_rows(np.abs(d - med))
    return float(np.nanmedian(1.4826 * mad))


SMALL_GROUP = 8  # fewer nodes than this: each is judged against the spread of the others


def _spread_of(values: np.ndarray) -> float:
    """Natural spread of values themselves: median over buckets of 1.4826 x MAD across rows
    (at least two rows valid in a bucket)."""
    ok = valid_count(values) >= 2
    if not ok.any():
        return math.nan
    v = values[:, ok]
    med = nanmedian_rows(v)
    return float(np.nanmedian(1.4826 * nanmedian_rows(np.abs(v - med))))


def _own_noise(rows: np.ndarray) -> float:
    """How well a node's median over its chips is known: median over buckets of 1.4826 x MAD
    of its chips about that median, over the square root of their number (0 when unknown)."""
    ok = valid_count(rows) >= 3
    if not ok.any():
        return 0.0
    r = rows[:, ok]
    mad = nanmedian_rows(np.abs(r - nanmedian_rows(r)))
    return float(np.nanmedian(1.4826 * mad / np.sqrt(valid_count(r))))


def _stretches(t: np.ndarray, bad: np.ndarray, p: PeersParams) -> list[tuple[int, int]]:
    """(first, last) indices into ``t`` of stretches that stay out of line."""
    idx = np.flatnonzero(bad)
    if idx.size == 0:
        return []
    out = []
    a = b = int(idx[0])
    for j in idx[1:].tolist():
        if j - b <= 2:  # one bucket of respite is bridged
            b = j
            continue
        out.append((a, b))
        a = b = j
    out.append((a, b))
    keep = []
    for a, b in out:
        dur = t[b] - t[a] + p.bucket_s
        share = bad[a : b + 1].mean()
        if dur >= p.min_duration_s and share >= p.min_share:
            keep.append((a, b))
    return keep


def _confidence(t: np.ndarray, d: np.ndarray, sign: int) -> tuple[float, int]:
    """1 - p of a one-sided sign test on hourly medians of the deviation; hours used."""
    from soak.analysis._dist import binom_sf

    hours = np.floor((t - t[0]) / 3600.0)
    meds = np.array([np.median(d[hours == h]) for h in np.unique(hours)])
    meds = meds[meds != 0]
    if meds.size == 0:
        return 0.0, 0
    k = int((np.sign(meds) == sign).sum())
    return 1.0 - binom_sf(k - 1, meds.size, 0.5), int(meds.size)


def _confidence_of(tv: np.ndarray, dv: np.ndarray, stretches: list[tuple[int, int]], sign: int) -> float:
    a, b = stretches[0][0], stretches[-1][1] + 1
    return _confidence(tv[a:b], dv[a:b], sign)[0]


def _compare(
    src: Buckets, grid: Grid, spec: _Spec, rows: dict[str, np.ndarray], cap: float | None,
    profile: Profile, run_start: float, job_step: np.ndarray | None = None,
) -> list[Finding]:
    p = profile.peers
    keys = list(rows)
    if len(keys) < p.min_peers + 1:
        return []
    x = _transform(spec, np.vstack([rows[k] for k in keys]), profile, run_start, grid)
    nodes: dict[str | None, list[int]] = defaultdict(list)
    for i, k in enumerate(keys):
        nodes[src.place(k)[0]].append(i)
    everyone = list(range(len(keys)))
    floor = spec.floor(p, cap)
    out: list[Finding] = []
    slow_nodes: set[str] = set()
    # Nodes against nodes: a fault every chip of a node shares (a failed fan tray, a slow
    # host) leaves its chips in line with each other. Chip metrics only from SMALL_GROUP
    # nodes of a model on: temperature, power and the rest differ from node to node with the
    # rack and its air, and two or three other nodes are no measure of how much (a healthy
    # node of four ran 6.6 C above the others for ten hours of a day-night cycle).
    if len(nodes) >= p.min_peers + 1 and None not in nodes and (spec.kind == "straggler"
                                                               or len(nodes) >= SMALL_GROUP):
        node_floor = floor if spec.node_floor is None else spec.node_floor(p)
        out += _node_compare(grid, spec, x, nodes, node_floor, profile, slow_nodes,
                             [src.place(k)[1] for k in keys], job_step, cap)
    # Each chip against its node's other chips when there are enough, else the cluster's.
    refs, cluster_refs = {}, {}
    local_refs: dict[int, np.ndarray | None] = {}
    for members in nodes.values():
        local_refs.update(_references(x, members, p.min_peers))
    wide_refs = _references(x, everyone, p.min_peers)
    for i, k in enumerate(keys):
        node = src.place(k)[0]
        local, wide = local_refs[i], wide_refs[i]
        cluster_refs[i] = wide
        if local is not None:
            refs[i] = (local, "node")
        elif wide is not None and node not in slow_nodes:
            refs[i] = (wide, "cluster")
    if not refs:
        return out
    dev = np.full_like(x, np.nan)
    for i, (ref, _) in refs.items():
        dev[i] = x[i] - ref
    spread = _spread(dev)
    if not math.isfinite(spread):
        return out
    limit = max(floor, p.k_sigma * spread)
    t = grid.centres()
    for i, (ref, scope) in refs.items():
        node, device = src.place(keys[i])
        judged = _judge(spec, t, dev[i], limit, p)
        if judged is None:
            continue
        if isinstance(judged[-1], recurring.Episodes):
            ok, tv, sign, eps = judged
            base_raw = _raw(spec, ref[ok][eps.selected], rows[keys[i]][ok][eps.selected])
            out.append(_make_episodes(spec, device, node, eps, sign, base_raw, scope, spread, limit,
                                      profile, cap, recurring.step_time_in_episodes(t, job_step, eps.windows)))
            continue
        ok, tv, dv, sign, sel, stretches, rule = judged
        base_raw = _raw(spec, ref[ok][sel], rows[keys[i]][ok][sel])
        wide = cluster_refs[i]
        wide_raw = None if wide is None else _raw(spec, wide[ok][sel], rows[keys[i]][ok][sel])
        out.append(_make(spec, device, node, tv, dv, sel, stretches, sign, base_raw, wide_raw,
                         scope, spread, limit, profile, cap, rule=rule))
    return out


def _finding(
    spec: _Spec, tv: np.ndarray, dv: np.ndarray, limit: float, p: PeersParams
) -> tuple[int, np.ndarray, list[tuple[int, int]]] | None:
    for sign in ((spec.direction,) if spec.direction else (1, -1)):
        bad = sign * dv > limit
        stretches = _stretches(tv, bad, p)
        if stretches:
            sel = np.zeros(tv.size, bool)
            for a, b in stretches:
                sel[a : b + 1] = True
            return sign, sel & bad, stretches
    return None


def _raw(spec: _Spec, ref: np.ndarray, own: np.ndarray) -> float:
    """The baseline in metric units over the chosen buckets."""
    if spec.scale == "log":
        return float(math.exp(float(np.nanmedian(ref))))
    if spec.scale == "growth":
        return float(np.nanmedian(ref))  # the peers' growth, bytes
    return float(np.nanmedian(ref))


def _node_compare(
    grid: Grid, spec: _Spec, x: np.ndarray, nodes: dict[str | None, list[int]], floor: float,
    profile: Profile, slow_nodes: set[str], keys: list[str], job_step: np.ndarray | None,
    cap: float | None,
) -> list[Finding]:
    """Each node's median over its chips or ranks per bucket against the other nodes' (the
    same natural-spread rule and floors as a chip against its siblings): one finding with
    ``device`` None naming its members; ``slow_nodes`` gets the nodes found, whose members
    are then not compared with the cluster again."""
    p = profile.peers
    names = sorted(n for n in nodes if n is not None)
    per_node = np.vstack([nanmedian_rows(x[nodes[n]]) for n in names])
    all_nodes = list(range(len(names)))
    dev = np.full_like(per_node, np.nan)
    for j, ref in _references(per_node, all_nodes, p.min_peers).items():
        if ref is not None:
            dev[j] = per_node[j] - ref
    spread = _spread(dev)
    if not math.isfinite(spread):
        return []
    limit = max(floor, p.k_sigma * spread)
    t = grid.centres()
    out = []
    judgements = {}
    for j, node in enumerate(names):
        if spec.node_floor is not None:
            # Temperature: healthy nodes differ by their racks and inlets, and with eight
            # nodes of a model one hot node is an eighth of the deviations whose MAD would
            # be the spread it is judged by (a hall whose healthy nodes spanned 5.7 C gave a
            # spread of 2.9 C with a 7 C node in it, 1.9 C without). So: the other nodes'
            # spread, at least the noise of this node's own median (its chips' disagreement
            # over the square root of their number), and node_k_sigma.
            spread = max(_spread_of(np.delete(per_node, j, axis=0)), _own_noise(x[nodes[node]]))
            if not math.isfinite(spread):
                continue
            limit = max(floor, p.node_k_sigma * spread)
        elif len(names) < SMALL_GROUP:
            # A few nodes: one straggler is a third of the deviations whose MAD is the natural
            # spread, and each peer's deviation is half its lead. Measure the spread among the
            # others alone (their values around their median) for judging this one.
            spread = _spread_of(np.delete(per_node, j, axis=0))
            if not math.isfinite(spread):
                continue
            limit = max(floor, p.k_sigma * spread)
        judged = _judge(spec, t, dev[j], limit, p)
        if judged is not None:
            judgements[j] = (judged, spread, limit)
    if spec.node_floor is not None and len(judgements) >= p.group_min_nodes:
        # Several nodes hot together: leaving one out leaves its neighbours in the others,
        # whose robust spread does not count them. A group is judged against the spread of
        # every node of the model, itself included (robust while it is less than half of
        # them): a rack a few degrees warmer than the rest is how halls are (a healthy
        # hall's rack of three ran 3.5 to 6.8 C above the others), one well above is not.
        spread = max(_spread_of(per_node), 0.0)
        limit = max(floor, p.k_sigma * spread)
        judgements = {j: (judged, spread, limit) for j in judgements
                      if (judged := _judge(spec, t, dev[j], limit, p)) is not None}
    for j, (judged, spread, limit) in sorted(judgements.items()):
        node = names[j]
        members = [keys[i] for i in nodes[node]]
        if isinstance(judged[-1], recurring.Episodes):
            ok, tv, sign, eps = judged
            sel = eps.selected
            base_raw = _raw(spec, per_node[j, ok][sel] - dev[j, ok][sel], per_node[j, ok][sel])
            slow_nodes.add(node)
            out.append(_make_episodes(spec, None, node, eps, sign, base_raw, "cluster", spread, limit, profile,
                                      cap, recurring.step_time_in_episodes(t, job_step, eps.windows),
                                      members=members))
            continue
        ok, tv, dv, sign, sel, stretches, rule = judged
        ref = per_node[j, ok][sel] - dv[sel]
        base_raw = _raw(spec, ref, per_node[j, ok][sel])
        slow_nodes.add(node)
        out.append(_make(spec, None, node, tv, dv, sel, stretches, sign, base_raw, None, "cluster",
                         spread, limit, profile, cap, members=members, rule=rule))
    return out


def _make(
    spec: _Spec, key: str | None, node: str | None, tv: np.ndarray, dv: np.ndarray, sel: np.ndarray,
    stretches: list[tuple[int, int]], sign: int, baseline: float, cluster_baseline: float | None,
    scope: str, spread: float, limit: float, profile: Profile, cap: float | None,
    members: list[str] | None = None, rule: str = "persistent",
) -> Finding:
    p = profile.peers
    d = float(np.median(dv[sel]))
    out_s = float(sel.sum()) * p.bucket_s
    deviation, pct, severity, sized = _sized(spec, p, d, baseline, out_s)
    start = float(tv[stretches[0][0]]) - p.bucket_s / 2
    end = float(tv[stretches[-1][1]]) + p.bucket_s / 2
    conf, n_hours = _confidence(tv[stretches[0][0] : stretches[-1][1] + 1],
                                dv[stretches[0][0] : stretches[-1][1] + 1], sign)
    z = abs(d) / spread if spread > 0 else math.inf
    values: dict[str, Any] = {"metric": spec.metric, "scope": scope, "duration_h": (end - start) / 3600, "z": z,
                              "confidence": conf, **sized}
    if spec.kind == "straggler":
        code = f"straggler.node.{spec.metric}" if key is None else f"straggler.{spec.metric}"
        if key is None:  # a slow node: name its ranks (a few; else how many)
            values.update(_members(node, members, "ranks"))
    else:
        code = f"outlier.node.{spec.metric}" if key is None and node is not None else f"outlier.{spec.metric}"
        if key is None and node is not None:  # a node out of line: name its chips
            values.update(_members(node, members, "chips"))
    return _peer_finding(
        spec, key, node, start, end, severity, code, values, baseline, deviation, profile,
        {
            "deviation_pct": pct,
            "compared_with": scope,
            "cluster_baseline": cluster_baseline,
            **_spread_details(spec, spread, limit),
            "z": z,
            "confidence": conf,
            "hours_tested": n_hours,
            "share_out_of_line": float(sel[stretches[0][0] : stretches[-1][1] + 1].mean()),
            "stretches": [[float(tv[a]) - p.bucket_s / 2, float(tv[b]) + p.bucket_s / 2] for a, b in stretches[:20]],
            "capacity": cap,
            "ranks": None if members is None else len(members),
            "members": members,
            "method": "median of peers per time bucket, deviation beyond max(floor, k x 1.4826 MAD), persistent",
            "rule": rule,
            "version": DETECTOR_VERSION,
        },
    )


def _sized(spec: _Spec, p: PeersParams, d: float, baseline: float,
           out_s: float) -> tuple[float, float | None, str, dict[str, Any]]:
    """How far out of line a deviation ``d`` is: (deviation in metric units, percent, severity, values).

    One place for the rule every peer finding is sized by, persistent or recurring (``out_s``:
    how long it was out of line). The severity policy: what costs the customer fails, for
    ``fail_min_s`` or more: a straggler ``straggler_fail_frac`` slower (the synchronous job
    runs at its pace), a chip or node ``temp_fail_c`` hotter at comparable power; what only
    looks odd has the profile's ``outlier_severity``.
    """
    if spec.scale == "log":
        deviation, pct = baseline * math.expm1(d), math.expm1(d) * 100.0
    else:
        deviation, pct = d, (d / baseline * 100.0 if baseline else None)
    unit = _UNIT_KEYS[spec.unit]
    lasting = out_s >= p.fail_min_s
    if spec.kind == "straggler":
        severity = "fail" if lasting and abs(math.expm1(d)) >= p.straggler_fail_frac else "warn"
        return deviation, pct, severity, {"change_pct": abs(pct or 0.0), f"baseline_{unit}": baseline}
    scale = 1e6 if spec.unit == "MB" else 1.0
    severity = p.outlier_severity
    if spec.metric == "temp_c" and lasting and deviation >= p.temp_fail_c:
        severity = "fail"
    return deviation, pct, severity, {
        f"deviation_{unit}": deviation / scale, f"baseline_{unit}": baseline / scale,
        "change_pct": pct if spec.scale == "log" else None}


def _spread_details(spec: _Spec, spread: float, limit: float) -> dict[str, Any]:
    """The natural spread and the limit as a finding's details give them (a ratio metric's in %)."""
    log = spec.scale == "log"
    return {
        "natural_spread": math.expm1(spread) * 100.0 if log else spread,
        "natural_spread_unit": "%" if log else spec.unit,
        "limit": math.expm1(limit) * 100.0 if log else limit,
    }


def _peer_finding(
    spec: _Spec, key: str | None, node: str | None, start: float, end: float, severity: str, code: str,
    values: dict[str, Any], baseline: float, deviation: float, profile: Profile, details: dict[str, Any],
    **extra: Any,
) -> Finding:
    """A chip, rank or node out of line, whichever rule found it: the profile caps its severity,
    its summary is said from ``code`` and ``values``; ``extra`` holds the fields one rule adds."""
    return Finding(
        kind=spec.kind,
        device=key,
        node=node,
        metric=spec.metric,
        start=start,
        end=end,
        severity=profile.cap(spec.kind, severity),
        summary=say(code, values),
        code=code,
        values=values,
        onset=start,
        baseline=baseline,
        deviation=deviation,
        details=details,
        **extra,
    )


def _members(node: str | None, members: list[str] | None, noun: str) -> dict[str, Any]:
    """A node's members as a finding names them: a few by name, else how many."""
    few = bool(members) and len(members or []) <= 4
    return {"node": node, "members": members if few else None, noun: len(members) if members and not few else None}


def _make_episodes(
    spec: _Spec, key: str | None, node: str | None, eps: recurring.Episodes, sign: int, baseline: float,
    scope: str, spread: float, limit: float, profile: Profile, cap: float | None,
    steps: tuple[float, float] | None, members: list[str] | None = None,
) -> Finding:
    """A chip, rank or node out of line in recurring episodes (``soak.analysis.recurring``)."""
    out_s = sum(b - a for a, b in eps.windows)
    deviation, pct, severity, sized = _sized(spec, profile.peers, eps.deviation, baseline, out_s)
    values: dict[str, Any] = {
        "metric": spec.metric, "scope": scope, "count": eps.count, "typical_min": eps.typical_s / 60.0,
        "period_min": None if eps.period_s is None else eps.period_s / 60.0, "share_pct": eps.share * 100.0,
        **recurring.throughput_values(steps, eps.share), **sized,
    }
    if key is None and node is not None:
        values.update(_members(node, members, "ranks" if spec.kind == "straggler" else "chips"))
        code = f"{spec.kind}.node.episodes.{spec.metric}"
    else:
        code = f"{spec.kind}.episodes.{spec.metric}"
    start, end = eps.windows[0][0], eps.windows[-1][1]
    return _peer_finding(
        spec, key, node, start, end, severity, code, values, baseline, deviation, profile,
        {
            "deviation_pct": pct,
            "compared_with": scope,
            **_spread_details(spec, spread, limit),
            "episodes": eps.count,
            "typical_episode_s": eps.typical_s,
            "share_of_run": eps.share,
            "windows": [list(w) for w in eps.windows[:50]],
            "step_time_in_episodes_s": None if steps is None else steps[0],
            "step_time_outside_s": None if steps is None else steps[1],
            "capacity": cap,
            "ranks": None if members is None else len(members),
            "members": members,
            "method": "episodes beyond max(floor, k x 1.4826 MAD) and beyond the series' own median by as much, "
                      "recurring (count, share or period)",
            "rule": "recurring",
            "version": recurring.DETECTOR_VERSION,
        },
        period_s=eps.period_s,
        count=eps.count,
    )


# the rule the tails are judged by (soak.analysis.tails): this module's, handed over
_TAIL_RULE = tails.Rule(spec=_Spec, out_of_line=_out_of_line, spread=_spread, confidence=_confidence,
                        members=_members)
