"""The final analysis the daemon saves in ``report/analysis.json`` is what the report shows:
its verdict (also when the run failed on clean telemetry), findings, thresholds and versions."""

from __future__ import annotations

import json
import shutil

import pytest

from soak.config import plan_from_dict
from soak.judge import judge_run
from soak.report.loader import load_report_data
from soak.runfolder import write_analysis
from soak.store import Store
from soak.telemetry.records import DeviceSample, Snapshot
from tests.report.figures import pdf_text

T0 = 1_764_000_000.0


def _finished_run(tmp_path, status: str, verdict_override: str | None) -> tuple[Store, dict]:
    """A clean 2 h stand-in run, finished as the daemon's ``_finish`` does it."""
    run_dir = tmp_path / "r"
    (run_dir / "report").mkdir(parents=True)
    store = Store.open(run_dir / "soak.db")
    plan = plan_from_dict({"sampling": {"interval": "10s"}})
    store.create_run("r", host="h", plan=plan.to_dict(), started_ts=T0, run_dir=str(run_dir))
    for i in range(720):
        store.add_snapshot("r", Snapshot(ts=T0 + 10.0 * i, host="h", devices=(
            DeviceSample(device="npu0-0", backend="npu", up=True, util_pct=95.0, temp_c=50.0, power_w=300.0,
                         hbm_used_bytes=30 << 30, hbm_total_bytes=64 << 30),)))
    store.add_event("r", "start", ts=T0 + 5.0, workload="lm", rank=0, message="lm rank 0 started")
    result = judge_run(store, "r", plan=plan, status="finished", ended=T0 + 7200)
    assert result is not None and result.analysis.verdict == "pass"
    judged = judge_run(store, "r", plan=plan, status=status, ended=T0 + 7200,
                       why=None if status == "finished" else "gave up after 3 restarts")
    verdict = verdict_override or judged.verdict
    store.replace_findings("r", judged.findings)
    store.finish_run("r", status=status, ended_ts=T0 + 7200, verdict=verdict)
    write_analysis(run_dir, judged.to_dict())
    saved = json.loads((run_dir / "report" / "analysis.json").read_text(encoding="utf-8"))
    assert [p.name for p in (run_dir / "report").iterdir()] == ["analysis.json"]  # no temp file left
    return store, saved


def test_saved_analysis_carries_thresholds_versions_and_the_run_verdict(tmp_path) -> None:
    store, saved = _finished_run(tmp_path, "finished", None)
    with store:
        assert saved["verdict"] == "pass" == store.get_run("r").verdict
        assert saved["run_id"] == "r" and saved["detector_versions"]["hang"]
        assert saved["thresholds"]["hang"]["threshold_s"] == 300.0
        data = load_report_data(store, "r", with_series=False)
    assert data.verdict == "pass" and data.clean_statement.text == saved["clean_statement"]
    assert data.clean_statement.code == saved["clean_statement_typed"]["code"] == "statement.clean"
    assert {d.name for d in data.detectors} >= {"hang", "memory_creep", "profile"}


@pytest.mark.slow
def test_report_shows_the_stored_verdict_of_a_failed_run(tmp_path) -> None:
    # Restarts exhausted: the run failed although its telemetry alone would pass.
    store, saved = _finished_run(tmp_path, "failed", "fail")
    with store:
        assert saved["verdict"] == "fail" == store.get_run("r").verdict
        assert any(r.startswith("run failed:") for r in saved["reasons"])
        data = load_report_data(store, "r", with_series=False)
        assert (data.verdict, data.clean_statement) == ("fail", None)
        assert any(r.text.startswith("run failed:") and r.code == "reason.run_failed" for r in data.verdict_reasons)
        if shutil.which("pdftotext") is None:
            pytest.skip("poppler-utils not installed")
        from soak.report.build import build_pdf

        built = build_pdf(store, "r", tmp_path / "report.pdf", lang="en")
    assert built.verdict == "fail"
    text = pdf_text(built.path)
    assert "Verdict: FAIL" in text and "Verdict: PASS" not in text
