"""`soak analyze RUN_ID` judges a recorded run with the run's own plan (acceptance thresholds,
expected checkpoint cadence), as the daemon did, so both give the same verdict."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from soak.config import plan_from_dict
from soak.store import Store

# slow: each test runs soak analyze as a process
pytestmark = [pytest.mark.slow, pytest.mark.compute]  # pyproject.toml

T0 = 1_767_225_600.0


def _record(db: str, plan: dict) -> None:
    store = Store.open(db)
    store.create_run("r1", host="node-a", plan=plan_from_dict(plan).to_dict(), started_ts=T0)
    rows = []
    for i in range(0, 4 * 3600, 10):
        # A 30 s stall every 10 min (checkpoint writes), no events recorded.
        idle = i >= 600 and (i - 600) % 600 < 30
        rows.append({"run_id": "r1", "ts": T0 + i, "device": "npu0-0", "up": True,
                     "util_pct": 1.0 if idle else 95.0, "hbm_used_bytes": 30_000_000_000,
                     "hbm_total_bytes": 68_719_476_736, "temp_c": 60.0})
    store.add_sample_rows(rows)
    # the workload trained from the start (a run that never trained cannot pass)
    store.add_event("r1", "start", ts=T0 + 1.0, workload="lm", rank=0, message="lm rank 0 started")
    store.close()


def _analyze(*args: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "soak", "analyze", *args, "--format", "json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_plan_checkpoint_cadence_explains_the_stalls(tmp_path):
    db = str(tmp_path / "soak.db")
    _record(db, {"phases": {"checkpoint_every": "10m", "checkpoint_duration": "1m"}})
    out = _analyze("r1", "--db", db)
    drops = [f for f in out["findings"] if f["kind"] == "utilization_dropouts"]
    assert out["verdict"] == "pass"
    assert drops and all(f["severity"] == "info" for f in drops)


def test_plan_thresholds_are_applied(tmp_path):
    # The stalls go down to 1 %; the plan counts only drops below 0.5 % as drops.
    db = str(tmp_path / "soak.db")
    _record(db, {"acceptance": {"thresholds": {"utilization.low_pct": 0.5}}})
    out = _analyze("r1", "--db", db)
    assert out["verdict"] == "pass"
    assert [f for f in out["findings"] if f["kind"] == "utilization_dropouts"] == []


def test_explicit_profile_wins_over_the_plan(tmp_path):
    db = str(tmp_path / "soak.db")
    _record(db, {"acceptance": {"thresholds": {"utilization.low_pct": 0.5}}})
    profile = tmp_path / "site.toml"
    profile.write_text("[thermal]\nthreshold_c = 90\n")
    out = _analyze("r1", "--db", db, "--profile", str(profile))
    (f,) = [f for f in out["findings"] if f["kind"] == "utilization_dropouts"]
    assert f["severity"] == "fail" and out["verdict"] == "fail"


def test_plan_profile_file_gone(tmp_path):
    # The plan named a profile file that has since moved: one line, and --profile still works.
    db = str(tmp_path / "soak.db")
    gone = tmp_path / "site.toml"
    gone.write_text("[thermal]\nthreshold_c = 90\n")
    _record(db, {"acceptance": {"profile": str(gone)}})
    gone.unlink()
    r = subprocess.run([sys.executable, "-m", "soak", "analyze", "r1", "--db", db],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("soak: error: run r1: ") and line.endswith("(pass --profile FILE.toml)")
    other = tmp_path / "other.toml"
    other.write_text("[thermal]\nthreshold_c = 95\n")
    assert _analyze("r1", "--db", db, "--profile", str(other))["verdict"] in ("pass", "fail")
