"""A real ``soak run`` of the GEMM burn whose chips compute a wrong product: the run fails on
the "numerical correctness" criterion, naming both chips and the check, and the finding is on
the terminal within a heartbeat poll of the wrong result (measured here, from the workload's
own line of the fault to the daemon's line of the finding)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from soak.store import Store
from tests import procs

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parent.parent.parent


def _inject_ts(run_dir: Path) -> dict[int, float]:
    """Each rank's wall time of its injected corruption, from its heartbeat file."""
    out = {}
    for path in (run_dir / "heartbeats").glob("gemm-rank*.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("event") == "inject":
                out[int(rec["rank"])] = float(rec["ts"])
    return out


def test_gemm_with_a_corrupt_product_on_both_chips_fails_naming_them_and_the_check(tmp_path: Path) -> None:
    data = tmp_path / "runs"
    argv = [sys.executable, "-m", "soak", "run", "--backend", "sim", "--sim-chips", "2", "--workload", "gemm",
            "--size", "tiny", "--nproc", "2", "--inject", "corrupt:30", "--time-scale", "60", "--duration", "1h",
            "--interval", "1s", "--listen", "", "--data-dir", str(data), "--run-id", "g1"]
    run_dir = data / "g1"
    logs = [procs.daemon_log(run_dir)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    seen: float | None = None
    with procs.start(argv, tmp_path, "agent", env=env) as agent:
        deadline = time.monotonic() + 240
        while agent.poll() is None and time.monotonic() < deadline:  # bounded: the run lasts 60 s
            if seen is None and agent.stderr_text().count("finding [fail] sdc on") >= 2:
                seen = time.time()
            time.sleep(0.2)
        rc = agent.wait_exit(30, logs=logs)
        err = agent.stderr_text()
    assert rc == 1, err
    assert "verdict fail" in err, err
    injected = _inject_ts(run_dir)
    assert sorted(injected) == [0, 1]
    assert seen is not None, err
    print(f"wrong product to the finding on the terminal: {seen - max(injected.values()):.2f} s (wall)")
    report = json.loads((run_dir / "report" / "analysis.json").read_text())
    sdc = [f for f in report["findings"] if f["kind"] == "sdc"]
    assert {f["device"] for f in sdc} == {"npu0-0", "npu1-0"}, sdc
    for f in sdc:
        assert f["severity"] == "fail" and f["metric"] == "gemm"
        v = f["values"]
        assert (v["check"], v["comparison"], v["class"], v["step"]) == ("gemm", "gemm_cpu", "chip", 30)
        assert v["error"] > v["tolerance"] == 1e-3
        assert "wrong result in the gemm check" in f["summary"]
    (crit,) = [c for c in report["criteria"] if c["code"] == "criterion.numerics"]
    assert crit["met"] is False
    v = crit["values"]
    assert (v["checked"], v["chips"], v["fails"]) == (2, 2, 2)
    assert v["checked_chips"] == ["npu0-0", "npu1-0"] and min(v["chip_checks"]) > 0
    with Store.open(str(run_dir / "soak.db"), create=False) as store:
        events = store.load_events("g1", "sdc")
    assert {(e.rank, e.detail["chip"], e.detail["severity"], e.detail["check"]) for e in events} == {
        (0, "npu0-0", "fail", "gemm_cpu"), (1, "npu1-0", "fail", "gemm_cpu")}
