"""The daemon's small parts on real files and sockets: heartbeat follower, step windows,
the run lock, sd_notify, the run metrics and the progress line."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from soak.daemon.heartbeat import HeartbeatFollower, StepAggregator
from soak.daemon.lock import RunLock
from soak.daemon.metrics import RunCollector
from soak.daemon.sdnotify import notify, watchdog_interval_s
from soak.daemon.status import RankStatus, RunStatus, progress_line
from soak.errors import StoreError


def _line(**kw: object) -> bytes:
    rec = {"workload": "lm", "rank": 0, "event": "step", "step": 1, "ts": 100.0}
    rec.update(kw)
    return (json.dumps(rec) + "\n").encode()


def test_follower_reads_only_complete_lines_and_keeps_offsets(tmp_path) -> None:
    hb = tmp_path / "lm-rank0.jsonl"
    hb.write_bytes(_line(step=1) + _line(step=2)[:10])  # the second line is half-written
    f = HeartbeatFollower(tmp_path)
    assert [r["step"] for r in f.poll()] == [1]
    assert f.poll() == []
    with open(hb, "ab") as fh:
        fh.write(_line(step=2)[10:] + b"not json\n" + _line(step=3))
    assert [r["step"] for r in f.poll()] == [2, 3]
    assert f.bad_lines == 1
    assert f.offsets["lm-rank0.jsonl"] == hb.stat().st_size


def test_follower_bounds_each_read(tmp_path) -> None:
    hb = tmp_path / "lm-rank0.jsonl"
    hb.write_bytes(b"".join(_line(step=i) for i in range(1, 201)))
    f = HeartbeatFollower(tmp_path, max_bytes=1000)
    got: list[int] = []
    for _ in range(100):
        batch = f.poll()
        assert len(batch) <= 1000 // len(_line(step=1)) + 1
        got += [r["step"] for r in batch]
        if not batch:
            break
    assert got == list(range(1, 201))


def test_follower_skip_existing_starts_at_the_end(tmp_path) -> None:
    (tmp_path / "lm-rank0.jsonl").write_bytes(_line(step=1))
    f = HeartbeatFollower(tmp_path)
    f.skip_existing()
    assert f.poll() == []


def test_aggregator_folds_a_window_into_one_row_with_the_median() -> None:
    agg = StepAggregator(window_s=10.0, to_ts=lambda t: t * 2, attempt=lambda w: 3)
    recs = [
        {"workload": "lm", "rank": 1, "event": "step", "step": s, "ts": 100.0 + s, "step_time_s": t,
         "compute_s": t / 2 + s, "loss": 5.0 - s, "tokens_per_s": 10.0 * s, "mem_peak_bytes": 100 * s}
        for s, t in [(1, 0.1), (2, 0.3), (3, 0.2)]
    ]
    rows, events = agg.feed(recs)
    assert rows == [] and events == []
    rows, _ = agg.feed([{**recs[0], "step": 11, "ts": 111.0, "step_time_s": 9.0}])
    assert len(rows) == 1
    r = rows[0]
    assert (r["step"], r["n_steps"], r["step_time_s"], r["loss"], r["attempt"]) == (3, 3, 0.2, 2.0, 3)
    assert r["ts"] == 206.0 and r["mem_peak_bytes"] == 300 and r["tokens_per_s"] == 30.0
    assert r["compute_s"] == 2.15  # the median of 1.05, 2.15, 3.1: the time outside the collective
    assert agg.flush(None)[0]["step"] == 11
    assert agg.rank_state("lm", 1).last_progress_wall == 111.0


def test_aggregator_turns_events_into_store_events_and_resume_rewinds() -> None:
    agg = StepAggregator(window_s=10.0)
    _, events = agg.feed([
        {"workload": "lm", "rank": 0, "event": "step", "step": 30, "ts": 1.0},
        {"workload": "lm", "rank": 0, "event": "timeout", "step": 30, "ts": 2.0, "message": "allreduce"},
        {"workload": "lm", "rank": 0, "event": "resume", "step": 20, "ts": 3.0, "message": "from 20"},
    ])
    assert [(e["kind"], e["message"]) for e in events] == [("comm_timeout", "allreduce"), ("resume", "from 20")]
    assert agg.rank_state("lm", 0).step == 20


def test_second_lock_on_a_run_folder_is_refused_until_released(tmp_path) -> None:
    first = RunLock(tmp_path)
    first.acquire()
    with pytest.raises(StoreError, match=f"in use by another soak daemon \\(pid {os.getpid()}\\)"):
        RunLock(tmp_path).acquire()
    first.release()
    with RunLock(tmp_path):
        pass


def test_lock_of_a_killed_holder_is_free(tmp_path) -> None:
    code = f"from soak.daemon.lock import RunLock; from pathlib import Path; import os; RunLock(Path({str(tmp_path)!r})).acquire(); os._exit(0)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    with RunLock(tmp_path):
        pass


def test_sd_notify_sends_one_datagram(tmp_path, monkeypatch) -> None:
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as srv:
        srv.bind(path)
        srv.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", path)
        assert notify("READY=1", "STATUS=run r1 started")
        assert srv.recv(4096) == b"READY=1\nSTATUS=run r1 started"
    monkeypatch.delenv("NOTIFY_SOCKET")
    assert notify("READY=1") is False
    monkeypatch.setenv("WATCHDOG_USEC", "20000000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    assert watchdog_interval_s() == 10.0
    monkeypatch.setenv("WATCHDOG_PID", "1")
    assert watchdog_interval_s() is None


def _status(**kw: object) -> RunStatus:
    base = dict(run_id="r1", workload="lmx2", verdict="running", elapsed_s=3725.0, remaining_s=60.0, restarts=2,
                ranks=(RankStatus("lm", 0, 120, 0.25, 800.0, 1000.0), RankStatus("lm", 1, 119, None, None, None)),
                findings={("memory_creep", "fail"): 1, ("thermal", "warn"): 2}, passing=False)
    base.update(kw)
    return RunStatus(**base)  # type: ignore[arg-type]


def test_run_metrics_use_the_contract_names_and_leave_unknowns_out() -> None:
    reg = CollectorRegistry()
    reg.register(RunCollector(lambda: _status()))
    text = generate_latest(reg).decode()
    assert 'soak_run_info{run_id="r1",verdict="running",workload="lmx2"} 1.0' in text
    assert 'soak_run_elapsed_seconds{run_id="r1"} 3725.0' in text
    assert 'soak_run_remaining_seconds{run_id="r1"} 60.0' in text
    assert 'soak_run_restarts_total{run_id="r1"} 2.0' in text
    assert 'soak_run_step{rank="1",run_id="r1",workload="lm"} 119.0' in text
    assert 'soak_run_step_time_seconds{rank="0",run_id="r1",workload="lm"} 0.25' in text
    assert 'soak_run_step_time_seconds{rank="1"' not in text  # unknown: left out, never 0
    assert 'soak_run_tokens_per_second{rank="0",run_id="r1",workload="lm"} 800.0' in text
    assert 'soak_run_last_heartbeat_timestamp_seconds{rank="0",run_id="r1",workload="lm"} 1000.0' in text
    assert 'soak_run_findings{kind="memory_creep",run_id="r1",severity="fail"} 1.0' in text
    assert 'soak_run_verdict_pass{run_id="r1"} 0.0' in text
    quiet = CollectorRegistry()
    quiet.register(RunCollector(lambda: _status(passing=None)))
    assert "soak_run_verdict_pass{" not in generate_latest(quiet).decode()
    assert "soak_node_clock_offset_seconds{" not in text  # a single node has no store clock to be off from
    node = CollectorRegistry()
    node.register(RunCollector(lambda: _status(clock_offset_s=-0.25)))
    assert 'soak_node_clock_offset_seconds{run_id="r1"} -0.25' in generate_latest(node).decode()


def test_what_the_judge_knows_is_served_with_the_node_a_peer_finding_names() -> None:
    from soak.daemon.status import LinkTest, OpenFinding, ReliabilitySoFar

    st = _status(
        ranks=(RankStatus("lm", 0, 120, 0.25, 800.0, 1000.0, 0.2), RankStatus("lm", 1, 119, None, None, None)),
        open_findings=(OpenFinding("straggler", "fail", "node-1", None, "compute_s", "straggler.node.compute_s"),
                       OpenFinding("thermal", "warn", None, "npu0-0", "temp_c", "thermal.excursions")),
        criteria={"coverage": True, "nodes": False}, link_test=LinkTest(1700.5, {"node-1": 12.5, "node-2": 3.25}),
        nodes_by_status={"running": 2, "lost": 1},
        reliability=ReliabilitySoFar(0.9125, {"checkpoint": 30.0, "node_lost": 12.5}, {"crash": 0, "node_lost": 1},
                                     2.5, 0.5))
    reg = CollectorRegistry()
    reg.register(RunCollector(lambda: st))
    text = generate_latest(reg).decode()
    assert ('soak_finding_active{code="straggler.node.compute_s",device="",kind="straggler",metric="compute_s",'
            'node="node-1",run_id="r1",severity="fail"} 1.0') in text
    # this node's own finding: its node label is the agent's own (added to every series)
    assert ('soak_finding_active{code="thermal.excursions",device="npu0-0",kind="thermal",metric="temp_c",'
            'run_id="r1",severity="warn"} 1.0') in text
    assert 'soak_run_verdict_so_far{criterion="coverage",run_id="r1"} 1.0' in text
    assert 'soak_run_verdict_so_far{criterion="nodes",run_id="r1"} 0.0' in text
    assert 'soak_link_busbw_gbps{peer="node-2",run_id="r1"} 3.25' in text
    assert 'soak_link_test_timestamp_seconds{run_id="r1"} 1700.5' in text
    assert 'soak_rank_compute_seconds{rank="0",run_id="r1",workload="lm"} 0.2' in text
    assert 'soak_rank_compute_seconds{rank="1"' not in text
    assert 'soak_cluster_nodes{run_id="r1",status="lost"} 1.0' in text
    assert 'soak_run_ettr_ratio{run_id="r1"} 0.9125' in text
    assert 'soak_run_lost_seconds{cause="checkpoint",run_id="r1"} 30.0' in text
    assert 'soak_run_failures{cause="node_lost",run_id="r1"} 1.0' in text
    assert 'soak_run_failures{cause="crash",run_id="r1"} 0.0' in text  # none yet is said: 0, not absent
    assert 'soak_run_node_test_seconds{run_id="r1"} 9000.0' in text
    assert 'soak_run_node_mttf_lower90_seconds{run_id="r1"} 1800.0' in text
    # before any analysis: no criterion, link or node series (not judged is not 0)
    quiet = CollectorRegistry()
    quiet.register(RunCollector(lambda: _status()))
    plain = generate_latest(quiet).decode()
    for name in ("soak_finding_active{", "soak_run_verdict_so_far{", "soak_link_busbw_gbps", "soak_cluster_nodes",
                 "soak_run_ettr_ratio{", "soak_run_failures{"):
        assert name not in plain


def test_progress_line_is_one_short_line() -> None:
    line = progress_line(_status())
    assert line == ("[r1] 1:02:05 elapsed, 0:01:00 left | lm/0 step 120 (250 ms), lm/1 step 119 | "
                    "restarts 2 | 3 findings (1 fail)")


def test_online_analysis_reads_raw_samples_until_a_series_gets_long() -> None:
    from soak.config import plan_from_dict
    from soak.runplan import online_bucket_s

    plan = plan_from_dict({"sampling": {"interval": "1s"}})
    assert online_bucket_s(plan, 3600.0) is None
    assert online_bucket_s(plan, 72 * 3600.0) == pytest.approx(72 * 3600 / 20000)


def test_acceptance_thresholds_reach_the_analysis_profile_or_name_the_bad_key() -> None:
    from soak.config import plan_from_dict
    from soak.errors import ConfigError
    from soak.runplan import build_profile

    prof = build_profile(plan_from_dict({"acceptance": {"thresholds": {"thermal.threshold_c": 90,
                                                                       "memory.min_fit_points": 8}}}))
    assert prof.thermal.threshold_c == 90.0 and prof.memory.min_fit_points == 8
    with pytest.raises(ConfigError, match="acceptance.thresholds: thermal.nonsense"):
        build_profile(plan_from_dict({"acceptance": {"thresholds": {"thermal.nonsense": 1}}}))


def test_online_analysis_stores_findings_and_one_event_per_new_finding(tmp_path) -> None:
    from soak.clock import ScaledClock
    from soak.config import plan_from_dict
    from soak.daemon.lifecycle import Daemon, StartedRun
    from soak.runplan import build_profile
    from soak.store import Store
    from soak.telemetry.records import DeviceSample, Snapshot

    t0 = 1_764_000_000.0
    store = Store.open(tmp_path / "soak.db")
    store.create_run("r", host="h", plan={}, started_ts=t0)
    # 10 h at 60 s ticks; the chip's HBM grows 1 GB/h: a leak the analysis must flag
    for i in range(600):
        store.add_snapshot("r", Snapshot(ts=t0 + 60 * i, host="h", devices=(
            DeviceSample(device="npu0-0", backend="npu", up=True, util_pct=95.0, hbm_total_bytes=64 << 30,
                         hbm_used_bytes=int(30e9 + 1e9 * i / 60) + (i % 7) * 10_000_000),)))
    plan = plan_from_dict({"sampling": {"interval": "60s"}})
    d = Daemon(plan)
    # a time line that reads "now" at the end of the data, as the daemon's would
    clock = ScaledClock(scale=1.0, origin=0.0)
    object.__setattr__(clock, "now", lambda: t0 + 600 * 60)
    d.started = StartedRun("r", tmp_path, plan, build_profile(plan), store, clock, t0, t0 + 3600.0, 0, False)
    d._analysis_job()
    d.online.next_at = 0.0
    d._analysis_job()  # a second pass finds the same leak: no second event
    found = store.load_findings("r")
    assert [(f.kind, f.device, f.severity) for f in found] == [("memory_creep", "npu0-0", "fail")]
    events = store.load_events("r", kind="finding")
    assert len(events) == 1 and events[0].detail["kind"] == "memory_creep"
    # the event carries the finding's code and values: the report renders it in its language
    assert events[0].detail["code"] == found[0].detail["code"] and events[0].detail["values"]["metric"] == "hbm_used_bytes"
    assert d.passing is False and d.findings[0]["kind"] == "memory_creep"
    store.close()


def test_online_finding_is_printed_when_found(tmp_path) -> None:
    import io

    from soak.clock import ScaledClock
    from soak.config import plan_from_dict
    from soak.daemon.lifecycle import Daemon, StartedRun
    from soak.runplan import build_profile
    from soak.store import Store
    from soak.telemetry.records import DeviceSample, Snapshot

    t0 = 1_764_000_000.0
    store = Store.open(tmp_path / "soak.db")
    store.create_run("r", host="h", plan={}, started_ts=t0)
    for i in range(600):
        store.add_snapshot("r", Snapshot(ts=t0 + 60 * i, host="h", devices=(
            DeviceSample(device="npu0-0", backend="npu", up=True, util_pct=95.0, hbm_total_bytes=64 << 30,
                         hbm_used_bytes=int(30e9 + 1e9 * i / 60) + (i % 7) * 10_000_000),)))
    plan = plan_from_dict({"sampling": {"interval": "60s"}})
    out = io.StringIO()
    d = Daemon(plan, out=out)
    clock = ScaledClock(scale=1.0, origin=0.0)
    object.__setattr__(clock, "now", lambda: t0 + 600 * 60)
    d.started = StartedRun("r", tmp_path, plan, build_profile(plan), store, clock, t0, t0 + 3600.0, 0, False)
    d._analysis_job()
    assert out.getvalue().startswith("soak: finding [fail] memory_creep on npu0-0: hbm_used_bytes creeps"), out.getvalue()
    store.close()


def test_the_served_link_test_is_this_nodes_pairs_in_the_last_one_and_criteria_only_judged() -> None:
    from soak.daemon.online import criteria_so_far, last_link_test, open_findings
    from soak.store import Store

    with Store.open("sqlite://") as store:
        store.create_run("c1", host="h", plan={}, started_ts=1000.0, planned_end_ts=2000.0, workload="lm",
                         backend="sim", time_scale=1.0)
        assert last_link_test(store, "c1", "node-1") is None  # before the first test: nothing served
        pairs = [{"a": "node-0", "b": "node-1", "busbw_gbps": 10.0}, {"a": "node-0", "b": "node-2", "busbw_gbps": 9.0},
                 {"a": "node-1", "b": "node-2", "busbw_gbps": None}]
        store.add_event("c1", "link_test", ts=1100.0, detail={"pairs": pairs, "when": "preflight"})
        pairs[0] = {"a": "node-0", "b": "node-1", "busbw_gbps": 4.5}
        store.add_event("c1", "link_test", ts=1700.0, detail={"pairs": pairs, "when": "periodic"})
        got = last_link_test(store, "c1", "node-1")
        # the last test only; a pair that measured nothing is left out, not 0
        assert got is not None and (got.ts, dict(got.busbw_gbps)) == (1700.0, {"node-0": 4.5})
        assert last_link_test(store, "c1", None) is None  # a single node takes no part in one
    criteria = [{"code": "criterion.coverage", "met": True}, {"code": "criterion.nodes", "met": None},
                {"code": "criterion.kind.hang", "met": False}]
    assert criteria_so_far(criteria) == {"coverage": True, "kind.hang": False}
    f = {"kind": "thermal", "severity": "warn", "device": "npu0-0", "metric": "temp_c", "code": "thermal.excursions"}
    # two findings of one name (two stretches of one chip) are one series
    assert len(open_findings([f, {**f, "start": 5.0}])) == 1


def test_an_announced_finding_that_names_no_chip_is_said_of_its_node_or_the_job() -> None:
    # a replica dispute nobody settled, a job-wide fault: the line once read "on None"
    import io
    from types import SimpleNamespace

    from soak.daemon.online import OnlineAnalysis

    out = io.StringIO()
    events: list[dict] = []
    spool = SimpleNamespace(event=lambda kind, **kw: events.append(kw))
    run = SimpleNamespace(clock=SimpleNamespace(now=lambda: 1.0))
    found = [{"kind": "thermal", "node": None, "device": None, "metric": "temp_c", "severity": "warn",
              "summary": "hot"},
             {"kind": "thermal", "node": "n1", "device": None, "metric": "temp_c", "severity": "fail", "summary": "x"},
             {"kind": "thermal", "node": "n1", "device": "npu0", "metric": "temp_c", "severity": "fail", "summary": "y"},
             # said when its event was stored, not a second time
             {"kind": "sdc", "node": "n1", "device": "npu0", "metric": "gemm", "severity": "fail", "summary": "z"}]
    OnlineAnalysis(out).announce(run, found, spool, None)
    assert out.getvalue().splitlines() == ["soak: finding [warn] thermal on the job: hot",
                                           "soak: finding [fail] thermal on n1: x",
                                           "soak: finding [fail] thermal on n1/npu0: y"]
    assert len(events) == 4
