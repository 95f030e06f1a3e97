"""The PDF of a demo-shaped run (8 chips, a leak, a crash, the demo's recorded manifest and
plan) laid out as a document: no near-empty page, every table inside the margins, every heading
kept with what follows, the appendix in labelled tables; in English and Chinese. A small
cluster's PDF has no near-empty page either."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from soak.report.build import build_pdf
from soak.store import Store
from tests.conftest import skip_unless_ci
from tests.report.pagecheck import Box, Page, pdf_pages
from tests.report.synth import write_cluster_run, write_run

# slow: renders two whole PDFs and reads every page
pytestmark = [pytest.mark.slow, pytest.mark.compute]  # pyproject.toml

MM = 72 / 25.4
MARGIN = 18 * MM  # the PDF's left and right margins (soak.report.pdf)
FOOTER = 20 * MM  # the footer's band at the page's foot: page number, run id, simulation mark
MIN_LINES = 12  # a page of text holds at least this many lines, unless it is the last
MANIFEST = json.loads((Path(__file__).parents[1] / "fixtures" / "report" / "demo-manifest.json").read_text())
RUN = "demo-layout"


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, list[Page]]:
    missing = [tool for tool in ("pdftotext", "pdfimages") if shutil.which(tool) is None]
    if missing:
        skip_unless_ci(f"{', '.join(missing)} not installed (poppler-utils)")
    out = tmp_path_factory.mktemp("layout")
    # the report is made on the delivery engineer's machine: paths under its home read as ~/...
    with pytest.MonkeyPatch.context() as mp, Store.open(out / "soak.db") as store:
        mp.setenv("HOME", "/home/delivery")
        write_run(store, RUN, chips=8, hours=8.0, interval_s=20.0, findings=False)
        store.update_run(RUN, plan=MANIFEST["plan"], manifest=MANIFEST["environment"])
        return {lang: pdf_pages(build_pdf(store, RUN, out / f"{lang}.pdf", lang=lang).path) for lang in ("en", "zh")}


def _body(page: Page) -> list[Box]:
    return [w for w in page.words if w.y1 < page.height - FOOTER]


def _lines(words: list[Box]) -> list[list[Box]]:
    """Words grouped by their baseline (rounded to a point)."""
    by_y: dict[int, list[Box]] = {}
    for w in words:
        by_y.setdefault(round(w.y1), []).append(w)
    return [by_y[y] for y in sorted(by_y)]


@pytest.fixture(scope="module")
def cluster_pages(tmp_path_factory) -> dict[str, list[Page]]:
    """A 3-node x 2-chip cluster run: its matrix is a few lines below the verdict."""
    if shutil.which("pdftotext") is None:
        skip_unless_ci("pdftotext not installed (poppler-utils)")
    out = tmp_path_factory.mktemp("cluster-layout")
    with Store.open(out / "soak.db") as store:
        write_cluster_run(store, "c-layout", nodes=3, chips=2, hours=0.5)
        return {lang: pdf_pages(build_pdf(store, "c-layout", out / f"{lang}.pdf", lang=lang).path)
                for lang in ("en", "zh")}


def _short_pages(doc: list[Page]) -> list[tuple[int, int, str]]:
    return [(p.number, len(_lines(_body(p))), " ".join(w.text for w in _body(p))[:120])
            for p in doc[:-1] if not p.images and len(_lines(_body(p))) < MIN_LINES]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_page_but_the_last_is_near_empty(pages, lang: str) -> None:
    assert _short_pages(pages[lang]) == []


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_small_clusters_matrix_is_not_a_near_empty_page(cluster_pages, lang: str) -> None:
    doc = cluster_pages[lang]
    assert _short_pages(doc) == []
    (matrix,) = [p for p in doc if ("Every chip of every node" if lang == "en" else "各节点的全部芯片") in p.text]
    # what follows the matrix starts on its page
    assert ("Verdict per node" if lang == "en" else "各节点结论") in matrix.text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_table_is_inside_the_margins(pages, lang: str) -> None:
    outside = [(p.number, w.text, round(w.x0), round(w.x1)) for p in pages[lang] for w in p.words
               if w.x0 < MARGIN - 1 or w.x1 > p.width - MARGIN + 1]
    assert outside == [], outside[:10]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_appendix_has_no_raw_dump_and_no_local_path(pages, lang: str) -> None:
    text = " ".join(p.text for p in pages[lang])
    heading = "附录：阈值、环境清单与运行计划" if lang == "zh" else "Appendix: thresholds, environment manifest and run plan"
    assert heading in text
    appendix = text[text.index(heading):]
    for raw in ("npu.cards[", "board_id", "chip_boards", ".venv", "/home/delivery", "_source", "npu_smi N/A"):
        assert raw not in appendix, raw
    for shown in ("1025C9030000", "0000:82:00.0", "python 3.11.7", "~/soak-runs", "8 h 00 min"):
        assert shown in appendix, shown
    if lang == "zh":
        for title in ("主机", "软件", "加速卡", "运行计划", "采样", "节点间链路", "同类比较"):
            assert title in text, title


def test_every_heading_keeps_with_what_follows(recorded, monkeypatch) -> None:
    """The story as built: each section heading (13 pt) either follows a conditional page
    break (``Styles.heading``) or is kept together with what follows it."""
    from reportlab.platypus import CondPageBreak, KeepTogether, Paragraph, SimpleDocTemplate

    from soak.report.loader import load_report_data
    from soak.report.pdf import render_pdf

    stories: list[list] = []
    build = SimpleDocTemplate.build
    monkeypatch.setattr(SimpleDocTemplate, "build", lambda self, story, **kw: (stories.append(list(story)),
                                                                               build(self, story, **kw))[1])
    with Store.open(recorded["db"], create=False) as store:
        data = load_report_data(store, recorded["run_id"])
    render_pdf(data, lang="en")
    (story,) = stories
    loose = [f.getPlainText() for i, f in enumerate(story)
             if isinstance(f, Paragraph) and f.style.fontSize >= 13 and f.style.fontSize < 20  # h2, not the title
             and not (i and isinstance(story[i - 1], CondPageBreak))]
    assert loose == [], loose
    assert any(isinstance(f, KeepTogether) for f in story)
