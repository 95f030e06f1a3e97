"""The Chinese report of a clean run gives its verdict reason in Chinese, not the analysis'
English sentence; a finding's own summary is left as written."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from soak.report import fonts
from soak.report.build import build_pdf
from soak.report.i18n import reason_text
from soak.store import Store


def test_reason_text_translates_only_the_clean_sentence():
    assert reason_text("no failing or warning findings", "zh") == "无失败级或告警级问题"
    assert reason_text("no failing or warning findings", "en") == "no failing or warning findings"
    summary = "FAIL memory_creep on npu3-0 from 2026-11-29 10:48:09Z: creeps 843.8 MB/h"
    assert reason_text(summary, "zh") == summary


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")
def test_zh_pdf_of_a_clean_run(tmp_path):
    try:
        fonts.register_cjk_font()
    except Exception as exc:  # no CJK TrueType font on this machine
        pytest.skip(f"no CJK font: {exc}")
    db = tmp_path / "soak.db"
    t0 = 1_790_000_000.0
    with Store.open(db) as store:
        store.create_run("r-ok", host="h1", plan={}, started_ts=t0)
        store.add_sample_rows([
            {"run_id": "r-ok", "ts": t0 + 10 * i, "device": "npu0-0", "up": True, "util_pct": 95.0,
             "temp_c": 55.0, "power_w": 300.0, "hbm_used_bytes": 30_000_000_000}
            for i in range(60)
        ])
        store.finish_run("r-ok", status="finished", ended_ts=t0 + 600, verdict="pass")
        built = build_pdf(store, "r-ok", tmp_path / "zh.pdf", lang="zh", keys=None)
    text = subprocess.run(["pdftotext", str(built.path), "-"], capture_output=True, text=True,
                          check=True, timeout=60).stdout
    assert "无失败级或告警级问题" in text
    assert "no failing or warning findings" not in text
