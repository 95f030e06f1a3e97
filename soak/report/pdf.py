"""The customer's PDF (reportlab platypus), before attachments and signature.

``render_pdf`` lays out: cover (customer, site, cluster, node, serials, run window, verdict),
acceptance criteria with measured values, per-chip summary, charts, findings with evidence,
event timeline, manifest, clean-run statement, detector versions and thresholds, the SHA-256
of the exported raw data, and a signature slot on the last page whose position is returned so
``signing.finalize_pdf`` can put the visible signature exactly there.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from datetime import tzinfo
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

from soak.provenance import time_scaled
from soak.report import numerics as nmr
from soak.report import reliability_text as rt
from soak.report.appendix import appendix_tables, detector_name, threshold_lines
from soak.report.charts import CHART_ASPECT, all_chart_pngs
from soak.report.device_faults import chip_columns, clean_line, fault_header, fault_rows
from soak.report.evidence_text import evidence_rows
from soak.report.fonts import register_cjk_font, try_register_cjk_font
from soak.report.i18n import simulation_label, t, verdict_label
from soak.report.links import link_node_rows, link_pair_rows, links_intro, links_shown
from soak.report.model import Customer, ReportData, fmt, fmt_bytes, fmt_duration, soak_window
from soak.report.names import kind_name, metric_name, severity_name
from soak.report.pdf_style import Markup, Styles, table
from soak.report.rows import (
    accounting_rows,
    chips_figure,
    coverage_rows,
    event_rows,
    interruption_rows,
    nodes_figure,
)
from soak.report.sentences import criterion_cells, decided_by, finding_text, reason_text
from soak.report.timewent import sections as time_went_sections
from soak.report.units import dur, run_zone, span, when, zone_label

if TYPE_CHECKING:
    from reportlab.pdfgen.canvas import Canvas
    from reportlab.platypus import BaseDocTemplate

    from soak.report.signing import Signer

MAX_EVENTS = 200  # more go to the attached JSON; a 72 h run can hold thousands of checkpoints
MAX_MANIFEST_ROWS = 300
MAX_FAULT_ROWS = 120  # a chip that flaps all run long stays one row; the rest are in the attached JSON
MAX_LINK_PAIRS = 40  # every pair not ok is shown; the rest are in the attached JSON
SIGNATURE_BOX_H = 80.0
FONTS_SUBJECT = "fonts: "  # in the document's Subject, before the fonts it drew with


@dataclass(frozen=True)
class RawData:
    """The exported raw data whose digest the report prints (and which is attached)."""

    sha256: str | None
    rows: int | None
    filename: str = "soak-raw.csv"
    profile: str = "soak-profile.toml"  # the attached acceptance profile it is analysed with


@dataclass
class SignatureSlot:
    """Where the visible signature goes: 0-based page and box (x1, y1, x2, y2) in points."""

    page: int = 0
    box: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)


def _serials(data: ReportData, most: int = 16) -> str:
    """The chips' serial numbers; a cluster's many in the chips CSV, not on the cover."""
    found = list(dict.fromkeys(c.serial for c in data.chips if c.serial))
    if not found:
        return "N/A"
    more = f" … (+{len(found) - most})" if len(found) > most else ""
    return ", ".join(found[:most]) + more


def _slot_flowable(slot: SignatureSlot, st: Styles, lang: str, signed: bool):
    from reportlab.lib import colors
    from reportlab.platypus import Flowable

    class _Slot(Flowable):
        def wrap(self, avail_w: float, avail_h: float) -> tuple[float, float]:
            self.width = min(260.0, avail_w)
            return self.width, SIGNATURE_BOX_H

        def draw(self) -> None:
            c = self.canv
            x, y = c.absolutePosition(0, 0)
            slot.page = c.getPageNumber() - 1
            slot.box = (x, y, x + self.width, y + SIGNATURE_BOX_H)
            c.setStrokeColor(colors.HexColor("#888888"))
            c.setDash(2, 2)
            c.rect(0, 0, self.width, SIGNATURE_BOX_H)
            if not signed:
                c.setFillColor(colors.HexColor("#b22222"))
                st.draw(c, self.width / 2, SIGNATURE_BOX_H / 2 - 4, t("unsigned", lang), 12, align="centre")

    return _Slot()


def _cover_end():
    """The end of the cover: the rest of page 1 stays blank, so what follows (the time
    accounting and its other shares) is not read as the cover's. A cover too long for page 1
    already ended on a later page: there it takes no room, and what follows goes on under the
    cover's last lines instead of leaving them alone on a near-empty page."""
    from reportlab.platypus import Flowable

    class CoverEnd(Flowable):
        def wrap(self, avail_w: float, avail_h: float) -> tuple[float, float]:
            # a Frame gives a flowable its canvas before it wraps it
            on_cover = self.canv.getPageNumber() == 1
            return avail_w, (max(0.0, avail_h - 0.01) if on_cover else 0.0)

        def draw(self) -> None:
            pass

    return CoverEnd()


def render_pdf(
    data: ReportData,
    *,
    customer: Customer | None = None,
    raw: RawData | None = None,
    lang: str = "en",
    font: str | None = None,
    signed: bool = True,
    signer: Signer | None = None,
    drawn: list[str] | None = None,
) -> tuple[bytes, SignatureSlot, tuple[str, ...]]:
    """The report as PDF bytes, the signature slot's position and the fonts it drew with
    (named in its metadata too). ``signer``: whose key signs it (named by the signature; the
    demo's key said on the cover). ``drawn``, when given, collects every text it draws."""
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.units import mm
    from reportlab.platypus import Image, KeepTogether, SimpleDocTemplate, Spacer

    cjk = register_cjk_font(font) if lang == "zh" else try_register_cjk_font(font)
    st = Styles(lang, cjk, drawn)
    customer = customer or Customer()
    raw = raw or RawData(None, None)
    run = data.run
    slot = SignatureSlot()
    story: list = []
    page_w = A4[0] - 36 * mm

    tz = run_zone(run.timezone, run.utc_offset_s)
    zone = zone_label(tz, run.started_at)

    # -- cover: who, what, the verdict and the criteria at a glance ------------------------
    story.append(st.p(t("title", lang), st.h1))
    sim_label = simulation_label(run.backend, run.time_scale, lang)
    if sim_label:
        story.append(st.p(sim_label, st.banner))
    if signed and signer is not None and signer.demo:
        story.append(st.p(t("demo_key", lang), st.banner))
    story.append(Spacer(1, 3 * mm))
    # On a scaled time line the run's times are not wall-clock times: say so next to them, and
    # keep "generated" on the wall clock, where it is true (and may read before the run's end).
    scaled = time_scaled(run.time_scale)
    scale = f"{run.time_scale:g}" if scaled else ""
    window_key = t("run_window_scaled", lang).format(scale=scale) if scaled else t("run_window", lang)
    # one run duration on every page: the soak window's (the accounting's "ran")
    w_start, w_end = soak_window(data)
    ran_s = None if w_start is None or w_end is None else max(0.0, w_end - w_start)
    duration = fmt_duration(ran_s)
    if scaled and ran_s is not None:
        duration = t("duration_wall", lang).format(run=duration, wall=fmt_duration(ran_s / run.time_scale))
    serials = _serials(data)
    color = {"pass": "#1a7f37", "fail": "#b22222"}.get(data.verdict or "", "#555555")
    vstyle = st.verdict.clone("vc", textColor=colors.HexColor(color))
    decided = decided_by(data.findings, lang)
    line = f"{t('verdict', lang)}: {verdict_label(data.verdict, lang)}"
    story.append(st.p(f"{line} ({decided})" if decided and data.verdict in ("pass", "fail") else line, vstyle))
    for reason in data.verdict_reasons:
        story.append(st.p(f"• {reason_text(reason, lang, tz)}"))
    story.append(Spacer(1, 3 * mm))
    nodes = nodes_figure(data, lang)
    pairs = [
        (t("customer", lang), customer.customer),
        (t("site", lang), customer.site),
        (t("cluster", lang), customer.cluster),
        # a cluster run is on many hosts: name its nodes, not the host that created the run
        *([(t("nodes", lang), nodes)] if nodes else [(t("node", lang), customer.node or run.host),
                                                      (t("host", lang), run.host)]),
        (t("run_id", lang), run.run_id),
        (t("workload", lang), run.workload),
        (t("backend", lang), run.backend),
        (t("chips", lang), chips_figure(data, lang)),
        (t("restarts", lang), run.restarts),
        (t("planned", lang), fmt_duration(run.planned_duration_s)),
        (t("time_zone", lang), zone),
    ]
    if run.time_scale and run.time_scale != 1:
        pairs.append((t("time_scale", lang), f"×{run.time_scale:g}"))
    half = (len(pairs) + 1) // 2
    grid = [[*pairs[i], *(pairs[i + half] if i + half < len(pairs) else ("", ""))] for i in range(half)]
    kw = 26 * mm
    story.append(table(st, None, grid, [kw, page_w / 2 - kw, kw, page_w / 2 - kw], key_cols=(0, 2)))
    story.append(table(st, None, [[window_key, span(w_start, w_end, tz)], [t("duration", lang), duration],
                                  [t("serials", lang), serials]], [2 * kw, page_w - 2 * kw], key_cols=(0,)))
    # when it was made goes with the run's window it speaks of: left to the cover's foot, a
    # cover one line too long leaves it alone on a page of its own
    generated = t("generated_wall", lang) if scaled else t("generated", lang)
    story.append(st.p(f"{generated}: {when(data.generated_at or time.time(), tz)} · {t('times_in', lang).format(zone=zone)}", st.small))
    if scaled:
        story.append(st.p(t("time_line_note", lang).format(scale=scale), st.small))
    story += st.heading(t("at_a_glance", lang))
    crit_rows = []
    for c in data.criteria:
        name, required, measured, met = criterion_cells(c, lang)
        mark = {True: "#1a7f37", False: "#b22222"}.get(c.met, "#555555")
        crit_rows.append([name, required, measured, Markup(f'<font color="{mark}"><b>{escape(met)}</b></font>')])
    if crit_rows:
        story.append(table(st, [t("criterion", lang), t("required", lang), t("measured", lang), t("met", lang)],
                           crit_rows, [40 * mm, 45 * mm, page_w - 106 * mm, 21 * mm]))
    else:
        story.append(st.p("N/A"))
    # the cover's one training share is the availability judged; the time's other shares (of
    # the planned time, ETTR) are said with the accounting they come from (_reliability_section),
    # which starts on the next page: the cover is a page of its own
    story.append(_cover_end())
    if data.cluster is not None:
        from soak.report.pdf_cluster import cluster_story

        story += cluster_story(data, st, lang, page_w, tz)

    # -- where the time went, coverage, chips ------------------------------------------------
    acc = accounting_rows(data.accounting, lang)
    if acc:
        story += st.heading(t("accounting", lang))
        story.append(table(st, None, [list(r) for r in acc], [80 * mm, page_w - 80 * mm], key_cols=(0,)))
        stops = interruption_rows(data.accounting, tz, lang, data.events)
        if stops:
            story.append(Spacer(1, 2 * mm))
            story += st.heading(t("interruptions", lang), st.body.clone("ib", fontName=st.h2.fontName))
            story.append(table(st, [t("from", lang), t("how_long", lang), t("int_cause", lang), t("counted", lang), t("message", lang)],
                               [list(r) for r in stops], [28 * mm, 20 * mm, 40 * mm, 28 * mm, page_w - 116 * mm]))
    story += _reliability_section(st, data, lang, page_w, tz)
    cov = coverage_rows(data.coverage, lang)
    if data.cluster is not None:  # a cluster's chips: those read too little here, all in the CSV
        low = {c.device for c in data.cluster.cells if c.low_coverage}
        cov = [r for r in cov if r[0] in low]
    if cov:
        story += st.heading(t("coverage", lang))
        dev_w = 22 * mm if data.cluster is None else 32 * mm  # a cluster's chips are node/chip
        story.append(table(st, [t("device", lang), t("cov_lowest", lang), t("cov_all", lang)], [list(r) for r in cov],
                           [dev_w, 42 * mm, page_w - 42 * mm - dev_w]))
        tick = (data.coverage or {}).get("tick_s")
        story.append(st.p(t("cov_note", lang).format(tick=dur(tick)), st.small))

    story += _links_section(st, data, lang, page_w)

    story += st.heading(t("chip_summary", lang))
    chips = data.chips
    if data.cluster is not None:  # every chip is in the matrix and the CSV; the details of these
        named = {c.device for c in data.cluster.flagged()}
        chips = tuple(c for c in chips if c.device in named)
    chip_rows = [
        [
            c.device,
            c.model,
            c.serial,
            fmt(c.util_mean_pct),
            fmt(c.util_min_pct),
            fmt(c.temp_max_c),
            fmt(c.power_mean_w),
            fmt_bytes(c.hbm_peak_bytes),
            fmt(c.step_time_median_s, digits=3),
            c.findings,
            *chip_columns(c, lang),
        ]
        for c in chips
    ]
    hdr = ["device", "model", "serial", "util_mean", "util_min", "temp_max", "power_mean", "hbm_peak", "step_median", "findings",
           "chip_health", "chip_ecc", "chip_link"]
    if all(c.step_time_median_s is None for c in data.chips):
        # Step time is per rank, not per chip, unless the run mapped ranks to chips.
        hdr.remove("step_median")
        chip_rows = [r[:8] + r[9:] for r in chip_rows]
    if chip_rows:
        # the names and the serial get their room, the figures share the rest
        fixed = {"device": 17 * mm if data.cluster is None else 26 * mm, "model": 12 * mm, "serial": 23 * mm,
                 "hbm_peak": 13 * mm, "findings": 14 * mm, "chip_ecc": 14 * mm}
        share = (page_w - sum(fixed.values())) / (len(hdr) - len(fixed))
        story.append(table(st, [t(h, lang) for h in hdr], chip_rows, [fixed.get(h, share) for h in hdr]))
    else:
        story.append(st.p(t("chips_flagged_none", lang)))
    story += _device_faults_section(st, data, lang, page_w, tz)
    story += _numerics_section(st, data, lang, page_w, tz)

    # -- charts ----------------------------------------------------------------------------
    charts = all_chart_pngs(data, lang=lang, font=cjk)
    if charts:
        # on this page where the heading and the first chart fit, else at the next one's top
        images = [Image(io.BytesIO(png), width=page_w, height=page_w * CHART_ASPECT) for _metric, png in charts]
        story.append(KeepTogether([st.p(t("charts", lang), st.h2), images[0]]))
        for img in images[1:]:
            story += [Spacer(1, 2 * mm), img]
        story.append(Spacer(1, 2 * mm))

    # -- findings --------------------------------------------------------------------------
    story += st.heading(t("findings", lang))
    if not data.findings:
        story.append(st.p(t("no_findings", lang)))
    half_w = page_w / 2
    for f in data.findings:
        rows = [
            [t("kind", lang), kind_name(f.kind, lang), t("severity", lang), severity_name(f.severity, lang)],
            [t("device", lang), f.device, t("metric", lang), metric_name(f.metric, lang)],
            [t("start", lang), when(f.start, tz), t("end", lang), when(f.end, tz)],
        ]
        linked = "" if f.capture is None else f" → {t('capture_link', lang).format(id=f.capture)}"
        ev = evidence_rows(f, tz, lang)
        rows += [[*ev[i], *(ev[i + 1] if i + 1 < len(ev) else ("", ""))] for i in range(0, len(ev), 2)]
        block = [
            st.p(f"{kind_name(f.kind, lang)} · {f.device or 'N/A'}: {finding_text(f, lang, tz)}{linked}",
                 st.body.clone("fb", fontName=st.h2.fontName)),
            table(st, None, rows, [30 * mm, half_w - 30 * mm, 30 * mm, half_w - 30 * mm], key_cols=(0, 2)),
            Spacer(1, 3 * mm),
        ]
        story.append(KeepTogether(block))

    # -- where the time went --------------------------------------------------------------
    story += st.heading(t("time_went", lang))
    went = time_went_sections(data, lang)
    if not went:
        story.append(st.p(t("no_captures", lang)))
    else:
        story.append(st.p(t("time_went_intro", lang), st.small))
    for sec in went:
        block = [st.p(sec.title, st.body.clone("tw", fontName=st.h2.fontName))]
        if sec.note:
            block.append(st.p(sec.note))
        if sec.rows:
            first = 40 * mm
            rest = (page_w - first) / max(1, len(sec.header) - 1)
            block.append(table(st, list(sec.header), [list(r) for r in sec.rows], [first] + [rest] * (len(sec.header) - 1)))
        block.append(Spacer(1, 3 * mm))
        story.append(KeepTogether(block))

    # -- events ----------------------------------------------------------------------------
    story += st.heading(t("events", lang))
    ev_rows = event_rows(data.events, tz, lang)
    if not ev_rows:
        story.append(st.p(t("no_events", lang)))
    else:
        story.append(table(st, [t("time", lang), t("event", lang), t("device", lang), t("message", lang)],
                           [list(r) for r in ev_rows[:MAX_EVENTS]], [36 * mm, 30 * mm, 22 * mm, page_w - 88 * mm]))
        if len(ev_rows) > MAX_EVENTS:
            story.append(st.p(f"… +{len(ev_rows) - MAX_EVENTS} (soak-findings.json)", st.small))

    # -- statement, detectors, the appendix, integrity ---------------------------------------
    story += st.heading(t("clean_statement", lang))
    story.append(st.p(t("no_clean_statement", lang) if data.clean_statement is None
                      else reason_text(data.clean_statement, lang, tz)))

    story += _appendix(st, data, lang, page_w, tz)

    # The digest and the signature stay on one page: a signature alone on the last page reads
    # as an empty page, and the two belong together (what is signed, and by whom).
    closing = [
        st.p(t("data_integrity", lang), st.h2),
        table(st, None, [[t("data_sha256", lang), raw.sha256], [t("data_rows", lang), raw.rows]],
              [60 * mm, page_w - 60 * mm], key_cols=(0,)),
        Spacer(1, 2 * mm),
        st.p(t("attachments_note", lang).format(raw=raw.filename, profile=raw.profile), st.small),
        st.p(t("signature", lang), st.h2),
        *([st.p(t("signed_by", lang).format(name=signer.name, fingerprint=signer.fingerprint_sha256))]
          if signed and signer is not None else []),
        *([st.p(t("demo_key", lang), st.banner)] if signed and signer is not None and signer.demo else []),
        st.p(t("signature_note", lang), st.small),
        Spacer(1, 2 * mm),
        _slot_flowable(slot, st, lang, signed),
    ]
    story.append(KeepTogether(closing))

    def _footer(canvas: Canvas, doc: BaseDocTemplate) -> None:
        canvas.saveState()
        canvas.setFillColor(colors.HexColor("#666666"))
        st.draw(canvas, 18 * mm, 10 * mm, f"soak · {run.run_id}", 7)
        st.draw(canvas, A4[0] - 18 * mm, 10 * mm, f"{doc.page}", 7, align="right")
        if sim_label:
            # On every page: a page copied out of the report still says what it is.
            canvas.setFillColor(colors.HexColor("#b22222"))
            st.draw(canvas, 18 * mm, 13.5 * mm, sim_label, 7.5, bold=True)
        canvas.restoreState()

    # the footer is drawn while the document is built, after its metadata is set: its fonts now
    for text in (f"soak · {run.run_id} 0123456789", sim_label or "", t("unsigned", lang)):
        st.fonts.runs(text, "Helvetica")
    st.fonts.embed()
    used = tuple(st.fonts.labels())
    buf = io.BytesIO()
    doc = SimpleDocTemplate(
        buf,
        pagesize=A4,
        leftMargin=18 * mm,
        rightMargin=18 * mm,
        topMargin=16 * mm,
        bottomMargin=18 * mm,
        title=f"{t('title', lang)} {run.run_id}",
        author=customer.customer or "soak",
        subject=f"soak run {run.run_id}; raw data sha256 {raw.sha256 or 'N/A'}; {FONTS_SUBJECT}{'; '.join(used)}",
        keywords=f"soak-run-id:{run.run_id} soak-data-sha256:{raw.sha256 or 'N/A'} soak-verdict:{data.verdict or 'N/A'}",
        creator="soak",
        lang="zh-CN" if lang == "zh" else "en",
    )
    doc.build(story, onFirstPage=_footer, onLaterPages=_footer)
    return buf.getvalue(), slot, used


def _reliability_section(st: Styles, data: ReportData, lang: str, page_w: float, tz: tzinfo) -> list:
    """ETTR, the planned time as a bar of its parts, the MTTF bound and its projections, the
    repeat offenders: on the cover, in the customer's terms."""
    from reportlab.lib import colors
    from reportlab.lib.units import mm
    from reportlab.platypus import Spacer, Table, TableStyle

    parts = rt.parts(data.reliability, lang)
    if not parts:
        return []
    out: list = [*st.heading(t("reliability", lang))]
    # the bar: one cell per part, as wide as its share of the planned time (a sliver stays visible)
    total = sum(p.seconds for p in parts)
    widths = [max(0.6 * mm, page_w * p.seconds / total) for p in parts]
    widths = [w * page_w / sum(widths) for w in widths]
    bar = Table([[""] * len(parts)], colWidths=widths, rowHeights=[5 * mm])
    bar.setStyle(TableStyle([("BACKGROUND", (i, 0), (i, 0), colors.HexColor(p.color)) for i, p in enumerate(parts)]
                            + [("LEFTPADDING", (0, 0), (-1, -1), 0), ("RIGHTPADDING", (0, 0), (-1, -1), 0)]))
    # the legend in one line, each part's name in its colour: the cover has little room left
    legend = " · ".join(f'<span backColor="{p.color}">&nbsp;&nbsp;&nbsp;&nbsp;</span> {escape(name)} {escape(how_long)} '
                        f'({escape(share)})'
                        for p, (name, how_long, share) in zip(parts, rt.part_rows(data.reliability, lang), strict=True))
    tight = st.small.clone("rel", spaceBefore=0, spaceAfter=0.5)
    out += [bar, Spacer(1, 1 * mm), st.p(Markup(legend), tight, markup=True)]
    for line in rt.lines(data.reliability, lang, tz) + rt.offender_lines(data.repeat_offenders, lang):
        out.append(st.p(f"• {line}", tight))
    return out


def _device_faults_section(st: Styles, data: ReportData, lang: str, page_w: float, tz: tzinfo) -> list:
    """What the chips' own fault reports said, one row per chip and signal (and code), fail
    first; a run without any says so in one line, with how many chips' reports were read."""
    from reportlab.lib.units import mm

    out: list = [*st.heading(t("device_faults", lang))]
    if not data.device_faults:
        return out + [st.p(clean_line(data.criteria, lang))]
    with_node = data.cluster is not None
    rows = [list(r) for r in fault_rows(data.device_faults[:MAX_FAULT_ROWS], tz, lang, with_node=with_node)]
    colours = {"fail": "#b22222", "warn": "#b8860b"}
    for r, v in zip(rows, data.device_faults, strict=False):
        if v.severity in colours:  # the level names how bad it is: in the severity's colour
            r[-3] = Markup(f'<font color="{colours[v.severity]}"><b>{escape(r[-3])}</b></font>')
    widths = [19 * mm, *([16 * mm] if with_node else []), 13 * mm, (20 if with_node else 23) * mm, 24 * mm, 17 * mm]
    rest = page_w - sum(widths)
    widths += [rest * 0.32, rest * 0.22, rest * 0.22, rest * 0.24]
    out += [st.p(t("df_intro", lang), st.small), table(st, fault_header(lang, with_node=with_node), rows, widths)]
    if len(data.device_faults) > MAX_FAULT_ROWS:
        out.append(st.p(t("df_more", lang).format(n=len(data.device_faults) - MAX_FAULT_ROWS), st.small))
    return out


def _numerics_section(st: Styles, data: ReportData, lang: str, page_w: float, tz: tzinfo) -> list:
    """The checks each chip ran (the criterion's evidence), then every numerical event, fail first."""
    from reportlab.lib.units import mm

    out: list = [*st.heading(t("numerics", lang)), st.p(nmr.evidence_line(data.criteria, lang))]
    if not data.numerics:
        return out + [st.p(t("nm_none", lang), st.small)]
    with_node = data.cluster is not None
    rows = [list(r) for r in nmr.rows(data.numerics[:nmr.MAX_ROWS], tz, lang, with_node=with_node)]
    colours = {"fail": "#b22222", "warn": "#b8860b"}
    for r, v in zip(rows, data.numerics, strict=False):
        if v.severity in colours:
            r[-1] = Markup(f'<font color="{colours[v.severity]}"><b>{escape(r[-1])}</b></font>')
    fixed = [19 * mm, *([16 * mm] if with_node else []), 14 * mm, 20 * mm, 9 * mm, 11 * mm]
    rest = page_w - sum(fixed)
    widths = fixed + [rest * w for w in (0.14, 0.14, 0.1, 0.1, 0.32, 0.2)]
    out += [st.p(t("nm_intro", lang), st.small), table(st, nmr.header(lang, with_node=with_node), rows, widths)]
    if len(data.numerics) > nmr.MAX_ROWS:
        out.append(st.p(t("nm_more", lang).format(n=len(data.numerics) - nmr.MAX_ROWS), st.small))
    return out


def _links_section(st: Styles, data: ReportData, lang: str, page_w: float) -> list:
    """The busbw table per pair and per node against expected and the cluster median (a run
    of several nodes with a link test)."""
    from reportlab.lib.units import mm
    from reportlab.platypus import Spacer

    shown, omitted = links_shown(data.links, MAX_LINK_PAIRS)
    pairs = link_pair_rows(shown, lang)
    if not pairs:
        return []
    out = [*st.heading(t("links", lang)), st.p(links_intro(data.links, lang), st.small), Spacer(1, 1 * mm)]
    w = (page_w - 40 * mm) / 5
    out.append(table(st, [t("link_pair", lang), t("link_busbw", lang), t("link_tests", lang), t("link_vs_median", lang),
                          t("link_vs_expected", lang), t("status", lang)], [list(r) for r in pairs],
                     [40 * mm, w, w, w, w, w]))
    if omitted:
        out.append(st.p(t("links_more", lang).format(n=omitted), st.small))
    out.append(Spacer(1, 2 * mm))
    out.append(table(st, [t("node", lang), t("link_node_busbw", lang), t("link_pairs", lang), t("link_vs_median", lang),
                          t("link_vs_expected", lang), t("status", lang)],
                     [list(r) for r in link_node_rows(data.links, lang)], [40 * mm, w, w, w, w, w]))
    return out


def _own(detector: Any, detectors: Any) -> dict:
    """A detector's thresholds; the profile's without the sections a detector of its own
    lists (each threshold said once)."""
    if detector.name != "profile":
        return dict(detector.thresholds)
    others = {d.name for d in detectors if d.name != "profile"}
    return {k: v for k, v in detector.thresholds.items() if k not in others}


def _appendix(st: Styles, data: ReportData, lang: str, page_w: float, tz: Any) -> list:
    """The detectors' thresholds in words, the environment manifest and the run plan as
    labelled tables (``soak.report.appendix``): reference, after everything the verdict rests
    on."""
    from reportlab.lib.units import mm
    from reportlab.platypus import Spacer

    env, plans = appendix_tables(data.manifest, data.run.run_id, lang)
    out: list = [*st.heading(t("appendix", lang)), st.p(t("appendix_intro", lang), st.small)]
    sub = st.body.clone("ab", fontName=st.h2.fontName)
    out += st.heading(t("detectors", lang), sub)
    det_rows = [
        [detector_name(d.name, lang), (d.version or "N/A").split("/", 1)[-1],
         Markup("<br/>".join(escape(line) for line in threshold_lines(d.name, _own(d, data.detectors), lang, tz))
                or "N/A")]
        for d in data.detectors
    ]
    if det_rows:
        out += [table(st, [t("detector", lang), t("version", lang), t("thresholds", lang)], det_rows,
                      [40 * mm, 16 * mm, page_w - 56 * mm]), Spacer(1, 2 * mm)]
    else:
        out.append(st.p("N/A"))
    if not env and not plans:
        return out
    for i, tb in enumerate([*env, *plans]):
        if i == len(env) and plans:
            out += st.heading(t("plan_title", lang))
        rows = [list(r) for r in tb.rows[:MAX_MANIFEST_ROWS]]
        if tb.header is None:
            grid = table(st, None, rows, [62 * mm, page_w - 62 * mm], key_cols=(0,))
        else:
            grid = table(st, list(tb.header), rows, [page_w / len(tb.header)] * len(tb.header))
        out += [*st.heading(tb.title, sub), grid, Spacer(1, 2 * mm)]
    return out
