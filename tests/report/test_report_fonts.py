"""Fonts that cannot lose text: every character in a font that has it, Latin and digits never
in a CJK-only font (Droid Sans Fallback has neither), a character no font has is an error naming
it, and the PDF names the fonts it drew with. Each CJK font on this machine renders both
languages, and ``pdftotext`` reads back every text drawn."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import matplotlib
import pytest

from soak.errors import FontNotFound, MissingGlyph
from soak.report import fonts
from tests.conftest import skip_unless_ci

pytestmark = pytest.mark.compute  # pyproject.toml

FOUND = fonts.candidate_paths()
DEJAVU = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"


def _a_cjk_font() -> fonts.FontChoice:
    if not FOUND:
        skip_unless_ci("no CJK font installed (fonts-wqy-microhei, fonts-droid-fallback, fonts-noto-cjk)")
    return fonts.register_cjk_font(str(FOUND[0]))


def test_each_run_is_drawn_in_the_font_that_has_it() -> None:
    cjk = _a_cjk_font()
    fs = fonts.FontSet(cjk)
    # Latin, digits and cp1252 punctuation stay in the style's Helvetica; CJK in the CJK font;
    # what neither has (≥) in DejaVu Sans; the markup's tags and entities are left as they are
    marked = fs.mark("结论: <b>FAIL</b> 2026 — 节点&amp;芯片 ≥ 95 %")
    # an OpenType/CFF font draws as this report's own TrueType subset, named after the font
    c = re.match(r'<font name="([^"]+)">', marked).group(1)
    assert c == cjk.font_name or (cjk.cff and c.startswith(f"{cjk.font_name}-"))
    assert marked == (f'<font name="{c}">结论</font>: <b>FAIL</b> 2026 — <font name="{c}">节点</font>&amp;'
                      f'<font name="{c}">芯片 </font><font name="SoakSymbols">≥ </font>95 %')
    assert fs.mark("Verdict", bold=True) == "Verdict"
    assert fs.mark("≥", bold=True) == '<font name="SoakSymbols-Bold">≥</font>'
    assert fs.runs("模拟 ×240 — 8 h", "Helvetica-Bold") == [(c, "模拟 "), ("Helvetica-Bold", "×240 — 8 h")]


CFF = [p for p in FOUND if p.suffix in (".otf", ".ttc") and p.read_bytes()[:4] in (b"OTTO", b"ttcf")
       and fonts.register_cjk_font(str(p)).cff]


@pytest.mark.skipif(not CFF, reason="no OpenType/CFF CJK font installed (fonts-noto-cjk)")
def test_an_opentype_cjk_font_is_embedded_as_truetype_outlines_of_what_is_drawn() -> None:
    from reportlab.pdfbase import pdfmetrics

    cjk = fonts.register_cjk_font(str(CFF[0]))
    assert cjk.family == "Noto Sans CJK SC" or "SC" in (cjk.family or "")
    # two reports in one process, each with a subset of its own (reportlab keeps the first font
    # registered under a name): the second one's characters are not the first one's
    names = []
    for cjk_part, latin, more in (("华东智算中心 ", "ACME ", "鑫"), ("上海 ", "DC2 ", "淼")):
        fs = fonts.FontSet(cjk)
        marked = fs.mark(cjk_part + latin + more)  # a space in a CJK run is the CJK font's: it has one
        name = re.match(r'<font name="([^"]+)">', marked).group(1)
        assert marked == f'<font name="{name}">{cjk_part}</font>{latin}<font name="{name}">{more}</font>'
        fs.embed()
        drawn = pdfmetrics.getFont(name).face.charToGlyph
        assert all(drawn.get(ord(c)) for c in cjk_part + more + fonts.catalog_cjk())
        names.append(name)
    assert names[0] != names[1] and all(n.startswith(cjk.font_name) for n in names)


def test_a_letter_no_font_has_is_an_error_naming_it_and_the_fonts() -> None:
    cjk = _a_cjk_font()
    with pytest.raises(MissingGlyph) as err:
        fonts.FontSet(cjk).mark("customer \U0001e900")  # ADLAM CAPITAL LETTER ALIF
    msg = str(err.value)
    assert "U+1E900" in msg and "in 'customer \U0001e900'" in msg and cjk.label in msg, msg
    assert "Helvetica" in msg and "DejaVu Sans" in msg and "--font" in msg


def test_a_symbol_no_font_has_in_recorded_text_is_drawn_as_its_code_point() -> None:
    # what a run recorded (an exception's text quoted in an event) may hold any character: an
    # emoji is shown as its code point, the report is made
    fs = fonts.FontSet(_a_cjk_font())
    assert fs.mark("exit 1: RuntimeError: gloo \U0001f3d6 x") == "exit 1: RuntimeError: gloo [U+1F3D6] x"
    assert fs.runs("a \U0001f3d6", fonts.LATIN_FONT) == [(fonts.LATIN_FONT, "a [U+1F3D6]")]
    assert fs.stood_in == {"\U0001f3d6"}


def test_chinese_in_a_report_without_a_cjk_font_names_what_to_install() -> None:
    with pytest.raises(MissingGlyph, match=r"'客' \(U\+5BA2 CJK UNIFIED IDEOGRAPH-5BA2\).*fonts-wqy-microhei"):
        fonts.FontSet(None).mark("客户 华东")


def test_a_font_without_the_chinese_it_must_draw_is_refused() -> None:
    # DejaVu Sans is TrueType and reportlab embeds it, but it has no Chinese
    fonts.register_cjk_font.cache_clear()
    try:
        with pytest.raises(FontNotFound, match=r"--font .*DejaVuSans.ttf: DejaVu Sans has no '.' \(U\+[0-9A-F]{4} "
                                               r".*which the Chinese report draws"):
            fonts.register_cjk_font(str(DEJAVU))
    finally:
        fonts.register_cjk_font.cache_clear()


def test_the_catalog_has_the_chinese_of_every_text_module() -> None:
    needed = fonts.catalog_cjk()
    # from the labels, the event messages and the evidence: all of them in the one check
    assert {"验", "收", "崩", "溃", "拷", "机"} <= set(needed)
    assert not any(fonts.latin_has(c) for c in needed)


poppler = pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils not installed")


def _drawn_but_not_read(pdf: Path, drawn: list[str]) -> list[str]:
    """The texts drawn that ``pdftotext`` does not read back. In ``-raw`` order a paragraph's
    lines follow each other, so with every space and line break gone it is one substring."""
    text = subprocess.run(["pdftotext", "-raw", str(pdf), "-"], capture_output=True, text=True, check=True,
                          timeout=60).stdout
    flat = re.sub(r"\s+", "", text)
    return [d for d in drawn if re.sub(r"\s+", "", d) not in flat]


DEMO_DB_ENV = "SOAK_TEST_DEMO_DB"  # a ``soak demo`` run's soak.db: its report is the one checked


@pytest.fixture(scope="module")
def report_data(recorded):
    """The recorded run's report data, or where ``SOAK_TEST_DEMO_DB`` names a demo run's store
    (scripts/font-sets.sh), that run's."""
    import os

    from soak.report.loader import load_report_data
    from soak.store import Store

    demo = os.environ.get(DEMO_DB_ENV)
    with Store.open(demo or recorded["db"], create=False) as store:
        data = load_report_data(store, store.list_runs()[0].id if demo else recorded["run_id"])
    # a simulated, accelerated run: the banner and every footer hold a line of both scripts
    return replace(data, run=replace(data.run, backend="sim", time_scale=240.0))


@pytest.mark.slow
@poppler
@pytest.mark.parametrize("font", FOUND or [None], ids=[p.name for p in FOUND] or ["none"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_text_drawn_is_read_back_with_each_cjk_font(report_data, tmp_path, font: Path | None,
                                                          lang: str) -> None:
    from soak.report.model import Customer
    from soak.report.pdf import render_pdf

    if font is None:
        skip_unless_ci("no CJK font installed (fonts-wqy-microhei, fonts-droid-fallback, fonts-noto-cjk)")
    drawn: list[str] = []
    pdf, _, used = render_pdf(report_data, lang=lang, font=str(font), drawn=drawn,
                              customer=Customer("华东智算中心 ACME", "上海 DC2", "cl-910b-07", "node-a01"))
    path = tmp_path / f"{lang}.pdf"
    path.write_bytes(pdf)
    assert len(drawn) > 100
    assert _drawn_but_not_read(path, drawn) == []
    cjk = fonts.register_cjk_font(str(font))
    assert used[0] == "Helvetica (PDF standard font)" and cjk.label in used
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    assert f"fonts: {'; '.join(used)}" in info


@pytest.mark.slow
def test_report_pdf_prints_the_fonts_it_drew_with(recorded, tmp_path, capsys) -> None:
    from soak.cli import main

    font = _a_cjk_font()
    out = tmp_path / "zh.pdf"
    assert main(["report", "pdf", recorded["run_id"], "--data-dir", str(recorded["data_dir"]), "-o", str(out),
                 "--lang", "zh", "--unsigned", "--font", str(font.path)]) == 0
    printed = capsys.readouterr().out
    assert f"fonts: Helvetica (PDF standard font); DejaVu Sans (DejaVuSans.ttf); {font.label}\n" in printed
