"""Memory creep on device HBM and host RSS.

Method (calibration in docs/analysis.md):

1. Envelope: the minimum of each ``envelope_window_s`` block. The minimum removes the
   allocator sawtooth and GC noise and keeps what memory is *retained*. Blocks with few
   samples (gaps) are dropped; single-block dips (a restart freeing memory) are removed
   against a running median.
2. Regimes: a persistent drop of the envelope (a restart that gives memory back) starts a
   new regime; only the last one is fitted.
3. Burn-in: the first max(1 h, 25 %) of the regime is skipped: warm-up and allocator
   step-ups plateau early and otherwise bias the slope.
4. Onset: a hinge (flat, then linear) fit on the envelope; when it explains the data much
   better than a straight line, the leak began mid-run and the fit starts at the hinge. The
   onset said is the change point of the whole regime's readings (``change_point``: flat, then the
   creep) with its 90 % interval; without one, the line extended back.
5. Theil-Sen slope with a 90 % CI on the fit window. A finding needs the CI's lower end
   above tau *and* a positive slope in each of the four quarters (a slow wave fails that
   rule), *and* the CI's lower end still above tau with the window's largest level shift
   taken out (a late one-off allocation is a step, not a creep).
6. Across restarts (a job restarted into ``segments_min`` runs or more: then its runs are
   judged together, not the last regime, a few hours of warm-up): a leak that each restart resets
   is a sawtooth whose every tooth climbs at the same rate. The memory is cut into runs at
   the restarts (the run's ``restart`` phase windows where it has any, else the envelope
   blocks that fall below ``restart_drop_frac`` of their neighbours: a restart frees the
   memory), each run gets its own burn-in, and the runs' slopes are pooled: the Theil-Sen
   slope over the pairs *within* each run (Sen's stratified estimator, as the seasonal
   Kendall test pools seasons) with its CI from the summed Kendall variances. A finding
   needs ``segments_min`` runs, the pooled CI's lower end above tau, ``segments_rising_share``
   of the runs rising on their own, and both the first and second halves of the runs
   rising (a warm-up that levels off within each run is no leak).
7. Projection and severity: at this slope, memory runs out in ``hours_to_exhaustion``
   (``exhausted_at``); ``fail`` when that is within the profile's required runtime (or
   capacity is unknown), ``warn`` otherwise: a slow leak is still a defect to report.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from soak.analysis._stats import block_reduce, quarter_slopes, robust_sigma, theil_sen
from soak.analysis.messages import say
from soak.analysis.model import Finding
from soak.analysis.profile import MemoryParams, Profile
from soak.analysis.trace import Series, Trace

DETECTOR_VERSION = "memory_creep/1.1"
METRICS = ("hbm_used_bytes", "host_rss_bytes")


def detect(trace: Trace, profile: Profile, run_start: float, run_end: float) -> list[Finding]:
    out: list[Finding] = []
    restarts = restart_windows(profile)
    for metric in METRICS:
        for s in trace.series(metric):
            capacity = None
            if metric == "hbm_used_bytes":
                tot = trace.get(s.device, "hbm_total_bytes")
                if tot is not None and tot.v.size:
                    capacity = float(np.median(tot.v))
            # a job restarted again and again: its runs between restarts are judged together
            # (the last regime alone is a few hours of a warm-up); else the last regime
            blocks = blocks_of(s, profile.memory, run_start)  # reduced once for both
            runs = restart_runs(s, profile.memory, run_start, restarts, blocks)
            if runs is not None:
                f = across_restarts(s, profile, run_start, capacity, restarts, runs)
            else:
                f = analyse_series(s, profile, run_start, run_end, capacity, blocks)
            if f is not None:
                out.append(f)
    return out


Blocks = tuple[np.ndarray, np.ndarray, np.ndarray]  # block centres, minima, readings per block


def blocks_of(s: Series, p: MemoryParams, origin: float) -> Blocks:
    """The series' minimum per ``envelope_window_s`` block."""
    return block_reduce(s.t, s.v, p.envelope_window_s, "min", origin=origin)


def tau_for(metric: str, capacity: float | None, p: MemoryParams) -> float:
    """Smallest slope (bytes/h) worth a finding."""
    if metric == "hbm_used_bytes":
        frac = p.hbm_min_slope_frac_per_h * capacity if capacity else 0.0
        return max(p.hbm_min_slope_bytes_per_h, frac)
    return p.rss_min_slope_bytes_per_h


def envelope(s: Series, p: MemoryParams, origin: float, blocks: Blocks | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
    """The retained level: block minima without gaps and single low blocks. ``blocks``: the
    series' block minima when already reduced (``blocks_of``)."""
    te, ye, n = blocks if blocks is not None else blocks_of(s, p, origin)
    if te.size == 0:
        return te, ye
    full = np.median(n)
    ok = n >= max(2, 0.3 * full)  # a block mostly in a gap has an unreliable minimum
    te, ye = te[ok], ye[ok]
    if ye.size >= 7:
        from scipy.ndimage import median_filter

        med = median_filter(ye, size=7, mode="nearest")
        resid = ye - med
        spread = max(robust_sigma(resid), 1e-9 * max(1.0, float(np.median(np.abs(ye)))))
        # One or two low blocks (a restart's freed memory) are not the retained level.
        dip = resid < -max(6 * spread, 0.01 * float(np.median(np.abs(ye))))
        te, ye = te[~dip], ye[~dip]
    return te, ye


def _last_regime_start(te: np.ndarray, ye: np.ndarray) -> int:
    """Index where the last regime begins: after the last persistent drop of the envelope."""
    if ye.size < 8:
        return 0
    level = float(np.median(np.abs(ye))) or 1.0
    noise = robust_sigma(np.diff(ye)) or 0.0
    k = 3
    from numpy.lib.stride_tricks import sliding_window_view

    med = np.median(sliding_window_view(ye, k), axis=1)  # med[j] = median(ye[j:j+k])
    i = np.arange(k, ye.size - k + 1)
    drops = i[np.flatnonzero(med[i - k] - med[i] > max(8 * noise, 0.005 * level))]
    # A regime must be long enough to judge; a drop near the end (or the beat of a sampled
    # sawtooth, which looks like a drop every few hours) does not start one.
    min_len = max(6 * 3600.0, 0.25 * (te[-1] - te[0]))
    long_enough = drops[te[-1] - te[drops] >= min_len]
    return int(long_enough[-1]) if long_enough.size else 0


def _hinge(x: np.ndarray, y: np.ndarray, min_pts: int) -> tuple[int, float, float] | None:
    """Best hinge point for y = a + b * max(0, x - x_c): (index, SSE hinge, SSE line)."""
    n = x.size
    if n <= 2 * min_pts:
        return None
    cands = np.arange(min_pts, n - min_pts)
    xc = x[cands][:, None]
    h = np.maximum(0.0, x[None, :] - xc)  # (candidates, n)
    hm = h.mean(axis=1, keepdims=True)
    ym = y.mean()
    hc = h - hm
    b = (hc * (y - ym)).sum(axis=1) / np.maximum((hc * hc).sum(axis=1), 1e-300)
    resid = (y - ym)[None, :] - b[:, None] * hc
    sse = (resid * resid).sum(axis=1)
    xm = x.mean()
    bl = ((x - xm) * (y - ym)).sum() / max(((x - xm) ** 2).sum(), 1e-300)
    sse_line = float((((y - ym) - bl * (x - xm)) ** 2).sum())
    best = int(np.argmin(sse))
    return int(cands[best]), float(sse[best]), sse_line


def _hinge_fits(x: np.ndarray, u: np.ndarray, cs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate ``c`` of ``cs``, the least-squares slope ``b`` of ``u`` (centred) on
    ``h = max(0, x - c)`` (centred) and the fit's residual sum of squares, from suffix sums of
    ``x`` (sorted) and ``u``: O(n + candidates), where a matrix of every ``h`` took 400
    candidates x n readings (0.8 GB and 4 s on a 72 h leak read at 1 Hz). The sums are
    taken from the end, where each ``h`` is non-zero, and ``x`` from its first value, so no
    large total cancels against another."""
    n = x.size
    xs, cs_s = x - x[0], cs - x[0]

    def tail(a: np.ndarray) -> np.ndarray:  # tail(a)[k] = a[k:].sum()
        return np.concatenate((np.cumsum(a[::-1])[::-1], [0.0]))

    k = np.searchsorted(xs, cs_s, side="right")  # h > 0 from index k on
    m = (n - k).astype(float)
    sx, sxx, su, sxu = tail(xs)[k], tail(xs * xs)[k], tail(u)[k], tail(xs * u)[k]
    s1 = sx - m * cs_s  # sum of h
    s2 = sxx - 2.0 * cs_s * sx + m * cs_s * cs_s  # sum of h^2
    shh = np.maximum(s2 - s1 * s1 / n, 0.0)  # sum of (h - mean h)^2
    shu = (sxu - cs_s * su) - s1 / n * float(u.sum())  # sum of (h - mean h) u
    b = shu / np.maximum(shh, 1e-300)
    sse = float((u * u).sum()) - b * shu
    return b, sse


def _hinge_fits_exact(x: np.ndarray, u: np.ndarray, cs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_hinge_fits`` reading by reading, a row of ``h`` per candidate, 32 candidates at a
    time (bounded memory); each row's sums are the same whatever rows are beside it."""
    bs, sses = np.empty(cs.size), np.empty(cs.size)
    for a in range(0, cs.size, 32):
        h = np.maximum(0.0, x[None, :] - cs[a : a + 32, None])
        hc = h - h.mean(axis=1, keepdims=True)
        b = (hc * u).sum(axis=1) / np.maximum((hc * hc).sum(axis=1), 1e-300)
        resid = u[None, :] - b[:, None] * hc
        bs[a : a + 32], sses[a : a + 32] = b, (resid * resid).sum(axis=1)
    return bs, sses


def change_point(x: np.ndarray, y: np.ndarray, min_pts: int, conf: float = 0.90,
                 step: float | None = None) -> tuple[float, float, float] | None:
    """Where a flat series turns into a line: the hinge ``c`` of y = a + b * max(0, x - c)
    fitted by least squares over a fine grid of ``c`` (``step``: a quarter of the median
    spacing of ``x``), with its ``conf`` interval from the profile of the fit (the ``c`` whose
    residual sum of squares stays within the F quantile of the best: Hudson's hinge,
    Lerman 1980). None when the hinge does not explain the series better than a line (an F test
    of the one parameter more at 1 - ``conf`` / 10) or than a flat line before it: a leak from
    the start has no onset of its own. ``x`` in any unit; ``c`` and its bounds in the same."""
    from soak.analysis._dist import f_ppf

    n = x.size
    if n <= 2 * min_pts or n < 8:
        return None
    dx = float(np.median(np.diff(x))) if n > 1 else 0.0
    if dx <= 0:
        return None
    lo_c, hi_c = float(x[2]), float(x[n - min_pts // 2])  # three points at least before, six after
    if hi_c <= lo_c:
        return None
    step = step or max(dx / 4.0, (hi_c - lo_c) / 400.0)  # at most ~400 candidates: bounded work
    cs = np.arange(lo_c, hi_c + step / 2, step)
    ym = y.mean()
    u = y - ym
    b, sse = _hinge_fits(x, u, cs)
    # The sums' rounding is far below ``tol``; where a comparison below is closer than that
    # (the best fit, the interval's edge; every candidate of a near-perfect line, whose
    # residuals the sums cannot tell from zero) the fit is computed reading by reading.
    tol = 1e-7 * float((u * u).sum())
    near = np.flatnonzero(sse <= sse.min() + 2.0 * tol)
    b[near], sse[near] = _hinge_fits_exact(x, u, cs[near])
    best = int(near[np.argmin(sse[near])])
    sse_min = float(sse[best])
    xm = x.mean()
    bl = ((x - xm) * (y - ym)).sum() / max(((x - xm) ** 2).sum(), 1e-300)
    sse_line = float((((y - ym) - bl * (x - xm)) ** 2).sum())
    dof = n - 3
    if sse_min <= 0 or b[best] <= 0:
        return None
    # the hinge must beat the straight line clearly (a leak since the start is a line)
    if (sse_line - sse_min) / (sse_min / dof) < f_ppf(conf, 1, dof):
        return None
    edge = sse_min * (1 + f_ppf(conf, 1, dof) / dof)
    close = np.flatnonzero(np.abs(sse - edge) <= 2.0 * tol)
    b[close], sse[close] = _hinge_fits_exact(x, u, cs[close])
    inside = cs[sse <= edge]
    return float(cs[best]), float(inside.min()), float(inside.max())


def _warmed_up(te: np.ndarray, ye: np.ndarray) -> float:
    """When the regime's warm-up ends: the first block of the envelope not far below the blocks
    after it (a process allocates its working set in its first minutes, gigabytes at a time:
    that rise is not the start of a leak, whose blocks differ by far less)."""
    level = float(np.median(np.abs(ye))) or 1.0
    noise = robust_sigma(np.diff(ye)) if ye.size > 2 else 0.0
    jump = max(3.0 * noise, 0.02 * level)
    for i in range(max(0, ye.size - 4)):
        if ye[i] >= float(np.median(ye[i + 1:i + 4])) - jump:
            return float(te[i])
    return float(te[0])


def _flat_before(x: np.ndarray, y: np.ndarray, c: float, per_hour: float) -> bool:
    """Whether the series before ``c`` (x in seconds) rose at most half the creep's
    rate: a warm-up that grows and then slows is not a flat start that turns into a leak."""
    before = x < c
    if before.sum() < 3:
        return True
    xb, yb = x[before] / 3600.0, y[before]
    # the median of the pairwise slopes (Theil-Sen): a sawtooth that beats with the envelope's
    # blocks (high and low blocks in turn) tilts a least-squares line over a few blocks, not it
    i, j = np.triu_indices(xb.size, 1)
    dx = xb[j] - xb[i]
    ok = dx > 0
    if not ok.any():
        return True
    b = float(np.median((yb[j] - yb[i])[ok] / dx[ok]))
    return b <= 0.5 * per_hour


def _extend_back(
    te: np.ndarray, ye: np.ndarray, tf: np.ndarray, yf: np.ndarray, per_hour: float, window_s: float
) -> float:
    """Onset of a leak that began before the fit window: walk back from the window's start
    while the envelope stays on the fitted line (two misses in a row end the walk)."""
    hours = (tf - tf[0]) / 3600.0
    intercept = float(np.median(yf - per_hour * hours))
    resid = yf - (intercept + per_hour * hours)
    tol = max(4.0 * robust_sigma(resid), 0.5 * per_hour * window_s / 3600.0)
    i0 = int(np.searchsorted(te, tf[0]))
    onset = float(tf[0])
    misses = 0
    for i in range(i0 - 1, -1, -1):
        pred = intercept + per_hour * (te[i] - tf[0]) / 3600.0
        if abs(ye[i] - pred) <= tol:
            onset = float(te[i])
            misses = 0
        else:
            misses += 1
            if misses >= 2:
                break
    return onset - window_s / 2


def _without_step(y: np.ndarray) -> np.ndarray:
    """The window with its largest level shift taken out (height: median of six blocks after
    minus six before the best split), to tell a one-off allocation from a creep."""
    n = y.size
    if n < 8:
        return y
    c1 = np.cumsum(y)
    c2 = np.cumsum(y * y)
    k = np.arange(2, n - 1)  # split after k points, at least two on each side
    left = c2[k - 1] - c1[k - 1] ** 2 / k
    right = (c2[-1] - c2[k - 1]) - (c1[-1] - c1[k - 1]) ** 2 / (n - k)
    j = int(k[np.argmin(left + right)])
    height = float(np.median(y[j : j + 6]) - np.median(y[max(0, j - 6) : j]))
    return y - np.where(np.arange(n) >= j, height, 0.0)


def analyse_series(
    s: Series, profile: Profile, run_start: float, run_end: float, capacity: float | None,
    blocks: Blocks | None = None,
) -> Finding | None:
    p = profile.memory
    te, ye = envelope(s, p, run_start, blocks)
    if te.size < p.min_fit_points:
        return None
    r0 = _last_regime_start(te, ye)
    te, ye = te[r0:], ye[r0:]
    regime_start = float(te[0]) - p.envelope_window_s / 2 if r0 else run_start
    span = run_end - regime_start
    burn = max(p.burn_in_h * 3600.0, p.burn_in_frac * span)
    onset = None
    fit_from = regime_start + burn
    # Onset: a hinge fit inside the fit window; a leak that began after the burn-in is
    # then fitted from its onset only (the last regime).
    win = te >= fit_from
    hinge = _hinge(te[win] / 3600.0, ye[win], p.min_fit_points) if win.sum() else None
    if hinge is not None:
        i, sse_h, sse_l = hinge
        if sse_l > 0 and sse_h < (1 - p.onset_min_gain) * sse_l:
            onset = float(te[win][i])
            fit_from = onset
    sel = te >= fit_from
    if sel.sum() < p.min_fit_points:
        return None
    tf, yf = te[sel], ye[sel]
    slope = theil_sen(tf, yf, p.ci)
    if slope is None:
        return None
    tau = tau_for(s.metric, capacity, p)
    if not slope.low > tau:  # no creep: its quarters (four fits more) need not be known
        return None
    quarters = quarter_slopes(tf, yf)
    if not all(q > 0 for q in quarters):
        return None
    # A late one-off step (with a slow wave) can pass the quarter rule at a low tau; a creep
    # keeps its slope when the largest step is taken out.
    unstepped = theil_sen(tf, _without_step(yf), p.ci)
    if unstepped is None or unstepped.low <= tau:
        return None
    # The onset: where the whole regime turns from flat to the creep (a change point with its
    # interval), else the fit window's own hinge, else the line extended back.
    onset_ci = None
    fit_at_hinge = onset is not None  # the sentence's "since": where the fit starts
    warm = _warmed_up(te, ye)
    upto = (te <= tf[-1]) & (te >= warm)
    # fitted on the readings themselves, not the envelope: a sawtooth sampled every few minutes
    # leaves a few block minima per hour, each a draw of the sawtooth; all the readings
    # average it out (its mean is the same before and after the onset)
    raw = (s.t >= max(warm, regime_start)) & (s.t <= tf[-1])
    cp = change_point(s.t[raw], s.v[raw], p.min_fit_points, p.ci)
    # flat before it: judged on the envelope (what is retained), a block's start for its time
    half = p.envelope_window_s / 2
    if cp is not None and _flat_before(te[upto] - half, ye[upto], cp[0], slope.per_hour):
        onset, onset_ci = cp[0], [max(regime_start, cp[1]), cp[2]]
    onset_method = "change point" if onset is not None else "line extended back"
    if onset is None:
        onset = _extend_back(te, ye, tf, yf, slope.per_hour, p.envelope_window_s)
    last = float(np.median(yf[-3:]))
    growth = slope.per_hour * (tf[-1] - tf[0]) / 3600.0
    hte = (capacity - last) / slope.per_hour if capacity and capacity > last else None
    if capacity and capacity <= last:
        hte = 0.0
    severity = "fail"
    if hte is not None and hte >= profile.required_runtime_h:
        severity = "warn"
    severity = profile.cap("memory_creep", severity)
    scale = 1e6
    exhausted_at = None if hte is None else float(s.end) + hte * 3600.0
    code = "memory_creep.capacity_unknown" if hte is None else (
        "memory_creep.runs_out_within_required" if hte < profile.required_runtime_h
        else "memory_creep.runs_out_beyond_required")
    values = {
        "metric": s.metric, "slope_mb_per_h": slope.per_hour / scale, "slope_low_mb_per_h": slope.low / scale,
        "slope_high_mb_per_h": slope.high / scale, "change_point": fit_at_hinge,
        "growth_mb": growth / scale, "hours_to_exhaustion_h": hte, "required_h": profile.required_runtime_h,
        "exhausted_at": exhausted_at,
    }
    summary = say(code, values)
    return Finding(
        kind="memory_creep",
        device=s.device,
        metric=s.metric,
        start=float(tf[0]),
        end=float(s.end),
        severity=severity,
        summary=summary,
        code=code,
        values=values,
        onset=onset,
        slope_per_hour=slope.per_hour,
        details={
            "slope_ci90": [slope.low, slope.high],
            "tau_per_hour": tau,
            "quarter_slopes_per_hour": quarters,
            "fit_window": [float(tf[0]), float(tf[-1])],
            "burn_in_h": burn / 3600.0,
            "envelope_window_s": p.envelope_window_s,
            "growth": growth,
            "capacity": capacity,
            "hours_to_exhaustion": hte,
            "exhausted_at": exhausted_at,
            "required_runtime_h": profile.required_runtime_h,
            "onset_method": onset_method,
            "onset_ci90": onset_ci,
            "regime_start": regime_start,
            "method": "Theil-Sen on block-minimum envelope, burn-in, quarter rule",
            "version": DETECTOR_VERSION,
        },
    )


# --------------------------------------------------------------------------- across restarts


def restart_windows(profile: Profile) -> list[tuple[float, float]]:
    """The run's restarts as the events gave them (phase windows named ``restart``)."""
    return sorted((float(a), float(b)) for ph in profile.phases if ph.name == "restart" for a, b in ph.windows)


def drops(t: np.ndarray, y: np.ndarray, width: float, frac: float) -> list[tuple[float, float]]:
    """Restarts seen in the memory itself: the windows (``width`` wide, around ``t``) whose
    minimum ``y`` falls below ``frac`` of the windows around them (the process freed its
    memory), those that touch merged. Gaps (NaN) are left out."""
    from scipy.ndimage import median_filter

    ok = np.isfinite(y)
    tv, yv = t[ok], y[ok]
    if yv.size < 7:
        return []
    low = yv < frac * median_filter(yv, size=13, mode="nearest")
    out: list[tuple[float, float]] = []
    for i in np.flatnonzero(low):
        a, b = float(tv[i]) - width / 2, float(tv[i]) + width / 2
        if out and a <= out[-1][1] + 1e-6:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _trace_restarts(s: Series, p: MemoryParams, origin: float, blocks: Blocks | None = None
                    ) -> list[tuple[float, float]]:
    """Restarts seen in one series' block minima (``drops``)."""
    te, ye, _ = blocks if blocks is not None else blocks_of(s, p, origin)
    return drops(te, ye, p.envelope_window_s, p.restart_drop_frac)


def pooled_sen(parts: list[tuple[np.ndarray, np.ndarray]], ci: float) -> tuple[float, float, float] | None:
    """Sen's slope (per hour) over the pairs within each part, and its CI from the summed
    Kendall variances (no ties correction: envelope minima of real memory rarely tie)."""
    from soak.analysis._dist import norm_ppf

    slopes = []
    var = 0.0
    for t, y in parts:
        n = t.size
        if n < 2:
            continue
        x = t / 3600.0
        i, j = np.triu_indices(n, 1)
        dx = x[j] - x[i]
        ok = dx > 0
        slopes.append((y[j] - y[i])[ok] / dx[ok])
        var += n * (n - 1) * (2 * n + 5) / 18.0
    if not slopes:
        return None
    allp = np.sort(np.concatenate(slopes))
    m = allp.size
    if m < 3:
        return None
    c = norm_ppf(0.5 + ci / 2) * np.sqrt(var)
    lo = int(np.clip(np.floor((m - c) / 2.0), 0, m - 1))
    hi = int(np.clip(np.ceil((m + c) / 2.0), 0, m - 1))
    return float(np.median(allp)), float(allp[lo]), float(allp[hi])


def runs_between(te: np.ndarray, ye: np.ndarray, cuts: list[tuple[float, float]], start: float, end: float,
          p: MemoryParams) -> list[tuple[float, float, np.ndarray, np.ndarray]]:
    """(run start, run end, envelope after the run's burn-in) of each run between restarts."""
    edges = [start]
    for a, b in cuts:
        edges += [a, b]
    edges.append(end)
    out = []
    for a, b in zip(edges[::2], edges[1::2], strict=True):
        if b <= a:
            continue
        burn = max(p.burn_in_h * 3600.0, p.burn_in_frac * (b - a))
        sel = (te >= a + burn) & (te < b)
        out.append((a, b, te[sel], ye[sel]))
    return out


def restart_runs(s: Series, p: MemoryParams, run_start: float, restarts: list[tuple[float, float]],
                 blocks: Blocks | None = None,
                 ) -> tuple[list[tuple[float, float]], list[tuple[float, float, np.ndarray, np.ndarray]]] | None:
    """(restarts, runs between them with enough envelope after their burn-in) of a series
    restarted into ``segments_min`` runs or more; None otherwise."""
    blocks = blocks if blocks is not None else blocks_of(s, p, run_start)
    cuts = [(a, b) for a, b in restarts if b > s.start and a < s.end] or _trace_restarts(s, p, run_start, blocks)
    if len(cuts) + 1 < p.segments_min:
        return None
    te, ye = envelope(s, p, run_start, blocks)
    runs = [r for r in runs_between(te, ye, cuts, max(run_start, s.start), s.end + 1.0, p)
            if r[2].size >= p.segment_min_points]
    return (cuts, runs) if len(runs) >= p.segments_min else None


def across_restarts(s: Series, profile: Profile, run_start: float, capacity: float | None,
                    restarts: list[tuple[float, float]],
                    seen: tuple[list[tuple[float, float]], list[Any]] | None = None) -> Finding | None:
    """A creep every run between restarts shares (see the module's method, step 6)."""
    p = profile.memory
    seen = seen or restart_runs(s, p, run_start, restarts)
    if seen is None:
        return None
    cuts, runs = seen
    parts = [(t, y) for _, _, t, y in runs]
    pooled = pooled_sen(parts, p.ci)
    tau = tau_for(s.metric, capacity, p)
    if pooled is None or pooled[1] <= tau:
        return None
    own = [theil_sen(t, y, p.ci) for t, y in parts]
    rising = sum(1 for o in own if o is not None and o.per_hour > 0)
    if rising < p.segments_rising_share * len(runs):
        return None
    # both halves of the runs climb: a warm-up that levels off within each run is no leak
    halves = [pooled_sen([(t[:k], y[:k]) for t, y in parts if (k := t.size // 2) >= 2], p.ci),
              pooled_sen([(t[t.size // 2:], y[t.size // 2:]) for t, y in parts], p.ci)]
    if any(h is None or h[0] <= tau for h in halves):
        return None
    slope, low, high = pooled
    # how far each run got: its level at the end above its level at the start, both from the
    # line through its own envelope at the pooled slope
    grown, hours, bases = [], [], []
    for a, b, t, y in runs:
        base = float(np.median(y - slope * (t - a) / 3600.0))
        top = float(np.median(y[-3:]))
        bases.append(base)
        grown.append(top - base)
        hours.append((min(b, s.end) - a) / 3600.0)
    base = float(np.median(bases))
    hte = (capacity - base) / slope if capacity and capacity > base else (0.0 if capacity else None)
    severity = "fail"
    if hte is not None and hte >= profile.required_runtime_h:
        severity = "warn"
    severity = profile.cap("memory_creep", severity)
    code = "memory_creep.restarts.capacity_unknown" if hte is None else (
        "memory_creep.restarts.runs_out_within_required" if hte < profile.required_runtime_h
        else "memory_creep.restarts.runs_out_beyond_required")
    scale = 1e6
    values = {
        "metric": s.metric, "slope_mb_per_h": slope / scale, "slope_low_mb_per_h": low / scale,
        "slope_high_mb_per_h": high / scale, "segments": len(runs), "rising": rising,
        "growth_min_mb": min(grown) / scale, "growth_max_mb": max(grown) / scale,
        "hours_min_h": min(hours), "hours_max_h": max(hours),
        "hours_to_exhaustion_h": hte, "required_h": profile.required_runtime_h,
    }
    first = float(runs[0][2][0])
    return Finding(
        kind="memory_creep",
        device=s.device,
        metric=s.metric,
        start=first,
        end=float(s.end),
        severity=severity,
        summary=say(code, values),
        code=code,
        values=values,
        onset=float(runs[0][0]),
        slope_per_hour=slope,
        details={
            "slope_ci90": [low, high],
            "tau_per_hour": tau,
            "segments": [{"start": a, "end": min(b, s.end), "hours": h, "growth": g,
                          "slope_per_hour": None if o is None else o.per_hour}
                         for (a, b, _, _), h, g, o in zip(runs, hours, grown, own, strict=True)],
            "half_slopes_per_hour": [halves[0][0], halves[1][0]],  # type: ignore[index]
            "restarts_from": "events" if any(b > s.start and a < s.end for a, b in restarts) else "trace",
            "restarts": [list(c) for c in cuts],
            "envelope_window_s": p.envelope_window_s,
            "capacity": capacity,
            "baseline": base,
            "hours_to_exhaustion": hte,
            "required_runtime_h": profile.required_runtime_h,
            "onset_method": "first run between restarts",
            "method": "Sen's slope pooled over the runs between restarts, burn-in per run, halves rule",
            "version": DETECTOR_VERSION,
        },
    )
