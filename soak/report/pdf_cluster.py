"""The cluster view's pages of the PDF (``soak.report.pdf`` calls ``cluster_story``).

The node x chip matrix follows the verdict, on the next page when it does not fit below it
(it is sized so 64 nodes x 16 chips fit on one page); then, on the same page where there is
room (a few nodes' matrix is a few lines: a page break after it left a near-empty page),
the verdict per node, the stragglers and outliers, the version check across nodes, the
cluster's clean-run statement and the chips with findings (every chip is in the attached CSV).
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape

from soak.report import reliability_text as rt
from soak.report.cluster import CHIPS_CSV_NAME, ClusterView
from soak.report.cluster_text import (
    COLOURS,
    LETTERS,
    chip_heads,
    chip_row,
    counts_line,
    node_row,
    peer_rows,
    statement_lines,
    verdict_word,
    version_table,
)
from soak.report.i18n import t, verdict_label
from soak.report.model import ReportData
from soak.report.pdf_style import Markup, Styles, table
from soak.report.sentences import decided_by, reason_text
from soak.report.units import pct

MAX_REASONS = 12
FRAME_H = 745.0  # A4 less the report's margins, points
MIN_ROW_H = 7.0  # below this the matrix no longer reads: it runs over pages instead


def cluster_story(data: ReportData, st: Styles, lang: str, page_w: float, tz: Any) -> list[Any]:
    from reportlab.lib import colors
    from reportlab.lib.units import mm
    from reportlab.platypus import KeepTogether, Spacer

    view: ClusterView = data.cluster
    out: list[Any] = [*st.heading(t("cluster_view", lang))]
    color = {"pass": "#1a7f37", "fail": "#b22222"}.get(data.verdict or "", "#555555")
    decided = f" ({escape(decided_by(data.findings, lang))})" if data.verdict in ("pass", "fail") else ""
    out.append(st.p(f'{escape(t("cluster_verdict", lang))}: <font color="{color}"><b>'
                    f"{escape(verdict_label(data.verdict, lang))}</b></font>{decided}", markup=True))
    out.append(st.p(counts_line(view, lang)))
    for r in data.verdict_reasons[:MAX_REASONS]:
        out.append(st.p(f"• {reason_text(r, lang, tz)}", st.cell))
    if len(data.verdict_reasons) > MAX_REASONS:
        out.append(st.p(f"… +{len(data.verdict_reasons) - MAX_REASONS}", st.small))

    # the matrix follows on the same page when it fits there (a few nodes), else on its own
    out.append(KeepTogether(_matrix(view, st, lang, page_w, colors, mm)))

    out += st.heading(t("node_verdicts", lang))
    rows = []
    for n in view.nodes:
        r = node_row(n, view, lang)
        r[4] = Markup(f'<font color="{COLOURS[n.verdict]}"><b>{escape(r[4])}</b></font>')
        rows.append(r)
    out.append(table(st, [t("node_col", lang), t("rank_col", lang), t("node_status", lang), t("node_chips", lang),
                          t("verdict", lang), t("reasons_col", lang)], rows,
                     [30 * mm, 11 * mm, 17 * mm, 13 * mm, 17 * mm, page_w - 88 * mm]))

    rel_rows = rt.node_rows(data.reliability, lang, tz)
    if rel_rows:
        out += st.heading(t("rel_by_node", lang))
        out.append(table(st, rt.node_heads(lang), rel_rows,
                         [30 * mm, 20 * mm, 22 * mm, 18 * mm, 45 * mm, page_w - 135 * mm]))

    out += st.heading(t("peers_title", lang))
    peers = peer_rows(view, lang)
    if peers:
        out.append(table(st, [t("kind", lang), t("severity", lang), t("where_col", lang), t("metric", lang),
                              t("deviation", lang), t("findings", lang)], peers,
                         [20 * mm, 15 * mm, 32 * mm, 28 * mm, 19 * mm, page_w - 114 * mm]))
    else:
        out.append(st.p(t("no_peers", lang)))

    out += st.heading(t("versions_title", lang))
    head, vrows = version_table(view, lang)
    out.append(st.p(head))
    if vrows:
        marked = [[Markup(f'<font color="#b22222"><b>{escape(r[0])}</b></font>') if r[0].startswith("* ") else r[0],
                   r[1], r[2]] for r in vrows]
        out.append(table(st, [t("version_field", lang), t("version_value", lang), t("version_other", lang)], marked,
                         [60 * mm, 50 * mm, page_w - 110 * mm]))

    out += st.heading(t("cluster_statement", lang))
    for line in statement_lines(data, view, lang):
        out.append(st.p(line))

    out += st.heading(t("chips_flagged", lang))
    flagged = view.flagged()
    if flagged:
        out.append(table(st, chip_heads(lang), [chip_row(c, view.min_coverage, lang) for c in flagged],
                         [24 * mm, 16 * mm, 14 * mm, 14 * mm, 13 * mm, 13 * mm, 13 * mm, 13 * mm, 15 * mm, 12 * mm,
                          page_w - 147 * mm]))
    else:
        out.append(st.p(t("chips_flagged_none", lang)))
    out.append(Spacer(1, 2 * mm))
    out.append(st.p(t("chips_csv_note", lang).format(n=len(view.cells), name=CHIPS_CSV_NAME), st.small))
    return out


def _matrix(view: ClusterView, st: Styles, lang: str, page_w: float, colors: Any, mm: float) -> list[Any]:
    """Heading, legend and the matrix: one row per node, one column per chip, coloured."""
    from reportlab.platypus import LongTable, TableStyle

    grid = view.grid()
    n_rows = len(view.nodes) + 1
    row_h = max(MIN_ROW_H, min(14.0, (FRAME_H - 110.0) / n_rows))
    size = max(4.5, min(7.0, row_h - 2.5))
    name_w, verdict_w = 34 * mm, 9 * mm
    chip_w = (page_w - name_w - verdict_w) / max(1, len(view.columns))
    size = min(size, chip_w / 3.6)  # "npu7-1" fits its column
    font = st.cell.fontName
    bold = st.head.fontName
    data = [[st.fit(t("node_col", lang), size, bold=True, white=True), "", *(st.fit(c, size, bold=True, white=True)
                                                                            for c in view.columns)]]
    style = [
        ("FONT", (0, 0), (-1, -1), font, size),
        ("FONT", (0, 0), (-1, 0), bold, size),
        ("ALIGN", (1, 0), (-1, -1), "CENTER"),
        ("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
        ("TOPPADDING", (0, 0), (-1, -1), 0),
        ("BOTTOMPADDING", (0, 0), (-1, -1), 0.5),
        ("LEFTPADDING", (0, 0), (-1, -1), 1),
        ("RIGHTPADDING", (0, 0), (-1, -1), 1),
        ("GRID", (0, 0), (-1, -1), 0.25, colors.white),
        ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#2f4f6f")),
        ("TEXTCOLOR", (0, 0), (-1, 0), colors.white),
    ]
    for i, n in enumerate(view.nodes, start=1):
        name = n.name if len(n.name) <= 22 else f"{n.name[:10]}…{n.name[-10:]}"
        row = [st.fit(name, size), LETTERS[n.verdict]]
        style.append(("BACKGROUND", (1, i), (1, i), colors.HexColor(COLOURS[n.verdict])))
        for j, chip in enumerate(view.columns, start=2):
            c = grid.get((n.name, chip))
            if c is None:
                row.append("")
                continue
            row.append(LETTERS[c.verdict] + ("!" if c.device_fault else ""))
            style.append(("BACKGROUND", (j, i), (j, i), colors.HexColor(COLOURS[c.verdict])))
        data.append(row)
    table = LongTable(data, colWidths=[name_w, verdict_w] + [chip_w] * len(view.columns),
                      rowHeights=[row_h] * len(data), repeatRows=1)
    table.setStyle(TableStyle(style))
    legend = t("cluster_legend", lang).format(cov=pct(view.min_coverage))
    words = " · ".join(f"{LETTERS[v]} {verdict_word(v, lang)}" for v in LETTERS)
    if any(c.device_fault for c in view.cells):
        words += f" · {t('df_matrix_mark', lang)}"
    return [st.p(t("cluster_matrix", lang), st.h2), st.p(f"{counts_line(view, lang)} ({words})", st.small),
            st.p(legend, st.small), table]
