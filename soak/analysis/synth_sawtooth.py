"""Sawtooth halls: a machine hall whose job is restarted every few hours, with or without a
leak that each restart resets.

A long soak's leak most often shows as a sawtooth: the leaking job runs out (an OOM, a
watchdog, an operator), restarts, frees its memory and climbs again. The hall is
``synth_hall``'s (16 nodes x 8 chips of two models, racks, day-night cycle, synchronous
steps, checkpoints) over 72 h, and its job restarts at intervals drawn from ``every_h``.
At each restart every chip's HBM is freed for ``downtime_s`` (its utilization at idle, no
steps), then the job warms up again: what a restarted job does on a real chip, which makes
a healthy restarted job a test of its own:

- each start allocates a little more or less than the last (``start_spread_mb``: the
  allocator's pools, the data loader's buffers), and a few allocator step-ups follow in its
  first half hour;
- the allocator's sawtooth, its period a whole number of readings, and small noise;
- on ``wave`` halls a slow memory wave (150 MB, a period of 4 to 10 h) that a restart does
  not reset (the hall's data, not the job).

A leak (``leak_node``, ``leak_mb_per_h``) adds that rate on every chip of the node from
each restart on. The run's restart events are the ``phases`` (``restart`` windows) when
``events`` is true; without them the analysis finds the restarts in the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from soak.analysis.profile import Phase
from soak.analysis.synth import T0, Fault
from soak.analysis.synth_hall import GIB, Hall
from soak.analysis.synth_hall import generate as hall_trace
from soak.analysis.trace import Trace


@dataclass(frozen=True)
class SawtoothHall:
    name: str
    nodes: int = 16
    chips: int = 8
    hours: float = 72.0
    dt_s: float = 30.0
    seed: int = 0
    every_h: tuple[float, float] = (3.0, 12.0)  # hours between restarts, drawn uniformly
    downtime_s: float = 120.0
    leak_node: str | None = None  # e.g. "n05": every chip of that node leaks
    leak_mb_per_h: float = 0.0
    events: bool = True  # the run's restart events are known (as phases)
    wave: bool = False
    start_spread_mb: float = 150.0

    @property
    def hall(self) -> Hall:
        return Hall(self.name, nodes=self.nodes, chips=self.chips, hours=self.hours, dt_s=self.dt_s, seed=self.seed)

    def restarts(self) -> list[float]:
        """Seconds from the start at which the job restarts."""
        rng = np.random.default_rng((self.seed, 29))
        out, at = [], 0.0
        lo, hi = self.every_h
        while True:
            at += rng.uniform(lo, hi) * 3600.0
            if at >= self.hours * 3600.0 - 1800.0:
                return out
            out.append(at)

    @property
    def segments(self) -> int:
        return len(self.restarts()) + 1

    @property
    def phases(self) -> list[Phase]:
        out = list(self.hall.phases)
        if self.events:
            out.append(Phase("restart", windows=tuple((T0 + a, T0 + a + self.downtime_s + 60.0)
                                                      for a in self.restarts())))
        return out

    @property
    def faults(self) -> list[Fault]:
        if self.leak_node is None or self.leak_mb_per_h <= 0:
            return []
        return [Fault("memory_creep", f"{self.leak_node}/*", 0.0, self.leak_mb_per_h * 1e6)]


def generate(h: SawtoothHall) -> tuple[Trace, list[Fault]]:
    """The hall's trace (every chip's memory a sawtooth of restarts) and its labels."""
    base = hall_trace(h.hall)[0]
    rng = np.random.default_rng((h.seed, 31))
    starts = np.array([0.0, *h.restarts()])
    series: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    for s in base.series():
        node, chip = base.place(s.device)
        series[(s.device, s.metric) if node is None else (node, chip, s.metric)] = (s.t, s.v)
    wave_period = rng.uniform(4, 10) * 3600.0
    for s in base.series("hbm_used_bytes"):
        node, chip = base.place(s.device)
        cap = float(np.median(base.get(s.device, "hbm_total_bytes").v))  # type: ignore[union-attr]
        t_rel = s.t - T0
        run = np.searchsorted(starts, t_rel, side="right") - 1
        since = t_rel - starts[run] - np.where(run > 0, h.downtime_s, 0.0)
        down = since < 0
        level = 0.5 * cap + rng.uniform(-0.5, 0.5) * GIB
        per_start = level + rng.normal(0, h.start_spread_mb * 1e6, starts.size)
        hbm = per_start[run] * np.minimum(1.0, np.maximum(since, 0.0) / 1200.0)
        for r in range(starts.size):  # allocator step-ups early in each run
            for _ in range(int(rng.integers(0, 3))):
                at = rng.uniform(0.0, 1800.0)
                hbm += np.where((run == r) & (since >= at), rng.uniform(20e6, 300e6), 0.0)
        period = h.dt_s * int(rng.integers(5, 11))
        hbm += rng.uniform(0.2, 1.0) * GIB * (np.mod(t_rel + h.dt_s * int(rng.integers(0, 10)), period) / period)
        hbm += rng.normal(0, 2e6, t_rel.size)
        if h.wave:
            hbm += 150e6 * np.sin(2 * np.pi * t_rel / wave_period + rng.uniform(0, 0.5))
        if h.leak_node is not None and node == h.leak_node:
            hbm += h.leak_mb_per_h * 1e6 * np.maximum(since, 0.0) / 3600.0
        hbm[down] = 0.5 * GIB  # the process is gone: its memory freed
        series[(node, chip, "hbm_used_bytes")] = (s.t, hbm)
        # the restart's downtime: the chip idles and steps stop
        util = base.get(s.device, "util_pct")
        if util is not None:
            u_rel = util.t - T0
            r_u = np.searchsorted(starts, u_rel, side="right") - 1
            idle = (r_u > 0) & (u_rel - starts[r_u] < h.downtime_s)
            series[(node, chip, "util_pct")] = (util.t, np.where(idle, rng.uniform(0, 2, util.t.size), util.v))
        for metric in ("step_time_s", "compute_s"):
            st = base.get(s.device, metric)
            if st is None:
                continue
            s_rel = st.t - T0
            r_s = np.searchsorted(starts, s_rel, side="right") - 1
            keep = ~((r_s > 0) & (s_rel - starts[r_s] < h.downtime_s))
            series[(node, chip, metric)] = (st.t[keep], st.v[keep])
    return Trace.from_arrays(series, source=f"sawtooth:{h.name}"), h.faults
