"""`soak analyze RUN_ID`: a recorded run read from the store, its events as explained phases."""

from __future__ import annotations

import json
import subprocess
import sys

from soak.store import Store

T0 = 1_767_225_600.0


def _record(db: str, with_events: bool) -> None:
    store = Store.open(db)
    store.create_run("r1", host="node-a", plan={}, started_ts=T0)
    rows = []
    for i in range(0, 4 * 3600, 10):
        ts = T0 + i
        # A 30 s stall every 10 min, all checkpoint writes of this run.
        idle = i >= 600 and (i - 600) % 600 < 30
        rows.append({"run_id": "r1", "ts": ts, "device": "npu0-0", "up": True,
                     "util_pct": 1.0 if idle else 95.0, "hbm_used_bytes": 30_000_000_000,
                     "hbm_total_bytes": 68_719_476_736, "temp_c": 60.0})
    store.add_sample_rows(rows)
    if with_events:
        for i in range(600, 4 * 3600, 600):
            store.add_event("r1", "checkpoint", ts=T0 + i - 2, end_ts=T0 + i + 32)
    store.close()


def _analyze(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "soak", "analyze", *args, "--format", "json"],
                          capture_output=True, text=True, timeout=60)


def test_run_id_from_store_with_checkpoint_events_explains_stalls(tmp_path):
    db = str(tmp_path / "soak.db")
    _record(db, with_events=True)
    r = _analyze("r1", "--db", db)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    drops = [f for f in out["findings"] if f["kind"] == "utilization_dropouts"]
    assert out["verdict"] == "pass"
    assert [(f["severity"], f["explained_by"], f["count"]) for f in drops] == [("info", "checkpoint", 23)]


def test_run_id_without_events_fails_on_periodic_stalls(tmp_path):
    db = str(tmp_path / "soak.db")
    _record(db, with_events=False)
    out = json.loads(_analyze("r1", "--db", db).stdout)
    (f,) = [f for f in out["findings"] if f["kind"] == "utilization_dropouts"]
    assert out["verdict"] == "fail" and f["severity"] == "fail" and round(f["period_s"]) == 600


def test_unknown_run_id_is_one_line_exit_2(tmp_path):
    db = str(tmp_path / "soak.db")
    _record(db, with_events=False)
    r = _analyze("nope", "--db", db)
    assert r.returncode == 2
    assert r.stderr.strip() == (f"soak: error: nope: no such file, and no such run in sqlite:///{db} "
                                f"(soak runs list --db sqlite:///{db} lists the runs there)")
