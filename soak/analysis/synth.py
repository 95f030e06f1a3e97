"""Labelled synthetic soak traces for evaluating the detectors.

A healthy trace carries what real runs carry and what naive detectors mistake for faults:
memory warm-up and allocator step-ups, allocator/GC sawtooth, a slow memory wave, checkpoint
spikes (idle chip, slow step, RSS burst), random short utilization dips, a daily ambient
temperature cycle, a low constant rate of retried comm timeouts, restarts (counters reset,
memory freed and re-allocated) and collection gaps. Faults are injected on top with a known
kind, device, onset and magnitude, so the harness can score detection and accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from soak.analysis.model import PEER_KINDS
from soak.analysis.profile import Phase
from soak.analysis.trace import Trace
from soak.device_names import device_key

GIB = 1 << 30
HBM_TOTAL = 64 * GIB
T0 = 1_767_225_600.0  # 2026-01-01 00:00 UTC


@dataclass(frozen=True)
class Fault:
    """An injected fault. ``magnitude`` by kind:

    memory_creep: bytes/h; utilization_dropouts: period s; hang: duration s;
    comm_timeouts: events/h after onset; thermal: degrees above threshold (excursion) or
    C/h (drift); throughput_degradation: % (abrupt) or %/h (gradual); outlier: degrees
    hotter at equal power (style temp) or % more power (style power); straggler: % slower
    steps.
    """

    kind: str
    device: str  # a series key, "*" for every chip, "nNN/*" for every chip of a node
    onset_h: float
    magnitude: float
    style: str = ""  # memory: linear|steps, metric; hang: idle|busy; thermal: excursion|drift; ...
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    name: str
    hours: float = 24.0
    dt_s: float = 10.0
    n_devices: int = 2
    seed: int = 0
    faults: tuple[Fault, ...] = ()
    checkpoint_every_s: float | None = 3600.0
    checkpoint_dur_s: float = 40.0
    restarts_h: tuple[float, ...] = ()
    gaps: int = 2  # collection gaps of 1-10 min per device
    dips_per_day: float = 8.0
    late_step: bool = False  # a one-off HBM level step late in the run (healthy)
    slow_wave: bool = False  # 150 MB memory wave with a 4-10 h period (healthy)
    noise: float = 1.0  # scales every noise term (and the rate of random dips)
    nodes: int = 1  # > 1: a cluster trace, n_devices chips on each node, keys "nNN/device"
    spread: float = 0.0  # natural chip-to-chip and node-to-node differences (1 = typical)
    shared_ambient: bool = False  # one daily temperature cycle per node (else one per chip)

    @property
    def places(self) -> list[tuple[str | None, str]]:
        """(node, chip) of every chip; node None on a single node."""
        chips = [f"npu{i // 8}-{i % 8}" for i in range(self.n_devices)]
        return [(n, c) for n in self.node_names or [None] for c in chips]

    @property
    def devices(self) -> list[str]:
        """Series keys: the chips, or ``node/chip`` on a cluster (``device_key``)."""
        return [device_key(n, c) for n, c in self.places]

    @property
    def node_names(self) -> list[str]:
        return [f"n{i:02d}" for i in range(self.nodes)] if self.nodes > 1 else []

    @property
    def phases(self) -> list[Phase]:
        if self.checkpoint_every_s is None:
            return []
        return [Phase("checkpoint", self.checkpoint_every_s, self.checkpoint_dur_s)]


def _sawtooth(t: np.ndarray, period: float, amp: float, phase: float) -> np.ndarray:
    return amp * np.mod(t + phase, period) / period


def generate(sc: Scenario) -> tuple[Trace, list[Fault]]:
    """The scenario's trace (healthy background plus faults) and its labels."""
    rng = np.random.default_rng(sc.seed)
    dur = sc.hours * 3600.0
    t_rel = np.arange(0.0, dur, sc.dt_s)
    n = t_rel.size
    ck_off = rng.uniform(600, 1800)
    ck = np.zeros(n, bool)
    if sc.checkpoint_every_s:
        ck = np.mod(t_rel - ck_off, sc.checkpoint_every_s) < sc.checkpoint_dur_s
        ck &= t_rel >= ck_off
    restart = np.zeros(n, bool)
    after_restart = np.full(n, np.inf)
    restart_ids = np.zeros(n, int)
    for i, rh in enumerate(sorted(sc.restarts_h)):
        a = rh * 3600.0
        restart |= (t_rel >= a) & (t_rel < a + 120.0)
        since = t_rel - (a + 120.0)
        after_restart = np.where(since >= 0, since, after_restart)
        restart_ids[t_rel >= a] = i + 1
    warm_since = np.minimum(t_rel, after_restart)
    series: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    faults_by_dev: dict[str, list[Fault]] = {}
    for f in sc.faults:
        for node, chip in sc.places:
            d = device_key(node, chip)
            if f.device in ("*", d) or (node is not None and f.device == device_key(node, "*")):
                faults_by_dev.setdefault(d, []).append(f)
    global_dips = _dips(rng, dur, sc.dips_per_day / 2, t_rel)  # host-side stalls hit every chip
    # Natural differences come from their own generator: a trace without them is unchanged.
    spread_rng = np.random.default_rng((sc.seed, 7))
    node_off = {n: (spread_rng.normal(0, 1.5 * sc.spread), spread_rng.normal(0, 0.01 * sc.spread),
                    spread_rng.uniform(0, 6.3)) for n in sc.node_names or [""]}
    for node, chip in sc.places:
        dev = device_key(node, chip)
        n_temp, n_step, n_phase = node_off[node or ""]
        c_temp, c_power, c_step = (spread_rng.normal(0, 1.0 * sc.spread), spread_rng.normal(0, 0.03 * sc.spread),
                                   spread_rng.normal(0, 0.01 * sc.spread))
        # A chip labelled out of line is that much off its siblings' typical value.
        if any(f.kind in PEER_KINDS for f in faults_by_dev.get(dev, [])):
            c_temp = c_power = c_step = 0.0
        busy = ~(ck | restart)
        dips = global_dips | _dips(rng, dur, sc.dips_per_day * sc.noise / 2, t_rel)
        nz = sc.noise
        util = np.clip(93 + rng.normal(0, 3 * nz, n), 0, 100)
        idle = ck | restart | dips
        util[idle] = rng.uniform(0, 2, idle.sum())
        # HBM: warm-up to a base level, early allocator step-ups, sawtooth, small noise.
        base = rng.uniform(0.4, 0.6) * HBM_TOTAL
        hbm = base * np.minimum(1.0, warm_since / 1200.0)
        for _ in range(rng.integers(0, 4)):
            at = rng.uniform(0.02, 0.2) * dur
            hbm = hbm + np.where(t_rel >= at, rng.uniform(0.2, 1.0) * GIB, 0.0)
        hbm += _sawtooth(t_rel, rng.uniform(60, 300), rng.uniform(0.5, 2) * nz * GIB, rng.uniform(0, 300))
        hbm += rng.normal(0, 2e6 * nz, n)
        if sc.slow_wave:
            hbm += 150e6 * np.sin(2 * np.pi * t_rel / (rng.uniform(4, 10) * 3600))
        if sc.late_step:
            hbm += np.where(t_rel >= rng.uniform(0.55, 0.8) * dur, 300e6, 0.0)
        hbm[restart] = 0.5 * GIB
        # Host RSS: GC sawtooth, noise, checkpoint bursts.
        rss = 6 * GIB * np.minimum(1.0, 0.5 + warm_since / 1200.0)
        rss += _sawtooth(t_rel, rng.uniform(30, 120), rng.uniform(100e6, 400e6) * nz, rng.uniform(0, 120))
        rss += rng.normal(0, 20e6 * nz, n) + np.where(ck, 1.0 * GIB, 0.0)
        rss[restart] = 0.3 * GIB
        phase = rng.uniform(0, 6.3)
        if sc.shared_ambient:
            phase = n_phase
        temp = (
            55 + n_temp + c_temp + 3 * np.sin(2 * np.pi * t_rel / 86400 + phase)
            + 0.05 * (util - 93) + rng.normal(0, 0.5 * nz, n)
        )
        power = 300 * (1 + c_power) * util / 93 + rng.normal(0, 8, n)
        step = 0.25 * (1 + n_step + c_step) * np.exp(rng.normal(0, 0.03 * nz, n)) * np.where(
            warm_since < 600, 1.3, 1.0)
        step[ck] = 20.0
        has_step = ~(restart | dips)
        comm_events = rng.random(n) < 0.2 / 3600 * sc.dt_s  # retried timeouts, constant rate
        sig = {"util": util, "hbm": hbm, "rss": rss, "temp": temp, "step": step, "comm": comm_events,
               "has_step": has_step, "busy": busy, "power": power}
        for f in faults_by_dev.get(dev, []):
            _inject(f, sig, t_rel, rng, sc)
        comm = _counter(sig["comm"], restart_ids)
        keep = _gaps(rng, t_rel, sc.gaps)
        t = T0 + t_rel
        put = {
            "util_pct": sig["util"], "hbm_used_bytes": sig["hbm"], "hbm_total_bytes": np.full(n, float(HBM_TOTAL)),
            "temp_c": sig["temp"], "power_w": sig["power"], "host_rss_bytes": sig["rss"],
            "comm_timeouts_total": comm,
        }
        name = (chip,) if node is None else (node, chip)
        for m, v in put.items():
            series[(*name, m)] = (t[keep], v[keep])
        if "fatal" in sig:
            series[(*name, "comm_fatal_timeouts_total")] = (t[keep], _counter(sig["fatal"], restart_ids)[keep])
        sk = keep & sig["has_step"]
        series[(*name, "step_time_s")] = (t[sk], sig["step"][sk])
    return Trace.from_arrays(series, source=f"synth:{sc.name}"), list(sc.faults)


def _dips(rng: np.random.Generator, dur: float, per_day: float, t_rel: np.ndarray) -> np.ndarray:
    out = np.zeros(t_rel.size, bool)
    for _ in range(rng.poisson(per_day * dur / 86400)):
        a = rng.uniform(0, dur)
        out |= (t_rel >= a) & (t_rel < a + rng.uniform(10, 40))
    return out


def _gaps(rng: np.random.Generator, t_rel: np.ndarray, n_gaps: int) -> np.ndarray:
    keep = np.ones(t_rel.size, bool)
    for _ in range(n_gaps):
        a = rng.uniform(0, t_rel[-1])
        keep &= ~((t_rel >= a) & (t_rel < a + rng.uniform(60, 600)))
    return keep


def _counter(events: np.ndarray, restart_ids: np.ndarray) -> np.ndarray:
    """Cumulative count that restarts from 0 with each process."""
    c = np.cumsum(events.astype(float))
    out = c.copy()
    for rid in np.unique(restart_ids)[1:]:
        first = int(np.argmax(restart_ids == rid))
        seg = restart_ids == rid
        out[seg] = c[seg] - c[first]
    return out


def _inject(f: Fault, sig: dict[str, np.ndarray], t_rel: np.ndarray, rng: np.random.Generator, sc: Scenario) -> None:
    on = f.onset_h * 3600.0
    after = t_rel >= on
    since_h = np.where(after, (t_rel - on) / 3600.0, 0.0)
    if f.kind == "memory_creep":
        key = "rss" if f.params.get("metric") == "host_rss_bytes" else "hbm"
        for rh in sorted(sc.restarts_h):
            # A restart gives the leaked memory back; the new process leaks again.
            a = rh * 3600.0 + 120.0
            since_h = np.where(t_rel >= max(a, on), (t_rel - max(a, on)) / 3600.0, since_h)
        if f.style == "steps":
            every_h = f.params.get("every_h", 2.0)
            sig[key] += np.floor(since_h / every_h) * f.magnitude * every_h
        else:
            sig[key] += f.magnitude * since_h
    elif f.kind == "utilization_dropouts":
        dur = f.params.get("duration_s", 30.0)
        off = f.params.get("offset_s", 0.0)
        drop = after & (np.mod(t_rel - on - off, f.magnitude) < dur)
        sig["util"][drop] = rng.uniform(0, 2, drop.sum())
        sig["has_step"] &= ~drop
    elif f.kind == "hang":
        hung = after & (t_rel < on + f.magnitude)
        sig["has_step"] &= ~hung
        if f.style == "idle":
            sig["util"][hung] = rng.uniform(0, 1, hung.sum())
        else:
            sig["util"][hung] = rng.uniform(98, 100, hung.sum())
    elif f.kind == "comm_timeouts":
        if f.style == "fatal":
            sig["fatal"] = (t_rel >= on) & (t_rel < on + sc.dt_s)
        else:
            sig["comm"] |= after & (rng.random(t_rel.size) < f.magnitude / 3600 * sc.dt_s)
    elif f.kind == "thermal":
        if f.style == "drift":
            sig["temp"] += f.magnitude * since_h
        else:
            dur = f.params.get("duration_s", 300.0)
            hot = after & (t_rel < on + dur)
            # Lift to the threshold plus magnitude, keeping the noise.
            sig["temp"][hot] = 85.0 + f.magnitude + rng.normal(0, 0.3, hot.sum())
    elif f.kind == "outlier":
        if f.style == "power":
            sig["power"] *= np.where(after, 1 + f.magnitude / 100, 1.0)
        else:  # hotter at the same power: a blocked heat sink, a failing fan
            sig["temp"] += np.where(after, f.magnitude, 0.0)
    elif f.kind == "straggler":
        sig["step"] *= np.where(after, 1 + f.magnitude / 100, 1.0)
    elif f.kind == "throughput_degradation":
        if f.style == "gradual":
            sig["step"] *= 1 + f.magnitude / 100 * since_h
        else:
            sig["step"] *= np.where(after, 1 + f.magnitude / 100, 1.0)
    else:  # pragma: no cover - programming error
        raise ValueError(f.kind)


def link_rows(nodes: int, tests: int = 6, *, busbw_gbps: float = 20.0, spread: float = 0.04,
              slow_pairs: dict[tuple[int, int], float] | None = None, slow_nodes: dict[int, float] | None = None,
              every_s: float = 3600.0, seed: int = 0) -> list[tuple[float, str, str, str, float]]:
    """Five-column rows of pairwise link tests (``node`` one end, ``device`` ``link:OTHER``,
    metric ``pair_busbw_gbps``): every pair of ``nodes`` (``n00`` ...) in ``tests`` tests.

    Healthy pairs differ by ``spread`` (a fixed share per pair, as cables and switch ports
    differ, plus half of it per test); ``slow_pairs``/``slow_nodes`` take a fraction off.
    """
    rng = np.random.default_rng(seed)
    slow_pairs, slow_nodes = dict(slow_pairs or {}), dict(slow_nodes or {})
    rows = []
    pairs = [(a, b) for a in range(nodes) for b in range(a + 1, nodes)]
    own = {p: 1.0 + rng.normal(0.0, spread) for p in pairs}
    for k in range(tests):
        ts = T0 + k * every_s
        for a, b in pairs:
            v = busbw_gbps * own[(a, b)] * (1.0 + rng.normal(0.0, spread / 2))
            v *= 1.0 - slow_pairs.get((a, b), 0.0)
            v *= 1.0 - max(slow_nodes.get(a, 0.0), slow_nodes.get(b, 0.0))
            rows.append((ts, f"n{a:02d}", f"link:n{b:02d}", "pair_busbw_gbps", float(v)))
    return rows
