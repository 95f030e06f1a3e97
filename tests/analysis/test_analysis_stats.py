"""The shared statistics give the values of the library calls they stand in for, exactly:
the detectors' findings must not move when a per-series call becomes one call over all."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import theilslopes

from soak.analysis._stats import (
    block_reduce,
    block_reduce_many,
    median_of_counts,
    nanmedian_each_row,
    sen_slope,
)


def _series(rng: np.random.Generator, n: int, start: float) -> tuple[np.ndarray, np.ndarray]:
    t = start + np.cumsum(rng.choice([1.0, 1.0, 1.0, 7.0, 60.0], size=n))
    v = np.round(rng.normal(50.0, 5.0, size=n), 1)  # rounded: ties, as tools report them
    return t, v


@pytest.mark.parametrize("how", ["min", "max", "mean", "median"])
def test_block_reduce_many_is_block_reduce_of_each_series(how: str) -> None:
    rng = np.random.default_rng(3)
    ts, vs = [], []
    for k in range(40):
        n = int(rng.integers(0, 400)) if k % 7 else 0  # some series empty
        # series start inside the block where the one before ended: a block never spans two
        t, v = _series(rng, n, 1000.0 + 13.0 * k)
        if k == 5:
            v[3] = np.nan  # a NaN block: NaN, as np.median says
        ts.append(t)
        vs.append(v)
    got = block_reduce_many(ts, vs, 60.0, how, origin=990.0)
    assert len(got) == len(ts)
    for (t, v), (tc, y, n) in zip(zip(ts, vs, strict=True), got, strict=True):
        want = block_reduce(t, v, 60.0, how, origin=990.0)
        np.testing.assert_array_equal(tc, want[0])
        np.testing.assert_array_equal(y, want[1])  # bitwise, NaN where NaN
        np.testing.assert_array_equal(n, want[2])


def test_block_reduce_many_of_nothing() -> None:
    assert [x[0].size for x in block_reduce_many([np.empty(0)] * 2, [np.empty(0)] * 2, 60.0, "min", 0.0)] == [0, 0]


def test_block_median_is_numpys_median_of_each_block() -> None:
    rng = np.random.default_rng(8)
    t, v = _series(rng, 5000, 0.0)
    tc, y, n = block_reduce(t, v, 600.0, "median", origin=0.0)
    idx = np.floor(t / 600.0).astype(int)
    want = [np.median(v[idx == b]) for b in np.unique(idx)]
    np.testing.assert_array_equal(y, want)
    assert n.sum() == v.size and n.size > 2


@pytest.mark.parametrize("alpha", [None, 0.90, 0.95])
def test_sen_slope_is_scipys_theilslopes(alpha: float | None) -> None:
    rng = np.random.default_rng(11)
    for n in (3, 10, 57, 200):
        x = np.sort(rng.choice(np.arange(0.0, 3 * n), size=n))  # repeated times: pairs without a slope
        y = np.round(rng.normal(0.0, 1.0, size=n) + 0.01 * x, 2)
        med, lo, hi = sen_slope(x, y, alpha)
        with np.errstate(all="ignore"):
            ref = theilslopes(y, x, 0.95 if alpha is None else alpha)
        np.testing.assert_equal(med, ref.slope)  # NaN as NaN: no pair with two times
        if alpha is None:
            assert np.isnan(lo) and np.isnan(hi)
        else:
            np.testing.assert_equal((lo, hi), (ref.low_slope, ref.high_slope))


def test_nanmedian_each_row_is_numpys_nanmedian() -> None:
    rng = np.random.default_rng(5)
    mat = np.round(rng.normal(size=(60, 9)), 1)
    mat[rng.random(mat.shape) < 0.3] = np.nan
    mat[4] = np.nan  # a row with no value: NaN, without NumPy's warning
    mat[7, 2] = np.inf
    want = np.array([np.nanmedian(r) if np.isfinite(r).any() or np.isinf(r).any() else np.nan for r in mat])
    np.testing.assert_array_equal(nanmedian_each_row(mat), want)


def _dense_hinge(x: np.ndarray, y: np.ndarray, cs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The textbook fit of every candidate hinge, one row of h = max(0, x - c) each."""
    h = np.maximum(0.0, x[None, :] - cs[:, None])
    u = y - y.mean()
    hc = h - h.mean(axis=1, keepdims=True)
    b = (hc * u).sum(axis=1) / np.maximum((hc * hc).sum(axis=1), 1e-300)
    resid = u[None, :] - b[:, None] * hc
    return b, (resid * resid).sum(axis=1)


@pytest.mark.parametrize(("onset_h", "noise"), [(None, 20e6), (5.0, 20e6), (20.0, 20e6), (7.0, 0.0), (7.0, 1e3)])
def test_change_point_fits_every_hinge_as_the_dense_fit_does(onset_h: float | None, noise: float,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # noise 0: a simulated leak, a perfect line after its onset, whose residuals the sums
    # cannot tell from zero: the fits that decide are made reading by reading
    from soak.analysis import memory

    rng = np.random.default_rng(21)
    x = 1.7e9 + np.cumsum(rng.choice([60.0, 60.0, 61.0, 120.0], size=1500))  # epoch seconds, gaps
    hours = (x - x[0]) / 3600.0
    leak = 0.0 if onset_h is None else 100e6 * np.maximum(0.0, hours - onset_h)
    y = 40e9 + leak + rng.normal(0.0, noise, size=x.size)
    cs = np.linspace(x[2], x[-10], 400)
    if noise:
        b, sse = memory._hinge_fits(x, y - y.mean(), cs)
        b_ref, sse_ref = _dense_hinge(x, y, cs)
        np.testing.assert_allclose(b, b_ref, rtol=1e-7)
        np.testing.assert_allclose(sse, sse_ref, rtol=1e-7)
        assert int(np.argmin(sse)) == int(np.argmin(sse_ref))
    b_exact, sse_exact = memory._hinge_fits_exact(x, y - y.mean(), cs)
    b_ref, sse_ref = _dense_hinge(x, y, cs)
    assert b_exact.tolist() == b_ref.tolist() and sse_exact.tolist() == sse_ref.tolist()
    found = memory.change_point(x, y, 24)
    monkeypatch.setattr(memory, "_hinge_fits", lambda x, u, cs: _dense_hinge(x, u, cs))
    assert found == memory.change_point(x, y, 24)  # the same onset and interval, grid points both
    if onset_h is not None:
        c, lo, hi = found
        assert lo <= c <= hi
        assert abs((c - x[0]) / 3600.0 - onset_h) < 0.5


def test_median_of_counts_is_numpys_median() -> None:
    rng = np.random.default_rng(2)
    for size in (1, 2, 3, 10, 143, 144):
        n = rng.integers(0, 600, size=size)
        assert median_of_counts(n) == float(np.median(n))
        assert median_of_counts(n.astype(float) + 0.5) == float(np.median(n.astype(float) + 0.5))


def test_the_distribution_functions_are_scipy_stats_to_the_bit() -> None:
    from scipy import stats

    from soak.analysis import _dist

    for n in [*range(1, 60), 144, 1000, 5000]:
        for p in (0.0, 0.03, 0.1, 0.37, 0.5, 0.9, 1.0):
            for k in range(-1, min(n, 80) + 1):
                assert _dist.binom_sf(k, n, p) == stats.binom.sf(k, n, p), (k, n, p)
                if k >= 1:
                    assert _dist.binomtest_greater(k, n, p) == stats.binomtest(k, n, p, "greater").pvalue
    for q in (0.5, 0.8, 0.9, 0.95, 0.99, 0.999):
        assert _dist.norm_ppf(q) == stats.norm.ppf(q)
        for dfd in [*range(1, 200), 1000, 259197]:
            assert _dist.f_ppf(q, 1, dfd) == stats.f.ppf(q, 1, dfd), (q, dfd)
        for df in range(2, 400, 2):
            assert _dist.chi2_ppf(q, df) == stats.chi2.ppf(q, df), (q, df)


def test_soak_analyze_imports_no_scipy_stats(tmp_path) -> None:
    # its import builds every distribution's documentation: half a second of a small analysis
    import subprocess
    import sys

    from soak.analysis.synth import Fault, Scenario, generate

    trace, _ = generate(Scenario("s", hours=6, dt_s=10, n_devices=4, seed=3, checkpoint_every_s=None,
                                 faults=(Fault("memory_creep", "npu0-1", 0.0, 100e6),)))
    path = tmp_path / "t.csv"
    with open(path, "w") as f:
        f.write("timestamp,device,metric,value\n")
        for s in trace.series():
            for t, v in zip(s.t.tolist(), s.v.tolist(), strict=True):
                f.write(f"{t!r},{s.device},{s.metric},{v!r}\n")
    code = ("import sys, runpy; sys.argv = ['soak', 'analyze', sys.argv[1], '--format', 'json']\n"
            "try:\n    runpy.run_module('soak', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print('scipy.stats' in sys.modules, file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert '"verdict"' in out.stdout, out.stderr
    assert out.stderr.strip().splitlines()[-1] == "False", out.stderr


def _cusum_loop(x, base, delta, h, confirm_n, min_shift):  # noqa: ANN001, ANN202
    """The CUSUM as a loop, one block at a time (the detector's own before its screen)."""
    k, s, last_zero = delta / 2.0, 0.0, 0
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
            s, last_zero = 0.0, i + 1
    return None


def test_the_throughput_cusum_screen_gives_the_loops_answer() -> None:
    from soak.analysis.throughput import cusum_onset

    rng = np.random.default_rng(9)
    alarms = 0
    for case in range(600):
        n = int(rng.integers(0, 400))
        x = rng.normal(0.0, 0.02, size=n)
        if case % 3 == 0 and n > 20:  # a shift, sometimes too short to confirm
            at = int(rng.integers(0, n))
            x[at : at + int(rng.integers(1, 60))] += rng.choice([0.03, 0.08, 0.2])
        delta = float(rng.choice([0.02, 0.05]))
        args = (x, 0.0, delta, 5.0 * delta, int(rng.integers(3, 12)), 0.04)
        want = _cusum_loop(*args)
        assert cusum_onset(*args) == want, case
        alarms += want is not None
    assert 20 < alarms < 400  # both answers were put to the test
