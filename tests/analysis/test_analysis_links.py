"""The pairwise link test's judgement: a slow pair or node named, a healthy fabric silent,
the absolute floor per chip model, the CSV form, and the links criterion."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from soak.analysis import Profile, Trace, analyze
from soak.analysis import links as lk
from soak.analysis.profile import chip_model
from soak.analysis.synth import link_rows
from soak.errors import ConfigError
from soak.judge import judge_trace

pytestmark = pytest.mark.compute  # pyproject.toml


def _link_findings(rows, profile=None):
    res = analyze(Trace.from_rows(rows), profile)
    return [f for f in res.findings if f.metric == lk.METRIC], res


@pytest.mark.parametrize("seed", range(5))
def test_healthy_8_node_fabric_with_natural_spread_has_no_link_finding(seed):
    found, res = _link_findings(link_rows(8, seed=seed))
    assert found == [] and res.verdict == "pass"


def test_a_pair_30pct_slower_is_found_and_named_as_the_link():
    found, res = _link_findings(link_rows(8, slow_pairs={(2, 5): 0.30}, seed=3))
    (f,) = found
    assert (f.kind, f.node, f.device, f.severity) == ("straggler", "n02", "link:n05", "fail")
    assert -35 < f.details["deviation_pct"] < -25 and f.details["rule"] == "relative"
    assert "link n02 - n05" in f.summary and "(median of 6 test(s))" in f.summary
    assert any(r.startswith("FAIL straggler on n02/link:n05") for r in res.reasons)


def test_a_node_whose_links_are_all_30pct_slower_is_named_as_the_node_not_its_pairs():
    found, _ = _link_findings(link_rows(8, slow_nodes={3: 0.30}, seed=4))
    (f,) = found
    assert (f.node, f.device, f.metric) == ("n03", None, "pair_busbw_gbps")
    assert -35 < f.details["deviation_pct"] < -25 and f.details["pairs"] == 7


def test_three_nodes_tell_a_slow_node_from_a_slow_link():
    node, _ = _link_findings(link_rows(3, slow_nodes={1: 0.30}, seed=5))
    assert [(f.node, f.device) for f in node] == [("n01", None)]
    # both ends of the slow link have a fast pair with the third node: the link, not a node
    link, _ = _link_findings(link_rows(3, slow_pairs={(0, 1): 0.30}, seed=5))
    assert [(f.node, f.device) for f in link] == [("n00", "link:n01")]


def _events(pairs, chip_name=None, backend="cuda", injected=None, ts=100.0):
    detail = {"pairs": [{"a": a, "b": b, "busbw_gbps": v, "size_bytes": 1 << 20} for a, b, v in pairs],
              "backend": backend, "device_name": chip_name, "injected": injected or {}}
    return [SimpleNamespace(kind="link_test", ts=ts, detail=detail)]


def test_two_nodes_below_the_chip_models_floor_fail_and_above_pass():
    low = lk.evaluate(lk.from_events(_events([("a", "b", 20.0)], "NVIDIA H100 80GB HBM3")))
    (f,) = low.findings
    assert low.chip == "H100" and low.expected_gbps == 40.0 and low.floor_gbps == 30.0
    assert (f.node, f.device, f.details["rule"]) == ("a", "link:b", "floor")
    assert "below the floor 30 GB/s (75% of the expected 40 GB/s for H100)" in f.summary
    ok = lk.evaluate(lk.from_events(_events([("a", "b", 38.0)], "NVIDIA H100 80GB HBM3")))
    assert ok.findings == () and [p.status for p in ok.pairs] == ["ok"]
    cpu = lk.evaluate(lk.from_events(_events([("a", "b", 0.01)], None, backend="cpu")))
    assert cpu.chip == "CPU" and cpu.floor_gbps is None and cpu.findings == ()


def test_an_injected_slow_link_says_so_and_the_table_has_every_pair_and_node():
    ev = _events([("n0", "n1", 7.0), ("n0", "n2", 10.0), ("n1", "n2", 7.1)], backend="cpu",
                 injected={"n1": "slow-link:1,0.3"})
    v = lk.evaluate(lk.from_events(ev))
    (f,) = v.findings
    assert f.node == "n1" and f.device is None and f.details["injected"]
    assert "(injected: slow-link:1,0.3)" in f.summary
    assert [(p.a, p.b, p.status) for p in v.pairs] == [("n0", "n1", "slow node"), ("n0", "n2", "ok"),
                                                       ("n1", "n2", "slow node")]
    assert [(n.node, n.status) for n in v.nodes] == [("n0", "ok"), ("n1", "slow"), ("n2", "ok")]
    assert v.median_gbps == pytest.approx(7.1) and v.to_dict()["pairs"][0]["busbw_gbps"] == 7.0


def test_chip_models_of_device_names():
    assert [chip_model(n) for n in ("Ascend910B2", "Ascend910_9391", "310P3", "NVIDIA H200", "Tesla V100")] == [
        "910B", "910_93", "310P", "H200", None]
    assert chip_model("NVIDIA H100", "cpu") == "CPU"


def test_every_chip_figure_has_its_source_and_an_override_needs_one():
    for model, e in Profile.default().chips.items():
        assert e.pair_busbw_source and e.tflops_source, model
    p = Profile.from_dict({"chips": {"H100": {"pair_busbw_gbps": 45, "pair_busbw_source": "site acceptance"}},
                           "links": {"max_below_median_frac": 0.1}})
    assert p.chips["H100"].pair_busbw_gbps == 45.0 and p.chips["H100"].tflops_16bit == 989.0
    assert p.links.max_below_median_frac == 0.1
    with pytest.raises(ConfigError, match=r"chips.H100.pair_busbw_source: a figure needs its source"):
        Profile.from_dict({"chips": {"H100": {"pair_busbw_gbps": 45}}})
    with pytest.raises(ConfigError, match=r"chips.H100.busbw: unknown key"):
        Profile.from_dict({"chips": {"H100": {"busbw": 45}}})


def test_a_trace_of_several_nodes_without_link_rows_is_not_judged_on_links():
    rows = [(1.0 + i, n, "npu0", "util_pct", 90.0) for i in range(5) for n in ("a", "b")]
    crit = {c["name"]: c for c in judge_trace(Trace.from_rows(rows)).criteria}
    assert crit["links"]["met"] is None and "no link test recorded" in crit["links"]["measured"]
    single = judge_trace(Trace.from_rows([(1.0 + i, "npu0", "util_pct", 90.0) for i in range(5)]))
    assert "links" not in {c["name"] for c in single.criteria}


@pytest.mark.slow
def test_soak_analyze_reads_pair_busbw_from_the_five_column_csv(tmp_path):
    path = tmp_path / "links.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["timestamp", "node", "device", "metric", "value"])
        w.writerows(link_rows(6, slow_pairs={(1, 4): 0.3}, seed=8))
    out = subprocess.run([sys.executable, "-m", "soak", "analyze", str(path), "--format", "json"],
                         capture_output=True, text=True, timeout=120)
    doc = json.loads(out.stdout)
    named = [(f["kind"], f["node"], f["device"], f["metric"]) for f in doc["findings"]]
    assert named == [("straggler", "n01", "link:n04", "pair_busbw_gbps")]
    crit = {c["name"]: c for c in doc["criteria"]}
    assert crit["links"]["met"] is False and "n01-n04" in crit["links"]["measured"]
    assert doc["links"]["tests"] == 6 and len(doc["links"]["pairs"]) == 15
