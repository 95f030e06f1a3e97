"""The PDF's paragraph styles and its one look of a table, for every page that draws one.

The run's pages (``soak.report.pdf``) and the cluster's pages (``soak.report.pdf_cluster``)
both build their tables here, so they look the same and neither imports the other's insides.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

from soak.report.fonts import LATIN_BOLD, LATIN_FONT, FontChoice, FontSet, latin_has

if TYPE_CHECKING:
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import Paragraph


HEADING_ROOM = 30 * 72 / 25.4  # 30 mm: a heading, a table's header and its first rows
CELL_PAD = 12.0  # reportlab's table cell padding, left and right (6 pt each)

# A figure is its number and its unit ("48.2 GiB", "98.9 %", "3 h 56 min", "0 / 15"): the units
# the report's formats write (soak.analysis.messages.hm and pct, fmt_bytes, the table cells).
_UNITS = r"(?:d|h|min|s|ms|%|B|KiB|MiB|GiB|TiB|KB|MB|GB|TB|W|°C|GB/s|Gb/s|TFLOP/s|MB/h)"
_NUMBER_UNIT = re.compile(rf"(\d) ({_UNITS})(?![\w/])")
_DURATION_PARTS = re.compile(r"(\d\xa0(?:d|h|min)) (?=\d+\xa0(?:h|min|s)(?![\w/]))")
_PAIR = re.compile(r"(\d) / (?=\d)")
_BREAKS = re.compile(r"[ \t\n]+")  # where a paragraph may wrap: not at a no-break space
# a paragraph may wrap beside any CJK character too: each is a part of its own
_PARTS = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]|[^\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]+")


def whole_figures(text: str) -> str:
    """``text`` with the spaces inside each figure made no-break spaces, so that a wrapped
    line never reads "3 h 56" above "min" (the PDF's text still reads a plain space)."""
    text = _NUMBER_UNIT.sub("\\1\xa0\\2", text)
    text = _DURATION_PARTS.sub("\\1\xa0", text)
    return _PAIR.sub("\\1\xa0/\xa0", text)


# A duration in Chinese text: the figures of the report (``soak.report.units.dur``) write
# "8 h 00 min", "5 min", "42 s" in both languages, and most durations a Chinese page shows are
# those; a sentence's "1.5 小时", "20 分钟", "60 秒" beside them read as another figure style. The
# Chinese PDF writes every duration the figures' way. "每小时" (per hour) and "节点小时" (a
# node-hour, a quantity) have no number right before the unit and stay words.
_ZH_DURATION = re.compile(r"(\d)\s?(小时|分钟|秒)(?!数)(?=([\u4e00-\u9fff])?)")
_ZH_UNIT = {"小时": "h", "分钟": "min", "秒": "s"}


def zh_durations(text: str) -> str:
    """``text`` with each number-and-unit duration in the figures' style ("1.5 h", "20 min")."""
    return _ZH_DURATION.sub(lambda m: f"{m.group(1)} {_ZH_UNIT[m.group(2)]}{' ' if m.group(3) else ''}", text)


class Styles:
    """The report's paragraph styles in its language; ``p`` makes a paragraph. Both languages
    set their Latin text in Helvetica, each run of another script in the font that has it
    (``FontSet``). ``drawn``, when given, collects the plain text of every paragraph."""

    def __init__(self, lang: str, cjk: FontChoice | None, drawn: list[str] | None = None) -> None:
        from reportlab.lib import colors
        from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet

        self.cjk = cjk
        self.lang = lang
        self.fonts = FontSet(cjk)
        self.drawn = drawn
        self._longest: dict[tuple[str, float, bool], float] = {}
        base, bold = LATIN_FONT, LATIN_BOLD
        ss = getSampleStyleSheet()
        self.body = ParagraphStyle("b", parent=ss["BodyText"], fontName=base, fontSize=9, leading=12)
        self.small = ParagraphStyle("s", parent=self.body, fontSize=7, leading=9)
        self.cell = ParagraphStyle("c", parent=self.body, fontSize=7.5, leading=9.5)
        self.head = ParagraphStyle("hc", parent=self.cell, fontName=bold, textColor=colors.white)
        self.key = ParagraphStyle("k", parent=self.cell, textColor=colors.HexColor("#333333"))
        self.h1 = ParagraphStyle("h1", parent=ss["Title"], fontName=bold, fontSize=20, leading=26)
        self.h2 = ParagraphStyle(
            "h2", parent=ss["Heading2"], fontName=bold, fontSize=13, leading=17, spaceBefore=8
        )
        self.verdict = ParagraphStyle("v", parent=self.h1, fontSize=28, leading=34)
        self.banner = ParagraphStyle(
            "sim", parent=self.body, fontName=bold, fontSize=12, leading=16, textColor=colors.HexColor("#b22222")
        )

    def p(self, text: object, style: ParagraphStyle | None = None, *, markup: bool = False) -> Paragraph:
        """A paragraph; each run the Latin font lacks (CJK, symbols) in the font that has it."""
        from reportlab.platypus import Paragraph

        style = style or self.body
        s = str(text) if markup else escape("N/A" if text is None else str(text))
        s = whole_figures(zh_durations(s) if self.lang == "zh" else s)
        if self.drawn is not None:
            self.drawn.append(plain_text(s))
        return Paragraph(self.fonts.mark(s, bold=style.fontName == LATIN_BOLD), style)

    def heading(self, text: object, style: ParagraphStyle | None = None) -> list:
        """A section's heading, on the next page where less than ``HEADING_ROOM`` is left on
        this one: a heading is never alone at a page's foot, away from what it heads. (reportlab's
        keepWithNext would move a long table whole, leaving a near-empty page behind.)"""
        from reportlab.platypus import CondPageBreak

        return [CondPageBreak(HEADING_ROOM), self.p(text, style or self.h2)]

    def fit(self, text: str, size: float, *, bold: bool = False, white: bool = False) -> object:
        """A plain table cell drawn in the table's own font (Latin) as ``text`` itself, else as
        a paragraph of that size whose runs take the fonts that have them."""
        if all(latin_has(c) for c in text):
            if self.drawn is not None:
                self.drawn.append(text)
            return text
        from reportlab.lib import colors

        style = (self.head if bold else self.cell).clone("fit", fontSize=size, leading=size + 1,
                                                          textColor=colors.white if white else colors.black)
        return self.p(text, style)

    def width(self, text: str, size: float, *, bold: bool = False) -> float:
        """The width of ``text`` drawn at ``size``, each run in its font."""
        from reportlab.pdfbase.pdfmetrics import getRegisteredFontNames, standardFonts, stringWidth

        total = 0.0
        known = None
        for font, part in self.fonts.runs(text, LATIN_BOLD if bold else LATIN_FONT):
            if font not in standardFonts:
                known = known if known is not None else set(getRegisteredFontNames())
                if font not in known:
                    # a CFF CJK font is registered as the report is built: its glyphs are an em.
                    # Never asked of reportlab: it searches every AFM file on the disk for a font
                    # it does not know, on each call (minutes for a table of thresholds)
                    total += size * len(part)
                    continue
            total += stringWidth(part, font, size)
        return total

    def longest_word(self, shown: str, size: float, *, bold: bool = False) -> float:
        """The width of the widest part of the text ``shown`` that a paragraph cannot wrap: a
        word, or a whole figure."""
        key = (shown, size, bold)
        if key not in self._longest:  # a table repeats its cells ("pass", "16/16", "OK")
            words = [part for w in _BREAKS.split(whole_figures(shown)) for part in _PARTS.findall(w)]
            self._longest[key] = max((self.width(w, size, bold=bold) for w in words), default=0.0)
        return self._longest[key]

    def draw(self, canvas: object, x: float, y: float, text: str, size: float, *, bold: bool = False,
             align: str = "left") -> None:
        """``text`` on the canvas at (x, y), each run in its font; ``align`` left, centre or right."""
        from reportlab.pdfbase.pdfmetrics import stringWidth

        runs = self.fonts.runs(text, LATIN_BOLD if bold else LATIN_FONT)
        if self.drawn is not None:
            self.drawn.append(text)
        width = sum(stringWidth(part, font, size) for font, part in runs)
        x -= {"left": 0.0, "centre": width / 2, "right": width}[align]
        for font, part in runs:
            canvas.setFont(font, size)  # type: ignore[attr-defined]
            canvas.drawString(x, y, part)  # type: ignore[attr-defined]
            x += stringWidth(part, font, size)


def plain_text(markup: str) -> str:
    """The text a paragraph's ``markup`` shows: tags dropped, entities read."""
    import html
    import re

    return html.unescape(re.sub(r"<br\s*/?>", " ", re.sub(r"<(?!br)[^>]*>", "", markup))).replace("\xa0", " ")


class Markup(str):
    """Cell text that is already reportlab paragraph markup (escaped by the caller)."""


def table(st: Styles, header: list[str] | None, rows: list[list[object]], widths: list[float] | None,
          key_cols: tuple[int, ...] = ()):
    """A report table: a dark header row repeated on each page, banded rows, ``key_cols``
    shaded as labels; a ``Markup`` cell is taken as paragraph markup, any other is escaped."""
    from reportlab.lib import colors
    from reportlab.platypus import LongTable, TableStyle

    def cell(c: object, col: int):
        if isinstance(c, Markup):
            return st.p(c, st.cell, markup=True)
        return st.p(c, st.key if col in key_cols else st.cell)

    data = [[st.p(h, st.head) for h in header]] if header else []
    data += [[cell(c, i) for i, c in enumerate(row)] for row in rows]
    if widths is not None:
        widths = keep_words_whole(widths, _least_widths(st, header, rows, len(widths)))
    tbl = LongTable(data, colWidths=widths, repeatRows=1 if header else 0)
    style = [
        ("GRID", (0, 0), (-1, -1), 0.25, colors.HexColor("#b0b0b0")),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("TOPPADDING", (0, 0), (-1, -1), 2),
        ("BOTTOMPADDING", (0, 0), (-1, -1), 2),
    ]
    if header:
        style += [("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#2f4f6f")),
                  ("ROWBACKGROUNDS", (0, 1), (-1, -1), [colors.white, colors.HexColor("#f2f5f8")])]
    for col in key_cols:
        style.append(("BACKGROUND", (col, 0), (col, -1), colors.HexColor("#eef1f4")))
    tbl.setStyle(TableStyle(style))
    return tbl


def _shown(c: object) -> str:
    """The text a table cell shows."""
    if isinstance(c, Markup):
        return plain_text(c)
    return "N/A" if c is None else str(c)


def _least_widths(st: Styles, header: list[str] | None, rows: list[list[object]], n: int) -> list[float]:
    """Each column's least width: its widest word or figure (header or cell) and the padding."""
    least = [0.0] * n
    for i, h in enumerate((header or [])[:n]):
        least[i] = st.longest_word(_shown(h), st.head.fontSize, bold=True)
    for row in rows:
        for i, c in enumerate(row[:n]):
            least[i] = max(least[i], st.longest_word(_shown(c), st.cell.fontSize))
    return [w + CELL_PAD + 0.5 for w in least]


def keep_words_whole(widths: list[float], least: list[float]) -> list[float]:
    """``widths`` with each column that is narrower than its widest word ("Findings" wrapped as
    "Finding s", "48.2 GiB" broken in two) widened, the room taken from the columns that have
    more than they need, in proportion to what they have spare; the table's width stays. Where
    the spare room is short, each narrow column gets its share of it."""
    need = sum(max(0.0, m - w) for w, m in zip(widths, least, strict=True))
    spare = sum(max(0.0, w - m) for w, m in zip(widths, least, strict=True))
    if need <= 0 or spare <= 0:
        return list(widths)
    give = min(need, spare)
    return [w + (m - w) * give / need if m > w else w - (w - m) * give / spare
            for w, m in zip(widths, least, strict=True)]
