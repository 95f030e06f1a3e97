"""The daemon's analysis explains a restart's downtime like ``soak analyze RUN_ID``: a slow
restart (down longer than the hang threshold) is not a hang; the same silence without the
crash and restart events is one."""

from __future__ import annotations

import pytest

from soak.config import plan_from_dict
from soak.judge import judge_run
from soak.runplan import run_phases
from soak.store import Store
from soak.telemetry.records import DeviceSample, Snapshot

T0 = 1_764_000_000.0
CRASH = T0 + 3600.0
RESUMED = CRASH + 1500.0  # 25 min down: five times the 300 s hang threshold


def _record(store: Store, run_id: str, *, with_events: bool) -> None:
    """2 h of one chip at 10 s ticks and rank 0's step rows; nothing runs from the crash to
    the resume: the chip idles with its HBM still held (the old ranks are being reaped) and
    no step rows arrive, which is exactly what a hang looks like."""
    store.create_run(run_id, host="h", plan={}, started_ts=T0)
    steps = []
    for i in range(720):
        ts = T0 + 10.0 * i
        down = CRASH <= ts < RESUMED
        store.add_snapshot(run_id, Snapshot(ts=ts, host="h", devices=(
            DeviceSample(device="npu0-0", backend="npu", up=True, util_pct=1.0 if down else 95.0,
                         hbm_used_bytes=30 << 30, hbm_total_bytes=64 << 30),)))
        if not down:
            steps.append({"ts": ts, "workload": "lm", "rank": 0, "step": i, "n_steps": 10, "step_time_s": 1.0})
    store.add_steps(run_id, steps)
    store.add_event(run_id, "start", ts=T0)
    if with_events:
        store.add_event(run_id, "crash", ts=CRASH, workload="lm", message="lm: crashed (exit 1)")
        store.add_event(run_id, "restart", ts=CRASH + 20.0, workload="lm", message="lm: restart 1 (attempt 2)")
        # the new ranks load the checkpoint for most of the downtime, then say so
        store.add_event(run_id, "resume", ts=RESUMED, workload="lm", rank=0, detail={"step": 360})


@pytest.mark.parametrize("with_events", [True, False], ids=["crash-and-restart", "silence"])
def test_slow_restart_is_no_hang_but_unexplained_silence_is(tmp_path, with_events: bool) -> None:
    plan = plan_from_dict({"run": {"duration": "2h"}, "sampling": {"interval": "10s"}})
    with Store.open(tmp_path / "soak.db") as store:
        _record(store, "r", with_events=with_events)
        judged = judge_run(store, "r", plan=plan, now=T0 + 7200)
        findings, verdict = judged.findings, judged.analysis.verdict  # the detectors' verdict
        phases = {p.name: p.windows for p in run_phases(store.load_events("r"), plan)}
    crashes = next(c for c in judged.criteria if c["name"] == "crashes and hangs")
    hangs = [f for f in findings if f["kind"] == "hang"]
    if with_events:
        assert phases["restart"] == ((CRASH, RESUMED + 60.0),)
        assert hangs == [] and verdict == "pass", findings
        # the crash itself was not injected: the acceptance fails on it, not on a hang
        assert crashes["met"] is False and judged.verdict == "fail"
    else:
        assert "restart" not in phases
        assert hangs and hangs[0]["start"] <= CRASH + 10 and verdict == "fail"


def test_soak_analyze_run_id_uses_the_same_windows(tmp_path, capsys) -> None:
    import json

    from soak.cli import main

    db = tmp_path / "soak.db"
    with Store.open(db) as store:
        _record(store, "r", with_events=True)
    assert main(["analyze", "r", "--db", str(db), "--now", str(T0 + 7200), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "pass" and not [f for f in out["findings"] if f["kind"] == "hang"]
