"""What `soak run` tells the person at the terminal: where to look at the start, findings as
they are found (on an accelerated time line too), the workloads in words."""

from __future__ import annotations

import io

import pytest

from soak.config import plan_from_dict
from soak.daemon.jobs import analysis_period_s
from soak.daemon.lifecycle import workload_words
from tests.daemon.conftest import ThreadRun, fake_argv, fake_plan


def test_online_analysis_follows_the_runs_time_line() -> None:
    # soak demo: 8 h in 2 min; a 5 min analysis period on the wall would come after the end
    demo = plan_from_dict({"run": {"duration": "8h", "time_scale": 240}, "devices": {"backend": "sim"}, "jobs": {"analysis_every": "5m"}})
    assert analysis_period_s(demo) == 5.0  # 300 s / 240, but not below 5 s of wall time
    fast = plan_from_dict({"run": {"duration": "8h", "time_scale": 20}, "devices": {"backend": "sim"}, "jobs": {"analysis_every": "5m"}})
    assert analysis_period_s(fast) == 15.0
    real = plan_from_dict({"jobs": {"analysis_every": "5m"}})
    assert analysis_period_s(real) == 300.0


def test_run_label_reads_as_words() -> None:
    plan = plan_from_dict({"workloads": [{"name": "lm", "nproc": 2}, {"name": "gemm", "nproc": 1}]})
    assert workload_words(plan) == "lm on 2 processes, gemm on 1 process"


@pytest.mark.slow
def test_start_says_where_metrics_and_the_app_are(tmp_path) -> None:
    from soak.daemon.lifecycle import Daemon
    from tests.report.serve_helpers import free_port

    port = free_port()
    plan = fake_plan(tmp_path, run={"duration": "3s"}, exporter={"listen": f"127.0.0.1:{port}"})
    out = io.StringIO()
    tr = ThreadRun(Daemon(plan, argv_factory=fake_argv(), progress_every_s=60.0, out=out,
                          loop_interval_s=0.05, step_window_s=1.0)).start()
    tr.join(60)
    text = out.getvalue()
    assert "soak: run r1: lm on 1 process for 3 s\n" in text, text
    assert f"  metrics:    http://127.0.0.1:{port}/metrics\n" in text
    assert f"  report app: soak report serve --data-dir {tmp_path / 'runs'}   then open http://127.0.0.1:8501/\n" in text


def test_the_last_line_counts_the_findings_the_final_analysis_withdrew() -> None:
    # the terminal said "3 findings (1 fail)" during the run; the final analysis kept 2: the last
    # line says what became of the third, so the two counts agree
    from soak.daemon.status import ended_lines

    lines = ended_lines("r1", "finished", "fail", 2, ["no progress for 17 min (ongoing)"])
    assert lines == ["soak: run r1 finished, verdict fail, 2 findings, 1 announced during the run withdrawn "
                     "by the final analysis (soak runs show r1)",
                     "  withdrawn: no progress for 17 min (ongoing)"]
    assert ended_lines("r1", "finished", "pass", 0, []) == ["soak: run r1 finished, verdict pass, 0 findings "
                                                           "(soak runs show r1)"]
