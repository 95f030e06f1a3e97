"""Supervision on real processes: crash (SIGKILL), hang, give-up; restarts resume from the
last checkpoint and every restart is recorded."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from soak.store import Store

pytestmark = pytest.mark.slow


def _store(plan) -> Store:
    return Store.open(os.path.join(plan.run.data_dir, "r1", "soak.db"))


def _steps(store: Store) -> list[int]:
    return [r["step"] for r in store.load_steps("r1")]


def test_workload_killed_with_sigkill_is_restarted_and_resumes_from_checkpoint(tmp_path, run_daemon) -> None:
    from tests.daemon.conftest import fake_plan

    plan = fake_plan(tmp_path, run={"duration": "12s"})
    tr = run_daemon(plan)
    d = tr.daemon
    tr.wait_for(lambda: d.agg.rank_state("lm", 0).step >= 12)
    victim = d.supervisors[0].pid
    step_at_kill = d.agg.rank_state("lm", 0).step
    os.kill(victim, signal.SIGKILL)
    tr.wait_for(lambda: d.supervisors[0].restarts == 1 and d.agg.rank_state("lm", 0).step > step_at_kill + 5)
    d.request_stop("test")
    assert tr.join() == 1  # a crash nobody injected fails the acceptance, even of a stopped run

    store = _store(plan)
    kinds = [e.kind for e in store.load_events("r1")]
    crash = store.load_events("r1", kind="crash")
    assert len(crash) == 1 and crash[0].detail["exit_code"] == -signal.SIGKILL
    restart = store.load_events("r1", kind="restart")
    assert len(restart) == 1 and restart[0].detail["restarts"] == 1 and restart[0].detail["pid"] != victim
    assert kinds.index("crash") < kinds.index("restart")
    # the second attempt resumed from the last checkpoint at or before the kill
    resume = [e for e in store.load_events("r1", kind="resume")]
    assert len(resume) == 1
    resumed_at = resume[0].detail["step"]
    assert resumed_at % 5 == 0 and step_at_kill - 5 <= resumed_at <= step_at_kill
    rows = store.load_steps("r1")
    assert {r["attempt"] for r in rows} == {1, 2}
    assert max(r["step"] for r in rows if r["attempt"] == 2) > step_at_kill
    run = store.get_run("r1")
    assert (run.status, run.restarts, run.verdict) == ("stopped", 1, "fail")
    store.close()
    analysis = json.loads((Path(plan.run.data_dir) / "r1" / "report" / "analysis.json").read_text())
    crashes = next(c for c in analysis["criteria"] if c["name"] == "crashes and hangs")
    assert (crashes["met"], crashes["uninjected"]) == (False, 1)
    assert any(r.startswith("restarts: crash of lm") for r in analysis["reasons"])


def test_hung_workload_is_detected_killed_and_restarted(tmp_path, run_daemon) -> None:
    from tests.daemon.conftest import fake_plan

    plan = fake_plan(tmp_path, run={"duration": "30s"}, restart={"hang_timeout": "1.5s"})
    tr = run_daemon(plan, "--hang-at", "8")
    d = tr.daemon
    tr.wait_for(lambda: d.supervisors[0].restarts == 1 and d.agg.rank_state("lm", 0).step >= 12, timeout_s=40)
    hung_pid = None
    d.request_stop("test")
    assert tr.join() == 1  # an uninjected hang fails the acceptance
    store = _store(plan)
    hang = store.load_events("r1", kind="hang")
    assert len(hang) == 1 and hang[0].detail["stalled_s"] >= 1.5
    hung_pid = hang[0].detail["pid"]
    assert store.load_events("r1", kind="crash") == []
    assert len(store.load_events("r1", kind="restart")) == 1
    with pytest.raises(ProcessLookupError):  # the hung process group is gone
        os.killpg(hung_pid, 0)
    assert max(_steps(store)) >= 12
    store.close()


def test_gives_up_after_max_restarts_and_fails_the_run(tmp_path, run_daemon) -> None:
    from tests.daemon.conftest import fake_plan

    plan = fake_plan(tmp_path, run={"duration": "60s"}, restart={"max_restarts": 2})
    tr = run_daemon(plan, "--crash-at", "3", "--crash-always")
    assert tr.join(60) == 1
    store = _store(plan)
    assert len(store.load_events("r1", kind="crash")) == 3
    assert len(store.load_events("r1", kind="restart")) == 2
    stop = store.load_events("r1", kind="stop")
    assert stop and stop[0].detail["gave_up"] is True
    run = store.get_run("r1")
    assert (run.status, run.verdict, run.restarts) == ("failed", "fail", 2)
    store.close()


def test_low_disk_stops_the_run_cleanly_with_one_error_line(tmp_path, run_daemon) -> None:
    from soak.errors import StoreError
    from tests.daemon.conftest import fake_plan

    plan = fake_plan(tmp_path, run={"duration": "60s"}, jobs={"min_free": "1000000GiB"})
    tr = run_daemon(plan)
    with pytest.raises(StoreError, match=r"MiB free on the run folder.s disk \(needs [0-9.]+ MiB\); stopping before it fills \(run r1 stopped"):
        tr.join(60)
    store = _store(plan)
    run = store.get_run("r1")
    assert run.status == "stopped" and run.ended_ts is not None
    disk = store.load_events("r1", kind="disk")
    assert len(disk) == 1 and disk[0].detail["free_bytes"] > 0
    assert store.load_events("r1", kind="stop")[0].detail["reason"] == "disk"
    store.close()
