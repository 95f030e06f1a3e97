"""The PDF: built from a recorded run, rendered by poppler, read back as text (en and zh)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import subprocess

import pytest

from soak.analysis import DETECTOR_VERSIONS
from soak.cli import main
from soak.report import fonts
from soak.report.build import build_pdf
from soak.report.model import Customer, Message
from soak.report.sentences import reason_text
from soak.report.verify import FINDINGS_NAME, PROFILE_NAME, RAW_NAME, read_attachments
from soak.store import Store
from tests.report.figures import pdf_text
from tests.report.pagecheck import english_left

# slow: renders and reads whole PDFs
pytestmark = [pytest.mark.slow, pytest.mark.compute]  # pyproject.toml

poppler = pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")


@pytest.fixture(scope="module")
def built(recorded, keys, tmp_path_factory):
    out = tmp_path_factory.mktemp("pdf")
    with Store.open(recorded["db"], create=False) as store:
        en = build_pdf(
            store,
            recorded["run_id"],
            out / "en.pdf",
            lang="en",
            customer=Customer("ACME Compute", "Shanghai DC2", "cl-910b-07", "node-a01"),
            keys=keys,
        )
        zh = build_pdf(
            store,
            recorded["run_id"],
            out / "zh.pdf",
            lang="zh",
            customer=Customer("华东智算中心", "上海二号机房", "cl-910b-07", "node-a01"),
            keys=keys,
        )
    return {"en": en, "zh": zh, "dir": out}


@poppler
def test_english_pdf_has_every_section_and_the_fail_verdict(built, recorded):
    text = pdf_text(built["en"].path)
    for needle in (
        "Soak test acceptance report",
        "ACME Compute",
        "Shanghai DC2",
        "cl-910b-07",
        "Verdict: FAIL",
        "Acceptance criteria",
        "Per-chip summary",
        "Per-chip timelines",
        "Findings",
        "Event timeline",
        "Appendix: thresholds, environment manifest and run plan",
        "Clean-run statement",
        "Detector versions and thresholds",
        "24.1.rc2",  # driver version from the manifest
        "032100000001",  # serial of the card holding the leaking chip npu1-1
        "injected crash",  # the crash event
    ):
        assert needle in text, needle
    # The planted HBM leak on npu1-1 is found by the real analysis and named on the cover.
    assert recorded["shape"].creep_device == "npu1-1"
    assert "memory creep" in text and "npu1-1" in text
    assert DETECTOR_VERSIONS["memory_creep"].split("/", 1)[1] in text
    assert "None" not in text


@poppler
def test_pdf_digest_is_the_sha256_of_the_store_export(built, recorded, tmp_path):
    with Store.open(recorded["db"], create=False) as store:
        n = store.export_csv(recorded["run_id"], tmp_path / "raw.csv")
    digest = hashlib.sha256((tmp_path / "raw.csv").read_bytes()).hexdigest()
    assert built["en"].data_sha256 == digest
    assert built["en"].data_rows == n
    assert digest in pdf_text(built["en"].path).replace(" ", "").replace("\n", "")


def test_pdf_attaches_raw_csv_and_findings_json(built):
    from pyhanko.pdf_utils.reader import PdfFileReader

    reader = PdfFileReader(io.BytesIO(built["en"].path.read_bytes()))
    atts = read_attachments(reader)
    assert set(atts) == {RAW_NAME, FINDINGS_NAME, PROFILE_NAME}
    assert atts[RAW_NAME].startswith(b"timestamp,device,metric,value\r\n")
    assert hashlib.sha256(atts[RAW_NAME]).hexdigest() == built["en"].data_sha256
    doc = json.loads(atts[FINDINGS_NAME])
    assert doc["verdict"] == "fail"
    assert doc["raw_data_sha256"] == built["en"].data_sha256
    assert doc["profile_sha256"] == hashlib.sha256(atts[PROFILE_NAME]).hexdigest()
    kinds = {(f["kind"], f["device"], f["severity"]) for f in doc["findings"]}
    assert ("memory_creep", "npu1-1", "fail") in kinds
    assert any(e["kind"] == "restart" for e in doc["events"])


@poppler
def test_chinese_pdf_renders_cjk_with_an_embedded_font(built):
    text = pdf_text(built["zh"].path)
    for needle in ("稳定性拷机验收报告", "结论", "未通过", "华东智算中心", "上海二号机房", "逐芯片汇总", "验收标准", "环境清单",
                   "运行时长", "无失败级内存持续增长"):
        assert needle in text, needle
    assert not english_left(text)  # every sentence of the judgement rendered in Chinese
    fonts_out = subprocess.run(["pdffonts", str(built["zh"].path)], capture_output=True, text=True, check=True).stdout
    # every TrueType font (the CJK font, whichever was found, and DejaVu Sans) is embedded
    embedded = [ln for ln in fonts_out.splitlines()[2:] if " TrueType " in ln]
    assert any("DejaVu" not in ln for ln in embedded) and all(" yes " in ln for ln in embedded), fonts_out


@poppler
def test_pages_render_with_pdftoppm(built, tmp_path):
    subprocess.run(["pdftoppm", "-r", "40", "-png", str(built["zh"].path), str(tmp_path / "p")], check=True)
    pages = sorted(tmp_path.glob("p-*.png"))
    assert len(pages) >= 4
    assert all(p.stat().st_size > 5_000 for p in pages)


@poppler
def test_missing_values_print_na(tmp_path):
    """A chip whose temperature the tool never gave, and no manifest: N/A, never 0 or None."""
    db = tmp_path / "soak.db"
    with Store.open(db) as store:
        store.create_run("r-na", host="h1", plan={}, started_ts=1_790_000_000.0)
        store.add_sample_rows(
            [
                {"run_id": "r-na", "ts": 1_790_000_000.0 + 10 * i, "device": "npu0-0", "up": True,
                 "util_pct": 90.0, "temp_c": None, "power_w": None, "hbm_used_bytes": None}
                for i in range(30)
            ]
        )
        store.finish_run("r-na", status="finished", ended_ts=1_790_000_300.0, verdict="pass")
        built = build_pdf(store, "r-na", tmp_path / "na.pdf", keys=None)
    text = pdf_text(built.path)
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("npu0-0"))
    assert row.count("N/A") >= 5, row  # model, serial, temp, power, HBM
    assert "None" not in text
    assert "UNSIGNED DRAFT" in text


def test_zh_without_any_cjk_font_is_one_clear_error(monkeypatch, tmp_path, recorded):
    monkeypatch.setattr(fonts, "_FONT_DIRS", (str(tmp_path),))
    monkeypatch.delenv("SOAK_REPORT_FONT", raising=False)
    fonts.register_cjk_font.cache_clear()
    try:
        with pytest.raises(fonts.FontNotFound, match="fonts-wqy-microhei.*--font"):
            fonts.register_cjk_font()
    finally:
        fonts.register_cjk_font.cache_clear()


def test_font_option_rejects_missing_and_unreadable_fonts(tmp_path):
    fonts.register_cjk_font.cache_clear()
    with pytest.raises(fonts.FontNotFound, match="no such file"):
        fonts.register_cjk_font(str(tmp_path / "nope.ttf"))
    bogus = tmp_path / "bogus.ttf"
    bogus.write_bytes(b"OTTO" + b"\0" * 64)  # an OpenType/CFF signature, and nothing of a font
    with pytest.raises(fonts.FontNotFound, match="not a TrueType or OpenType font"):
        fonts.register_cjk_font(str(bogus))
    fonts.register_cjk_font.cache_clear()


def test_cli_pdf_unknown_run_exits_2_with_one_line(recorded, tmp_path, capsys):
    rc = main(["report", "pdf", "r-missing", "-o", str(tmp_path / "x.pdf"), "--db", recorded["db"], "--unsigned"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and "r-missing" in err


def test_cli_pdf_json_output(recorded, keys, tmp_path, capsys):
    out = tmp_path / "cli.pdf"
    rc = main(["report", "pdf", recorded["run_id"], "-o", str(out), "--data-dir", str(recorded["data_dir"]),
               "--key", str(keys.key_path), "--cert", str(keys.cert_path), "--format", "json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["signed"] is True and doc["verdict"] == "fail" and out.is_file()
    assert doc["cert_fingerprint_sha256"] == keys.fingerprint_sha256


# `soak report pdf -o PATH` where PATH is a folder, or lies under a file: one line, exit 2,
# and no stray temporary file.


def _pdf(recorded, out) -> list[str]:
    return ["report", "pdf", recorded["run_id"], "-o", str(out), "--data-dir", str(recorded["data_dir"]),
            "--unsigned"]


def test_output_that_is_a_directory(recorded, tmp_path, capsys) -> None:
    rc = main(_pdf(recorded, tmp_path))
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == f"soak: error: -o {tmp_path}: is a directory; name the PDF file, e.g. {tmp_path / 'acceptance.pdf'}"
    assert list(tmp_path.iterdir()) == []
    assert not (tmp_path.parent / f".{tmp_path.name}.tmp").exists()


def test_output_under_a_regular_file(recorded, tmp_path, capsys) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("x")
    rc = main(_pdf(recorded, blocker / "report.pdf"))
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith(f"soak: error: -o {blocker / 'report.pdf'}: cannot create its folder {blocker}")
    assert "\n" not in err


# The Chinese report gives every reason of its verdict in Chinese: the clean-run sentence and a
# finding's own sentence (numbers kept, the time in the run's zone), not the analysis' English.


def _message(said) -> Message:
    return Message(str(said), said.code, said.values)


def test_reason_text_says_the_finding_in_chinese():
    from soak.analysis import Finding
    from soak.analysis.messages import said, say
    from soak.analysis.verdict import reasons

    assert reason_text(_message(said("reason.no_findings", {})), "zh") == "无失败级或告警级问题"
    assert reason_text(_message(said("reason.no_findings", {})), "en") == "no failing or warning findings"
    code, start = "memory_creep.runs_out_within_required", 1796035689.0 - 86400  # 2026-11-29 10:48:09Z
    values = {"metric": "hbm_used_bytes", "slope_mb_per_h": 843.8, "slope_low_mb_per_h": 798.0,
              "slope_high_mb_per_h": 858.9, "change_point": False, "growth_mb": 4773.0, "hours_to_exhaustion_h": 4.2,
              "required_h": 72.0, "exhausted_at": start + 6 * 3600}
    f = Finding(kind="memory_creep", device="npu3-0", metric="hbm_used_bytes", start=start, end=start + 3600,
                severity="fail", summary=say(code, values), code=code, values=values)
    (reason,) = reasons([f])
    assert str(reason).startswith("FAIL memory_creep on npu3-0 from 2026-11-29 10:48:09Z: hbm_used_bytes creeps")
    assert reason_text(_message(reason), "zh") == (
        "失败：npu3-0 的内存持续增长，自 2026-11-29 10:48 起：HBM 占用自老化期结束起每小时增长 843.8 MB"
        "（90% 置信区间 798.0–858.9）；拟合期内共增长 4773 MB；按此速率 4 h 12 min 后耗尽（在要求的 72 h 00 min 内）")
    assert reason_text(_message(reason), "en") == (
        "FAIL memory creep on npu3-0 from 2026-11-29 10:48: HBM in use creeps 843.8 MB/h (90% CI 798.0..858.9) "
        "since burn-in; +4773 MB over the fit; at this rate it runs out in 4 h 12 min (within the required 72 h 00 min)")
    # a reason without a code (an analysis this version cannot judge again) is shown as written
    assert reason_text(Message("something an older soak said"), "zh") == "something an older soak said"


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")
def test_zh_pdf_of_a_clean_run(tmp_path):
    if not fonts.candidate_paths():  # no CJK TrueType font on this machine at all
        pytest.skip("no CJK font installed (fonts-wqy-microhei)")
    fonts.register_cjk_font()  # one that is there but cannot be registered is a failure
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


@poppler
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_thresholds_are_in_words_not_raw_keys(built, lang):
    # the detectors' thresholds and the profile are read by a customer: a sentence or a
    # labelled value with its unit, never a profile key "= value"
    text = " ".join(pdf_text(built[lang].path).split())
    raw = re.findall(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+ = \S+", text)
    assert raw == [], raw[:5]
    assert "severity by kind: comm_timeouts" not in text and "hbm_min_slope" not in text
    if lang == "en":
        wanted = ("memory creep (HBM): a slope of at least 5 MB/h sustained past the burn-in",
                  "hang: no training progress for 5 min", "overheating: above 85 °C",
                  "severity by kind: fail: communication timeouts, device fault")
    else:
        wanted = ("内存持续增长（HBM）：老化期后持续增长至少 5 MB/h", "挂起：训练 5 min 没有进展", "过热：高于 85 °C",
                  "各类问题的严重级别：失败：通信超时、芯片故障")
    squashed = text.replace(" ", "")  # a cell's line breaks fall anywhere in a sentence
    for needle in wanted:
        assert needle.replace(" ", "") in squashed, needle
