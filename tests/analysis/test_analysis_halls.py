"""Faults a whole node shares, faults that come and go, and how soon each is named: on the
machine-hall traces (16 nodes x 8 chips, two chip models, rack inlet differences, the hall's
day-night cycle) and on the episode rule itself."""

from __future__ import annotations

import numpy as np
import pytest

from soak.analysis import analyze, recurring
from soak.analysis.model import PEER_KINDS
from soak.analysis.profile import PeersParams
from soak.analysis.synth import T0, Fault
from soak.analysis.synth_hall import Hall, generate

pytestmark = pytest.mark.compute  # pyproject.toml

ONSET_H = 6.05


def _peer_findings(hall: Hall, until_h: float | None = None):
    trace, _ = generate(hall)
    now = None if until_h is None else T0 + until_h * 3600.0
    if now is not None:
        trace = trace.until(now)
    res = analyze(trace, phases=hall.phases, now=now)
    return [f for f in res.findings if f.kind in PEER_KINDS and f.severity != "info"]


@pytest.mark.slow  # a 128-chip day analysed: seconds each
def test_a_healthy_hall_of_two_chip_models_with_its_day_night_cycle_has_no_finding():
    trace, _ = generate(Hall("healthy", seed=41, spread=2.0, day_night_c=4.0))
    res = analyze(trace, phases=Hall("healthy").phases)
    assert [f.summary for f in res.findings if f.severity != "info"] == []


@pytest.mark.slow  # a 128-chip day analysed: seconds each
def test_a_node_whose_chips_are_all_hotter_is_one_finding_naming_the_node_not_its_chips():
    # a failed fan tray: every chip of n09 7 C hotter at the same power. Its chips agree with
    # each other; the node is out of line with the other nodes of its chip model.
    (f,) = _peer_findings(Hall("hot-node", seed=42, faults=(Fault("outlier", "n09/*", ONSET_H, 7.0, "temp"),)))
    assert (f.code, f.node, f.device, f.metric) == ("outlier.node.temp_c", "n09", None, "temp_c")
    assert f.values["chips"] == 8 and f.values["scope"] == "cluster"
    assert 5.0 < f.deviation < 9.5
    # compared with the other nodes of its model (50 C), not with the hotter model (56 C)
    assert 46.0 < f.baseline < 53.0
    assert abs(f.onset - (T0 + ONSET_H * 3600.0)) <= 1200
    assert f.summary.startswith("node n09 (8 chips): temp_c +")


@pytest.mark.slow  # a 128-chip day analysed: seconds each
def test_a_node_slow_for_12_minutes_of_every_hour_is_found_with_its_period_share_and_cost():
    # 25 % slower outside the collectives for 12 min of every hour: no two-hour stretch, yet
    # under synchronous data parallelism it slows the whole job for a fifth of the time
    hall = Hall("recurring", seed=43, faults=(
        Fault("straggler", "n03/*", 0.0, 25.0, "recurring", params={"every_s": 3600.0, "duration_s": 720.0}),))
    (f,) = _peer_findings(hall)
    assert (f.code, f.node, f.device, f.kind) == ("straggler.node.episodes.compute_s", "n03", None, "straggler")
    v = f.values
    assert v["period_min"] == pytest.approx(60.0) and f.period_s == pytest.approx(3600.0)
    assert v["count"] >= 20 and 10 <= v["typical_min"] <= 20
    assert 15 <= v["share_pct"] <= 35  # 12 min of 60, to the 10-min bucket
    assert 20 < v["change_pct"] < 30 and f.severity == "fail"
    # the job's steps are slower in the episodes, and that costs a share of the run
    assert v["slowdown_pct"] > 10 and 1.0 < v["lost_pct"] < 10.0
    assert "every 60 min" in f.summary and "episodes" in f.summary


@pytest.mark.slow  # a 128-chip day analysed: seconds each
def test_a_large_fault_is_named_by_the_online_analysis_within_half_an_hour_and_a_small_one_is_not():
    # a chip 12 C hotter (twice the evaluation's floor): three buckets beyond twice the
    # limit name it long before the two-hour rule could; 6 C is left to the two-hour rule
    big = Hall("hot-chip", seed=44, faults=(Fault("outlier", "n12/npu0-3", ONSET_H, 12.0, "temp"),))
    (f,) = _peer_findings(big, until_h=ONSET_H + 0.5)
    assert (f.node, f.device, f.metric, f.details["rule"]) == ("n12", "npu0-3", "temp_c", "large")
    small = Hall("hot-chip", seed=44, faults=(Fault("outlier", "n12/npu0-3", ONSET_H, 6.0, "temp"),))
    assert _peer_findings(small, until_h=ONSET_H + 0.5) == []
    (g,) = _peer_findings(small)
    assert (g.node, g.device, g.details["rule"]) == ("n12", "npu0-3", "persistent")


P = PeersParams()
T = T0 + (np.arange(144) + 0.5) * P.bucket_s  # 24 h of 10-min buckets


def test_episodes_that_recur_every_hour_are_found_with_their_period():
    dev = np.zeros(T.size)
    dev[np.arange(3, T.size, 6)] = 0.2  # one bucket of every six, 20 % over a 5 % limit
    eps = recurring.find(T, dev, 1, np.log1p(0.05), P)
    assert eps is not None and eps.count == 24 and eps.period_s == pytest.approx(3600.0)
    assert eps.typical_s == P.bucket_s and eps.share == pytest.approx(24 / 144)


def test_a_day_night_swing_and_a_natural_offset_near_the_limit_are_no_episodes():
    limit = 4.5
    rng = np.random.default_rng(1)
    # a chip with its own daily cycle against its siblings': 6 C either way, once a day
    swing = 6.0 * np.sin(2 * np.pi * (T - T0) / 86400.0) + rng.normal(0, 0.3, T.size)
    assert recurring.find(T, swing, 1, limit, P) is None
    # a chip whose natural offset sits at the limit flickers across it all day
    flicker = limit + rng.normal(0, 0.4, T.size)
    assert recurring.find(T, flicker, 1, limit, P) is None


def test_one_or_two_short_episodes_are_not_recurring():
    dev = np.zeros(T.size)
    dev[[40, 41, 100]] = 9.0
    assert recurring.find(T, dev, 1, 4.5, P) is None
    dev[130] = 9.0  # a third one: three episodes covering 3 % of the run, not periodic
    assert recurring.find(T, dev, 1, 4.5, P) is None
    dev[[10, 20, 60]] = 9.0  # six: many enough
    eps = recurring.find(T, dev, 1, 4.5, P)
    assert eps is not None and eps.count == 6 and eps.period_s is None
