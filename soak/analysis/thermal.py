"""Thermal: excursions above a threshold, slow drift, and hardware throttle flags.

* **Excursion**: ``temp_c`` above ``threshold_c`` for at least ``min_duration_s``; the
  episode ends only when the temperature falls below threshold - ``hysteresis_c``, so a
  reading hovering at the line is one episode, not many. Reported with duration and peak.
* **Drift**: Theil-Sen on hourly medians (deg C/h, 90 % CI); a finding needs the
  CI's lower end above tau and a positive slope in all four quarters, at unchanged power
  (power's own trend below ``drift_max_power_pct_per_h``). From ``drift_min_hours`` (48 h)
  on, a 24 h moving average first removes the daily ambient cycle and tau is
  ``drift_min_c_per_h``; from ``drift_short_min_hours`` (20 h) a daily harmonic fitted with
  the trend is taken out instead and tau is ``drift_short_min_c_per_h`` (0.3 C/h is found
  in a 24 h run). It warns; it fails when it took the chip ``drift_fail_c`` (10 C) further
  above its peers (the other chips of its model) than it started, from the first hour's
  median lead to the last's. Its endpoints are the first and last hourly medians.
* **Throttle**: when a ``throttle_reasons`` metric (NVML clock-event bitmask) is present, any
  of ``throttle_mask`` (HW slowdown 0x8, SW thermal 0x20, HW thermal 0x40, power brake
  0x80) set for ``throttle_min_s`` is a failing episode. Hardware facts come first.
"""

from __future__ import annotations

import numpy as np

from soak.analysis._stats import block_reduce, episodes, quarter_slopes, runs, theil_sen
from soak.analysis.messages import say
from soak.analysis.model import Finding
from soak.analysis.profile import Profile
from soak.analysis.trace import Series, Trace

DETECTOR_VERSION = "thermal/1.0"
DRIFT_BLOCK_S = 3600.0  # drift is fitted to the medians of these blocks (hourly)
_BITS = {0x4: "SwPowerCap", 0x8: "HwSlowdown", 0x20: "SwThermalSlowdown",
         0x40: "HwThermalSlowdown", 0x80: "HwPowerBrakeSlowdown"}


def hysteresis_mask(v: np.ndarray, high: float, low: float) -> np.ndarray:
    """True from a crossing above ``high`` until the value falls below ``low``."""
    above = v > high
    below = v < low
    # State at each sample = last decisive event (above -> 1, below -> 0), carried forward.
    event = np.where(above, 1, np.where(below, 0, -1))
    idx = np.where(event >= 0, np.arange(v.size), 0)
    np.maximum.accumulate(idx, out=idx)
    state = event[idx]
    state[(idx == 0) & (event[0] < 0)] = 0
    return state == 1


def _excursions(s: Series, profile: Profile) -> list[Finding]:
    p = profile.thermal
    dt = s.median_dt_s() or 1.0
    hot = hysteresis_mask(s.v, p.threshold_c, p.threshold_c - p.hysteresis_c)
    eps = episodes(s.t, hot, dt, merge_gap_s=0.0, min_duration_s=p.min_duration_s)
    if not eps:
        return []
    peaks = []
    for a, b in eps:
        i0, i1 = np.searchsorted(s.t, [a, b])
        peaks.append(float(s.v[i0:i1].max()))
    total = sum(b - a for a, b in eps)
    values = {"count": len(eps), "threshold_c": p.threshold_c, "total_min": total / 60, "peak_c": max(peaks)}
    return [
        Finding(
            kind="thermal",
            device=s.device,
            metric="temp_c",
            start=eps[0][0],
            end=eps[-1][1],
            severity=profile.cap("thermal", "fail"),
            summary=say("thermal.excursions", values),
            code="thermal.excursions",
            values=values,
            onset=eps[0][0],
            count=len(eps),
            details={
                "episodes": [
                    {"start": a, "duration_s": b - a, "peak_c": pk}
                    for (a, b), pk in list(zip(eps, peaks, strict=True))[:50]
                ],
                "peak_c": max(peaks),
                "threshold_c": p.threshold_c,
                "hysteresis_c": p.hysteresis_c,
                "version": DETECTOR_VERSION,
            },
        )
    ]


def _drift(s: Series, profile: Profile, power: Series | None = None,
           peers: list[Series] | None = None) -> list[Finding]:
    p = profile.thermal
    span_h = (s.end - s.start) / 3600.0
    if span_h < p.drift_short_min_hours:
        return []
    th, yh, _ = block_reduce(s.t, s.v, DRIFT_BLOCK_S, "median")
    hourly = yh  # the endpoints the finding names are these, not the smoothed series' ends
    if span_h >= p.drift_min_hours:
        if th.size < p.drift_min_hours:
            return []
        if th.size >= 48:
            # A 24 h moving average of hourly medians removes the daily ambient cycle, which
            # would otherwise pass for drift within each quarter.
            k = 24
            yh = np.convolve(yh, np.ones(k) / k, mode="valid")
            th = th[k // 2 : k // 2 + yh.size]
        tau, method = p.drift_min_c_per_h, "24 h moving average"
    else:
        if th.size < p.drift_short_min_hours:
            return []
        # Under two days a moving average eats the run: fit the daily cycle (one harmonic)
        # together with the trend and take it out, so a day's ambient swing is no drift.
        x = (th - th[0]) / 3600.0
        w = 2 * np.pi / 24.0
        design = np.column_stack([np.ones_like(x), x, np.sin(w * x), np.cos(w * x)])
        coef = np.linalg.lstsq(design, yh, rcond=None)[0]
        yh = yh - design[:, 2:] @ coef[2:]
        tau, method = p.drift_short_min_c_per_h, "daily harmonic removed"
    slope = theil_sen(th, yh, 0.90)
    if slope is None or slope.low <= tau:
        return []
    q = quarter_slopes(th, yh)
    if not all(x > 0 for x in q):
        return []
    power_pct = _power_trend_pct_per_h(power)
    if power_pct is not None and power_pct > p.drift_max_power_pct_per_h:
        return []  # the chip works harder: a load change, not a cooling defect
    lead = _lead_gain(s, peers or [])
    values = {
        "slope_c_per_h": slope.per_hour, "slope_low_c_per_h": slope.low, "slope_high_c_per_h": slope.high,
        "power_trend_pct_per_h": power_pct, "first_c": float(hourly[0]), "last_c": float(hourly[-1]),
        "per_day_c": slope.per_hour * 24,
    }
    # The severity policy: a drift that took the chip drift_fail_c further above its peers
    # than it started fails (a cooling defect); one the peers share (the hall warming) or a
    # smaller one warns.
    severity = "fail" if lead is not None and lead >= p.drift_fail_c else "warn"
    return [
        Finding(
            kind="thermal",
            device=s.device,
            metric="temp_c",
            start=float(s.start),
            end=float(s.end),
            severity=profile.cap("thermal", severity),
            summary=say("thermal.drift", values),
            code="thermal.drift",
            values=values,
            onset=float(s.start),
            slope_per_hour=slope.per_hour,
            details={
                "drift_c_per_h": slope.per_hour,
                "ci90": [slope.low, slope.high],
                "quarter_slopes": q,
                "tau_c_per_h": tau,
                "method": method,
                "power_trend_pct_per_h": power_pct,
                "projection_c_per_day": slope.per_hour * 24,
                "endpoints": "hourly medians of the first and last hour",
                "lead_gain_c": lead,
                "drift_fail_c": p.drift_fail_c,
                "version": DETECTOR_VERSION,
            },
        )
    ]


def _lead(s: Series, peers: list[Series], t0: float) -> tuple[np.ndarray, np.ndarray]:
    """Hourly medians (from ``t0``) of how far ``s`` is above its peers' median: (hours, lead)."""
    th, yh, _ = block_reduce(s.t, s.v, DRIFT_BLOCK_S, "median", origin=t0)
    others: dict[float, list[float]] = {}
    for q in peers:
        tq, yq, _ = block_reduce(q.t, q.v, DRIFT_BLOCK_S, "median", origin=t0)
        for a, b in zip(tq.tolist(), yq.tolist(), strict=True):
            others.setdefault(round((a - t0) // DRIFT_BLOCK_S), []).append(b)
    hours = np.array([round((a - t0) // DRIFT_BLOCK_S) for a in th.tolist()])
    ref = np.array([float(np.median(others[h])) if len(others.get(h, ())) >= 3 else np.nan for h in hours.tolist()])
    return hours, yh - ref


def _lead_gain(s: Series, peers: list[Series]) -> float | None:
    """How much further above its peers (the other chips of its model) a chip ends than it
    started: its lead over their median in the last hour minus in the first (None: fewer than
    three peers)."""
    if len(peers) < 3:
        return None
    _, lead = _lead(s, peers, float(s.start))
    ok = lead[np.isfinite(lead)]
    return float(ok[-1] - ok[0]) if ok.size >= 2 else None


def _power_trend_pct_per_h(power: Series | None) -> float | None:
    """Theil-Sen trend of hourly power medians in % of their median per hour (None: no power)."""
    if power is None or power.t.size < 4:
        return None
    tp, yp, _ = block_reduce(power.t, power.v, 3600.0, "median")
    sl = theil_sen(tp, yp, 0.90)
    level = float(np.median(yp)) if yp.size else 0.0
    if sl is None or level <= 0:
        return None
    return sl.per_hour / level * 100.0


def _throttle(s: Series, profile: Profile) -> list[Finding]:
    p = profile.thermal
    bits = s.v.astype(np.int64)
    bad = (bits & p.throttle_mask) != 0
    dt = s.median_dt_s() or 1.0
    out = []
    starts, ends = runs(bad)
    for i0, i1 in zip(starts.tolist(), ends.tolist(), strict=True):
        a, b = float(s.t[i0]), float(s.t[i1 - 1]) + dt
        if b - a < p.throttle_min_s:
            continue
        seen = int(np.bitwise_or.reduce(bits[i0:i1]))
        names = [n for bit, n in _BITS.items() if seen & bit]
        out.append(
            Finding(
                kind="thermal",
                device=s.device,
                metric=s.metric,
                start=a,
                end=b,
                severity=profile.cap("thermal", "fail"),
                summary=say("thermal.throttled", {"duration_min": (b - a) / 60, "reasons": names}),
                code="thermal.throttled",
                values={"duration_min": (b - a) / 60, "reasons": names},
                onset=a,
                details={"reason_bits": seen, "reasons": names, "version": DETECTOR_VERSION},
            )
        )
    return out


def detect(trace: Trace, profile: Profile, run_start: float, run_end: float) -> list[Finding]:
    out: list[Finding] = []
    for s in trace.series("throttle_reasons"):
        out.extend(_throttle(s, profile))
    temps = list(trace.series("temp_c"))
    capacity = {s.device: _capacity(trace, s.device) for s in temps}
    for s in temps:
        out.extend(_excursions(s, profile))
        peers = [q for q in temps if q.device != s.device and capacity[q.device] == capacity[s.device]]
        out.extend(_drift(s, profile, trace.get(s.device, "power_w"), peers))
    return out


def _capacity(trace: Trace, device: str) -> float | None:
    """A chip's model as the peers know it: its HBM capacity (None: not read)."""
    cap = trace.get(device, "hbm_total_bytes")
    return None if cap is None or cap.v.size == 0 else round(float(np.median(cap.v)) / 2**30)
