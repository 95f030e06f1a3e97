"""The few distribution functions the detectors test with, from ``scipy.special``.

Each gives the value its ``scipy.stats`` namesake gives, to the bit (the same Boost and
Cephes routines underneath; tests/analysis/test_analysis_stats.py compares them on grids
of arguments), for the arguments the detectors pass. Importing ``scipy.stats`` builds every
distribution's documentation at import time: half a second of a ``soak analyze`` that
needs four functions of it.
"""

from __future__ import annotations

from scipy.special import betainc, fdtri, gammaincinv, ndtri


def binom_sf(k: int, n: int, p: float) -> float:
    """``scipy.stats.binom.sf(k, n, p)``: P(X > k) for X ~ Binomial(n, p), integer ``k``,
    ``n`` >= 1, 0 <= ``p`` <= 1 (the regularized incomplete beta I_p(k + 1, n - k), which
    SciPy's binomial computes)."""
    if k < 0:
        return 1.0
    if k >= n:
        return 0.0
    return float(betainc(k + 1, n - k, p))


def binomtest_greater(k: int, n: int, p: float) -> float:
    """``scipy.stats.binomtest(k, n, p, alternative="greater").pvalue`` (1 <= k <= n)."""
    return min(1.0, binom_sf(k - 1, n, p))


def f_ppf(q: float, dfn: float, dfd: float) -> float:
    """``scipy.stats.f.ppf(q, dfn, dfd)`` for 0 < q < 1."""
    return float(fdtri(dfn, dfd, q))


def norm_ppf(q: float) -> float:
    """``scipy.stats.norm.ppf(q)`` for 0 < q < 1."""
    return float(ndtri(q))


def chi2_ppf(q: float, df: float) -> float:
    """``scipy.stats.chi2.ppf(q, df)`` for 0 < q < 1."""
    return float(2.0 * gammaincinv(df / 2.0, q))
