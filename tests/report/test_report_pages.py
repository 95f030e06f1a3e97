"""Every page of the English and Chinese PDFs, looked at as a reader would: nothing outside the
page or over other text, no empty page, no raw JSON or epoch seconds; times in the run's zone,
routine events condensed, one casing for met/missed, the findings said in the report's language."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from soak.config import plan_from_dict
from soak.report.build import build_pdf
from soak.store import Store
from tests.conftest import skip_unless_ci
from tests.report.figures import conflicts, figures, pdf_text, pdf_text_pages
from tests.report.pagecheck import english_left, layout_problems, pdf_pages, raw_values
from tests.report.synth import write_run

# slow: renders whole PDFs in two languages and reads every page
pytestmark = [pytest.mark.slow, pytest.mark.compute]  # pyproject.toml

RUN = "r-pages"
START = 1_790_000_000.0  # 2026-09-21 14:13:20 UTC, 22:13:20 in Shanghai


def _plan() -> dict:
    return plan_from_dict({
        "run": {"duration": "4h", "preflight": False, "id": RUN},
        "devices": {"backend": "sim"},
        "sim": {"chips": 16},
        "workloads": [{"name": "lm", "size": "tiny", "nproc": 1}],
        "faults": {"inject": ["crash:200"]},
        "acceptance": {"thresholds": {"required_runtime_h": 4.0}},
    }).to_dict()


@pytest.fixture(scope="module")
def pdfs(tmp_path_factory) -> dict[str, Path]:
    """A 4 h, 16-chip run with a leak, a crash, 4 checkpoints and a plan, in en and zh.

    The pages are read with poppler's tools; without them the tests skip (and fail in CI). A
    missing or broken CJK font is no reason to skip: the Chinese report needs one, so it fails."""
    missing = [tool for tool in ("pdftotext", "pdfimages") if shutil.which(tool) is None]
    if missing:
        skip_unless_ci(f"{', '.join(missing)} not installed (poppler-utils)")
    out = tmp_path_factory.mktemp("pages")
    with Store.open(out / "soak.db") as store:
        shape = write_run(store, RUN, chips=16, hours=4.0, findings=False)
        run = store.get_run(RUN)
        manifest = dict(run.manifest)
        manifest["host"] = {**manifest["host"], "timezone": "Asia/Shanghai", "utc_offset_s": 28800}
        manifest["ascend"] = {"driver_version": None, "firmware_version": None}  # npu-smi has them
        store.update_run(RUN, plan=_plan(), manifest=manifest)
        store.add_event(RUN, "start", ts=START + 60, workload="lm", rank=0, message='{"size": "tiny", "world_size": 1}')
        store.add_event(RUN, "start", ts=shape.crash_ts + 150, workload="lm", rank=0, message="resumed")
        built = {lang: build_pdf(store, RUN, out / f"{lang}.pdf", lang=lang).path for lang in ("en", "zh")}
    return built


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_pdf_page_reads(pdfs, lang):
    pages = pdf_pages(pdfs[lang])
    assert len(pages) >= 5
    problems = []
    for page in pages:
        problems += [f"page {page.number}: {p}" for p in layout_problems(page.words, page.width, page.height, images=page.images)]
        problems += [f"page {page.number}: {p}" for p in raw_values(page.text)]
    assert not problems, "\n".join(problems[:30])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_figure_has_one_value_on_every_page(pdfs, lang):
    """Every figure (planned, ran, training, longest uninterrupted, shares, chips, the least
    covered chip) is written once, in one format, whichever page says it."""
    pages = figures(pdf_text_pages(pdfs[lang]))
    labels = set().union(*pages)
    # the figures of this run are all on its pages: a pattern that finds nothing checks nothing
    assert {"planned", "ran", "training", "productive", "judged availability", "longest uninterrupted",
            "chips", "coverage of npu0-0"} <= labels, labels
    assert not conflicts(pages)


def test_the_attached_csv_analysed_with_the_attached_profile_says_the_reports_required_hours(pdfs, tmp_path, capsys):
    """The PDF judged the run by its plan's profile (4 h required); the customer analyses the
    attached CSV as the PDF says, with the attached profile, and reads the same 4 h, not the
    default profile's 168 h."""
    import io
    import json

    from pyhanko.pdf_utils.reader import PdfFileReader

    from soak.cli import main
    from soak.report.verify import FINDINGS_NAME, PROFILE_NAME, RAW_NAME, read_attachments

    atts = read_attachments(PdfFileReader(io.BytesIO(pdfs["en"].read_bytes())))
    for name in (RAW_NAME, PROFILE_NAME):
        (tmp_path / name).write_bytes(atts[name])
    text = " ".join(" ".join(p.text for p in pdf_pages(pdfs["en"])).split())
    assert f"soak analyze {RAW_NAME} --profile {PROFILE_NAME}" in text  # the PDF says how
    assert main(["analyze", str(tmp_path / RAW_NAME), "--profile", str(tmp_path / PROFILE_NAME),
                 "--format", "json"]) == 0
    again = json.loads(capsys.readouterr().out)
    stated = json.loads(atts[FINDINGS_NAME])["findings"]
    required = {f["values"]["required_h"] for f in again["findings"] if f["kind"] == "memory_creep"}
    assert required == {4.0}  # the leak's finding says the hours it was judged against
    assert required == {f["values"]["required_h"] for f in stated if f["kind"] == "memory_creep"}
    assert "required 4 h" in text and "required 168 h" not in text


# a figure's number and unit, or two parts of a duration, on two lines of a wrapped cell
_UNIT = r"(?:h|min|s|ms|%|B|KiB|MiB|GiB|TiB|GB|MB|W|°C|GB/s|TFLOP/s)(?![\w/])"
_SPLIT = (rf"\d\n{_UNIT}", r"\d ?(?:h|min)\n\d+ ?(?:min|s)\b", r"\d /\n\d")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_figure_is_split_across_the_lines_of_a_cell(pdfs, lang):
    """"3 h 56" above "min", "48.2" above "GiB": pdftotext's raw text gives a wrapped cell's
    lines one after the other."""
    import re
    import subprocess

    text = subprocess.run(["pdftotext", "-raw", str(pdfs[lang]), "-"], capture_output=True, text=True,
                          check=True).stdout
    split = [text[max(0, m.start() - 25):m.end() + 5] for p in _SPLIT for m in re.finditer(p, text)]
    assert not split, split[:10]


def test_the_per_chip_header_keeps_its_words_whole(pdfs):
    import subprocess

    from soak.report.i18n import t

    text = subprocess.run(["pdftotext", "-raw", str(pdfs["en"]), "-"], capture_output=True, text=True,
                          check=True).stdout
    start = text.index("Device Model Serial")
    header = set(text[start:text.index("npu0-0", start)].split())
    for key in ("device", "model", "serial", "util_mean", "util_min", "temp_max", "power_mean", "hbm_peak",
                "findings", "chip_health", "chip_ecc", "chip_link"):
        assert set(t(key, "en").split()) <= header, (t(key, "en"), sorted(header))


def test_times_are_in_the_runs_zone(pdfs):
    text = " ".join(p.text for p in pdf_pages(pdfs["en"]))
    assert "Asia/Shanghai (UTC+08:00)" in text
    assert "2026-09-21 22:13" in text  # the run's start, local time
    assert "UTC" not in text.replace("UTC+08:00", "")


def test_checkpoints_are_one_line_with_count_and_cadence(pdfs):
    text = " ".join(p.text for p in pdf_pages(pdfs["en"]))
    assert "checkpoint ×4" in text
    assert "4 times, about every 1 h 00 min" in text
    assert "checkpoint step_" not in text  # not one row per checkpoint


def test_met_and_missed_have_one_casing(pdfs):
    words = [w.text for p in pdf_pages(pdfs["en"]) for w in p.words]
    assert "MISSED" not in words and "met" not in words
    assert "Met" in words and "Missed" in words


def test_long_keys_stay_whole(pdfs):
    words = {w.text for p in pdf_pages(pdfs["en"]) for w in p.words}
    # the thresholds and the plan say it in words: no key of the profile or the plan is left
    assert not any("required_runtime_h" in w for w in words)
    assert not any(w.startswith("throughput_degradation/") for w in words)


def test_driver_version_is_one_field(pdfs):
    text = " ".join(p.text for p in pdf_pages(pdfs["en"]))
    assert "NPU driver (npu-smi) 24.1.rc2" in text
    assert "Ascend driver" not in text


def test_accounting_and_coverage_are_shown(pdfs):
    text = " ".join(p.text for p in pdf_pages(pdfs["en"]))
    assert "Where the planned time went" in text and "Planned soak 4 h 00 min" in text
    assert "Evidence coverage per chip" in text and "npu7-1" in text


def test_the_cover_has_one_training_share_and_the_reliability_follows_the_accounting(pdfs):
    """Page 1 read four training percentages (judged, of planned, productive, ETTR): it keeps
    the judged one, saying what it is of; the others are said with the accounting."""
    for lang in ("en", "zh"):
        cover = figures(pdf_text_pages(pdfs[lang]))[0]
        assert {"judged availability", "training share of planned", "ETTR"} & set(cover) == {"judged availability"}
    assert "98.9 % of the time it ran, start-up and injected faults given back" in pdf_pages(pdfs["en"])[0].text
    en = next(p.text for p in pdf_pages(pdfs["en"]) if "Where the planned time went" in p.text)
    zh = next(p.text for p in pdf_pages(pdfs["zh"]) if "计划时间的去向" in p.text)
    assert "Reliability: effective training time and time to failure" in en
    assert "(ETTR)" in en and "productive training" in en and "a lower bound, not a forecast" in en
    assert "2T / χ²(0.90;" in " ".join(en.split())
    assert "有效训练时间比 (ETTR)" in zh and "这是下限而非预测" in zh


def test_chinese_pdf_says_the_findings_in_chinese(pdfs):
    text = " ".join(p.text for p in pdf_pages(pdfs["zh"]))
    assert "HBM 占用自" in text and "每小时增长" in text
    assert "creeps" not in text and "since burn-in" not in text
    assert "达标" in text and "未达标" in text
    assert not english_left(text)  # every sentence of the judgement rendered in Chinese


def test_utilization_chart_spans_0_to_100_and_its_marks_are_named(recorded, monkeypatch):
    """92-98 % autoscaled over 8 lines exaggerates noise; dashed lines need a legend."""
    from matplotlib.figure import Figure

    from soak.report.charts import metric_chart_png
    from soak.report.loader import load_report_data

    seen = {}
    real = Figure.savefig

    def spy(fig, *a, **kw):  # noqa: ANN001, ANN002, ANN003
        ax = fig.axes[0]
        seen["ylim"] = ax.get_ylim()
        seen["legend"] = [x.get_text() for x in ax.get_legend().get_texts()] if ax.get_legend() else []
        return real(fig, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", spy)
    with Store.open(recorded["db"], create=False) as store:
        data = load_report_data(store, recorded["run_id"])
    assert metric_chart_png(data, "util_pct") is not None
    assert seen["ylim"] == (0.0, 100.0)
    assert "crash, restart, injected fault or exit" in seen["legend"]
    assert "other chips" in seen["legend"]
    assert metric_chart_png(data, "hbm_used_bytes") is not None
    assert seen["legend"][:2] == ["npu1-1", "other chips"] and "finding span" in seen["legend"]


# the headings of the PDF's sections (st.h2): none may end a page, away from what it heads
_HEADINGS = ("accounting", "at_a_glance", "charts", "chip_summary", "clean_statement", "coverage", "data_integrity",
             "detectors", "events", "findings", "links", "appendix", "reliability", "signature", "time_went")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_heading_is_left_at_the_foot_of_a_page(pdfs, lang):
    from soak.report.i18n import t

    headings = {t(k, lang) for k in _HEADINGS}
    for page in pdf_pages(pdfs[lang]):
        body = [w for w in page.words if w.y1 < page.height - 20 * 72 / 25.4]  # above the footer lines
        if not body:
            continue
        foot = max(w.y1 for w in body)
        line = " ".join(w.text for w in sorted(body, key=lambda w: w.x0) if abs(w.y1 - foot) < 2)
        # a heading that is the page's last line, below its first third: what it heads is overleaf
        # (the charts' heading is followed by a chart, a picture: no text)
        if line == t("charts", lang) and page.images:
            continue
        assert not (line in headings and foot > page.height / 3), f"page {page.number} ends with {line!r}"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_heading_that_would_end_a_page_goes_over_with_its_table(tmp_path, lang):
    # the report's own heading style and table, laid out so that the heading alone would fit at
    # the foot of page 1: it must go to page 2, with the table it heads

    from reportlab.lib.pagesizes import A4
    from reportlab.lib.units import mm
    from reportlab.platypus import SimpleDocTemplate, Spacer

    from soak.report.fonts import try_register_cjk_font
    from soak.report.i18n import t
    from soak.report.pdf_style import Styles, table

    st = Styles(lang, try_register_cjk_font())
    doc = SimpleDocTemplate(str(tmp_path / "h.pdf"), pagesize=A4, topMargin=16 * mm, bottomMargin=18 * mm)
    frame_h = A4[1] - 34 * mm - 12  # the frame's height less its padding
    heading = st.heading(t("events", lang))
    _, heading_h = heading[-1].wrap(A4[0] - 36 * mm, frame_h)
    rows = [[f"2026-09-21 10:{i:02d}:00", "checkpoint", "lm-rank0", f"checkpoint at step {i}"] for i in range(30)]
    doc.build([Spacer(1, frame_h - heading_h - st.h2.spaceBefore - 6), *heading,
               table(st, ["time", "event", "device", "message"], rows, None)])
    pages = pdf_text(tmp_path / "h.pdf").split("\f")
    assert t("events", lang) not in pages[0] and t("events", lang) in pages[1], pages[:2]
