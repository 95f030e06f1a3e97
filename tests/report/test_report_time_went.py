"""'Where the time went': a dropout finding beside its capture and the baseline, in the app
and the PDF, in English and Chinese; a healthy run shows its baseline alone."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from soak.analysis.model import SCHEMA_VERSION
from soak.report.loader import load_report_data
from soak.report.timewent import sections
from soak.runfolder import write_analysis
from soak.store import Store
from tests.report.figures import pdf_text
from tests.report.test_report_app import APP
from tests.report.test_report_pdf import poppler

T0 = 1_790_000_000.0
DROP = {"kind": "utilization_dropouts", "device": "cpu", "metric": "util_pct", "start": T0 + 30, "end": T0 + 80,
        "severity": "fail", "summary": "10 utilization drops below 20% every 6 s", "period_s": 6.0}


def _summary(label: str, data: float, backward: float, **extra) -> dict:
    return {"label": label, "first_step": 21, "last_step": 30, "steps": 10, "backend": "cpu", "error": None,
            "steps_per_s": 32.0 if label == "baseline" else 10.1, "dominant": "data" if data > 0.5 else "backward",
            "shares": {"data": data, "forward": 0.2, "backward": backward, "optimizer": 0.05, "comm": 0.0,
                       "idle": max(0.0, 1 - data - 0.25 - backward)},
            "top_host_ops": [{"name": "aten::mm", "self_ms": 85.5, "calls": 270}],
            "top_device_ops": [{"name": "aten::mm", "self_ms": 85.5, "calls": 270}],
            "cpu_fallbacks": None, "cpu_fallbacks_note": "not applicable on CPU",
            "trace": f"profile/lm-rank0-{label}-step21/lm-rank0.pt.trace.json.gz", **extra}


def _run(tmp_path, run_id: str, finding: bool) -> Store:
    folder = tmp_path / run_id
    folder.mkdir(parents=True)
    store = Store.open(folder / "soak.db")
    store.create_run(run_id, host="h1", plan={}, started_ts=T0, backend="cpu", run_dir=str(folder))
    store.add_sample_rows([{"run_id": run_id, "ts": T0 + i, "device": "cpu", "up": True, "util_pct": 50.0}
                           for i in range(100)])
    store.add_event(run_id, "capture", ts=T0 + 10, workload="lm", rank=0, detail=_summary("baseline", 0.1, 0.54))
    if finding:
        store.add_event(run_id, "capture", ts=T0 + 60, workload="lm", rank=0,
                        detail=_summary("request", 0.68, 0.0, request=1, finding={**DROP, "devices": ["cpu"]}))
    store.finish_run(run_id, status="finished", ended_ts=T0 + 100, verdict="fail" if finding else "pass")
    # an analysis as the judge writes it, with its criteria (one without is re-judged from the store)
    write_analysis(folder, {"findings": [DROP] if finding else [], "verdict": "fail" if finding else "pass",
                            "reasons": [], "criteria": [], "schema_version": SCHEMA_VERSION})
    return store


def test_finding_sits_beside_its_capture_and_the_baseline(tmp_path) -> None:
    with _run(tmp_path, "slow", True) as store:
        data = load_report_data(store, "slow", with_series=False)
    assert [f.capture for f in data.findings] == [2]
    (sec,) = sections(data, "en")
    assert sec.title.endswith("→ capture #2") and sec.note == "Cause: Data loading takes 68% of the captured steps."
    rows = {r[0]: r[1:] for r in sec.rows}
    assert sec.header == ("", "Baseline", "At the finding")
    assert rows["Data loading"] == ("10%", "68%") and rows["Dominant share"] == ("Backward", "Data loading")
    assert rows["Top operator 1"] == ("aten::mm (85.5 ms)",) * 2 and rows["Top operator 2"] == ("–", "–")
    assert rows["CPU fallbacks"] == ("not applicable on CPU",) * 2
    (zh,) = sections(data, "zh")
    assert zh.note == "原因：数据加载占采集步骤时间的 68%。"


def test_healthy_run_shows_only_its_baseline(tmp_path) -> None:
    with _run(tmp_path, "ok", False) as store:
        data = load_report_data(store, "ok", with_series=False)
    (sec,) = sections(data, "en")
    assert sec.header == ("", "Baseline") and sec.capture.label == "baseline"


@poppler
@pytest.mark.parametrize("lang, words", [
    ("en", ("Where the time went", "capture #2", "Data loading", "68%", "not applicable on CPU")),
    ("zh", ("时间都花在哪里", "采集 #2", "数据加载", "68%", "CPU 上不适用")),
])
def test_pdf_section_in_both_languages(tmp_path, lang, words) -> None:
    from soak.report.build import build_pdf

    with _run(tmp_path, "slow", True) as store:
        built = build_pdf(store, "slow", tmp_path / f"{lang}.pdf", keys=None, lang=lang)
    text = " ".join(pdf_text(built.path).split())
    for w in words:
        assert w in text, w


def test_app_findings_page_links_the_capture(tmp_path, monkeypatch) -> None:
    _run(tmp_path, "slow", True).close()
    monkeypatch.setenv("SOAK_REPORT_DB", "")
    monkeypatch.setenv("SOAK_REPORT_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("SOAK_REPORT_LANG", raising=False)
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.sidebar.radio(key="page").set_value("findings").run()
    assert not at.exception, at.exception
    md = " ".join(m.value for m in at.markdown)
    assert "[capture #2](#capture-2)" in md and 'id="capture-2"' in md
    # the capture's table (the finding's evidence table comes before it)
    table = next(tb.value for tb in at.table if " " in tb.value.columns)
    assert list(table.columns) == [" ", "Baseline", "At the finding"]
    assert table.set_index(" ").loc["Data loading"].tolist() == ["10%", "68%"]
    assert "Data loading takes 68%" in " ".join(w.value for w in at.warning)


def test_soak_profile_lists_captures_and_names_a_missing_run(tmp_path, capsys) -> None:
    from soak.cli import main

    _run(tmp_path, "slow", True).close()
    assert main(["profile", "slow", "--data-dir", str(tmp_path), "--capture", "2"]) == 0
    out = capsys.readouterr().out
    assert "  2 request   lm/0     21-30           10.1    68% data" in out
    assert "explains [fail] utilization_dropouts on cpu" in out
    assert "CPU fallbacks: not applicable on CPU" in out
    assert main(["profile", "slow", "--data-dir", str(tmp_path), "--capture", "9"]) == 2
    assert "--capture 9: run slow has captures 1..2" in capsys.readouterr().err
    assert main(["profile", "nope", "--data-dir", str(tmp_path)]) == 2
    assert f"run nope: no {tmp_path / 'nope' / 'soak.db'}" in capsys.readouterr().err
