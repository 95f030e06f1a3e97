"""The "Numerical correctness" table of the report (PDF in both languages, the app): the
criterion's evidence (checks per chip) in one line, then every numerical event as the daemon
stored it, fail first.

The events and step rows are those the daemon stores from heartbeat lines a training writes
(``tests.analysis.test_analysis_numerics``): rank 1's chip (npu0-1) confirmed wrong at step
200 by the recompute check, and a NaN loss on it that did not recur, on a run of four chips
whose first two trained."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from soak.daemon.heartbeat import HeartbeatFollower, StepAggregator
from soak.report.build import build_pdf
from soak.store import Store
from tests.analysis.test_analysis_numerics import _lines, _place, _sdc
from tests.report.synth import write_run
from tests.report.test_report_app import APP
from tests.report.test_report_device_faults import cells

T0 = 1_790_000_000.0
poppler = pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")


def _wrong(store: Store, tmp_path: Path, run_id: str = "nm-1") -> None:
    write_run(store, run_id, chips=4, hours=0.5, interval_s=30.0, start=T0, creep=False, crash=False, findings=False)
    nan = {"event": "nonfinite", "rank": 1, "step": 300, "message": "loss is nan", "what": "loss", "value": "nan",
           "suspect_rank": 1, "classification": "transient"}
    hb = tmp_path / "hb"
    hb.mkdir()
    for rank, lines in _lines([_sdc("recompute", "chip"), nan]).items():
        (hb / f"lm-rank{rank}.jsonl").write_text("".join(__import__("json").dumps(
            {**x, "ts": x["ts"] - 1_760_000_000.0 + T0 + 0.25}) + "\n" for x in lines))
    agg = StepAggregator(window_s=5.0, place=_place)
    rows, events = agg.feed(HeartbeatFollower(hb).poll())
    store.add_steps(run_id, rows + agg.flush(None))
    for e in events:
        store.add_event(run_id, e["kind"], ts=e["ts"], workload=e["workload"], rank=e["rank"], message=e["message"],
                        detail=e["detail"])


@poppler
@pytest.mark.slow
def test_pdf_holds_the_numerical_correctness_table_in_english_and_chinese(tmp_path):
    with Store.open(tmp_path / "soak.db") as store:
        _wrong(store, tmp_path)
        en = build_pdf(store, "nm-1", tmp_path / "en.pdf", lang="en").path
        zh = build_pdf(store, "nm-1", tmp_path / "zh.pdf", lang="zh").path
    found = cells(en, "Numericalcorrectness", past="Per-chipsummary")
    # the evidence: 40 checks on each of the two chips the ranks trained on (step rows from the
    # 10th step on), none on the others
    assert found[0].startswith("80check(s)on2of4chip(s),steps10-400(npu0-040,npu0-140):1failing,1warning(s);"
                               "notjudgedonnpu1-0,npu1-1:nocheckreachedthem")
    i = found.index("Time")
    assert found[i:i + 11] == ["Time", "Chip", "Serial", "Rank", "Step", "What", "Check", "Error", "Tolerance",
                               "Settledas", "Severity"]
    body = found[i + 11:]
    assert body[1:11] == ["npu0-1", "SN-B", "1", "200", "wrongresult(silentdatacorruption)", "cross-chiprecompute",
                          "0.37", "0.001", "thischip(recurs)", "fail"]
    assert body[12:22] == ["npu0-1", "SN-B", "1", "300", "NaN/Inf", "loss", "N/A", "N/A", "transient(didnotrecur)",
                           "warning"]
    zt = cells(zh, "数值正确性", past="逐芯片汇总")
    assert zt[0].startswith("2/4个芯片共校验80次，第10–400步（npu0-040次,npu0-140次）：1个失败，1个告警")
    k = zt.index("时间")
    assert zt[k:k + 11] == ["时间", "芯片", "序列号", "Rank", "步", "类型", "校验", "误差", "容差", "判定", "严重性"]
    assert zt[k + 12:k + 22] == ["npu0-1", "SN-B", "1", "200", "计算结果错误（静默数据损坏）", "跨芯片重算", "0.37", "0.001",
                                 "本芯片（复现）", "失败"]


def test_app_overview_shows_the_numerical_correctness_table(tmp_path, monkeypatch):
    run_dir = tmp_path / "nm-1"
    run_dir.mkdir()
    with Store.open(run_dir / "soak.db") as store:
        _wrong(store, tmp_path)
    monkeypatch.setenv("SOAK_REPORT_DB", "")
    monkeypatch.setenv("SOAK_REPORT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("SOAK_REPORT_LANG", "en")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, at.exception
    assert "Numerical correctness" in [s.value for s in at.subheader]
    table = next(t.value for t in at.table if t.value.index.name == "Time")
    assert list(table["Chip"]) == ["npu0-1", "npu0-1"] and list(table["Severity"]) == ["fail", "warning"]
    assert list(table["Settled as"]) == ["this chip (recurs)", "transient (did not recur)"]
    assert any(m.value.startswith("80 check(s) on 2 of 4 chip(s)") for m in at.markdown)
