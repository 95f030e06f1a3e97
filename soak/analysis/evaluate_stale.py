"""Stale-telemetry traces for the evaluation harness (``benchmarks/eval_detectors.py --stale N``).

Machine halls (``synth_hall``: 16 nodes x 8 chips, 48 h, a reading a minute) with their
readings rounded as the tools print them (``quantized``: whole degrees and per cent, 0.1 W,
MiB), so a healthy reading can repeat. The healthy families:

- ``stale/healthy``: the hall as it runs;
- ``stale/healthy-idle``: the whole hall idle for 6 to 12 h (utilization 0, power at its idle
  floor): every chip holds still together;
- ``stale/healthy-hung``: one chip hung for 6 h (utilization 0, its HBM held, power at its
  idle floor) while the others work: a real reading holding still, not a stuck one;
- ``stale/healthy-counter``: a counter (``comm_timeouts_total``) every chip moves at the same
  rate, 1 to 20 an hour, each chip within 30 % of it (Poisson counts).

The fault families freeze one chip's sensor at its value from an onset
(``stale/frozen-temp_c``, ``-power_w``) or stop one chip's counter while its
peers go on at 15 or 30 an hour (``stale/frozen-counter``: a counter's floor is the time its
peers take to move ``stale.counter_quiet_moves`` times, an hour here; slower counters need
longer). A fault is found when a ``stale_telemetry`` finding
names its chip and metric; any other is false. The multiple is the frozen length in units
of the family's floor (``FLOOR_H``; at most 36 h of the 48). One series-day is one chip's metric watched for a day.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from soak.analysis import stale
from soak.analysis.profile import Profile
from soak.analysis.synth_hall import Hall, generate
from soak.analysis.trace import Series, Trace
from soak.device_names import device_key

STEP = {"temp_c": 1.0, "power_w": 0.1, "util_pct": 1.0, "hbm_used_bytes": float(1 << 20), "hbm_total_bytes": 1.0}
"""What the tools print: whole degrees and per cent, tenths of a watt, MiB."""
COUNTER = "comm_timeouts_total"
FLOOR_S = Profile().stale.min_unchanged_s
FLOOR_H = {"temp_c": 2.5, "power_w": FLOOR_S / 3600.0, COUNTER: FLOOR_S / 3600.0}
"""Each family's floor in these halls, hours: ``stale.peer_factor`` (10) x the peers' median
longest stretch where that is longer than ``stale.min_unchanged_s`` (whole-degree
temperatures hold still for about 0.2 h at a time, up to 0.5 h: 2 to 2.5 h), else the
minimum itself (tenths of a watt change within minutes; the counters count
15 or 30 an hour, so 15 moves take an hour at most)."""


@dataclass(frozen=True)
class StaleCase:
    family: str
    multiple: float  # frozen hours / the family's floor (FLOOR_H); 0 for healthy
    seed: int
    metric: str | None = None  # the frozen metric
    chip: tuple[int, int] = (5, 3)  # node index, chip index
    onset_h: float = 8.0
    frozen_h: float = 0.0
    idle_h: float = 0.0
    hung_h: float = 0.0
    counter_per_h: float = 0.0
    hours: float = 48.0


def quantized(trace: Trace) -> Trace:
    """The trace rounded as the tools print it (``STEP``)."""
    out = {}
    for s in trace.series():
        step = STEP.get(s.metric)
        v = s.v if step is None else np.round(s.v / step) * step
        out[(s.device, s.metric)] = Series(s.device, s.metric, s.t, v)
    return Trace(out, trace.source, {k: trace.place(k) for k in trace.devices})


def stale_cases(healthy: int = 2, multiples: tuple[float, ...] = (1.0, 2.0, 6.0, 24.0), reps: int = 2,
                seed0: int = 9000) -> list[StaleCase]:
    out: list[StaleCase] = []
    for i in range(healthy):
        out.append(StaleCase("stale/healthy", 0.0, seed0 + i))
        out.append(StaleCase("stale/healthy-idle", 0.0, seed0 + 50 + i, idle_h=6.0 + 6.0 * (i % 2)))
        out.append(StaleCase("stale/healthy-counter", 0.0, seed0 + 100 + i, counter_per_h=1.0 + 19.0 * (i % 2)))
        out.append(StaleCase("stale/healthy-hung", 0.0, seed0 + 150 + i, chip=(i % 16, i % 8), hung_h=6.0))
    seed = seed0 + 1000
    for m in multiples:
        for r in range(reps):
            seed += 1
            chip = (seed % 16, seed % 8)
            for metric in ("temp_c", "power_w"):
                out.append(StaleCase(f"stale/frozen-{metric}", m, seed, metric=metric, chip=chip,
                                     onset_h=4.0 + 4.0 * r, frozen_h=min(36.0, m * FLOOR_H[metric])))
            hours = m * FLOOR_H[COUNTER]
            # the peers count 15 or 30 an hour: a quiet hour is 15 of their moves (the floor)
            out.append(StaleCase("stale/frozen-counter", m, seed, metric=COUNTER, chip=chip,
                                 onset_h=4.0 + 4.0 * r, frozen_h=hours, counter_per_h=15.0 * (1 + r)))
    return out


def build(case: StaleCase) -> Trace:
    """The case's hall: quantized, with its idle stretch, counter and frozen reading."""
    trace, _ = generate(Hall(f"stale-{case.seed}", hours=case.hours, dt_s=60.0, seed=case.seed))
    rng = np.random.default_rng((case.seed, 23))
    series = {(s.device, s.metric): s for s in quantized(trace).series()}
    if case.idle_h:
        t0 = min(s.start for s in series.values())
        a = t0 + rng.uniform(4.0, case.hours - case.idle_h - 4.0) * 3600.0
        for (dev, metric), s in list(series.items()):
            on = (s.t >= a) & (s.t < a + case.idle_h * 3600.0)
            if metric == "util_pct":
                series[(dev, metric)] = Series(dev, metric, s.t, np.where(on, 0.0, s.v))
            elif metric == "power_w":
                idle = np.round((90.0 + rng.normal(0, 1.5, s.t.size)) / 0.1) * 0.1
                series[(dev, metric)] = Series(dev, metric, s.t, np.where(on, idle, s.v))
    if case.hung_h:
        dev = device_key(f"n{case.chip[0]:02d}", f"npu0-{case.chip[1]}")
        t0 = series[(dev, "util_pct")].t[0] + case.onset_h * 3600.0
        for metric in ("util_pct", "power_w", "hbm_used_bytes"):
            s = series[(dev, metric)]
            on = (s.t >= t0) & (s.t < t0 + case.hung_h * 3600.0)
            held = {"util_pct": np.zeros(s.t.size), "hbm_used_bytes": np.full(s.t.size, s.v[int(np.argmax(on))]),
                    "power_w": np.round((90.0 + rng.normal(0, 1.5, s.t.size)) / 0.1) * 0.1}[metric]
            series[(dev, metric)] = Series(dev, metric, s.t, np.where(on, held, s.v))
    if case.counter_per_h:
        for (dev, metric), s in list(series.items()):
            if metric != "util_pct":
                continue
            rate = case.counter_per_h * rng.uniform(0.7, 1.3)
            dt_h = np.diff(s.t, prepend=s.t[0]) / 3600.0
            series[(dev, COUNTER)] = Series(dev, COUNTER, s.t, np.cumsum(rng.poisson(rate * dt_h)).astype(float))
    if case.metric:
        key = (device_key(f"n{case.chip[0]:02d}", f"npu0-{case.chip[1]}"), case.metric)
        s = series[key]
        t0 = s.t[0] + case.onset_h * 3600.0
        on = (s.t >= t0) & (s.t < t0 + case.frozen_h * 3600.0)
        i = int(np.argmax(on))
        series[key] = Series(s.device, s.metric, s.t, np.where(on, s.v[i], s.v))
    return Trace(series, trace.source, {k: trace.place(k) for k in trace.devices})


def run_stale_case(case: StaleCase, profile: Profile | None = None) -> dict[str, Any]:
    trace = build(case)
    p = profile or Profile.default()
    found = stale.detect(trace, p, float(trace.start), float(trace.end))
    want = None if case.metric is None else (f"n{case.chip[0]:02d}", f"npu0-{case.chip[1]}", case.metric)
    hits = [f for f in found if (f.node, f.device, f.metric) == want]
    false = [f for f in found if f not in hits]
    watched = [s for m in stale.METRICS for s in trace.series(m)]
    errors = {"since_s": [f.start - (trace.get(device_key(*want[:2]), want[2]).t[0] + case.onset_h * 3600.0)
                          for f in hits[:1]]} if want else {}
    return {
        "family": case.family, "multiple": case.multiple, "scenario": f"{case.family}-{case.seed}",
        "detected": bool(hits) if want else None,
        "false": [f"{f.kind}:{device_key(f.node, str(f.device))}:{f.summary}" for f in false],
        "series_days": sum(s.end - s.start for s in watched) / 86400.0,
        "errors": errors,
    }
