"""No PASS without evidence, on real runs: a fleet whose npu-smi cannot be read (from the start
or switched on mid-run) fails on coverage naming the reader's error; repeated workload
SIGKILLs fail on crashes; chip-hours count chips while training, not the host or the gaps."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from scipy.stats import chi2

from soak.store import Store
from tests.daemon.conftest import fake_plan

# Coverage of sampling ticks is judged, with bounds wide enough for a daemon that misses a few
# ticks while other tests share the CPU (a fleet read half the run: between 20 % and 75 %).
pytestmark = pytest.mark.slow


def _sim_plan(tmp_path: Path, fault: str, run_id: str, scale: int = 900) -> Path:
    path = tmp_path / f"{run_id}.toml"
    path.write_text(f"""
[run]
duration = "2h"
time_scale = {scale}
data_dir = "{tmp_path / 'runs'}"
id = "{run_id}"
preflight = false
[devices]
backend = "sim"
[sim]
chips = 4
fault = "{fault}"
[sampling]
interval = "1s"
[exporter]
listen = ""
[[workloads]]
name = "lm"
""", encoding="utf-8")
    return path


def _run(plan: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "soak", "run", str(plan)], capture_output=True, text=True,
                          timeout=120, env=env, stdin=subprocess.DEVNULL)


def _analysis(tmp_path: Path, run_id: str) -> dict:
    return json.loads((tmp_path / "runs" / run_id / "report" / "analysis.json").read_text(encoding="utf-8"))


def _criterion(analysis: dict, name: str) -> dict:
    return next(c for c in analysis["criteria"] if c["name"] == name)


@pytest.mark.parametrize("fault,error,scale", [("dcmi", "dcmi module initialize failed", 900), ("garbage", "", 900),
                                               ("hang", "", 300)], ids=["dcmi", "garbage", "hang"])
def test_fleet_unreadable_from_the_start_fails_on_coverage(tmp_path, fault: str, error: str, scale: int) -> None:
    # a hanging npu-smi is killed at the tool timeout (10 s): that run needs ~25 s of wall time
    r = _run(_sim_plan(tmp_path, fault, "bad", scale=scale))
    assert r.returncode == 1, r.stderr
    assert "evidence: no chip was read during the run" in r.stderr and error in r.stderr
    analysis = _analysis(tmp_path, "bad")
    cov = _criterion(analysis, "evidence coverage")
    assert (cov["met"], cov["chips_seen"], cov["chips_expected"]) == (False, 0, 4)
    assert analysis["verdict"] == "fail" and analysis["clean_statement"] is None
    assert analysis["chip_hours"] == 0.0
    with Store.open(tmp_path / "runs" / "bad" / "soak.db", create=False) as store:
        outages = store.load_events("bad", kind="outage")
        assert store.get_run("bad").verdict == "fail"
    assert outages and outages[0].detail["reader"] == "npu-smi" and error in outages[0].detail["error"]
    assert outages[0].end_ts > outages[0].ts
    log = (tmp_path / "runs" / "bad" / "logs" / "daemon.log").read_text(encoding="utf-8")
    assert "reader npu-smi failing" in log


def test_dcmi_switched_on_mid_run_fails_naming_the_chips_and_the_error(tmp_path, run_daemon) -> None:
    # from 0.75 h to 1.5 h of a 2 h run (36 s of wall): no readings of any chip for a good part of
    # the soak. The stand-in workload trains from its first second: with the lm, a loaded
    # machine's torch start-up (38 s seen) once outlasted the run, and chip-hours had no training
    # to count. On such a machine the daemon may also take seconds to its first tick, so the gap
    # starts well after that and the bounds below are the sampler's own readings, not seconds.
    plan = fake_plan(tmp_path, run={"duration": "2h", "time_scale": 200, "id": "mid"},
                     devices={"backend": "sim"}, sim={"chips": 4, "fault": "dcmi:from_h=0.75,until_h=1.5"},
                     sampling={"interval": "1s"})
    assert run_daemon(plan).join(120) == 1
    analysis = _analysis(tmp_path, "mid")
    cov = _criterion(analysis, "evidence coverage")
    assert cov["met"] is False and cov["chips_seen"] == 4 and 0 < cov["min_ratio"] < 0.75
    reason = next(x for x in analysis["reasons"] if x.startswith("evidence: readings cover less than 95.0 %"))
    assert "on 4 chip(s)" in reason and "npu0-0" in reason and "dcmi module initialize failed" in reason
    # one outage of the reader, inside the fault's window, with readings before and after it
    with Store.open(tmp_path / "runs" / "mid" / "soak.db", create=False) as store:
        outages = [e for e in store.load_events("mid", kind="outage") if e.detail["reader"] == "npu-smi"]
        read = [r["ts"] for r in store.load_samples("mid", device="npu0-0") if r["util_pct"] is not None]
        start = store.get_run("mid").started_ts
    assert len(outages) == 1 and "dcmi module initialize failed" in outages[0].detail["error"]
    o = outages[0]
    # a reading is stamped when its tick begins; the simulated tool answers from the fleet's time
    # when it runs, on a loaded host seconds later (0.5 s of wall, 100 s here, seen): a quarter of an
    # hour of slack at each end
    assert 0.5 * 3600 <= o.ts - start and o.end_ts - start <= 1.75 * 3600, (o.ts - start, o.end_ts - start)
    assert min(read) < o.ts and max(read) > o.end_ts and not [t for t in read if o.ts < t < o.end_ts]
    # chip-hours count the chips' readings while training only: 4 chips x the 1.25 h they could be
    # read, with a reading's slack at each edge of the gap, not the 8 chip-hours of the whole run
    assert 0 < analysis["chip_hours"] <= 4 * 1.25 * 1.2


def test_eight_workload_sigkills_fail_and_chip_hours_count_chips_while_training(tmp_path, run_daemon) -> None:
    plan = fake_plan(tmp_path, run={"duration": "40s"},
                     restart={"backoff_initial": "0.1s", "backoff_max": "0.2s", "max_restarts": 20})
    tr = run_daemon(plan)
    d = tr.daemon
    killed: set[int] = set()
    for n in range(8):
        tr.wait_for(lambda n=n: d.supervisors[0].restarts == n and d.supervisors[0].pid not in killed
                    and d.agg.rank_state("lm", 0).step >= 3 * (n + 1), timeout_s=20)
        pid = d.supervisors[0].pid
        killed.add(pid)
        os.kill(pid, signal.SIGKILL)
    tr.wait_for(lambda: d.supervisors[0].restarts == 8, timeout_s=20)
    assert tr.join(60) == 1
    analysis = _analysis(tmp_path, "r1")
    crashes = _criterion(analysis, "crashes and hangs")
    assert (crashes["met"], crashes["uninjected"], crashes["injected"]) == (False, 8, 0)
    assert analysis["verdict"] == "fail"
    acc = analysis["accounting"]
    assert sum(1 for i in acc["interruptions"] if i["cause"] == "crash") == 8
    # one device ("cpu"), never the host row, and only while training: less than the window
    assert analysis["chip_unit"].startswith("CPU device-hours")
    assert 0 < analysis["chip_hours"] * 3600 <= acc["training_s"] + 1e-6 < acc["window_end"] - acc["window_start"]
    # the reliability: 8 failures of the machine, the chi-square bound over the run's node-hours,
    # and the planned time split without a second lost or counted twice
    rel = analysis["reliability"]
    assert rel["failures"] == {"crash": 8, "hang": 0, "node_lost": 0, "link": 0, "device_fault": 0, "sdc": 0}
    assert rel["node_hours"] == pytest.approx((acc["window_end"] - acc["window_start"]) / 3600)
    assert rel["node_mttf_h"] == pytest.approx(rel["node_hours"] / 8)
    assert rel["node_mttf_h_lower90"] == pytest.approx(2 * rel["node_hours"] / chi2.ppf(0.90, 18), rel=1e-9)
    # the job was up for the accounting's training time; the steps trained again after each kill
    # (from the checkpoint it resumed from) are not productive twice
    assert rel["training_s"] == acc["training_s"] and rel["injected_s"] == 0
    inside = sum(rel["lost_s"][c] for c in ("redone", "data_stall", "checkpoint", "link_test"))
    assert rel["productive_s"] + inside == pytest.approx(acc["training_s"]) and rel["lost_s"]["redone"] > 0
    assert rel["lost_s"]["crash"] > 0
    assert rel["productive_s"] + rel["injected_s"] + sum(rel["lost_s"].values()) == pytest.approx(rel["planned_s"])
    assert rel["planned_s"] == acc["planned_s"]
    # `soak runs show` says the same from the store's events
    shown = subprocess.run([sys.executable, "-m", "soak", "runs", "show", "r1", "--data-dir",
                            plan.run.data_dir, "--format", "json"],
                           capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(shown.stdout)["reliability"]["failures"] == rel["failures"]
    assert json.loads(shown.stdout)["reliability"]["lost_s"] == pytest.approx(rel["lost_s"])


def test_the_burn_in_clock_restarts_on_a_crash_and_moves_the_planned_end(tmp_path, run_daemon) -> None:
    # 12 s planned; the clock wants 10 s without an unexpected failure, at most 60 s in all
    need_s = 10.0
    plan = fake_plan(tmp_path, run={"duration": "12s"},
                     restart={"backoff_initial": "0.1s", "backoff_max": "0.2s", "max_restarts": 5},
                     acceptance={"thresholds": {"evidence.restart_clock_on_failure": 1,
                                                "evidence.min_uninterrupted_h": need_s / 3600,
                                                "evidence.max_duration_h": 60 / 3600,
                                                "evidence.max_uninjected_restarts": 1}})
    tr = run_daemon(plan)
    d = tr.daemon
    tr.wait_for(lambda: d.agg.rank_state("lm", 0).step >= 3
                and d.started.clock.now() - (d.started.planned_end_ts - 12.0) >= 6.0, timeout_s=60)
    pid = d.supervisors[0].pid
    os.kill(pid, signal.SIGKILL)
    rc = tr.join(120)
    analysis = _analysis(tmp_path, "r1")
    # what this test is about is the clock: on a loaded machine a criterion of the machine's own
    # (the readings' coverage of a 20 s run) may fail the verdict, and the exit status says so;
    # the clock's criteria are asserted below whatever the rest of the verdict
    assert rc == (0 if analysis["verdict"] == "pass" else 1), (rc, analysis["verdict"])
    acc = analysis["accounting"]
    crash = next(i for i in acc["interruptions"] if i["cause"] == "crash")
    assert crash["injected"] is False and crash["start"] - acc["window_start"] >= 6.0
    with Store.open(tmp_path / "runs" / "r1" / "soak.db", create=False) as store:
        run = store.get_run("r1")
        notes = [e for e in store.load_events("r1", kind="note") if (e.detail or {}).get("burn_in")]
    # the clock started again when the workload trained again after its crash: the planned end
    # moved to that moment plus the 10 s, the soak's start stayed where it was
    assert notes and notes[-1].detail["since"] == pytest.approx(crash["end"])
    assert run.planned_end_ts == pytest.approx(crash["end"] + need_s)
    assert run.plan["run"]["duration"] == pytest.approx(run.planned_end_ts - acc["window_start"])
    assert acc["planned_s"] == pytest.approx(run.planned_end_ts - acc["window_start"]) and acc["reached_end"]
    assert run.planned_end_ts - acc["window_start"] > 12.0 + 4.0  # moved: the crash came after 6 s
    assert _criterion(analysis, "runtime")["met"] is True
    # what the clock guarantees, the criterion finds: a stretch of the 10 s
    assert _criterion(analysis, "longest uninterrupted")["met"] is True
    # the run's last stretch lasted the clock's 10 s
    assert acc["window_end"] - crash["end"] == pytest.approx(need_s, abs=0.5)
    assert f"burn-in clock: {need_s / 3600:g} h without an unexpected failure" in notes[-1].message
