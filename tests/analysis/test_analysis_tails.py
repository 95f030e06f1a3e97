"""Tails compared with peers (ranks that stall briefly but often, the medians unchanged) and
a whole node's temperature judged by a node's own floor: on machine-hall traces (16 nodes x
8 chips, 24 h at 30 s, two chip models, rack inlet differences, the hall's day-night cycle,
every node's natural OS jitter)."""

from __future__ import annotations

import numpy as np
import pytest

from soak.analysis import peers, tails
from soak.analysis.buckets import StoredBuckets, TraceBuckets, grid_for, node_rows
from soak.analysis.messages import say
from soak.analysis.profile import Profile
from soak.analysis.synth import T0, Fault
from soak.analysis.synth_hall import Hall, generate
from soak.analysis.trace import Trace
from soak.report.i18n import CHINESE
from soak.store import Store

ONSET_H = 6.05


def _tail_findings(hall: Hall):
    trace, _ = generate(hall)
    profile = Profile.default().with_phases(tuple(hall.phases))
    grid = grid_for(profile, trace.start, trace.end)
    return peers.compare_tails(TraceBuckets(trace, grid), profile, trace.start)


def _temperature_findings(hall: Hall):
    """The peer comparison of the chip metrics that temperature is judged with (power, for
    comparable power; utilization, for idle buckets; capacity, for the chip model)."""
    trace, _ = generate(hall)
    keep = ("temp_c", "power_w", "util_pct", "hbm_total_bytes")
    arrays = {(*trace.place(s.device), s.metric): (s.t, s.v) for s in trace.series() if s.metric in keep}
    chips = Trace.from_arrays(arrays)
    return [f for f in peers.detect(chips, Profile.default().with_phases(tuple(hall.phases)),
                                    chips.start, chips.end) if f.metric == "temp_c"]


def test_block_tails_counts_the_readings_beyond_one_and_a_half_times_the_bucket_median():
    t = np.arange(40.0)  # two 20-s blocks
    v = np.ones(40)
    v[[3, 7]] = (2.0, 3.0)  # block 0: 2 of 20 readings stall, sizes 2x and 3x
    v[25] = 1.4  # block 1: 1.4x is no stall
    tc, share, n = tails.block_tails(t, v, 20.0, tails.SHARE, 0.0)
    assert tc.tolist() == [10.0, 30.0] and share.tolist() == [0.1, 0.0] and n.tolist() == [20, 20]
    tc, size, n = tails.block_tails(t, v, 20.0, tails.SIZE, 0.0)
    assert tc.tolist() == [10.0] and size.tolist() == [2.5] and n.tolist() == [20]


def test_a_node_whose_ranks_stall_in_7_percent_of_readings_is_named_with_share_size_and_cost():
    # n09's ranks 1.9x slower outside the collectives in 7 % of the readings, all together:
    # the bucket medians are unchanged, yet every rank waits for the slowest
    hall = Hall("stalls", seed=42, faults=(Fault("straggler", "n09/*", ONSET_H, 7.0, "stalls", params={"x": 1.9}),))
    (f,) = _tail_findings(hall)
    assert (f.code, f.kind, f.node, f.device, f.metric) == ("straggler.node.tail.compute_s", "straggler", "n09",
                                                           None, "compute_s")
    v = f.values
    assert v["ranks"] == 8 and f.severity == "warn"
    assert 5.5 < v["share_pct"] < 8.5 and v["peers_share_pct"] < 1.0
    assert 1.8 < v["stall_x"] < 2.0
    # the job's step: 0.20 s compute + 0.06 s all-reduce (at its slowest rank's pace), 0.18 s more in a stall
    assert 0.16 < v["step_in_stalls_s"] - v["step_outside_s"] < 0.20
    assert 3.5 < v["cost_pct"] < 6.0  # 7 % x 0.18 s / 0.27 s
    assert abs(f.onset - (T0 + ONSET_H * 3600.0)) <= 2.5 * 3600
    assert f.summary.startswith("node n09 (8 ranks): compute_s stalls in ")
    assert "more job time" in f.summary
    assert "作业时间多" in say(f.code, v, CHINESE)


def test_one_rank_that_stalls_is_named_against_its_node_and_no_other_rank_or_node_is():
    # a smaller hall: 4 nodes suffice to compare a rank with its node's other ranks
    hall = Hall("rank-stalls", nodes=4, hours=12.0, seed=43,
                faults=(Fault("straggler", "n02/npu0-5", 2.0, 10.0, "stalls", params={"x": 2.5}),))
    (f,) = _tail_findings(hall)
    assert (f.code, f.node, f.device) == ("straggler.tail.compute_s", "n02", "npu0-5")
    assert 8.0 < f.values["share_pct"] < 12.0 and 2.3 < f.values["stall_x"] < 2.7


@pytest.mark.parametrize("seed,spread,day_night_c", [(44, 2.0, 4.0), (45, 1.0, 2.5)])
def test_a_healthy_hall_with_natural_jitter_has_no_tail_finding(seed, spread, day_night_c):
    # two chip models, a day-night cycle, the natural node spread and every node's own OS
    # jitter (up to 0.5 % of its readings stall): no node or rank is out of line
    hall = Hall("healthy", seed=seed, spread=spread, day_night_c=day_night_c)
    assert _tail_findings(hall) == []


def test_stalls_costing_a_fifth_of_the_job_time_fail():
    hall = Hall("big-stalls", nodes=4, hours=12.0, seed=46,
                faults=(Fault("straggler", "n01/*", 2.0, 20.0, "stalls", params={"x": 3.0}),))
    (f,) = _tail_findings(hall)
    assert f.values["cost_pct"] >= 20.0 and f.severity == "fail"


@pytest.mark.parametrize("seed,hot_c", [(9600, 5.5), (47, 7.0)])
def test_a_whole_node_hotter_just_above_the_node_floor_and_well_above_it_is_named(seed, hot_c):
    # the node floor (5 C): healthy nodes differ by their racks and inlets by several degrees.
    # The other nodes' spread of medians sets the limit above it (node_k_sigma x it): here
    # the floor holds
    hall = Hall("hot-node", seed=seed, faults=(Fault("outlier", "n09/*", ONSET_H, hot_c, "temp"),))
    (f,) = _temperature_findings(hall)
    assert (f.code, f.node, f.device) == ("outlier.node.temp_c", "n09", None)
    p = Profile.default().peers
    assert f.details["limit"] == pytest.approx(max(p.node_temp_min_c, p.node_k_sigma * f.details["natural_spread"]))
    assert f.details["limit"] < hot_c
    assert hot_c - 1.0 < f.deviation < hot_c + 1.5


def test_a_healthy_hall_has_no_node_temperature_finding_at_the_node_floor():
    assert _temperature_findings(Hall("healthy", seed=48, spread=2.0, day_night_c=4.0)) == []


def test_the_tails_the_node_agents_store_give_the_leader_the_raw_trace_s_finding():
    # the cluster path: each node agent stores its ranks' tail buckets beside the medians;
    # the leader compares them from the store, never from the raw samples
    hall = Hall("stalls-stored", nodes=4, hours=12.0, seed=49,
                faults=(Fault("straggler", "n03/*", 2.0, 7.0, "stalls", params={"x": 1.9}),))
    trace, _ = generate(hall)
    profile = Profile.default().with_phases(tuple(hall.phases))
    t0, t1 = float(trace.start), float(trace.end)
    grid = grid_for(profile, t0, t1)
    by: dict[str, dict] = {}
    for s in trace.series():
        node, dev = trace.place(s.device)
        by.setdefault(node, {})[(dev, s.metric)] = (s.t, s.v)
    store = Store.open("sqlite://")
    try:
        store.create_run("c", host="n00", plan={}, started_ts=t0)
        for node, series in by.items():
            store.add_buckets("c", node, node_rows(Trace.from_arrays(series), t0, grid.width, hall.dt_s, t0,
                                                   t1 + grid.width, t1))
        stored = peers.compare_tails(StoredBuckets(lambda m: store.load_buckets("c", m), grid), profile, t0)
    finally:
        store.close()
    raw = peers.compare_tails(TraceBuckets(trace, grid), profile, t0)
    assert [(f.code, f.node, f.device) for f in raw] == [("straggler.node.tail.compute_s", "n03", None)]
    assert [(f.code, f.node, f.device, f.start, f.end) for f in stored] == [
        (f.code, f.node, f.device, f.start, f.end) for f in raw]
    assert stored[0].values["share_pct"] == pytest.approx(raw[0].values["share_pct"], rel=1e-9)
    assert stored[0].values["cost_pct"] == pytest.approx(raw[0].values["cost_pct"], rel=1e-9)
