"""Throughput degradation: step time against a post-warm-up baseline.

Input: 1-min medians of log(step_time_s) (a median per minute ignores the odd slow
checkpoint step); samples inside declared phase windows are dropped. Baseline: hours
``baseline_start_h`` .. +``baseline_len_h`` (10-30 % of the run for short runs).

* **Abrupt**: one-sided tabular CUSUM on the minute medians with
  delta = max(log(1 + delta_pct/100), 4 sigma_baseline), k = delta/2, alarm when the sum
  exceeds ``cusum_h`` x delta. The alarm is confirmed only when the median of the next
  ``confirm_s`` is at least log(1 + delta_pct/100) above the baseline (a restart's slow
  warm-up steps raise the sum briefly but do not confirm); an unconfirmed alarm resets the
  sum. Onset: the last time the sum was zero before the alarm.
* **Gradual**: Theil-Sen on 10-min medians after the baseline (%/h, 90 % CI) with the
  quarter rule; a finding needs the CI's lower end above ``gradual_min_pct_per_h``.

The size of a slowdown is the ratio of medians (after onset / baseline) with a 90 %
moving-block bootstrap CI (10-min blocks), so serial correlation does not shrink it.
"""

from __future__ import annotations

import math

import numpy as np

from soak.analysis._stats import block_reduce, quarter_slopes, robust_sigma, theil_sen
from soak.analysis.messages import say
from soak.analysis.model import Finding
from soak.analysis.profile import Profile
from soak.analysis.trace import Series, Trace

DETECTOR_VERSION = "throughput_degradation/1.0"
BASELINE_MIN_BLOCKS = 10  # fewer one-minute medians in the baseline window: no baseline, no test


def _baseline_window(t0: float, t1: float, profile: Profile) -> tuple[float, float]:
    p = profile.throughput
    span = t1 - t0
    a = t0 + p.baseline_start_h * 3600.0
    b = a + p.baseline_len_h * 3600.0
    if b > t0 + 0.3 * span:  # short run: keep two thirds of it for the test
        a, b = t0 + 0.1 * span, t0 + 0.3 * span
    return a, b


def cusum_onset(
    x: np.ndarray, base: float, delta: float, h: float, confirm_n: int, min_shift: float
) -> tuple[int, int] | None:
    """(onset index, alarm index) of the first confirmed upward shift, or None."""
    k = delta / 2.0
    # Screen first: the CUSUM is the walk's rise over its lowest point so far (Lindley), for
    # all points at once; where that never comes near h (a healthy rank), no alarm can, and
    # the loop below, a Python step per block, is not needed (512 ranks: 650 k steps). The
    # margin covers the two sums' rounding, so the answer is the loop's.
    z = x - base - k
    walk = np.cumsum(z)
    rise = walk - np.minimum(np.minimum.accumulate(walk), 0.0)
    if rise.size == 0 or float(rise.max()) + 1e-9 * (h + float(np.abs(z).sum())) < h:
        return None
    s = 0.0
    last_zero = 0
    # Python floats: indexing a numpy array element by element costs 5x the arithmetic.
    for i, xi in enumerate(x.tolist()):
        s = max(0.0, s + (xi - base - k))
        if s == 0.0:
            last_zero = i + 1
            continue
        if s > h:
            onset = min(last_zero, i)
            after = x[onset : onset + confirm_n]
            if after.size >= max(3, confirm_n // 3) and np.median(after) - base >= min_shift:
                return onset, i
            s = 0.0
            last_zero = i + 1
    return None


def _bootstrap_ratio(
    base: np.ndarray, after: np.ndarray, reps: int, block: int, seed: int = 7
) -> tuple[float, float]:
    """90 % moving-block bootstrap CI of exp(median(after) - median(base)) - 1, in %."""
    rng = np.random.default_rng(seed)

    def resample(x: np.ndarray, n_draw: int) -> np.ndarray:
        b = min(block, x.size)
        nb = max(1, int(math.ceil(x.size / b)))
        starts = rng.integers(0, x.size - b + 1, size=(n_draw, nb))
        idx = (starts[:, :, None] + np.arange(b)[None, None, :]).reshape(n_draw, -1)[:, : x.size]
        return np.median(x[idx], axis=1)

    diff = resample(after, reps) - resample(base, reps)
    lo, hi = np.quantile(diff, [0.05, 0.95])
    return float(np.expm1(lo) * 100), float(np.expm1(hi) * 100)


def analyse_series(s: Series, profile: Profile, run_start: float, run_end: float) -> Finding | None:
    p = profile.throughput
    t, v = s.t, s.v
    ok = v > 0
    for ph in profile.phases:
        for a, b in ph.windows:
            ok &= ~((t >= a) & (t <= b))
    t, x = t[ok], np.log(v[ok])
    if t.size < 20:
        return None
    tm, xm, _ = block_reduce(t, x, p.block_s, "median", origin=run_start)
    ba, bb = _baseline_window(run_start, run_end, profile)
    in_base = (tm >= ba) & (tm < bb)
    if in_base.sum() < BASELINE_MIN_BLOCKS:
        return None
    base_x = xm[in_base]
    base = float(np.median(base_x))
    sigma = robust_sigma(base_x)
    min_shift = math.log1p(p.delta_pct / 100.0)
    delta = max(min_shift, 4.0 * sigma)
    after_sel = tm >= bb
    ta, xa = tm[after_sel], xm[after_sel]
    if xa.size < 10:
        return None
    confirm_n = max(3, int(p.confirm_s / p.block_s))
    hit = cusum_onset(xa, base, delta, p.cusum_h * delta, confirm_n, min_shift)
    mode = None
    onset_t = None
    slope_pct = None
    slope_ci = None
    if hit is not None:
        mode = "abrupt"
        onset_t = float(ta[hit[0]]) - p.block_s / 2
        post = xa[hit[0] :]
    # Gradual: 10-min medians after the baseline start.
    t10, x10, _ = block_reduce(t, x, 600.0, "median", origin=run_start)
    g = t10 >= ba
    if g.sum() >= 12:
        sl = theil_sen(t10[g], x10[g], 0.90)
        if sl is not None:
            slope_pct = math.expm1(sl.per_hour) * 100
            slope_ci = [math.expm1(sl.low) * 100, math.expm1(sl.high) * 100]
            if mode is None and slope_ci[0] > p.gradual_min_pct_per_h:
                if all(q > 0 for q in quarter_slopes(t10[g], x10[g])):
                    mode = "gradual"
                    onset_t = float(ba)
                    last_hour = tm >= tm[-1] - 3600.0
                    post = xm[last_hour]
    if mode is None:
        return None
    change = math.expm1(float(np.median(post)) - base) * 100
    if change < p.delta_pct * 0.5:
        return None
    ci = _bootstrap_ratio(base_x, post, p.bootstrap, block=10)
    severity = profile.cap("throughput_degradation", "fail" if change >= p.fail_pct else "warn")
    base_ms = math.exp(base) * 1000
    final_ms = math.exp(float(np.median(post))) * 1000
    code = f"throughput_degradation.{mode}"
    values = {"change_pct": change, "change_low_pct": ci[0], "change_high_pct": ci[1],
              "slope_pct_per_h": slope_pct, "baseline_ms": base_ms, "final_ms": final_ms}
    return Finding(
        kind="throughput_degradation",
        device=s.device,
        metric=s.metric,
        start=onset_t,
        end=float(s.end),
        severity=severity,
        summary=say(code, values),
        code=code,
        values=values,
        onset=onset_t,
        details={
            "mode": mode,
            "change_pct": change,
            "change_ci90_pct": list(ci),
            "baseline_ms": base_ms,
            "final_ms": final_ms,
            "baseline_window": [ba, bb],
            "slope_pct_per_h": slope_pct,
            "slope_ci90_pct_per_h": slope_ci,
            "cusum_delta_log": delta,
            "version": DETECTOR_VERSION,
        },
    )


def detect(trace: Trace, profile: Profile, run_start: float, run_end: float) -> list[Finding]:
    out = []
    for s in trace.series("step_time_s"):
        f = analyse_series(s, profile, run_start, run_end)
        if f is not None:
            out.append(f)
    return out
