"""A run sampled too sparsely for a detector says so at its start and is not judged on it:
the simulated fleet leaks 800 MB/h, read once per 10 simulated minutes (1 s tick at x600),
over the memory envelope's 10-min window: the run, with nothing else failing, is not judged
(it ended PASS, 0 findings, before)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from soak.store import Store
from tests import procs

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_hbm_creep_sampled_once_per_10_min_is_not_judged_and_never_passes(tmp_path) -> None:
    runs = tmp_path / "runs"
    plan = tmp_path / "plan.toml"
    # the other criteria are loosened so that a shared, loaded machine missing some ticks or
    # starting the workload late leaves the blind ones the only thing between this run and a pass
    plan.write_text(f"""
[run]
duration = "6h"
time_scale = 600
data_dir = "{runs}"
id = "blind"
preflight = false
[devices]
backend = "sim"
[sim]
scenario = "healthy,hbm_creep:rate_mb_h=800,onset_h=1,chips=3"
[sampling]
interval = "1s"
[exporter]
listen = ""
[[workloads]]
name = "lm"
[acceptance]
thresholds = {{ "evidence.min_coverage" = 0.3, "evidence.min_availability" = 0.3 }}
""", encoding="utf-8")
    r = procs.run([sys.executable, "-m", "soak", "run", str(plan)],
                  tmp_path / "procs", env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
                  timeout_s=120, logs=[procs.daemon_log(runs / "blind")])
    assert r.returncode in (0, 1), r.stderr
    start = r.stderr.index("soak: run blind: ")
    line = ("soak: memory creep cannot be judged at one reading per 10 min: needs one per 5 min or less; "
            "use --interval 0.5s or less or --time-scale 300 or less\n")
    assert line in r.stderr and start < r.stderr.index(line) < r.stderr.index("soak: run blind finished")
    with Store.open(runs / "blind" / "soak.db", create=False) as s:
        notes = [e for e in s.load_events("blind", kind="note") if (e.detail or {}).get("blind")]
        assert {e.detail["kind"] for e in notes} == {"memory_creep", "utilization_dropouts", "outlier", "straggler"}
        memory = next(e for e in notes if e.detail["kind"] == "memory_creep")
        assert (memory.detail["interval_s"], memory.detail["max_interval_s"]) == (600.0, 300.0)
        assert memory.message == line[len("soak: "):-1]
        assert s.get_run("blind").verdict != "pass"
    saved = json.loads((runs / "blind" / "report" / "analysis.json").read_text(encoding="utf-8"))
    creep = next(c for c in saved["criteria"] if c["code"] == "criterion.kind.memory_creep")
    assert creep["met"] is None and creep["values"]["blind"] is True
    assert creep["measured"] == "not judged: one reading per 10 min, needs one per 5 min or less"
    assert saved["verdict"] is None, saved["reasons"]  # not judged: the blind criteria keep it from a pass
    assert "reason.blind" in {r["code"] for r in saved["reasons_typed"]}
    assert ("verdict N/A" in r.stderr and "\n  memory_creep cannot be judged at one reading per 10 min: needs one "
            "per 5 min or less\n" in r.stderr), r.stderr
    hang = next(c for c in saved["criteria"] if c["code"] == "criterion.kind.hang")
    assert hang["met"] is True and hang["values"]["shortest_s"] == 1800.0  # 3 readings: hangs of 30 min are seen
