"""A machine hall: labelled synthetic cluster traces with what a real hall carries between
its nodes, for evaluating the node comparison, recurring episodes and time to detect.

16 nodes x 8 chips over 24 h by default, of two chip models (half the nodes each: other
HBM capacity, power and temperature), racks of four nodes with their own inlet
temperature, each node and chip its own natural offset, one day-night cycle of the hall's
air (each node a few minutes behind or ahead of it), temperature following power,
synchronous data parallelism (every rank's step time is the slowest rank's compute time
plus the all-reduce; ``compute_s`` is each rank's own), hourly checkpoints (declared
phases) and a few host stalls. Faults (``synth.Fault``) on a chip (``nNN/npu0-K``) or on
every chip of a node (``nNN/*``):

- ``outlier`` ``temp``: degrees hotter at the same power; ``power``: % more power (and the
  heat that comes with it);
- ``thermal`` ``drift``: degrees per hour hotter from the onset, at unchanged power;
- ``straggler``: % more compute time on those ranks (``params["power_frac"]``: at that share of
  their power, a power cap); style ``recurring``: only for
  ``params["duration_s"]`` of every ``params["every_s"]``; style ``stalls``: that % of the
  readings (drawn at random, the same for every chip of the fault) ``params["x"]`` (1.9)
  times slower, the median unchanged.

Every node's ranks also stall now and then by nature (OS jitter): up to ``jitter_share``
of the readings, 1.5 to 2x slower, at random; a node's ranks together.

``params["until_h"]``: the fault ends then (a facility's cooling restored).

A chip or node labelled faulty has no natural offset of its own: it is off by the fault's
size from its peers' typical value. The pairwise link tests of the hall come from
``synth.link_rows`` (:func:`link_rows_with_onset`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from soak.analysis.profile import Phase
from soak.analysis.synth import T0, Fault, link_rows
from soak.analysis.trace import Trace
from soak.device_names import device_key

GIB = 1 << 30
# (HBM capacity, power at full load W, temperature at full load C): two chip models
MODELS = ((64 * GIB, 350.0, 56.0), (32 * GIB, 260.0, 50.0))
COMPUTE_S = 0.20  # a rank's time outside the collectives per step
ALLREDUCE_S = 0.06
C_PER_W = 0.04  # a chip's temperature rises with its power


@dataclass(frozen=True)
class Hall:
    name: str
    nodes: int = 16
    chips: int = 8
    hours: float = 24.0
    dt_s: float = 30.0
    seed: int = 0
    faults: tuple[Fault, ...] = ()
    # natural rack and node differences (1 = typical); chips differ from their siblings by
    # a typical amount whatever this is (the chip rule's own evaluation: evaluate.py)
    spread: float = 1.0
    day_night_c: float = 2.5  # amplitude of the hall's daily temperature cycle
    checkpoint_every_s: float = 3600.0
    checkpoint_dur_s: float = 60.0
    # hourly pairwise link tests; (a, b, fraction slower) pairs slow from link_onset_h
    slow_pairs: tuple[tuple[int, int, float], ...] = ()
    link_onset_h: float = 0.0
    jitter_share: float = 0.005  # natural stalls: each node up to this share of its readings
    models: int = 2  # chip models in the hall (1: every node of the first)

    @property
    def node_names(self) -> list[str]:
        return [f"n{i:02d}" for i in range(self.nodes)]

    @property
    def places(self) -> list[tuple[str, str]]:
        return [(n, f"npu0-{c}") for n in self.node_names for c in range(self.chips)]

    @property
    def devices(self) -> list[str]:
        return [device_key(n, c) for n, c in self.places]

    @property
    def phases(self) -> list[Phase]:
        return [Phase("checkpoint", self.checkpoint_every_s, self.checkpoint_dur_s)]

    def model_of(self, node_index: int) -> int:
        return 0 if self.models == 1 or node_index < self.nodes // 2 else 1


def _bounded(rng: np.random.Generator, sigma: float) -> float:
    """A chip's natural offset from its siblings: normal, within 2.5 sigma. A chip further
    out than that is out of its specification: what the peer comparison is there to find,
    not a healthy chip (its limit is 3.5 x the spread)."""
    return float(np.clip(rng.normal(0, sigma), -2.5 * sigma, 2.5 * sigma))


def _faults_on(h: Hall, node: str, chip: str) -> list[Fault]:
    return [f for f in h.faults if f.device in (device_key(node, chip), device_key(node, "*"))]


def _active(f: Fault, t_rel: np.ndarray) -> np.ndarray:
    """Where the fault is on: from its onset, in its episodes for a recurring one."""
    on = (t_rel >= f.onset_h * 3600.0) & (t_rel < f.params.get("until_h", np.inf) * 3600.0)
    if f.style == "recurring":
        every, dur = f.params.get("every_s", 3600.0), f.params.get("duration_s", 720.0)
        on &= np.mod(t_rel - f.onset_h * 3600.0, every) < dur
    return on


def _stalls(h: Hall, n: int) -> dict[object, np.ndarray]:
    """Which readings stall: per node, its natural jitter (a factor per reading, 1 when it
    does not stall), and per ``stalls`` fault, a mask. From a generator of their own, so that
    every other draw of the hall is the same with them as without."""
    rng = np.random.default_rng((h.seed, 13))
    out: dict[object, np.ndarray] = {}
    for node in h.node_names:
        hit = rng.random(n) < rng.uniform(0.0, h.jitter_share)
        out[node] = np.where(hit, rng.uniform(1.5, 2.0, n), 1.0)
    for i, f in enumerate(h.faults):
        if f.style == "stalls":
            out[i] = rng.random(n) < f.magnitude / 100.0
    return out


def generate(h: Hall) -> tuple[Trace, list[Fault]]:
    """The hall's trace and its labels."""
    rng = np.random.default_rng((h.seed, 11))
    t_rel = np.arange(0.0, h.hours * 3600.0, h.dt_s)
    n = t_rel.size
    ck_off = rng.uniform(600, 1800)
    ck = (np.mod(t_rel - ck_off, h.checkpoint_every_s) < h.checkpoint_dur_s) & (t_rel >= ck_off)
    stall = np.zeros(n, bool)  # host-side stalls every chip sees
    for _ in range(rng.poisson(4 * h.hours / 24)):
        a = rng.uniform(0, t_rel[-1])
        stall |= (t_rel >= a) & (t_rel < a + rng.uniform(10, 40))
    hall_phase = rng.uniform(0, 2 * np.pi)
    racks = {r: rng.normal(0, 0.8 * h.spread) for r in range((h.nodes + 3) // 4)}
    stalls = _stalls(h, n)
    series: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]] = {}
    compute: dict[tuple[str, str], np.ndarray] = {}
    t = T0 + t_rel
    for k, node in enumerate(h.node_names):
        cap, watts, temp0 = MODELS[h.model_of(k)]
        node_faulty = any(f.device == device_key(node, "*") for f in h.faults)
        # drawn whether or not they are used: a fault leaves every other draw as it was
        n_temp, n_power, n_compute = (racks[k // 4] + rng.normal(0, 0.6 * h.spread), rng.normal(0, 0.02 * h.spread),
                                      rng.normal(0, 0.008 * h.spread))
        if node_faulty:
            n_temp = n_power = n_compute = 0.0
        lag_s = rng.uniform(-1200, 1200)  # the hall's air reaches racks at other times
        ambient = h.day_night_c * np.sin(2 * np.pi * (t_rel + lag_s) / 86400 + hall_phase)
        for chip in (f"npu0-{c}" for c in range(h.chips)):
            faults = _faults_on(h, node, chip)
            own = bool(faults) and not node_faulty
            c_temp, c_power, c_compute = _bounded(rng, 0.8), _bounded(rng, 0.03), _bounded(rng, 0.008)
            if own:
                c_temp = c_power = c_compute = 0.0
            util = np.clip(93 + rng.normal(0, 2.5, n), 0, 100)
            idle = ck | stall
            util[idle] = rng.uniform(0, 2, idle.sum())
            power = watts * (1 + n_power + c_power) * util / 93 + rng.normal(0, 5, n)
            extra_c = np.zeros(n)
            slow = np.ones(n)
            for f in faults:
                on = _active(f, t_rel)
                i_f = h.faults.index(f)
                if f.kind == "outlier" and f.style == "power":
                    power = power * np.where(on, 1 + f.magnitude / 100, 1.0)
                elif f.kind == "thermal" and f.style == "drift":  # C/h from its onset, power unchanged
                    extra_c += np.where(on, f.magnitude * (t_rel / 3600.0 - f.onset_h), 0.0)
                elif f.kind == "outlier":
                    extra_c += np.where(on, f.magnitude, 0.0)
                elif f.kind == "straggler" and f.style == "stalls":
                    slow *= np.where(on & stalls[i_f], f.params.get("x", 1.9), 1.0)
                elif f.kind == "straggler":
                    slow *= np.where(on, 1 + f.magnitude / 100, 1.0)
                    # a chip held at a power cap runs slower at full utilization
                    power = power * np.where(on, f.params.get("power_frac", 1.0), 1.0)
            slow *= stalls[node]
            temp = (temp0 + n_temp + c_temp + ambient + C_PER_W * (power - watts) + extra_c
                    + rng.normal(0, 0.4, n))
            # the allocator's sawtooth, its period a whole number of readings: sampled at
            # another period it would alias into a slow wave that looks like a leak
            period = h.dt_s * int(rng.integers(5, 11))
            hbm = 0.5 * cap * np.minimum(1.0, t_rel / 1200.0) + rng.uniform(0.2, 1.0) * GIB * (
                np.mod(t_rel + h.dt_s * int(rng.integers(0, 10)), period) / period) + rng.normal(0, 2e6, n)
            comp = COMPUTE_S * (1 + n_compute + c_compute) * slow * np.exp(rng.normal(0, 0.02, n))
            compute[(node, chip)] = comp
            for metric, v in (("temp_c", temp), ("power_w", power), ("util_pct", util),
                              ("hbm_used_bytes", hbm), ("hbm_total_bytes", np.full(n, float(cap)))):
                series[(node, chip, metric)] = (t, v)
    # Synchronous data parallelism: every rank waits for the slowest in the all-reduce.
    job = np.max(np.vstack(list(compute.values())), axis=0) + ALLREDUCE_S
    job = np.where(ck, 20.0, job)
    steps = ~stall
    for (node, chip), comp in compute.items():
        series[(node, chip, "compute_s")] = (t[steps], comp[steps])
        series[(node, chip, "step_time_s")] = (t[steps], (job * np.exp(rng.normal(0, 0.003, n)))[steps])
    rows = link_rows_with_onset(h.nodes, h.hours, slow_pairs={(a, b): x for a, b, x in h.slow_pairs},
                                onset_h=h.link_onset_h, seed=h.seed)
    links: dict[tuple[str, str, str], tuple[list[float], list[float]]] = {}
    for ts, a, b, metric, v in rows:
        tv = links.setdefault((a, b, metric), ([], []))
        tv[0].append(ts)
        tv[1].append(v)
    series.update({k: (np.array(a), np.array(b)) for k, (a, b) in links.items()})
    return Trace.from_arrays(series, source=f"hall:{h.name}"), list(h.faults)


def link_rows_with_onset(nodes: int, hours: float, *, slow_pairs: dict[tuple[int, int], float], onset_h: float,
                         every_s: float = 3600.0, seed: int = 0) -> list[tuple[float, str, str, str, float]]:
    """The hall's hourly pairwise link tests, the ``slow_pairs`` slow from ``onset_h`` on:
    the same tests as without the fault before it (one generator, the same draws)."""
    tests = int(hours * 3600.0 // every_s)
    healthy = link_rows(nodes, tests, every_s=every_s, seed=seed)
    faulty = link_rows(nodes, tests, every_s=every_s, seed=seed, slow_pairs=slow_pairs)
    onset = T0 + onset_h * 3600.0
    return [f if f[0] >= onset else g for g, f in zip(healthy, faulty, strict=True)]
