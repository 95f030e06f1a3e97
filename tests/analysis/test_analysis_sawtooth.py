"""Memory creep across restarts: a leak every restart resets (a sawtooth) is named on the
leaking node, with its rate, its runs and how far each got; a healthy job restarted as
often stays quiet; the last regime's detector keeps its results where runs are few."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import theilslopes

from soak.analysis import analyze, memory
from soak.analysis.profile import Profile
from soak.analysis.synth import T0
from soak.analysis.synth_sawtooth import SawtoothHall, generate
from soak.analysis.trace import Series

pytestmark = pytest.mark.compute  # pyproject.toml

# 8 nodes (two chip models, four nodes each) x 4 chips, 72 h at 60 s: small enough to test
SMALL = {"nodes": 8, "chips": 4, "dt_s": 60.0}


def _found(h: SawtoothHall):
    trace, _ = generate(h)
    return [f for f in analyze(trace, phases=h.phases).findings if f.severity != "info"]


@pytest.mark.slow  # a 32-chip hall of 72 h analysed: seconds each
@pytest.mark.parametrize("events", [True, False])
def test_a_leak_each_restart_resets_is_named_on_its_node_with_rate_runs_and_growth(events):
    h = SawtoothHall("leak", seed=7, every_h=(3.0, 12.0), leak_node="n01", leak_mb_per_h=20.0, events=events,
                     **SMALL)
    found = _found(h)
    creep = [f for f in found if f.kind == "memory_creep"]
    assert {f.node for f in found} == {"n01"}, [f.summary for f in found]
    # every chip of the node leaks alike: one finding of the node, naming its chips
    assert len(creep) == 1 and creep[0].device is None and creep[0].code.startswith("memory_creep.restarts.")
    assert creep[0].code.endswith(".shared") and creep[0].values["shared_chips"] == 4
    assert set(creep[0].details["members"]) == {f"n01/npu0-{c}" for c in range(4)}
    for f in creep:
        assert f.values["slope_mb_per_h"] == pytest.approx(20.0, rel=0.10)
        assert f.values["slope_low_mb_per_h"] > 6.9  # tau on a 64 GiB chip
        # every run the trace has is one of the finding's (the short last one may lack points)
        assert h.segments - 1 <= f.values["segments"] <= h.segments
        assert f.details["restarts_from"] == ("events" if events else "trace")
        # how far each run got, read back from the trace: its level before the restart
        s = generate(h)[0].get(f.details["worst_details_of"], "hbm_used_bytes")
        for seg in f.details["segments"]:
            inside = (s.t >= seg["start"] + 1800.0) & (s.t < seg["end"])
            env_first = np.min(s.v[inside][:20])
            env_last = np.min(s.v[inside][-20:])
            hours = (s.t[inside][-10] - s.t[inside][10]) / 3600.0
            assert seg["growth"] >= env_last - env_first - 60e6
            assert seg["growth"] == pytest.approx(20e6 * seg["hours"], rel=0.25, abs=30e6), (seg, hours)
        assert "runs between restarts" in f.summary and f"{f.values['segments']} runs" in f.summary
    node = [f for f in found if f.code == "outlier.node.restarts.hbm_used_bytes"]
    assert len(node) == 1 and node[0].node == "n01" and node[0].device is None
    assert node[0].values["deviation_mb_per_h"] == pytest.approx(20.0, rel=0.10)


@pytest.mark.slow  # a 32-chip hall of 72 h analysed: seconds each
@pytest.mark.parametrize("every_h,wave,events", [((3.0, 4.0), True, False), ((3.0, 12.0), False, True),
                                                 ((24.0, 30.0), True, True)])
def test_a_healthy_job_restarted_as_often_stays_quiet(every_h, wave, events):
    h = SawtoothHall("healthy", seed=11, every_h=every_h, wave=wave, events=events, **SMALL)
    assert h.segments >= 3
    found = _found(h)
    if events:
        assert found == [], [f.summary for f in found]
    else:
        # without the run's events the restarts' idle minutes, on every chip at once, are
        # named as what they are; the memory is not
        assert all(f.code.startswith("utilization_dropouts.global") for f in found), [f.summary for f in found]


def test_a_warm_up_that_levels_off_in_every_run_is_no_leak():
    """Each run's memory rises for hours and levels off (a cache filling): its slopes are
    positive in every run, but the second halves of the runs are flat."""
    t = T0 + np.arange(0.0, 72 * 3600.0, 60.0)
    starts = T0 + np.arange(0.0, 72 * 3600.0, 8 * 3600.0)
    run = np.searchsorted(starts, t, side="right") - 1
    since = t - starts[run]
    rng = np.random.default_rng(3)
    v = 30e9 + 400e6 * (1 - np.exp(-since / 5400.0)) + rng.normal(0, 2e6, t.size)
    v[since < 120] = 0.5e9
    s = Series("npu0-0", "hbm_used_bytes", t, v)
    p = Profile.default()
    assert memory.analyse_series(s, p, T0, float(t[-1]), 64 * 2**30) is None
    assert memory.across_restarts(s, p, T0, 64 * 2**30, []) is None
    # the same runs with a leak in them: named
    leak = Series("npu0-0", "hbm_used_bytes", t, v + np.where(since >= 120, 30e6 * since / 3600.0, 0.0))
    f = memory.across_restarts(leak, p, T0, 64 * 2**30, [])
    assert f is not None and f.values["segments"] == 9
    # the warm-up's tail after each run's burn-in adds to the rate (about 10 MB/h here)
    assert 30.0 <= f.values["slope_mb_per_h"] <= 45.0


def test_two_runs_are_left_to_the_last_regime():
    t = T0 + np.arange(0.0, 48 * 3600.0, 60.0)
    since = np.where(t < T0 + 24 * 3600.0, t - T0, t - T0 - 24 * 3600.0)
    v = 30e9 + 40e6 * since / 3600.0
    v[(since < 120) & (t > T0 + 3600.0)] = 0.5e9
    s = Series("npu0-0", "hbm_used_bytes", t, v)
    assert memory.across_restarts(s, Profile.default(), T0, 64 * 2**30, []) is None


def test_pooled_sen_is_theil_sen_on_one_run_and_pools_within_runs_only():
    rng = np.random.default_rng(5)
    t = np.arange(0.0, 40 * 600.0, 600.0)
    y = 3.0 * t / 3600.0 + rng.normal(0, 1.0, t.size)
    slope, lo, hi = memory.pooled_sen([(t, y)], 0.90)
    ref = theilslopes(y, t / 3600.0, alpha=0.90)
    assert slope == pytest.approx(ref[0]) and lo == pytest.approx(ref[2], rel=0.02) and hi == pytest.approx(
        ref[3], rel=0.02)
    # runs at other levels: the pairs across them (a restart's drop) are not slopes
    parts = [(t, 3.0 * t / 3600.0 + 100.0 * k + rng.normal(0, 1.0, t.size)) for k in range(4)]
    slope4, lo4, hi4 = memory.pooled_sen(parts, 0.90)
    assert slope4 == pytest.approx(3.0, rel=0.05) and lo4 < 3.0 < hi4 and hi4 - lo4 < hi - lo
