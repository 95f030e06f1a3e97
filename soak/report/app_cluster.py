"""The cluster view in the report app (``soak.report.app`` shows it on the overview of a run
over several nodes): the node x chip matrix, where a click on a cell opens that chip, the
verdict per node, stragglers and outliers, the versions across nodes and the statement."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from soak.device_names import device_key
from soak.report import reliability_text as rt
from soak.report.cluster import VERDICTS, ChipCell, ClusterView
from soak.report.cluster_text import (
    COLOURS,
    chip_heads,
    chip_row,
    counts_line,
    node_row,
    peer_rows,
    statement_lines,
    verdict_word,
    version_table,
)
from soak.report.evidence_text import evidence_rows
from soak.report.i18n import t
from soak.report.names import kind_name, severity_name
from soak.report.sentences import finding_text
from soak.report.shown import shown, shown_rows
from soak.report.units import pct

CHIP_KEY = "cluster_chip"


def section_cluster(data: Any, lang: str, tz: Any, series_of: Callable[[str, str], list[Any]]) -> None:
    """The whole cluster view; ``series_of(node, chip)`` gives a chip's chart series."""
    import pandas as pd

    view: ClusterView = data.cluster
    st.subheader(t("cluster_view", lang))
    st.markdown(counts_line(view, lang))
    cells = {_name(c): c for c in view.cells}  # the picker names each chip as people read it
    picked = _matrix(view, lang)
    # the chart keeps its selection over reruns: a click opens the chip once, and the picker
    # below may choose another one after it
    if picked and picked != st.session_state.get("cluster_clicked"):
        st.session_state[CHIP_KEY] = picked
    st.session_state["cluster_clicked"] = picked
    options = list(cells)
    flagged = [_name(c) for c in view.flagged()]
    if st.session_state.get(CHIP_KEY) not in options:
        st.session_state[CHIP_KEY] = (flagged or options or [None])[0]
    chosen = st.selectbox(t("chip_pick", lang), options, key=CHIP_KEY)
    if chosen:
        _chip_detail(data, view, cells[chosen], lang, tz, series_of)

    st.markdown(f"**{t('node_verdicts', lang)}**")
    heads = [t("node_col", lang), t("rank_col", lang), t("node_status", lang), t("node_chips", lang),
             t("verdict", lang), t("reasons_col", lang)]
    st.dataframe(pd.DataFrame([dict(zip(heads, node_row(n, view, lang), strict=True)) for n in view.nodes]),
                 hide_index=True, width="stretch")
    rel_rows = rt.node_rows(data.reliability, lang, tz)
    if rel_rows:
        st.markdown(f"**{t('rel_by_node', lang)}**")
        st.dataframe(pd.DataFrame([dict(zip(rt.node_heads(lang), r, strict=True)) for r in rel_rows]),
                     hide_index=True, width="stretch")
    st.markdown(f"**{t('peers_title', lang)}**")
    peers = peer_rows(view, lang)
    if peers:
        heads = [t("kind", lang), t("severity", lang), t("where_col", lang), t("metric", lang), t("deviation", lang),
                 t("findings", lang)]
        st.table(pd.DataFrame(shown_rows([dict(zip(heads, r, strict=True)) for r in peers])).set_index(shown(heads[0])))
    else:
        st.success(t("no_peers", lang))
    st.markdown(f"**{t('versions_title', lang)}**")
    _versions(view, lang)
    st.markdown(f"**{t('cluster_statement', lang)}**")
    for line in statement_lines(data, view, lang):
        st.markdown(shown(line))


def _name(cell: ChipCell) -> str:
    return cell.device or device_key(cell.node, cell.chip)


def _matrix(view: ClusterView, lang: str) -> str | None:
    """The matrix as a chart whose cells can be clicked; the clicked chip's name or None."""
    import altair as alt
    import pandas as pd

    rows = [{"node": c.node, "chip": c.chip, "verdict": verdict_word(c.verdict, lang), "key": c.verdict,
             "findings": len(c.findings), "coverage": pct(c.coverage),
             "fault": "!" if c.device_fault else ""}
            for c in view.cells]
    if not rows:
        return None
    df = pd.DataFrame(rows)
    pick = alt.selection_point(name="chip", fields=["node", "chip"], on="click")
    order = [n.name for n in view.nodes]
    chart = (
        alt.Chart(df)
        .mark_rect(stroke="white", strokeWidth=1)
        .encode(
            x=alt.X("chip:O", sort=list(view.columns), title=None, axis=alt.Axis(orient="top", labelAngle=-45)),
            y=alt.Y("node:O", sort=order, title=None),
            color=alt.Color("key:N", title=t("verdict", lang),
                            scale=alt.Scale(domain=list(VERDICTS), range=[COLOURS[v] for v in VERDICTS]),
                            legend=alt.Legend(labelExpr=_label_expr(lang))),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.55)),
            tooltip=["node", "chip", "verdict", "coverage", "findings", "fault"],
        )
        .add_params(pick)
        .properties(height=max(120, 14 * len(order)))
    )
    if any(c.device_fault for c in view.cells):  # a chip's own fault report: its cell framed in black
        chart = chart.encode(stroke=alt.condition(alt.datum.fault == "!", alt.value("black"), alt.value("white")),
                             strokeWidth=alt.condition(alt.datum.fault == "!", alt.value(2.5), alt.value(1)))
        st.caption(t("df_matrix_mark_app", lang))
    event = st.altair_chart(chart, on_select="rerun", key="cluster_matrix", width="stretch")
    points = ((event or {}).get("selection") or {}).get("chip") or []
    cell = view.grid().get((points[0].get("node"), points[0].get("chip"))) if points else None
    return None if cell is None else _name(cell)


def _label_expr(lang: str) -> str:
    """The legend's labels in the report's language (the data carries the verdict codes)."""
    cases = " : ".join(f"datum.label == '{v}' ? '{verdict_word(v, lang)}'" for v in VERDICTS)
    return f"{cases} : datum.label"


def _chip_detail(data: Any, view: ClusterView, cell: ChipCell, lang: str, tz: Any,
                 series_of: Callable[[str, str], list[Any]]) -> None:
    import pandas as pd

    st.markdown(f"#### {t('chip_detail', lang)}: {shown(_name(cell))} · {verdict_word(cell.verdict, lang)}")
    heads = chip_heads(lang)
    st.table(pd.DataFrame(shown_rows([dict(zip(heads, chip_row(cell, view.min_coverage, lang), strict=True))]))
             .set_index(shown(heads[0])))
    mine = [f for f in data.findings if f.node == cell.node and f.device == cell.chip]
    for f in mine:
        st.markdown(f"- **{kind_name(f.kind, lang)}** ({severity_name(f.severity, lang)}): {shown(finding_text(f, lang))}")
        rows = evidence_rows(f, tz, lang)
        if rows:
            st.table(pd.DataFrame(shown_rows([{t("key", lang): k, t("value", lang): v} for k, v in rows]))
                     .set_index(shown(t("key", lang))))
    if cell.device is None:
        return
    for s in series_of(cell.node, cell.chip):
        if s.metric in ("util_pct", "temp_c", "power_w"):
            frame = pd.DataFrame({"ts": pd.to_datetime(list(s.ts), unit="s", utc=True), t(s.metric, lang): list(s.values)})
            st.line_chart(frame.set_index("ts"), height=140)


def _versions(view: ClusterView, lang: str) -> None:
    """Nodes x version fields, the fields that differ first, each differing value marked."""
    import pandas as pd

    head, _rows = version_table(view, lang)
    st.markdown(head)
    rows = list(view.versions)
    if not rows:
        return
    differ = [r for r in rows if r.differs]
    shown = differ + [r for r in rows if not r.differs]
    frame = pd.DataFrame({r.key: ["N/A" if v is None else v for v in r.values] for r in shown},
                         index=[n.name for n in view.nodes])
    common = {r.key: r.common()[0] for r in shown}

    def mark(col: Any) -> list[str]:
        want = common[col.name]
        return ["background-color: #f8d7da; font-weight: bold" if (None if v == "N/A" else v) != want else ""
                for v in col]

    st.dataframe(frame.style.apply(mark), width="stretch")
