"""The cluster path: node agents' bucket summaries in the store, compared by the leader, give
what the raw cluster trace gives (the same outliers and stragglers, the same coverage)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from soak.analysis import Profile, Trace, peers
from soak.analysis import evidence as ev
from soak.analysis.buckets import ANY, StoredBuckets, grid_for, node_rows
from soak.analysis.synth import T0, Fault, Scenario, generate
from soak.device_names import device_key
from soak.store import Store

# slow: a 6 x 8-chip, 24 h trace
pytestmark = [pytest.mark.slow, pytest.mark.compute]  # pyproject.toml


def _node_traces(trace: Trace) -> dict[str, Trace]:
    """Each node's own series, named as on the node (what its agent reads from the store)."""
    by: dict[str, dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]] = {}
    for s in trace.series():
        node, dev = trace.place(s.device)
        by.setdefault(node, {})[(dev, s.metric)] = (s.t, s.v)
    return {node: Trace.from_arrays(series) for node, series in by.items()}


@pytest.fixture(scope="module")
def cluster():
    sc = Scenario("cluster", hours=24, n_devices=8, nodes=6, seed=7, spread=1.0, shared_ambient=True,
                  faults=(Fault("outlier", "n02/npu0-3", 5.0, 6.0, "temp"), Fault("straggler", "n04/*", 0.0, 9.0),
                          Fault("straggler", "n01/npu0-6", 0.0, 30.0)))
    trace = generate(sc)[0]
    profile = Profile.default()
    t0, t1 = float(trace.start), float(trace.end)
    store = Store.open("sqlite://")
    store.create_run("c", host="n00", plan={}, started_ts=t0)
    width = profile.peers.bucket_s
    for node, own in _node_traces(trace).items():
        # as an agent does it: in two goes (the second also repeats the first's last bucket,
        # as a resumed agent would), then the last, partial bucket at the end
        half = t0 + 10 * width
        store.add_buckets("c", node, node_rows(own, t0, width, sc.dt_s, t0, half, t1))
        store.add_buckets("c", node, node_rows(own, t0, width, sc.dt_s, half - width, t1, t1))
        store.add_buckets("c", node, node_rows(own, t0, width, sc.dt_s, half, t1 + width, t1))
    yield trace, profile, store, sc
    store.close()


def _key(f):  # noqa: ANN001, ANN202
    return (f.kind, f.node, f.device, f.metric)


def test_bucket_summaries_find_the_same_outliers_and_stragglers_as_the_raw_trace(cluster) -> None:
    trace, profile, store, _ = cluster
    t0, t1 = float(trace.start), float(trace.end)
    raw = peers.detect(trace, profile, t0, t1)
    grid = grid_for(profile, t0, t1)
    stored = peers.compare(StoredBuckets(lambda m: store.load_buckets("c", m), grid), profile, t0)
    assert {("outlier", "n02", "npu0-3", "temp_c"), ("straggler", "n04", None, "step_time_s"),
            ("straggler", "n01", "npu0-6", "step_time_s")} <= {_key(f) for f in raw}
    assert sorted(map(_key, stored), key=str) == sorted(map(_key, raw), key=str)
    for a, b in zip(sorted(raw, key=lambda f: str(_key(f))), sorted(stored, key=lambda f: str(_key(f))), strict=True):
        assert b.deviation == pytest.approx(a.deviation, rel=1e-9) and (b.start, b.end) == (a.start, a.end)


def test_coverage_and_chip_hours_summed_by_the_store_are_the_raw_trace_s(cluster) -> None:
    trace, profile, store, sc = cluster
    t0, t1 = float(trace.start), float(trace.end)
    series = {(s.device, s.metric): s.t for s in trace.series()}
    raw = ev.coverage(series, sc.dt_s, t0, t1)
    width = profile.peers.bucket_s
    seconds = {(device_key(n, d), m): s for (n, d, m), s in store.bucket_coverage("c", t0, t1, width).items()}
    summed = ev.coverage_of(seconds, sc.dt_s, t0, t1)
    assert summed.chips_seen == raw.chips_seen == 48 and summed.metrics == raw.metrics
    for chip, ratios in raw.ratios.items():
        assert summed.ratios[chip] == pytest.approx(ratios, abs=1e-6)
    assert raw.worst[2] < 1.0  # the scenario's collection gaps count in both
    # chip-hours while training: exact for buckets trained throughout, understated inside the rest
    training = [(t0, t0 + 5 * 3600.0 + 100.0), (t0 + 6 * 3600.0, t1)]
    exact = ev.chip_hours(series, sc.dt_s, t0, t1, training=training)
    totals = store.bucket_totals("c", ANY, t0, t1, width)
    bound = ev.chip_hours_of_buckets(totals, width, t0, t1, training)
    assert exact - 2 * 48 * width / 3600 <= bound <= exact + 1e-9
    assert math.isclose(ev.chip_hours_of_buckets(totals, width, t0, t1), ev.chip_hours(series, sc.dt_s, t0, t1),
                        rel_tol=1e-9)
    assert totals[0][0] == T0
