"""Communication timeouts: counters that rise, and fatal counters that move at all.

Counters reset when a process restarts, so increments are taken like Prometheus
``rate()``: a decrease is a reset and the new value is the increment since it.

* **Rising rate** (``rate_counters``, default ``comm_timeouts_total``): compare the last
  third of the run with the first third by the exact conditional binomial test,
  ``binomtest(k_last, k_first + k_last, p = T_last / (T_first + T_last), "greater")``.
  A finding needs p < alpha / number of counters tested, a rate ratio above ``min_ratio``
  and at least ``min_count`` events in the last third: significance alone is not an alarm.
* **Fatal counters** (``fatal_counters``): every increment is a finding of its own.
"""

from __future__ import annotations

import numpy as np

from soak.analysis.messages import say
from soak.analysis.model import Finding
from soak.analysis.profile import Profile
from soak.analysis.trace import Series, Trace

DETECTOR_VERSION = "comm_timeouts/1.0"


def increments(s: Series) -> tuple[np.ndarray, np.ndarray]:
    """(time, increment) of each change; a decrease counts as a reset to 0 first."""
    d = np.diff(s.v)
    inc = np.where(d < 0, s.v[1:], d)
    nz = inc > 0
    return s.t[1:][nz], inc[nz]


def detect(trace: Trace, profile: Profile, run_start: float, run_end: float) -> list[Finding]:
    p = profile.comm
    out: list[Finding] = []
    rate_series = [s for m in p.rate_counters for s in trace.series(m)]
    n_tests = max(1, len(rate_series))
    for s in rate_series:
        if s.t.size < 3:
            continue
        t_inc, inc = increments(s)
        total = float(inc.sum())
        if total == 0:
            continue
        t0, t1 = s.start, s.end
        third = (t1 - t0) / 3.0
        if third <= 0:
            continue
        k_first = int(round(inc[t_inc < t0 + third].sum()))
        k_last = int(round(inc[t_inc >= t1 - third].sum()))
        if k_last < p.min_count:
            continue
        from soak.analysis._dist import binomtest_greater

        pv = binomtest_greater(k_last, k_first + k_last, 0.5)
        ratio = (k_last / third) / (k_first / third) if k_first else float("inf")
        if pv >= p.alpha / n_tests or ratio <= p.min_ratio:
            continue
        first_seen = float(t_inc[0])
        values = {"metric": s.metric, "last_third_count": k_last, "first_third_count": k_first, "ratio": ratio,
                  "p_value": pv, "total": total}
        out.append(
            Finding(
                kind="comm_timeouts",
                device=s.device,
                metric=s.metric,
                start=first_seen,
                end=float(t_inc[-1]),
                severity=profile.cap("comm_timeouts", "fail"),
                summary=say("comm_timeouts.rising", values),
                code="comm_timeouts.rising",
                values=values,
                onset=first_seen,
                count=int(round(total)),
                details={
                    "total": total,
                    "first_rate_per_h": k_first / third * 3600.0,
                    "last_rate_per_h": k_last / third * 3600.0,
                    "ratio": ratio,
                    "p_value": pv,
                    "alpha_per_test": p.alpha / n_tests,
                    "method": "exact conditional binomial test, last vs first third",
                    "version": DETECTOR_VERSION,
                },
            )
        )
    for m in p.fatal_counters:
        for s in trace.series(m):
            t_inc, inc = increments(s)
            for t, k in zip(t_inc.tolist(), inc.tolist(), strict=True):
                out.append(
                    Finding(
                        kind="comm_timeouts",
                        device=s.device,
                        metric=m,
                        start=t,
                        end=t,
                        severity=profile.cap("comm_timeouts", "fail"),
                        summary=say("comm_timeouts.fatal", {"metric": m, "increment": k}),
                        code="comm_timeouts.fatal",
                        values={"metric": m, "increment": k},
                        onset=t,
                        count=int(round(k)),
                        details={"fatal": True, "version": DETECTOR_VERSION},
                    )
                )
    return out
