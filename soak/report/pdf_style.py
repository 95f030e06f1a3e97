"""The PDF's paragraph styles and its one look of a table, for every page that draws one.

The run's pages (``soak.report.pdf``) and the cluster's pages (``soak.report.pdf_cluster``)
both build their tables here, so they look the same and neither imports the other's insides.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

from soak.report.fonts import CJK_FONT_NAME, FontChoice

if TYPE_CHECKING:
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import Paragraph


def has_wide(text: str) -> bool:
    """Whether ``text`` has a character the Latin fonts lack (CJK)."""
    return any(ord(c) > 0xFF for c in text)


class Styles:
    """The report's paragraph styles in its language; ``p`` makes a paragraph."""

    def __init__(self, lang: str, cjk: FontChoice | None) -> None:
        from reportlab.lib import colors
        from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet

        self.cjk = cjk
        base = CJK_FONT_NAME if (lang == "zh" and cjk) else "Helvetica"
        bold = CJK_FONT_NAME if (lang == "zh" and cjk) else "Helvetica-Bold"
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
        """A paragraph; runs of CJK text switch to the CJK font even in the English report."""
        from reportlab.platypus import Paragraph

        s = str(text) if markup else escape("N/A" if text is None else str(text))
        if self.cjk and has_wide(s) and (style or self.body).fontName != CJK_FONT_NAME:
            s = f'<font name="{CJK_FONT_NAME}">{s}</font>'
        return Paragraph(s, style or self.body)


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
