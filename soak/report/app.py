"""The report app (Streamlit): ``soak report serve`` runs ``streamlit run`` on this file.

Pages: runs, overview (verdict and why, criteria, per-chip summary), timelines (per chip, with
findings and events marked), findings with evidence, events and restarts, environment
manifest, and the signed PDF. A running run refreshes itself (``st.fragment(run_every=...)``).
Every query is downsampled in the database, so a 72 h x 16-chip run opens in seconds.

Arguments come after ``--`` on the streamlit command line, or from ``SOAK_REPORT_DB`` (how
``soak report serve`` hands over the store URL: never in argv),
``SOAK_REPORT_DATA_DIR``, ``SOAK_REPORT_LANG`` (used by tests).
"""

from __future__ import annotations

import argparse
import hmac
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import streamlit as st

from soak.report import numerics as nmr
from soak.report import reliability_text as rt
from soak.report.charts import BREAKING_EVENTS, chart_lines
from soak.report.device_faults import chip_columns, clean_line, fault_header, fault_rows
from soak.report.evidence_text import evidence_rows
from soak.report.i18n import simulation_label, t, verdict_label
from soak.report.links import link_node_rows, link_pair_rows, links_intro
from soak.report.model import fmt, fmt_bytes, fmt_duration, soak_window
from soak.report.names import event_name, kind_name, metric_name, severity_name
from soak.report.rows import (
    accounting_rows,
    chips_figure,
    coverage_rows,
    event_rows,
    interruption_rows,
    nodes_figure,
)
from soak.report.sentences import criterion_cells, event_text, finding_text, reason_text
from soak.report.shown import shown, shown_rows
from soak.report.signing import SIGN_TOKEN_ENV
from soak.report.timewent import sections as time_went_sections
from soak.report.units import run_zone, span, when, zone_label

if TYPE_CHECKING:
    from soak.store import Store
from soak.errors import mask_url, redact
from soak.report import APP_DB_ENV
from soak.runfolder import DEFAULT_DATA_DIR, find_stores

PAGES = ("runs", "overview", "timelines", "findings", "events", "manifest", "pdf")
PAGE_KEYS = {"runs": "runs", "overview": "overview", "timelines": "timelines", "findings": "findings",
             "events": "events", "manifest": "manifest", "pdf": "download_pdf"}
_METRIC_SCALE = {"hbm_used_bytes": 1 / 1024**3}
_FIXED_RANGE = {"util_pct": [0, 100]}  # the whole range: an autoscaled 92-98 % axis magnifies noise
_LOOPBACK = ("127.", "::1", "localhost")


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--db", default=os.environ.get(APP_DB_ENV))
    p.add_argument("--data-dir", default=os.environ.get("SOAK_REPORT_DATA_DIR", DEFAULT_DATA_DIR))
    p.add_argument("--lang", default=os.environ.get("SOAK_REPORT_LANG", "en"))
    p.add_argument("--refresh-s", type=float, default=float(os.environ.get("SOAK_REPORT_REFRESH_S", "5")))
    # "local": the app may sign with the data dir's key; "cli": it listens beyond this machine,
    # where anyone who reaches it could press the button, so only the key holder signs (CLI).
    p.add_argument("--signing", choices=("local", "cli"), default=os.environ.get("SOAK_REPORT_SIGNING") or None)
    argv = sys.argv[1:] if sys.argv and sys.argv[0].endswith("app.py") else []
    return p.parse_known_args(argv)[0]


@st.cache_resource
def _store(url: str) -> Store:
    """One store per URL for the whole server."""
    from soak.store import Store

    return Store.open(url, create=False)


@st.cache_data(ttl=5, show_spinner=False)
def _runs(db: str | None, data_dir: str) -> list[dict[str, Any]]:
    urls = [db] if db else [str(p) for p in find_stores(data_dir)]
    out: list[dict[str, Any]] = []
    for url in urls:
        try:
            for r in _store(url).list_runs():
                out.append({**r.as_dict(), "store": url})
        except Exception as exc:  # one broken run folder must not hide the others
            # a run folder's store is named by its folder; a store URL only masked
            name = mask_url(url) if "://" in url else Path(url).parent.name
            out.append({"id": f"({name}: {redact(str(exc))})", "store": None, "status": "error"})
    out.sort(key=lambda r: r.get("started_ts") or 0, reverse=True)
    return out


@st.cache_data(ttl=3600, max_entries=16, show_spinner=False)
def _report(url: str, run_id: str, last_ts: float | None, status: str) -> Any:
    """ReportData without series; keyed on the last sample so a live run refreshes. A finished
    run without the daemon's saved analysis is judged once (``soak.judge``), then cached."""
    from soak.report.loader import load_report_data

    return load_report_data(_store(url), run_id, with_series=False, analyze=status != "running")


@st.cache_data(ttl=3600, max_entries=64, show_spinner=False)
def _series(url: str, run_id: str, device: str | None, start: float | None, end: float | None, last_ts: float | None,
            node: str | None = None) -> list[Any]:
    from soak.report.loader import MAX_POINTS, auto_bucket_s, device_series, step_series

    store = _store(url)
    bucket = auto_bucket_s(start, end, MAX_POINTS)
    out = device_series(store, run_id, bucket, device, node)
    if device is None or device.startswith("__steps"):
        out += step_series(store, run_id, bucket)
    return out


def _tz(data: Any) -> Any:
    return run_zone(data.run.timezone, data.run.utc_offset_s)


# A table of more rows than this is the interactive grid (scrolled, sorted, searched); up to
# it a static table, every row and cell shown whole within the page: the grid cut a Chinese
# per-chip table at the page's right edge and showed 10 of an event timeline's 14 rows.
STATIC_MAX_ROWS = 200


def _table(rows: list[dict[str, Any]], *, wrap: bool = False, markup: bool = False) -> None:
    """A table: static (its cells wrapped, every row shown) unless ``wrap`` is False and it has
    more than ``STATIC_MAX_ROWS`` rows, then the interactive grid, tall enough for 30 rows.
    ``markup``: the cells are Markdown already (``markdown_cell``)."""
    import pandas as pd

    if wrap or len(rows) <= STATIC_MAX_ROWS:  # st.table writes its cells as Markdown: each through shown()
        rows = rows if markup else shown_rows(rows)
        st.table(pd.DataFrame(rows).set_index(list(rows[0])[0]) if rows else pd.DataFrame())
    else:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", height=35 * 31 + 3)


_MET_COLOR = {True: "green", False: "red", None: "gray"}


def markdown_cell(text: str) -> str:
    """``text`` as itself in a Markdown cell (``soak.report.shown``): a "Required" of
    ">= 8 h 00 min" would be a quote, a fault text's link a link."""
    return shown(text)


def _criterion_row(c: Any, lang: str) -> tuple[str, ...]:
    """A criterion's cells for the app's static table: its texts as written, Met green,
    Missed red."""
    *texts, met = criterion_cells(c, lang)
    return (*(markdown_cell(x) for x in texts), f":{_MET_COLOR[c.met]}[{markdown_cell(met)}]")


def _verdict_block(data: Any, lang: str) -> None:
    color = {"pass": "green", "fail": "red", "running": "blue"}.get(data.verdict or "", "gray")
    st.markdown(f"## {t('verdict', lang)}: :{color}[{verdict_label(data.verdict, lang)}]")
    if data.verdict_reasons:
        st.markdown(f"**{t('why', lang)}**")
        for r in data.verdict_reasons:
            st.markdown(f"- {shown(reason_text(r, lang, _tz(data)))}")
    if data.clean_statement:
        st.success(shown(reason_text(data.clean_statement, lang, _tz(data))))


def page_runs(runs: list[dict[str, Any]], lang: str) -> None:
    import pandas as pd

    st.subheader(t("runs", lang))
    if not runs:
        st.info(t("no_runs", lang))
        return
    rows = [
        {
            t("run_id", lang): r.get("id"),
            t("status", lang): r.get("status"),
            t("verdict", lang): verdict_label("running" if r.get("status") == "running" else r.get("verdict"), lang),
            t("host", lang): r.get("host"),
            t("workload", lang): r.get("workload"),
            t("started", lang): when(r.get("started_ts"), _zone_of(r)),
            t("duration", lang): fmt_duration(
                None if r.get("ended_ts") is None or r.get("started_ts") is None else r["ended_ts"] - r["started_ts"]
            ),
            t("restarts", lang): r.get("restarts"),
        }
        for r in runs
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def _zone_of(r: dict[str, Any]) -> Any:
    host = (r.get("manifest") or {}).get("host") or {}
    return run_zone(host.get("timezone"), host.get("utc_offset_s"))


def page_overview(data: Any, lang: str, url: str | None = None, last_ts: float | None = None) -> None:
    run = data.run
    _verdict_block(data, lang)
    if data.cluster is not None and url is not None:
        from soak.report.app_cluster import section_cluster

        end = run.ended_at if run.ended_at is not None else last_ts
        section_cluster(data, lang, _tz(data),
                        lambda node, chip: _series(url, run.run_id, chip, run.started_at, end, last_ts, node))
    c = st.columns(4)
    w_start, w_end = soak_window(data)  # one run duration, as the PDF states it
    c[0].metric(t("duration", lang), fmt_duration(None if w_start is None or w_end is None else w_end - w_start))
    c[1].metric(t("chips", lang), chips_figure(data, lang))
    c[2].metric(t("restarts", lang), fmt(run.restarts))
    c[3].metric(t("findings", lang), len(data.findings))
    tz = _tz(data)
    where = nodes_figure(data, lang) or f"{t('host', lang)}: {run.host or 'N/A'}"
    st.caption(f"{t('run_id', lang)}: {shown(run.run_id)} · {shown(where)} · "
               f"{t('run_window', lang)}: {span(run.started_at, run.ended_at, tz)} ({zone_label(tz, run.started_at)})")
    st.subheader(t("criteria", lang))
    heads = [t("criterion", lang), t("required", lang), t("measured", lang), t("met", lang)]
    _table([dict(zip(heads, _criterion_row(k, lang), strict=True)) for k in data.criteria], wrap=True, markup=True)
    acc = accounting_rows(data.accounting, lang)
    if acc:
        st.subheader(t("accounting", lang))
        _table([{t("key", lang): k, t("value", lang): v} for k, v in acc], wrap=True)
        stops = interruption_rows(data.accounting, tz, lang, data.events)
        if stops:
            heads = [t("from", lang), t("how_long", lang), t("int_cause", lang), t("counted", lang), t("message", lang)]
            st.markdown(f"**{t('interruptions', lang)}**")
            _table([dict(zip(heads, r, strict=True)) for r in stops], wrap=True)
    _reliability(data, lang, tz)  # the time's shares with the accounting they come from, as in the PDF
    cov = coverage_rows(data.coverage, lang)
    if cov:
        st.subheader(t("coverage", lang))
        _table([dict(zip([t("device", lang), t("cov_lowest", lang), t("cov_all", lang)], r, strict=True)) for r in cov])
    section_links(data, lang)
    st.subheader(t("chip_summary", lang))
    _table(
            [
                {
                    t("device", lang): ch.device,
                    t("model", lang): ch.model or "N/A",
                    t("serial", lang): ch.serial or "N/A",
                    t("util_mean", lang): fmt(ch.util_mean_pct),
                    t("util_min", lang): fmt(ch.util_min_pct),
                    t("temp_max", lang): fmt(ch.temp_max_c),
                    t("power_mean", lang): fmt(ch.power_mean_w),
                    t("hbm_peak", lang): fmt_bytes(ch.hbm_peak_bytes),
                    t("findings", lang): ch.findings,
                    **dict(zip([t("chip_health", lang), t("chip_ecc", lang), t("chip_link", lang)],
                               chip_columns(ch, lang), strict=True)),
                }
                for ch in data.chips
            ]
    )
    section_device_faults(data, lang)
    section_numerics(data, lang)


def section_numerics(data: Any, lang: str) -> None:
    """The checks each chip ran, then every numerical event of the run, fail first."""
    st.subheader(t("numerics", lang))
    st.markdown(nmr.evidence_line(data.criteria, lang))
    if not data.numerics:
        st.caption(t("nm_none", lang))
        return
    st.caption(t("nm_intro", lang))
    heads = nmr.header(lang, with_node=data.cluster is not None)
    _table([dict(zip(heads, r, strict=True)) for r in nmr.rows(data.numerics, _tz(data), lang,
                                                                with_node=data.cluster is not None)], wrap=True)


def section_device_faults(data: Any, lang: str) -> None:
    """The chips' own fault reports, fail first; one line where no chip reported one."""
    st.subheader(t("device_faults", lang))
    if not data.device_faults:
        st.markdown(clean_line(data.criteria, lang))
        return
    st.caption(t("df_intro", lang))
    with_node = data.cluster is not None
    heads = fault_header(lang, with_node=with_node)
    _table([dict(zip(heads, r, strict=True)) for r in fault_rows(data.device_faults, _tz(data), lang, with_node=with_node)],
           wrap=True)


# the lines' colours (Tableau 10, as Vega-Lite's own), each named in the legend
_PALETTE = ("#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d",
            "#17becf")


def page_timelines(url: str, data: Any, lang: str, last_ts: float | None) -> None:
    import altair as alt
    import pandas as pd

    # Times on the run's own clock: naive datetimes, which the browser shows as they are.
    tz = _tz(data)
    zone = zone_label(tz, data.run.started_at)

    def local(ts: float) -> Any:
        return pd.Timestamp(ts, unit="s", tz="UTC").tz_convert(tz).tz_localize(None)

    devices = [c.device for c in data.chips]
    flagged_devices = {f.device for f in data.findings if f.severity != "info"}
    crashes = [e.ts for e in data.events if e.kind in BREAKING_EVENTS]
    # the chips with something to explain first (info findings are already explained)
    flagged = sorted({f.device for f in data.findings if f.device in devices and f.severity != "info"})
    st.subheader(t("timelines", lang))
    chosen = st.multiselect(t("select_chip", lang), devices, default=flagged or devices[:4], key="chips")
    end = data.run.ended_at if data.run.ended_at is not None else last_ts
    series = _series(url, data.run.run_id, None, data.run.started_at, end, last_ts)
    spans = pd.DataFrame(
        [{"start": local(f.start), "end": local(f.end),
          "metric": f.metric, "finding": f"{f.kind} {f.device}"} for f in data.findings if f.start and f.end]
    )
    marks = pd.DataFrame(
        [{"ts": local(e.ts), "event": event_name(e.kind, lang), "message": event_text(e, lang, tz)}
         for e in data.events if e.kind in ("crash", "restart", "hang", "exit", "inject", "gap", "stop")]
    )
    for metric in ("util_pct", "temp_c", "hbm_used_bytes", "power_w", "step_time_s"):
        scale = _METRIC_SCALE.get(metric, 1.0)
        shown = [s for s in series if s.metric == metric and (metric == "step_time_s" or s.device in chosen)]
        # the PDF's lines (``charts.chart_lines``): broken where the readings stop or a rank
        # crashed (a null, which the chart leaves as a gap), named as the PDF names them; every
        # coloured line named in the legend, the rest grey and named together. The chips chosen
        # are each named; on the step-time chart rank 0 and the ranks a finding names.
        other = t("legend_other_ranks", lang)
        rows = [{"ts": x, "device": ln.device, "value": None if math.isnan(y) else y * scale,
                 "series": ln.device if metric != "step_time_s" else ln.label or other}
                for ln in chart_lines(shown, flagged_devices, metric, lang, crashes=crashes)
                for x, y in zip(ln.xs, ln.ys, strict=True)]
        if not rows:
            continue
        df = pd.DataFrame(rows)
        df["ts"] = pd.to_datetime(df["ts"], unit="s", utc=True).dt.tz_convert(tz).dt.tz_localize(None)
        named = sorted(set(df["series"]) - {other})
        domain = named + ([other] if other in set(df["series"]) else [])
        colours = [_PALETTE[i % len(_PALETTE)] for i in range(len(named))] + ["#9e9e9e"] * (len(domain) - len(named))
        legend = alt.Legend(orient="bottom", direction="horizontal", titleLimit=0, labelLimit=0)
        encoding = dict(
            x=alt.X("ts:T", title=zone, axis=alt.Axis(format="%m-%d %H:%M")),
            # the same room for every chart's y labels: their time axes line up
            y=alt.Y("value:Q", title=t(metric, lang), axis=alt.Axis(minExtent=48, maxExtent=48),
                    scale=alt.Scale(domain=_FIXED_RANGE[metric]) if metric in _FIXED_RANGE else alt.Scale(zero=False)),
            color=alt.Color("series:N", title=t("device", lang), scale=alt.Scale(domain=domain, range=colours),
                            legend=legend),
            detail="device:N",
            tooltip=[alt.Tooltip("device:N", title=t("device", lang)), alt.Tooltip("ts:T", title=zone),
                     alt.Tooltip("value:Q", title=t(metric, lang))],
        )
        # the grey lines first, the named ones over them
        grey = df["series"] == other
        layers = [alt.Chart(part).mark_line(strokeWidth=1).encode(**encoding)
                  for part in (df[grey], df[~grey]) if not part.empty]
        sp = spans[spans["metric"].isin([metric, None])] if not spans.empty else spans
        if not sp.empty:
            layers.append(alt.Chart(sp).mark_rect(opacity=0.15, color="orange").encode(x="start:T", x2="end:T", tooltip=["finding"]))
        if not marks.empty:
            # every kind of dashed mark named in the legend
            layers.append(alt.Chart(marks).mark_rule(color="gray").encode(
                x="ts:T", strokeDash=alt.StrokeDash("event:N", title=t("legend_event", lang), legend=legend),
                tooltip=[alt.Tooltip("event:N", title=t("event", lang)),
                         alt.Tooltip("message:N", title=t("message", lang))]))
        # the height holds the axes and the legend below the plot too (the chart fits its box)
        st.altair_chart(alt.layer(*layers).properties(height=320), width="stretch")
    if not spans.empty:
        st.caption(f":orange-background[{t('legend_finding', lang)}]: {t('legend_finding_note', lang)}")


def page_findings(data: Any, lang: str) -> None:
    st.subheader(t("findings", lang))
    if not data.findings:
        st.success(t("no_findings", lang))
    tz = _tz(data)
    for f in data.findings:
        # Material icons ship with Streamlit; an emoji needs a colour-emoji font the viewer may lack.
        icon = {"fail": ":material/error:", "warn": ":material/warning:"}.get(f.severity, ":material/info:")
        label = f"{kind_name(f.kind, lang)} · {shown(f.device or 'N/A')} · {shown(finding_text(f, lang, tz))}"
        with st.expander(label, expanded=f.severity == "fail", icon=icon):
            linked = "" if f.capture is None else (
                f" · [{t('capture_link', lang).format(id=f.capture)}](#capture-{f.capture})")
            st.markdown(
                f"**{t('severity', lang)}**: {severity_name(f.severity, lang)} · **{t('metric', lang)}**: "
                f"{metric_name(f.metric, lang)}{linked}  \n**{t('start', lang)}**: {when(f.start, tz)} · "
                f"**{t('end', lang)}**: {when(f.end, tz)}"
            )
            rows = evidence_rows(f, tz, lang)
            if rows:
                st.markdown(f"**{t('evidence', lang)}**")
                _table([{t("key", lang): k, t("value", lang): v} for k, v in rows], wrap=True)
    section_time_went(data, lang)


def section_links(data: Any, lang: str) -> None:
    """The busbw table per pair and per node (a run of several nodes with a link test)."""
    pairs = link_pair_rows(data.links, lang)
    if not pairs:
        return
    st.subheader(t("links", lang))
    st.caption(links_intro(data.links, lang))
    tail = [t("link_vs_median", lang), t("link_vs_expected", lang), t("status", lang)]
    _table([dict(zip([t("link_pair", lang), t("link_busbw", lang), t("link_tests", lang), *tail], r, strict=True))
            for r in pairs])
    _table([dict(zip([t("node", lang), t("link_node_busbw", lang), t("link_pairs", lang), *tail], r, strict=True))
            for r in link_node_rows(data.links, lang)])


def section_time_went(data: Any, lang: str) -> None:
    """The baseline beside the capture taken at each finding (``soak.report.timewent``)."""
    st.subheader(t("time_went", lang), anchor="time-went")
    went = time_went_sections(data, lang)
    if not went:
        st.info(t("no_captures", lang))
        return
    st.caption(t("time_went_intro", lang))
    for sec in went:
        anchor = None if sec.capture is None else f"capture-{sec.capture.id}"
        st.markdown(f"#### {shown(sec.title)}" if anchor is None else f'<h4 id="{anchor}">{_html(sec.title)}</h4>',
                    unsafe_allow_html=anchor is not None)
        if sec.note:
            (st.warning if sec.capture is not None and sec.capture.dominant in ("data", "idle") else st.info)(shown(sec.note))
        if sec.rows:  # operator names come from the trace
            st.table({shown(h or " "): [shown(r[i]) if isinstance(r[i], str) else r[i] for r in sec.rows]
                      for i, h in enumerate(sec.header)})


def _html(text: str) -> str:
    import html

    return html.escape(text)


def page_events(data: Any, lang: str) -> None:
    st.subheader(t("events", lang))
    st.metric(t("restarts", lang), fmt(data.run.restarts))
    rows = event_rows(data.events, _tz(data), lang)
    if not rows:
        st.info(t("no_events", lang))
        return
    heads = [t("time", lang), t("event", lang), t("device", lang), t("message", lang)]
    _table([dict(zip(heads, r, strict=True)) for r in rows])


def page_manifest(data: Any, lang: str) -> None:
    """The environment manifest and the plan as the PDF's appendix has them (``appendix``)."""
    from soak.report.appendix import appendix_tables

    st.subheader(t("manifest", lang))
    env, plans = appendix_tables(data.manifest, data.run.run_id, lang)
    if not env and not plans:
        st.info("N/A")
        return
    for i, tb in enumerate([*env, *plans]):
        if i == len(env):
            st.markdown(f"#### {t('plan_title', lang)}")
        st.markdown(f"**{tb.title}**")
        heads = list(tb.header) if tb.header else [t("key", lang), t("value", lang)]
        _table([dict(zip(heads, r, strict=True)) for r in tb.rows])


def may_sign(signing: str | None, token: str | None) -> bool:
    """Whether this session may sign with the data dir's key: nobody but this machine reaches
    the app (``soak report serve`` on loopback) *and* the session's URL carries the token the
    server was started with. Loopback alone is not the key holder: any user of the machine
    (``nobody``) can drive the app over its WebSocket."""
    if signing == "cli" or (signing is None and not (st.get_option("server.address") or "").startswith(_LOOPBACK)):
        return False
    expected = os.environ.get(SIGN_TOKEN_ENV) or ""
    return bool(expected and token) and hmac.compare_digest(str(token).encode(), expected.encode())


def session_admitted(token: str | None) -> bool:
    """Whether this session may see anything: where the server was started with a token
    (``soak report serve`` on loopback), only a session whose URL carries it, as Jupyter's;
    every user of the machine reaches a loopback port, and a run's data (its raw CSV, findings,
    serials) is its owner's. A server started without one (beyond loopback) shows every run to
    whoever reaches it: that is what ``docs/security.md`` says it is for."""
    expected = os.environ.get(SIGN_TOKEN_ENV) or ""
    if not expected:
        return True
    return bool(token) and hmac.compare_digest(str(token).encode(), expected.encode())


def session_may_sign(signing: str | None) -> bool:
    return may_sign(signing, st.query_params.get("token"))


def _run_pdfs(run_dir: str | None) -> list[Path]:
    """The PDFs the run already has (``soak demo``, ``soak report pdf -o`` into the run folder)."""
    from soak.runfolder import REPORT

    if not run_dir:
        return []
    folder = Path(run_dir) / REPORT
    return sorted(folder.glob("*.pdf"), key=lambda p: p.stat().st_mtime, reverse=True) if folder.is_dir() else []


def page_pdf(url: str, data: Any, lang: str, data_dir: str, run_dir: str | None, signing: str | None) -> None:
    from soak.report.build import build_pdf
    from soak.report.signing import default_keypair

    st.subheader(t("download_pdf", lang))
    st.markdown(f"**{t('pdf_in_run', lang)}**")
    held = _run_pdfs(run_dir)
    if not held:
        st.info(t("pdf_none_in_run", lang))
    for i, path in enumerate(held):
        st.download_button(f"{path.name} ({path.stat().st_size / 1e6:.1f} MB)", data=path.read_bytes(),
                           file_name=path.name, mime="application/pdf", key=f"run_pdf_{i}")
    keys = None
    if signing == "cli":
        st.warning(t("pdf_remote_no_sign", lang).format(run=data.run.run_id))
    elif not session_may_sign(signing):
        st.warning(t("pdf_no_token", lang).format(run=data.run.run_id))
    else:
        try:
            keys = default_keypair(Path(data_dir))
        except Exception as exc:  # show the one-line reason (e.g. key mode 0644)
            st.error(str(exc))
        if keys is None:
            st.warning(t("pdf_unsigned_hint", lang))
    label = t("build_pdf", lang) if keys is not None else t("pdf_build_draft", lang)
    if st.button(label, key="build_pdf"):
        with st.spinner("…"), tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / f"soak-report-{data.run.run_id}-{lang}.pdf"
            build_pdf(_store(url), data.run.run_id, out, lang=lang, keys=keys)
            st.session_state["pdf"] = (data.run.run_id, lang, out.read_bytes(), keys is not None)
    built = st.session_state.get("pdf")
    if built and built[0] == data.run.run_id:
        suffix = "" if built[3] else "-unsigned"
        st.download_button(
            f"{t('download_pdf', lang) if built[3] else t('pdf_build_draft', lang)} ({t('signed_yes' if built[3] else 'signed_no', lang)})",
            data=built[2],
            file_name=f"soak-report-{built[0]}-{built[1]}{suffix}.pdf",
            mime="application/pdf",
            key="download",
        )


def main() -> None:
    args = _args()
    st.set_page_config(page_title="soak report", page_icon=":material/science:", layout="wide")
    # static tables a size smaller, a row's name on one line: a 13-column per-chip table fits
    # the page in both languages without breaking "npu0-0" at its hyphen
    st.html("<style>[data-testid='stTable'] table {font-size: 0.8rem}"
            " [data-testid='stTable'] tbody tr > :first-child p {white-space: nowrap !important;"
            " word-break: keep-all !important; overflow-wrap: normal !important}</style>")
    lang = st.sidebar.radio(
        t("language", args.lang) + " / 语言", ("en", "zh"), index=1 if args.lang == "zh" else 0,
        format_func=lambda x: {"en": "English", "zh": "中文"}[x], horizontal=True, key="lang",
    )
    st.title(t("app_title", lang))
    if not session_admitted(st.query_params.get("token")):
        st.error(t("app_needs_token", lang))
        st.stop()
    runs = _runs(args.db, args.data_dir)
    usable = [r for r in runs if r.get("store")]
    page = st.sidebar.radio(
        t("page_nav", lang), PAGES, index=1 if usable else 0, format_func=lambda p: t(PAGE_KEYS[p], lang), key="page"
    )
    if page == "runs" or not usable:
        page_runs(runs, lang)
        return
    ids = [r["id"] for r in usable]
    run_id = st.sidebar.selectbox(t("select_run", lang), ids, key="run")
    rec = next(r for r in usable if r["id"] == run_id)
    url = rec["store"]
    live = rec.get("status") == "running"
    sim_label = simulation_label(rec.get("backend"), rec.get("time_scale"), lang)
    if sim_label:
        st.warning(sim_label, icon=":material/science:")

    def body() -> None:
        store = _store(url)
        now = store.get_run(run_id)
        status = now.status if now else (rec.get("status") or "")
        if live and status != "running":
            _runs.clear()
            st.rerun()  # the run just ended: redraw everything with its verdict
        last_ts = store.last_sample_ts(run_id)
        data = _report(url, run_id, last_ts, status)
        if live:
            st.caption(f":material/radio_button_checked: {t('live', lang)} · {time.strftime('%H:%M:%S')}")
        if page == "overview":
            page_overview(data, lang, url, last_ts)
        elif page == "timelines":
            page_timelines(url, data, lang, last_ts)
        elif page == "findings":
            page_findings(data, lang)
        elif page == "events":
            page_events(data, lang)
        elif page == "manifest":
            page_manifest(data, lang)
        elif page == "pdf":
            page_pdf(url, data, lang, args.data_dir, rec.get("run_dir"), args.signing)

    if live and page != "pdf":
        st.fragment(run_every=args.refresh_s)(body)()
    else:
        body()


def _reliability(data: Any, lang: str, tz: Any) -> None:
    """ETTR, the planned time by part, the MTTF bound and the repeat offenders, as the PDF's cover
    says them."""
    rows = rt.part_rows(data.reliability, lang)
    if not rows:
        return
    st.subheader(t("reliability", lang))
    heads = [t("int_cause", lang), t("how_long", lang), t("rel_share", lang)]
    _table([dict(zip(heads, r, strict=True)) for r in rows])
    st.markdown("\n".join(f"- {line}" for line in rt.lines(data.reliability, lang, tz)
                          + rt.offender_lines(data.repeat_offenders, lang)))


main()
