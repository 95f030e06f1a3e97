"""The whole loop with the real lm workload under torchrun: a 40 s CPU soak through the CLI.
The accelerated soak on the simulated fleet with an injected crash and HBM creep is the demo's
(tests/report/test_report_demo.py reads its run)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from soak.store import Store
from tests import procs
from tests.daemon.conftest import fake_plan

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def test_forty_second_cpu_soak_records_every_tick_and_a_verdict(tmp_path) -> None:
    """Runs among the parallel tests: "every tick" is counted in the sampler's own ticks (the
    readings it took, from its log, against the rows stored), not in gaps of wall seconds; a
    40 s run at time scale 1 is shorter than the step-time detector's baseline. 40 s, not 30: torch's
    start on a loaded machine took 25 s of 30, leaving one stored step row. A checkpoint every 20
    steps: a loaded machine once left the run short of the model's default 200."""
    port = procs.free_port()
    plan = tmp_path / "plan.toml"
    plan.write_text('[[workloads]]\nname = "lm"\nextra = ["--ckpt-every", "20"]\n', encoding="utf-8")
    proc = procs.start(
        [sys.executable, "-m", "soak", "run", str(plan), "--duration", "40s", "--backend", "cpu",
         "--data-dir", str(tmp_path), "--run-id", "e2e", "--listen", f"127.0.0.1:{port}", "--interval", "1s",
         "--no-preflight"], tmp_path / "procs", env=_env())
    logs = [procs.daemon_log(tmp_path / "e2e")]
    try:
        def stepping() -> str:
            text = procs.scrape(port)
            return text if "soak_run_step{" in text else ""

        text = procs.wait_until(stepping, proc, 55, logs=logs, interval_s=1.0)
        assert 'soak_run_info{run_id="e2e",verdict="running",workload="lmx1"} 1.0' in text
        assert 'soak_run_step{rank="0",run_id="e2e",workload="lm"}' in text
        assert 'soak_run_remaining_seconds{run_id="e2e"}' in text
        assert 'soak_device_utilization_ratio{' in text and 'device="cpu"' in text
        proc.wait_exit(120, logs=logs)
    finally:
        proc.close()
    err = proc.stderr_text()
    assert proc.returncode == 0, err
    assert "run e2e finished, verdict pass" in err
    assert "elapsed" in err and "left" in err  # progress lines
    with Store.open(tmp_path / "e2e" / "soak.db", create=False) as s:
        run = s.get_run("e2e")
        assert (run.status, run.verdict) == ("finished", "pass")
        ts = [r["ts"] for r in s.load_samples("e2e", device="cpu")]
        # one row for each reading the sampler took, none lost; about one a second of the run
        # (the verdict's evidence criterion passed: 95 % of the ticks of 40 s at 1 s)
        taken = int(re.findall(r"sampler: (\d+) ticks read chips", logs[0].read_text(encoding="utf-8"))[-1])
        assert len(ts) == len(set(ts)) == taken >= 35, (len(ts), taken)
        # psutil measures CPU between two reads: the first tick has none (None, never 0)
        assert all(r["util_pct"] is not None for r in s.load_samples("e2e", device="cpu")[1:])
        steps = s.load_steps("e2e")
        # trained and stepping: under the parallel tests' load torch may start late enough that
        # the run's steps fall in one step window, one row (step 42 once)
        assert steps and steps[-1]["step"] > 0 and steps[-1]["step_time_s"] > 0
        assert {e.kind for e in s.load_events("e2e")} >= {"start", "checkpoint"}
    saved = json.loads((tmp_path / "e2e" / "report" / "analysis.json").read_text(encoding="utf-8"))
    assert saved["verdict"] == "pass" and saved["run_id"] == "e2e" and saved["detector_versions"]


def test_a_bug_in_the_daemon_loop_still_ends_the_run(tmp_path, run_daemon, monkeypatch) -> None:
    """A daemon that died of a bug (an OverflowError in the progress line, for one) left its
    run 'running' for ever; it is now 'failed', and the traceback still says what broke."""
    from soak.daemon import lifecycle

    def broken(_status):
        raise OverflowError("cannot convert float infinity to integer")

    monkeypatch.setattr(lifecycle, "progress_line", broken)
    tr = run_daemon(fake_plan(tmp_path, run={"duration": "30s"}))
    with pytest.raises(OverflowError):
        tr.join(60)
    with Store.open(Path(tmp_path / "runs" / "r1" / "soak.db"), create=False) as s:
        run = s.get_run("r1")
    assert run.status == "failed" and run.ended_ts is not None
