"""Utilization dropouts: short idle episodes, their periodicity, and which chips share them.

An episode is ``util_pct < low_pct`` for at least ``min_duration_s``, with non-idle gaps of
at most ``merge_gap_s`` merged. Episodes as long as the hang threshold belong to the hang
detector. Episodes that match a declared phase (a periodic checkpoint/eval, or an explicit
window from the run's events) are *explained*: reported with severity ``info``.

The rest are tested for periodicity on the intervals between episode starts: period P is
their median, robust CV = 1.4826 MAD / P (intervals near 2P or 3P, where an event hid inside
another idle episode, within 10 %, are folded back onto P); periodic when there are at least
``min_events`` episodes, CV < ``max_cv``, at least ``min_share`` of intervals lie within
``share_tol`` x P, and that many intervals on the period would be rarer than ``max_p`` if the
drops were random (binomial test against a Poisson process at the same rate). A finding is
raised when the drops are periodic or when they idle the chip for more than
``max_idle_fraction`` of the time (with at least ``min_events`` episodes): a few random dips
a day are normal.
Drops that happen on (nearly) all chips at once point at a global stall (data loading,
I/O, a host-side pause) rather than at one chip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from soak.analysis._stats import episodes
from soak.analysis.messages import say
from soak.analysis.model import Finding
from soak.analysis.profile import Phase, Profile
from soak.analysis.trace import Trace

DETECTOR_VERSION = "utilization_dropouts/1.1"
METRIC = "util_pct"


@dataclass(frozen=True)
class Periodicity:
    period_s: float | None
    cv: float | None
    share: float | None
    onset: float | None
    p_value: float | None = None  # chance that random dips at this rate look as periodic


# Intervals near 2P or 3P (within this share of kP) are folded back onto P.
_FOLD_TOL = 0.1


def _on_period(r: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """For intervals ``r`` in units of the period: (folded intervals, lying within ``tol``)."""
    k = np.clip(np.round(r), 1, 3)
    hidden = (k > 1) & (np.abs(r - k) <= _FOLD_TOL * k)
    folded = np.where(hidden, r / k, r)
    return folded, np.abs(folded - 1.0) <= tol


def _chance_on_period(mean_over_p: float, tol: float) -> float:
    """Probability that one interval of a Poisson process (exponential intervals with the
    observed mean, in units of the period) lands on the period after folding."""
    hi = 3.0 * (1.0 + max(tol, _FOLD_TOL)) + 1.0
    edges = np.linspace(0.0, hi, 40_001)
    mid = 0.5 * (edges[:-1] + edges[1:])
    cdf = -np.expm1(-edges / mean_over_p)
    return float(np.diff(cdf)[_on_period(mid, tol)[1]].sum())


def periodicity(
    starts: np.ndarray, min_events: int, max_cv: float, tol: float, min_share: float, max_p: float = 1.0
) -> Periodicity:
    """Period of event start times from their intervals (None when not periodic).

    Judged on the intervals: robust CV below ``max_cv``, at least ``min_share`` of them
    within ``tol`` x P, and that share significant: under random (Poisson) dips at the same
    mean rate, the chance of at least as many intervals on the period (binomial tail) must
    be below ``max_p``. A handful of random dips otherwise often passes the first two rules
    by chance: with 10 dips, 6 of 9 intervals fall within +-25 % of their median (or of twice
    or three times it) in about 2 % of chips.
    """
    if starts.size < max(min_events, 3):
        return Periodicity(None, None, None, None)
    iv = np.diff(starts)
    p = float(np.median(iv))
    if p <= 0:
        return Periodicity(None, None, None, None)
    # An event hidden inside another idle episode (e.g. a checkpoint) leaves an interval of
    # 2P or 3P: fold such intervals back onto P before judging the spread.
    folded, near = _on_period(iv / p, tol)
    iv = folded * p
    cv = float(1.4826 * np.median(np.abs(iv - p)) / p)
    share = float(near.mean())
    if cv >= max_cv or share < min_share:
        return Periodicity(None, cv, share, None)
    from soak.analysis._dist import binom_sf

    q = _chance_on_period(float(np.mean(np.diff(starts))) / p, tol)
    p_value = binom_sf(int(near.sum()) - 1, near.size, q)
    if p_value >= max_p:
        return Periodicity(None, cv, share, None, p_value)
    # Onset of periodicity: the first episode followed by four more, each about one period
    # later (random dips in between do not break such a chain, unlike consecutive intervals;
    # a chain of random dips that long is very unlikely).
    onset = float(starts[0])
    for i, s0 in enumerate(starts.tolist()):
        t = s0
        ok = True
        for _ in range(4):
            nxt = None
            for m in (1, 2):  # one period on, or two when an event hid in a checkpoint
                j = np.searchsorted(starts, t + (m - tol) * p)
                if j < starts.size and starts[j] <= t + (m + tol) * p:
                    nxt = float(starts[j])
                    break
            if nxt is None:
                ok = False
                break
            t = nxt
        if ok:
            onset = float(starts[i])
            break
    return Periodicity(p, cv, share, onset, p_value)


def explain_by_phase(eps: list[tuple[float, float]], phases: tuple[Phase, ...]) -> list[str | None]:
    """Name of the phase explaining each episode, or None."""
    out: list[str | None] = [None] * len(eps)
    if not eps:
        return out
    starts = np.array([e[0] for e in eps])
    durs = np.array([e[1] - e[0] for e in eps])
    for ph in phases:
        for i, (s, e) in enumerate(eps):
            if out[i] is None and any(s <= we + 30 and e >= ws - 30 for ws, we in ph.windows):
                out[i] = ph.name
        if ph.every_s is None or ph.duration_s is None:
            continue
        every, dur = ph.every_s, ph.duration_s
        short = durs <= 2 * dur + 30
        if short.sum() < 2:
            continue
        # The phase's offset is unknown: take the most crowded bin of start mod every.
        bin_w = max(dur, 0.02 * every, 30.0)
        phase_pos = np.mod(starts[short], every)
        nb = max(1, int(np.ceil(every / bin_w)))
        # Episodes whose length is close to the declared one weigh more, so a foreign
        # periodic stall with a commensurate period does not capture the phase.
        w = 1.0 / (1.0 + np.abs(durs[short] - dur) / dur)
        hist = np.bincount((phase_pos // bin_w).astype(int) % nb, weights=w, minlength=nb)
        best = int(np.argmax(hist + 0.5 * (np.roll(hist, 1) + np.roll(hist, -1))))
        # Refine: median position of the episodes near the best bin (circular distance).
        rough = (best + 0.5) * bin_w
        near = np.abs((phase_pos - rough + every / 2) % every - every / 2) <= bin_w
        offs = (phase_pos[near] - rough + every / 2) % every - every / 2
        centre = (rough + float(np.median(offs))) % every
        tol = max(30.0, 0.5 * dur)
        dist = np.abs((np.mod(starts - centre, every) + every / 2) % every - every / 2)
        for i in np.flatnonzero(short & (dist <= tol)):
            if out[i] is None:
                out[i] = ph.name
    return out


def detect(
    trace: Trace, profile: Profile, run_start: float, run_end: float
) -> list[Finding]:
    p = profile.utilization
    hang_s = profile.hang.threshold_s
    per_dev: dict[str, list[tuple[float, float]]] = {}
    spans: dict[str, float] = {}
    explained: dict[str, list[tuple[tuple[float, float], str]]] = {}
    for s in trace.series(METRIC):
        dt = s.median_dt_s() or 1.0
        eps = episodes(s.t, s.v < p.low_pct, dt, p.merge_gap_s, p.min_duration_s)
        eps = [e for e in eps if e[1] - e[0] < max(hang_s, 3.0 * dt)]
        names = explain_by_phase(eps, profile.phases)
        per_dev[s.device] = [e for e, n in zip(eps, names, strict=True) if n is None]
        explained[s.device] = [(e, n) for e, n in zip(eps, names, strict=True) if n is not None]
        spans[s.device] = max(s.end - s.start + dt, dt)
    n_dev = len(per_dev)
    findings: list[Finding] = []
    for dev, eps in per_dev.items():
        findings.extend(_explained_findings(dev, explained[dev], profile))
        if not eps:
            continue
        starts = np.array([e[0] for e in eps])
        durs = np.array([e[1] - e[0] for e in eps])
        per = periodicity(starts, p.min_events, p.max_cv, p.share_tol, p.min_share, p.max_p)
        idle = float(durs.sum() / spans[dev])
        if per.period_s is None and (idle <= p.max_idle_fraction or len(eps) < p.min_events):
            continue
        together = _shared_share(eps, per_dev, dev) if n_dev > 1 else 0.0
        scope = "global" if n_dev > 1 and together >= p.global_min_share else "device"
        code = f"utilization_dropouts.{scope}"
        values = {
            "count": len(eps), "low_pct": p.low_pct, "periodic": bool(per.period_s), "period_s": per.period_s,
            "cv": per.cv, "mean_duration_s": float(durs.mean()), "idle_fraction": idle,
            "shared_fraction": together,
        }
        summary = say(code, values)
        findings.append(
            Finding(
                kind="utilization_dropouts",
                device=dev,
                metric=METRIC,
                start=float(starts[0]),
                end=float(eps[-1][1]),
                severity=profile.cap("utilization_dropouts", "fail"),
                summary=summary,
                code=code,
                values=values,
                onset=per.onset if per.onset is not None else float(starts[0]),
                period_s=per.period_s,
                count=len(eps),
                details={
                    "idle_fraction": idle,
                    "mean_duration_s": float(durs.mean()),
                    "max_duration_s": float(durs.max()),
                    "robust_cv": per.cv,
                    "share_in_period": per.share,
                    "p_value": per.p_value,
                    "scope": scope,
                    "shared_with_other_devices": together,
                    "first_seen": float(starts[0]),
                    "onset_of_periodicity": per.onset,
                    "method": "run-length episodes; period from inter-episode intervals",
                    "version": DETECTOR_VERSION,
                },
            )
        )
    return findings


def _explained_findings(
    dev: str, items: list[tuple[tuple[float, float], str]], profile: Profile
) -> list[Finding]:
    out = []
    for name in sorted({n for _, n in items}):
        eps = [e for e, n in items if n == name]
        starts = np.array([e[0] for e in eps])
        phase = next((ph for ph in profile.phases if ph.name == name), None)
        period = phase.every_s if phase is not None and phase.every_s else None
        if period is None and starts.size >= 3:
            period = float(np.median(np.diff(starts)))
        out.append(
            Finding(
                kind="utilization_dropouts",
                device=dev,
                metric=METRIC,
                start=float(starts[0]),
                end=float(eps[-1][1]),
                severity="info",
                summary=say("utilization_dropouts.explained", {"count": len(eps), "phase": name}),
                code="utilization_dropouts.explained",
                values={"count": len(eps), "phase": name, "period_s": period},
                onset=float(starts[0]),
                period_s=period,
                count=len(eps),
                explained_by=name,
                details={"version": DETECTOR_VERSION},
            )
        )
    return out


def _shared_share(
    eps: list[tuple[float, float]], per_dev: dict[str, list[tuple[float, float]]], dev: str
) -> float:
    """Mean share of the other devices that drop during each of this device's episodes."""
    others = [np.array(v) for d, v in per_dev.items() if d != dev]
    if not others:
        return 0.0
    shares = []
    for s, e in eps:
        hit = 0
        for o in others:
            if o.size and np.any((o[:, 0] <= e + 5) & (o[:, 1] >= s - 5)):
                hit += 1
        shares.append(hit / len(others))
    return float(np.mean(shares))
