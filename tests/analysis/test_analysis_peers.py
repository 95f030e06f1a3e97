"""Peer comparison (outlier, straggler), the node dimension, and the lowered detection floors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from soak.analysis import Profile, Trace, analyze, peers
from soak.analysis.evaluate import cluster_healthy_cases, healthy_cases, run_case
from soak.analysis.model import PEER_KINDS
from soak.analysis.synth import T0, Fault, Scenario, generate
from soak.errors import ConfigError

pytestmark = pytest.mark.compute  # pyproject.toml

GIB = 1 << 30


def _cluster(*faults: Fault, seed: int = 31, nodes: int = 8) -> Scenario:
    return Scenario("cluster", hours=24, n_devices=8, nodes=nodes, seed=seed, spread=1.0,
                    shared_ambient=True, faults=faults)


def _peer_findings(sc: Scenario):
    res = analyze(generate(sc)[0], phases=sc.phases)
    return [f for f in res.findings if f.kind in PEER_KINDS], res


def test_chip_6c_hotter_than_its_siblings_at_equal_power_is_named():
    sc = _cluster(Fault("outlier", "n03/npu0-5", 6.0, 6.0, "temp"))
    (f,), res = _peer_findings(sc)
    assert (f.kind, f.node, f.device, f.metric, f.severity) == ("outlier", "n03", "npu0-5", "temp_c", "warn")
    assert 4.5 < f.deviation < 8.0 and 50 < f.baseline < 62
    assert abs(f.onset - (T0 + 6 * 3600)) <= 1200  # since when: the injection, to a bucket
    assert f.details["compared_with"] == "node" and f.details["confidence"] > 0.99
    assert any(r.startswith("WARN outlier on n03/npu0-5") for r in res.reasons)


def test_node_8pct_slower_is_a_straggler_naming_the_node():
    sc = _cluster(Fault("straggler", "n05/*", 0.0, 8.0))
    found, _ = _peer_findings(sc)
    (f,) = [x for x in found if x.kind == "straggler"]
    assert (f.node, f.device, f.metric, f.severity) == ("n05", None, "step_time_s", "warn")
    assert 5.0 < f.details["deviation_pct"] < 11.0
    assert f.to_dict()["device"] is None and f.to_dict()["node"] == "n05"


@pytest.mark.slow
def test_one_slow_rank_is_a_straggler_on_that_rank_and_a_big_one_fails():
    for pct, severity in ((8.0, "warn"), (30.0, "fail")):
        (f,), _ = _peer_findings(_cluster(Fault("straggler", "n02/npu0-7", 0.0, pct)))
        assert (f.kind, f.node, f.device, f.severity) == ("straggler", "n02", "npu0-7", severity)


@pytest.mark.parametrize("case", cluster_healthy_cases(2), ids=lambda c: c.scenario.name)
def test_healthy_8_node_cluster_with_natural_spread_has_no_peer_finding(case):
    found, _ = _peer_findings(case.scenario)
    assert found == []


@pytest.mark.parametrize("case", healthy_cases(2, hours=24, n_devices=4, seed0=21), ids=lambda c: c.scenario.name)
def test_healthy_single_node_traces_have_no_findings(case):
    assert run_case(case)["false"] == []


def test_idle_chip_and_declared_phase_are_not_compared():
    t = np.arange(0, 12 * 3600.0, 10)
    arrays = {}
    for i in range(6):
        idle = i == 5  # an idle chip: cool and low power, not a defect
        arrays[(f"npu{i}", "util_pct")] = (T0 + t, np.full(t.size, 1.0 if idle else 95.0))
        arrays[(f"npu{i}", "power_w")] = (T0 + t, np.full(t.size, 90.0 if idle else 300.0))
        temp = np.full(t.size, 40.0 if idle else 60.0 + 0.3 * i)
        if i == 2:  # hot only inside a declared burn-in phase
            temp = np.where((t >= 3600) & (t < 7 * 3600), 75.0, temp)
        arrays[(f"npu{i}", "temp_c")] = (T0 + t, temp)
    from soak.analysis.profile import Phase

    tr = Trace.from_arrays(arrays)
    assert [f.device for f in analyze(tr).findings if f.kind == "outlier"] == ["npu2"]
    phase = Phase("burn-in", windows=((T0 + 3600, T0 + 7 * 3600),))
    assert [f for f in analyze(tr, phases=[phase]).findings if f.kind == "outlier"] == []


def test_simulated_fleet_healthy_data_has_no_peer_finding():
    from soak.telemetry.sim.config import SimConfig
    from soak.telemetry.sim.model import FleetModel

    model = FleetModel(SimConfig.build(chips=8, seed=3, origin=0.0))
    arrays: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for ts in np.arange(0, 6 * 3600.0, 30):
        for c in model.chips(float(ts)):
            for m, v in (("util_pct", c.util_pct), ("temp_c", c.temp_c), ("power_w", c.power_w),
                         ("hbm_used_bytes", c.mem_used_mb * 1e6), ("hbm_total_bytes", c.mem_total_mb * 1e6)):
                a = arrays.setdefault((f"npu{c.npu_id}-{c.chip_id}", m), ([], []))
                a[0].append(T0 + ts)
                a[1].append(np.nan if v is None else float(v))
    res = analyze(Trace.from_arrays({k: (np.array(a), np.array(b)) for k, (a, b) in arrays.items()}))
    assert [f for f in res.findings if f.kind in PEER_KINDS] == []


@pytest.mark.slow
def test_five_column_csv_names_node_and_device_and_four_column_stays(tmp_path):
    sc = _cluster(Fault("outlier", "n01/npu0-2", 0.0, 8.0, "temp"), nodes=4)
    tr, _ = generate(sc)
    lines = ["timestamp,node,device,metric,value"]
    four = ["timestamp,device,metric,value"]
    for s in tr.series():
        if s.metric not in ("temp_c", "power_w", "util_pct"):
            continue
        node, dev = tr.place(s.device)
        for t, v in zip(s.t[::6].tolist(), s.v[::6].tolist(), strict=True):
            lines.append(f"{t!r},{node},{dev},{s.metric},{v!r}")
            if node == "n00":
                four.append(f"{t!r},{dev},{s.metric},{v!r}")
    p5, p4 = tmp_path / "cluster.csv", tmp_path / "one.csv"
    p5.write_text("\n".join(lines) + "\n")
    p4.write_text("\n".join(four) + "\n")
    back = Trace.from_csv(p5)
    assert back.nodes == ["n00", "n01", "n02", "n03"] and back.place("n01/npu0-2") == ("n01", "npu0-2")
    out = subprocess.run([sys.executable, "-m", "soak", "analyze", str(p5), "--format", "json"],
                         capture_output=True, text=True, check=True)
    findings = json.loads(out.stdout)["findings"]
    (f,) = [x for x in findings if x["kind"] == "outlier"]
    assert (f["node"], f["device"], f["metric"]) == ("n01", "npu0-2", "temp_c")
    assert f["baseline"] is not None and 6 < f["deviation"] < 10
    assert all("node" in x and x["node"] is not None for x in findings if x["device"] is not None)
    one = Trace.from_csv(p4)
    assert one.nodes == [] and one.place("npu0-2") == (None, "npu0-2")
    assert all(f.node is None for f in analyze(one).findings)


def test_five_column_csv_with_an_empty_node_names_the_line(tmp_path):
    from soak.errors import InputError

    p = tmp_path / "t.csv"
    p.write_text("timestamp,node,device,metric,value\n1,n0,a,util_pct,5\n2,,a,util_pct,6\n")
    with pytest.raises(InputError, match="line 3: node is empty"):
        Trace.from_csv(p)


# Detection floor: slow leaks and short-run drift are reported, with a projection.


def _sawtooth_leak_trace(leak_bytes_per_h: float, seed: int) -> Trace:
    rng = np.random.default_rng(seed)
    t = np.arange(0, 24 * 3600.0, 10)
    hbm = (30e9 * np.minimum(1, t / 1200)  # warm-up fill
           + 180e6 * np.mod(t + rng.uniform(0, 300), 300) / 300  # allocator sawtooth
           + rng.normal(0, 2e6, t.size) + leak_bytes_per_h * t / 3600
           + np.where(np.mod(t - 900, 3600) < 60, 2e9, 0.0))  # checkpoint spikes
    return Trace.from_arrays({("npu0-0", "hbm_used_bytes"): (T0 + t, hbm),
                              ("npu0-0", "hbm_total_bytes"): (T0 + t, np.full(t.size, 64.0 * GIB))})


@pytest.mark.parametrize("seed", [1, 2])
def test_leak_of_12mb_per_h_under_180mb_sawtooth_in_24h_is_found_as_warn_with_projection(seed):
    (f,) = analyze(_sawtooth_leak_trace(12e6, seed)).findings
    assert f.kind == "memory_creep" and abs(f.slope_per_hour / 12e6 - 1) <= 0.35
    assert f.severity == "warn"  # lasts beyond the required 168 h: reported, not failed
    hte = f.details["hours_to_exhaustion"]
    assert 2000 < hte < 4000 and f.details["exhausted_at"] == pytest.approx(f.end + hte * 3600)
    assert "runs out in" in f.summary
    assert analyze(_sawtooth_leak_trace(0.0, seed)).findings == []


def test_same_leak_fails_when_it_threatens_the_required_runtime():
    (f,) = analyze(_sawtooth_leak_trace(12e6, 1), profile=Profile(required_runtime_h=5000)).findings
    assert f.severity == "fail"


def test_drift_of_035c_per_h_over_24h_is_found_and_a_daily_cycle_is_not():
    for mag, expect in ((0.35, True), (0.0, False)):
        sc = Scenario("d", hours=24, n_devices=1, seed=4,
                      faults=(Fault("thermal", "npu0-0", 0, mag, "drift"),) if mag else ())
        found = [f for f in analyze(generate(sc)[0], phases=sc.phases).findings if f.kind == "thermal"]
        assert bool(found) is expect
        if expect:
            assert abs(found[0].slope_per_hour / mag - 1) <= 0.35 and found[0].severity == "warn"
            assert "at unchanged power" in found[0].summary


def test_temperature_rise_with_rising_power_is_load_not_drift():
    t = np.arange(0, 24 * 3600.0, 60)
    power = 250 + 2.0 * t / 3600  # +0.8 %/h
    tr = Trace.from_arrays({("c", "temp_c"): (T0 + t, 50 + 0.35 * t / 3600),
                            ("c", "power_w"): (T0 + t, power)})
    assert [f for f in analyze(tr).findings if f.kind == "thermal"] == []


def test_profile_peers_section_and_severity(tmp_path):
    p = tmp_path / "p.toml"
    p.write_text('[peers]\noutlier_severity = "fail"\nmin_peers = 4\n')
    prof = Profile.from_toml(p)
    assert prof.peers.outlier_severity == "fail" and prof.peers.min_peers == 4
    p.write_text('[peers]\noutlier_severity = "loud"\n')
    with pytest.raises(ConfigError, match="peers.outlier_severity: must be one of info, warn, fail"):
        Profile.from_toml(p)


def _ranks_trace(slow: dict[str, float], nodes: int = 4, per_node: int = 1, hours: float = 12.0) -> Trace:
    """Synchronous data parallelism: every rank's step time is the slowest rank's; only the
    time outside the all-reduce (``compute_s``) differs. ``slow``: rank key -> factor."""
    rng = np.random.default_rng(7)
    t = T0 + np.arange(0, hours * 3600.0, 10.0)
    keys = [(f"node-{n}", f"lm-rank{n * per_node + r}") for n in range(nodes) for r in range(per_node)]
    compute = {k: 0.1 * slow.get(k[1], 1.0) * (1 + 0.01 * rng.standard_normal(t.size)) for k in keys}
    step = np.max(np.vstack(list(compute.values())), axis=0) + 0.02
    arrays = {}
    for k in keys:
        arrays[(*k, "step_time_s")] = (t, step)
        arrays[(*k, "compute_s")] = (t, compute[k])
    return Trace.from_arrays(arrays)


def test_a_slow_rank_under_data_parallelism_is_found_by_its_compute_time_naming_node_and_rank():
    # one rank a node, as a cluster test runs it: the whole node is the straggler, named with its rank
    res = analyze(_ranks_trace({"lm-rank2": 3.0}))
    (f,) = [x for x in res.findings if x.kind == "straggler"]
    assert (f.node, f.device, f.metric, f.severity) == ("node-2", None, "compute_s", "fail")
    assert f.details["members"] == ["lm-rank2"] and "node node-2 (lm-rank2): compute_s" in f.summary
    assert 150 < f.details["deviation_pct"] < 250  # 3x the compute: +200 %
    # several ranks a node: the slow rank itself, on its node
    res = analyze(_ranks_trace({"lm-rank5": 1.3}, nodes=2, per_node=4))
    (f,) = [x for x in res.findings if x.kind == "straggler"]
    assert (f.node, f.device, f.metric) == ("node-1", "lm-rank5", "compute_s")
    assert not [x for x in res.findings if x.metric == "step_time_s"]  # step times agree


def _four_nodes_one_with_longer_steps(with_compute: bool) -> tuple[Trace, float, float]:
    """Four nodes of one rank each, 24 h at 60 s; n01's step rows 30 % longer. With compute_s,
    every rank's time outside the collectives is alike: what synchronous data parallelism
    gives when n01's rows merely fell on the job's slow steps more often."""
    rng = np.random.default_rng(3)
    t = 1.8e9 + np.arange(0, 24 * 3600, 60.0)
    series = {}
    for n in range(4):
        node = f"n{n:02d}"
        series[(node, f"lm-rank{n}", "step_time_s")] = (t, 0.1 * np.exp(rng.normal(0, 0.01, t.size)) * (1.3 if n == 1 else 1.0))
        if with_compute:
            series[(node, f"lm-rank{n}", "compute_s")] = (t, 0.06 * np.exp(rng.normal(0, 0.01, t.size)))
    return Trace.from_arrays(series), float(t[0]), float(t[-1])


def test_a_rank_with_compute_time_is_not_named_by_its_step_time_alone() -> None:
    # seen on a real three-node run: one node named a straggler by its step time "in
    # episodes" that were another node's, whose compute time named it rightly
    bare, a, b = _four_nodes_one_with_longer_steps(with_compute=False)
    assert [(f.code, f.node) for f in peers.detect(bare, Profile.default(), a, b)] == [("straggler.node.step_time_s", "n01")]
    full, a, b = _four_nodes_one_with_longer_steps(with_compute=True)
    assert peers.detect(full, Profile.default(), a, b) == []
