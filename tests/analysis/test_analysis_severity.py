"""The severity policy (what costs the customer fails, what only looks odd warns), one finding
per fault, and figures that say what they are: on machine-hall traces and small synthetic ones."""

from __future__ import annotations

import tomllib

import pytest

from soak.analysis import analyze
from soak.analysis._stats import block_reduce
from soak.analysis.evaluate_halls import NODE_TEMP_C, SEVERITY_LEVELS, node_span_c
from soak.analysis.messages import say
from soak.analysis.profile import SEVERITY_POLICY, Profile
from soak.analysis.synth import Fault, Scenario
from soak.analysis.synth import generate as generate_scenario
from soak.analysis.synth_hall import Hall, generate
from soak.report.model import FindingView
from soak.report.sentences import decided_by

pytestmark = pytest.mark.compute  # pyproject.toml

ONSET_H = 6.05


def _analysis(hall: Hall):
    trace, _ = generate(hall)
    return trace, analyze(trace, phases=hall.phases)


def _fails(res):
    return [f for f in res.findings if f.severity == "fail"]


@pytest.mark.slow  # a 128-chip day analysed
def test_a_node_slower_from_the_start_at_capped_power_fails_the_run_as_a_straggler():
    # 12 % slower all run long: the job's step time never changes, so only the straggler
    # rule sees it; before the policy it warned (20 % was the line) and the run passed
    hall = Hall("slow", seed=9701, faults=(Fault("straggler", "n05/*", 0.0, SEVERITY_LEVELS["straggler_pct"],
                                                 params={"power_frac": 0.92}),))
    _, res = _analysis(hall)
    assert res.verdict == "fail"
    [f] = _fails(res)
    assert (f.code, f.node, f.device) == ("straggler.node.compute_s", "n05", None)
    assert 10.0 <= f.values["change_pct"] <= 14.0
    # below the line it warns, and the run passes
    lenient = Profile.from_dict({"peers": {"straggler_fail_frac": 0.15}})
    res2 = analyze(generate(hall)[0], lenient, phases=hall.phases)
    assert res2.verdict == "pass" and [f.code for f in res2.findings if f.severity == "warn"] == [
        "straggler.node.compute_s"]


@pytest.mark.slow  # 32 chips over 72 h
def test_a_chip_drifting_up_at_unchanged_power_fails_and_its_endpoints_are_its_hourly_medians():
    hall = Hall("drift", seed=9702, nodes=4, hours=72.0,
                faults=(Fault("thermal", "n02/npu0-3", 0.0, SEVERITY_LEVELS["drift_c_per_h"], "drift"),))
    trace, res = _analysis(hall)
    assert res.verdict == "fail"
    drift = [f for f in res.findings if f.code == "thermal.drift"]
    assert [(f.node, f.device, f.severity) for f in drift] == [("n02", "npu0-3", "fail")]
    f = drift[0]
    assert f.details["lead_gain_c"] >= 10.0
    # the figures read back from the trace: the first and last hourly medians the label names
    s = trace.get("n02/npu0-3", "temp_c")
    _, hourly, _ = block_reduce(s.t, s.v, 3600.0, "median")
    assert f.values["first_c"] == pytest.approx(hourly[0], abs=1e-9)
    assert f.values["last_c"] == pytest.approx(hourly[-1], abs=1e-9)
    assert f.values["last_c"] - f.values["first_c"] == pytest.approx(0.3 * 71.5, abs=3.0)  # the rise, not 48 h of it
    assert "(hourly medians)" in f.summary and say(f.code, f.values) == f.summary


@pytest.mark.slow  # 64 chips over a day
def test_a_rack_well_over_10_c_above_the_hall_for_hours_is_one_failing_finding_of_the_group():
    rack = tuple(Fault("outlier", f"n{k:02d}/*", ONSET_H, SEVERITY_LEVELS["rack_temp_c"], "temp",
                       params={"until_h": ONSET_H + 12.0}) for k in range(4, 8))
    hall = Hall("rack", seed=9703, chips=4, models=1, faults=rack)
    _, res = _analysis(hall)
    assert res.verdict == "fail"
    [f] = [f for f in res.findings if f.severity != "info"]
    assert (f.code, f.node, f.device, f.severity) == ("outlier.group.temp_c", None, None, "fail")
    assert f.values["members"] == ["n04", "n05", "n06", "n07"] and f.values["nodes"] == 4
    assert f.values["deviation_c"] >= 10.0 and 11.0 <= f.values["duration_h"] <= 13.5
    assert "facility" in f.summary


@pytest.mark.slow  # 2 x 128 chips over a day
def test_a_whole_node_7c_hotter_is_named_where_healthy_nodes_span_5c_and_the_healthy_hall_is_clean():
    kw = {"seed": 9800, "spread": 1.25, "models": 1}
    assert 4.0 <= node_span_c(Hall("span", **kw)) <= 5.5  # healthy node medians span about 5 C
    _, healthy = _analysis(Hall("healthy", **kw))
    assert healthy.verdict == "pass" and [f.summary for f in healthy.findings if f.severity != "info"] == []
    _, hot = _analysis(Hall("hot", faults=(Fault("outlier", "n09/*", ONSET_H, NODE_TEMP_C, "temp"),), **kw))
    found = [(f.code, f.node, f.device) for f in hot.findings if f.severity != "info"]
    assert found == [("outlier.node.temp_c", "n09", None)]


def test_a_stall_every_chip_shares_is_one_finding_of_the_job_listing_the_chips():
    sc = Scenario("stall", hours=6.0, n_devices=8, seed=3, dips_per_day=0.0,
                  faults=(Fault("utilization_dropouts", "*", 0.5, 600.0, params={"duration_s": 30.0}),))
    trace, _ = generate_scenario(sc)
    res = analyze(trace)
    drops = [f for f in res.findings if f.kind == "utilization_dropouts" and f.severity != "info"]
    assert len(drops) == 1
    f = drops[0]
    assert f.device is None and f.code == "utilization_dropouts.global.shared"
    assert f.values["shared_chips"] == 8 and len(f.values["shared_worst"]) == 3
    assert sorted(f.details["members"]) == sorted(s.device for s in trace.series("util_pct"))
    assert f.period_s == pytest.approx(600.0, rel=0.05)
    assert f.summary.startswith("8 chips (the worst ") and say(f.code, f.values) == f.summary


def test_a_fault_on_every_chip_of_one_node_is_one_finding_of_that_node():
    sc = Scenario("node-stall", hours=6.0, n_devices=4, nodes=4, seed=5, dips_per_day=0.0,
                  faults=(Fault("utilization_dropouts", "n01/*", 0.5, 600.0, params={"duration_s": 30.0}),))
    trace, _ = generate_scenario(sc)
    res = analyze(trace, peer_comparison=False)
    drops = [f for f in res.findings if f.kind == "utilization_dropouts" and f.severity != "info"]
    assert [(f.node, f.device, f.values["shared_chips"]) for f in drops] == [("n01", None, 4)]
    assert drops[0].summary.startswith("4 chips of node n01")


def test_a_fault_on_some_chips_only_stays_a_finding_per_chip():
    sc = Scenario("two", hours=6.0, n_devices=8, seed=3, dips_per_day=0.0,
                  faults=tuple(Fault("utilization_dropouts", f"npu0-{i}", 0.5, 600.0, params={"duration_s": 30.0})
                               for i in (1, 5)))
    res = analyze(generate_scenario(sc)[0])
    drops = [f for f in res.findings if f.kind == "utilization_dropouts" and f.severity != "info"]
    assert sorted(f.device for f in drops) == ["npu0-1", "npu0-5"]
    assert all(not f.code.endswith(".shared") for f in drops)


def _view(sev: str, kind: str, node: str | None, device: str | None) -> FindingView:
    return FindingView(kind=kind, device=device, metric="temp_c", start=0.0, end=1.0, severity=sev, summary="x",
                       node=node)


def test_the_verdict_line_names_the_findings_that_decided_it():
    fails = [_view("fail", "straggler", "n05", None), _view("fail", "thermal", "n12", "npu0-3"),
             _view("warn", "outlier", "n01", "npu0-1")]
    assert decided_by(fails) == "decided by node n05: straggler; n12/npu0-3: thermal"
    many = [_view("fail", "outlier", None, None)] + [_view("fail", "thermal", "n01", f"npu0-{i}") for i in range(4)]
    line = decided_by(many)
    assert line == "decided by the job: outlier among peers; n01/npu0-0: thermal; n01/npu0-1: thermal; and 2 more"
    assert decided_by([_view("warn", "outlier", "n01", "npu0-1")]) == "no failing finding; 1 warning(s)"
    assert decided_by([]) == "no failing finding"
    assert "判定依据" in decided_by(fails, "zh")


def test_the_default_profile_file_states_the_severity_policy_with_reasons_and_anchors():
    text = Profile.default().to_toml()
    head = text.split("name = ")[0]
    for level, what, why, anchor in SEVERITY_POLICY:
        assert f"# {level}: {what}" in head and f"#   why: {why}" in head
        assert anchor == "-" or f"#   anchor: {anchor}" in head
    assert "SuperBench fails a node 5 %" in head and "MindCluster" in head and "75 %" in head
    p = Profile.default().peers
    assert (p.straggler_fail_frac, p.temp_fail_c, p.fail_min_s) == (0.10, 10.0, 3600.0)
    assert Profile.default().thermal.drift_fail_c == 10.0
    # the file reads back as the same profile
    assert Profile.from_dict(tomllib.loads(text)) == Profile.default()



def test_a_cluster_leader_names_a_fault_every_node_shares_once_for_the_job():
    # each node agent merged its own chips' stall into one finding of its node; the leader
    # merges the nodes' into one of the job (16 nodes x 8 chips), and keeps a lone node's
    from soak.analysis import shared
    from soak.analysis.model import Finding

    def node_finding(node: str, start: float, chips: int = 8) -> Finding:
        values = {"count": 12, "low_pct": 5.0, "periodic": True, "period_s": 600.0, "cv": 0.01,
                  "mean_duration_s": 30.0, "idle_fraction": 0.05, "shared_fraction": 1.0,
                  "shared_chips": chips, "shared_worst": [f"{node}/npu0-{i}" for i in range(3)], "shared_node": node}
        code = "utilization_dropouts.global.shared"
        return Finding(kind="utilization_dropouts", device=None, node=node, metric="util_pct", start=start,
                       end=start + 7200.0, severity="fail", summary=say(code, values), code=code, values=values,
                       details={"members": [f"{node}/npu0-{i}" for i in range(chips)]})

    found = [node_finding(f"n{i:02d}", 1000.0 + i) for i in range(16)]
    merged = shared.merge_nodes(found, 16, Profile.default())
    [f] = merged
    assert (f.node, f.device, f.values["shared_chips"], len(f.details["members"])) == (None, None, 128, 128)
    assert f.summary.startswith("128 chips (the worst n00/npu0-0") and say(f.code, f.values) == f.summary
    # on two nodes of sixteen it is theirs, not the job's
    assert shared.merge_nodes(found[:2], 16, Profile.default()) == found[:2]
