"""ETTR, time lost by cause and the MTTF bound, from the time accounting of a run's events."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from scipy.stats import chi2

from soak.analysis import evidence as ev
from soak.analysis import reliability as rel


def _e(ts, kind, workload="lm", rank=0, message=None, detail=None, end_ts=None, node=None):
    return SimpleNamespace(ts=ts, kind=kind, workload=workload, rank=rank, message=message, detail=detail or {},
                           end_ts=end_ts, node=node)


def _parts(r: rel.Reliability) -> float:
    return r.productive_s + r.injected_s + sum(r.lost_s.values())


def test_a_clean_run_has_no_failure_and_the_bound_is_t_over_ln_10() -> None:
    acc = ev.account([_e(10, "start")], ["lm"], planned_start=0, planned_end=7200, ended=7200)
    r = rel.assess(acc, nodes=["n1"], project_nodes=[64, 256])
    assert r.productive_s == 7190 and r.lost_s["startup"] == 10 and _parts(r) == 7200
    assert r.ettr == pytest.approx(7190 / 7200)
    assert r.failure_count == 0 and r.node_mttf_h is None
    assert r.node_hours == 2.0
    # 2T / chi2(0.90; 2) = T / ln(10) = T / 2.303
    assert r.node_mttf_h_lower90 == pytest.approx(2.0 / math.log(10), rel=1e-12)
    assert [(p.nodes, p.mttf_h_lower90) for p in r.projections] == [
        (1, pytest.approx(2.0 / math.log(10))), (64, pytest.approx(2.0 / math.log(10) / 64)),
        (256, pytest.approx(2.0 / math.log(10) / 256))]


def test_eight_crashes_give_eight_failures_and_the_chi_square_bound() -> None:
    events = [_e(5, "start")]
    for k in range(8):
        events += [_e(100 + 100 * k, "crash", message="exit -9"), _e(110 + 100 * k, "start")]
    acc = ev.account(events, ["lm"], planned_start=0, planned_end=3600, ended=3600)
    r = rel.assess(acc, nodes=["n1"])
    assert r.failures == {"crash": 8, "hang": 0, "node_lost": 0, "link": 0, "device_fault": 0, "sdc": 0}
    assert r.lost_s["crash"] == pytest.approx(80) and r.productive_s == pytest.approx(3600 - 85)
    assert r.node_mttf_h == pytest.approx(1 / 8)
    assert r.node_mttf_h_lower90 == pytest.approx(2 * 1.0 / chi2.ppf(0.90, 18), rel=1e-9)
    assert r.per_node[0]["failures"]["crash"] == 8 and r.per_node[0]["last_failure"] == 800


def test_an_injected_crash_is_kept_apart_and_given_back_in_the_ettr() -> None:
    events = [_e(0, "start"), _e(90, "inject", message="crash: exiting at step 40"), _e(100, "crash"),
              _e(160, "start")]
    acc = ev.account(events, ["lm"], planned_start=0, planned_end=1000, ended=1000)
    r = rel.assess(acc)
    assert r.injected_s == 60 and r.injected_count == 1 and r.failure_count == 0
    assert r.ettr == pytest.approx(940 / 940) and _parts(r) == 1000


def test_overlapping_causes_share_no_second_and_an_early_end_is_not_run() -> None:
    # a daemon outage over an injected crash and an unexpected hang of a second workload;
    # the run stopped 200 s before its planned end
    events = [_e(0, "start"), _e(0, "start", workload="gemm"),
              _e(90, "inject", message="crash: exiting now"), _e(100, "crash"), _e(400, "start"),
              _e(150, "gap", workload=None, end_ts=300), _e(320, "start", workload="gemm"),
              _e(600, "hang", workload="gemm", detail={"stalled_s": 50}), _e(700, "start", workload="gemm"),
              _e(800, "stop", workload=None)]
    acc = ev.account(events, ["lm", "gemm"], planned_start=0, planned_end=1000, ended=800)
    r = rel.assess(acc)
    # the outage lasts until every workload trains again (lm at 400): the injected crash's
    # time under it is the outage's
    assert r.lost_s["daemon_down"] == pytest.approx(250)
    assert r.injected_s == pytest.approx(50)  # 100 .. 150
    # from its last step until it was killed (550 .. 600), then restarting (600 .. 700)
    assert r.lost_s["hang"] == pytest.approx(50) and r.lost_s["restart"] == pytest.approx(100)
    assert r.lost_s["not_run"] == 200
    assert r.productive_s == pytest.approx(acc.training_s) == pytest.approx(800 - 250 - 50 - 150)
    assert _parts(r) == pytest.approx(1000)
    assert r.failures == {"crash": 0, "hang": 1, "node_lost": 0, "link": 0, "device_fault": 0, "sdc": 0}
    # the daemon's own outage and the stop are not the machine's failures; the run's node-hours
    # end with the run
    assert r.node_hours == pytest.approx(800 / 3600)


def test_a_node_lost_is_one_failure_the_crashes_it_caused_are_not() -> None:
    events = [_e(0, "start"), _e(105, "crash", node="node-0", message="rank lost"),
              _e(115, "node_lost", workload=None, node="node-2", detail={"node": "node-2", "last_seen": 100}),
              # the same loss recorded by a second agent a moment later
              _e(116, "node_lost", workload=None, node="node-2", detail={"node": "node-2", "last_seen": 100.5}),
              _e(140, "start")]
    acc = ev.account(events, ["lm"], planned_start=0, planned_end=1000, ended=1000)
    away = {"node-2": [(100.0, math.inf)]}
    r = rel.assess(acc, nodes=["node-0", "node-1", "node-2"], away=away, cluster_nodes=3, project_nodes=[64])
    assert r.failures == {"crash": 0, "hang": 0, "node_lost": 1, "link": 0, "device_fault": 0, "sdc": 0}
    # lost from its last sign of life until the first agent said so, then the job re-formed
    assert r.lost_s["node_lost"] == pytest.approx(15) and r.lost_s["restart"] == pytest.approx(25)
    assert r.lost_s["crash"] == 0
    assert _parts(r) == pytest.approx(1000)
    assert r.node_hours == pytest.approx((3 * 1000 - 900) / 3600)
    assert [p.nodes for p in r.projections] == [3, 64]
    per = {n["node"]: n for n in r.per_node}
    assert per["node-2"]["failures"]["node_lost"] == 1 and per["node-0"]["failures"]["crash"] == 0
    assert per["node-2"]["node_hours"] == pytest.approx(100 / 3600)
    # node-2 trained until it was lost; the others with the job, before and after the loss
    assert per["node-2"]["productive_s"] == pytest.approx(100) and per["node-0"]["productive_s"] == r.productive_s


def test_the_statements_say_the_bound_as_t_over_its_divisor() -> None:
    acc = ev.account([_e(0, "start")], ["lm"], planned_start=0, planned_end=72 * 3600, ended=72 * 3600)
    r = rel.assess(acc, nodes=["n1"], project_nodes=[64])
    said = {s.code: s for s in r.statements()}
    assert "(2T / χ²(0.90; 2) = 144 / 4.605, T = 72 node-hours)" in said["reliability.mttf_lower"]
    assert said["reliability.mttf_lower"].startswith("mean time to failure per node >= 31.3 h")
    projections = [s for s in r.statements() if s.code == "reliability.projection"]
    assert projections == ["a job over 1 node(s) (this cluster): mean time to failure >= 31.3 h with 90% confidence",
                           "a job over 64 node(s): mean time to failure >= 0.489 h with 90% confidence"]
    d = r.to_dict()
    assert set(d) >= {"ettr", "planned_s", "productive_s", "injected_s", "lost_s", "failures", "node_hours",
                      "node_mttf_h", "node_mttf_h_lower90", "projections"}
    assert d["projections"][0] == {"nodes": 1, "mttf_h_lower90": pytest.approx(72 / math.log(10))}


def test_no_time_under_test_has_no_bound() -> None:
    acc = ev.account([], ["lm"], planned_start=0, planned_end=100, ended=0)
    r = rel.assess(acc)
    assert r.node_hours == 0 and r.node_mttf_h_lower90 is None and r.lost_s["not_run"] == 100
    assert [s.code for s in r.statements()] == ["reliability.ettr", "reliability.failures"]


def test_a_run_in_progress_has_its_remaining_time_ahead_not_lost() -> None:
    acc = ev.account([_e(10, "start")], ["lm"], planned_start=0, planned_end=1000, ended=400)
    live, ended = rel.assess(acc, running=True), rel.assess(acc)
    assert live.lost_s["ahead"] == 600 and "not_run" not in live.lost_s and _parts(live) == 1000
    assert live.ettr == pytest.approx(390 / 400)  # the ratio so far
    assert ended.lost_s["not_run"] == 600 and ended.ettr == pytest.approx(390 / 1000)
    assert "ahead" not in live.statements()[0]


def test_checkpoints_link_tests_and_data_stalls_are_not_productive_but_the_job_was_up() -> None:
    # time scale 2: an event's seconds are wall seconds, twice as long on the run's time line
    events = [_e(10, "start"),
              _e(100, "checkpoint", detail={"step": 50, "seconds": 5.0}),
              _e(200, "link_test", detail={"step": 90, "seconds": 3.0}),
              _e(300, "data_stall", rank=1, detail={"step": 140, "seconds": 2.0}),
              _e(400, "data_stall", detail={"step": 190, "seconds": 4.0, "injected": True}),
              # a checkpoint without its duration (an older run's): nothing is taken
              _e(500, "checkpoint", detail={"step": 240})]
    acc = ev.account(events, ["lm"], planned_start=0, planned_end=1000, ended=1000, time_scale=2.0)
    r = rel.assess(acc, events=events, time_scale=2.0)
    assert r.lost_s["checkpoint"] == 10 and r.lost_s["link_test"] == 6 and r.lost_s["data_stall"] == 4
    assert r.injected_s == 8  # the plan's own stall: given back, never against the machine
    # the accounting's training time (the job up) reconciles with productive time
    assert r.training_s == acc.training_s == 990
    assert r.productive_s == 990 - 10 - 6 - 4 - 8 and _parts(r) == 1000
    assert r.ettr == pytest.approx(r.productive_s / (1000 - 8))
    said = {s.code: s for s in r.statements()}
    # the plan's own stall is inside the up time too: said, so the three figures add up
    assert said["reliability.overhead"].values["overhead_s"] == 28
    assert ("of which 28 s did not train: injected 8 s, data_stall 4 s, checkpoint 10 s, link_test 6 s"
            in str(said["reliability.overhead"]))


def test_work_since_the_checkpoint_resumed_from_is_redone() -> None:
    events = [_e(0, "start"), _e(200, "checkpoint", detail={"step": 100, "seconds": 1.0}),
              _e(300, "crash"), _e(320, "resume", detail={"step": 100}), _e(320, "start", detail={"step": 100}),
              # it crashed again before its next checkpoint: the second attempt is thrown away too
              _e(400, "crash"), _e(410, "resume", detail={"step": 100}), _e(410, "start", detail={"step": 100})]
    acc = ev.account(events, ["lm"], planned_start=0, planned_end=1000, ended=1000)
    r = rel.assess(acc, events=events)
    assert r.lost_s["crash"] == 30 and r.lost_s["checkpoint"] == 1
    assert r.lost_s["redone"] == (300 - 200) + (400 - 320)
    assert r.productive_s == 1000 - 30 - 1 - 180 and _parts(r) == 1000
    assert r.failures["crash"] == 2


def test_a_restart_from_scratch_redoes_everything_since_the_first_start() -> None:
    # no checkpoint before the crash: the workload starts again at step 0
    events = [_e(10, "start", detail={"step": 0}), _e(300, "crash"), _e(330, "start", detail={"step": 0})]
    acc = ev.account(events, ["lm"], planned_start=0, planned_end=1000, ended=1000)
    r = rel.assess(acc, events=events)
    assert r.lost_s["redone"] == 290 and r.lost_s["crash"] == 30 and r.lost_s["startup"] == 10
    assert r.productive_s == 670 and _parts(r) == 1000


def test_an_injected_crash_s_redone_work_is_the_plan_s() -> None:
    events = [_e(0, "start"), _e(200, "checkpoint", detail={"step": 100}),
              _e(290, "inject", message="crash:120: exiting with status 1"), _e(300, "crash"),
              _e(320, "resume", detail={"step": 100}), _e(320, "start")]
    acc = ev.account(events, ["lm"], planned_start=0, planned_end=1000, ended=1000)
    r = rel.assess(acc, events=events)
    assert r.injected_s == 120 and r.lost_s["redone"] == 0 and r.failure_count == 0


def test_a_crash_on_a_link_test_timeout_is_a_link_failure() -> None:
    events = [_e(0, "start"), _e(290, "comm_timeout", rank=1, message="link_test at step 40: DistBackendError: timed out"),
              _e(300, "crash"), _e(330, "start"),
              _e(590, "comm_timeout", message="all_reduce at step 90: DistBackendError: timed out"),
              _e(600, "crash"), _e(620, "start")]
    acc = ev.account(events, ["lm"], planned_start=0, planned_end=1000, ended=1000)
    r = rel.assess(acc, events=events)
    assert r.failures == {"crash": 1, "hang": 0, "node_lost": 0, "link": 1, "device_fault": 0, "sdc": 0}
    assert r.lost_s["link"] == 30 and r.lost_s["crash"] == 20


def test_a_node_stopped_for_the_store_is_a_store_outage_not_the_daemon_s() -> None:
    events = [_e(0, "start"), _e(100, "store_outage", workload=None, end_ts=500),
              _e(400, "gap", workload=None, end_ts=500), _e(520, "start"),
              _e(700, "gap", workload=None, end_ts=750), _e(760, "start")]
    acc = ev.account(events, ["lm"], planned_start=0, planned_end=1000, ended=1000)
    r = rel.assess(acc, events=events)
    assert r.lost_s["store_outage"] == 120 and r.lost_s["daemon_down"] == 60 and r.failure_count == 0


def _fault(ts: float, code: str, interrupts: bool, device: str = "npu1-0") -> SimpleNamespace:
    # shaped as soak.analysis.device_faults.FaultChange.detail() records it
    return _e(ts, "device_fault", workload=None, rank=None, message=f"device fault on {device}: fault code {code}",
              detail={"device": device, "signal": "fault_code", "severity": "warn", "code": code, "level": "RestartNPU",
                      "cleared": False, "interrupts": interrupts})


def test_a_crash_a_chip_fault_caused_is_one_device_fault_and_a_fault_ridden_out_is_one_too() -> None:
    events = [_e(0, "start"),
              _e(300, "crash"), _e(330, "start"), _fault(350, "8C03A000", True),  # read after the job was back
              _fault(500, "A4025021", False),  # NotHandle: no failure
              _fault(700, "8C03A000", True, device="npu2-0"),  # the job rode it out: a failure all the same
              _e(1500, "crash"), _e(1520, "start")]  # a crash of its own, long after
    acc = ev.account(events, ["lm"], planned_start=0, planned_end=2000, ended=2000)
    r = rel.assess(acc, events=events, nodes=["n1"], fault_lag_s=60.0)
    assert r.failures == {"crash": 1, "hang": 0, "node_lost": 0, "link": 0, "device_fault": 2, "sdc": 0}
    # the fault's crash lost its 30 s to the fault, the other crash its 20 s; parts still sum
    assert r.lost_s["device_fault"] == 30 and r.lost_s["crash"] == 20 and _parts(r) == 2000
    assert r.per_node[0]["failures"]["device_fault"] == 2
    # read later than the detail interval after the job was back: not that crash's cause
    late = rel.assess(acc, events=events, nodes=["n1"], fault_lag_s=10.0)
    assert late.failures["crash"] == 2 and late.failures["device_fault"] == 2


def test_the_work_redone_after_an_injected_canary_is_said_with_the_up_time() -> None:
    """The demo read "the job was up 4 h 18 min, of which 29 s did not train: checkpoint 29 s;
    productive 3 h 25 min": the 52 min redone after the injected crash (the canary's time)
    were left unsaid, and the three figures did not add up."""
    from soak.analysis.reliability import Reliability

    up, checkpoint, redone = 4 * 3600 + 18 * 60, 29.0, 52 * 60
    rel = Reliability(planned_s=8 * 3600, productive_s=up - checkpoint - redone, injected_s=2 * 3600 + 41 * 60,
                      lost_s={"checkpoint": checkpoint, "startup": 3600.0}, failures={}, node_hours=8.0, nodes=1,
                      injected_count=1, training_s=up)
    (overhead,) = [s for s in rel.statements() if s.code == "reliability.overhead"]
    assert str(overhead) == ("the job was up 4 h 18 min, of which 52 min did not train: injected 52 min, "
                             "checkpoint 29 s; productive 3 h 25 min")


def _wrong(ts: float, chip: str, cls: str | None, step: int, rank: int = 1, severity: str = "fail") -> SimpleNamespace:
    # shaped as the daemon stores a workload's sdc_mismatch (soak.daemon.heartbeat)
    return _e(ts, "sdc", workload="gemm", rank=rank, message="wrong product",
              detail={"step": step, "check": "gemm_cpu", "error": 104.0, "tolerance": 1e-3, "suspect_rank": rank,
                      "classification": cls, "chip": chip, "serial": None, "severity": severity})


def test_a_chip_computing_wrong_is_one_sdc_failure_and_an_injected_one_a_canary() -> None:
    events = [_e(0, "start", workload="gemm"),
              _wrong(300, "npu1-0", "chip", 30), _wrong(600, "npu1-0", "chip", 60),  # one chip, wrong twice: one failure
              _wrong(700, "npu2-0", "transient", 70, rank=2, severity="warn"),  # a transient: no failure
              _e(800, "inject", workload="gemm", rank=3, detail={"step": 80, "inject": {"spec": "corrupt"}}),
              _wrong(800.5, "npu3-0", "chip", 80, rank=3)]  # the plan's canary
    acc = ev.account(events, ["gemm"], planned_start=0, planned_end=2000, ended=2000)
    r = rel.assess(acc, events=events, nodes=["n1"])
    assert r.failures == {"crash": 0, "hang": 0, "node_lost": 0, "link": 0, "device_fault": 0, "sdc": 1}
    assert r.lost_s.get("sdc", 0.0) == 0.0 and _parts(r) == 2000  # ridden out: no time lost
    assert r.failure_count == 1
    (failures,) = [x for x in r.statements() if x.code == "reliability.failures"]
    assert "0 device fault, 1 chip(s) computing wrong)" in failures
