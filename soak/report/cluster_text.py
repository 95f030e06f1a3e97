"""The cluster view in words (English or Chinese): the PDF and the app both call this.

Cells, rows and sentences of ``soak.report.cluster.ClusterView``; the sentences of findings
and reasons come from ``soak.report.sentences`` so a straggler reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

from soak.analysis.chip_verdicts import NodeReason
from soak.device_names import device_key
from soak.report.cluster import ChipCell, ClusterView, NodeView
from soak.report.device_faults import chip_columns
from soak.report.i18n import t
from soak.report.model import FindingView, ReportData
from soak.report.names import kind_name, metric_name, node_status_name, severity_name
from soak.report.sentences import finding_text, message
from soak.report.units import num, pct

# One letter per chip verdict in the matrix (the colour says it too; the letter survives a
# black-and-white print and text extraction).
LETTERS = {"fail": "F", "warn": "W", "pass": "P", "nodata": "–"}
COLOURS = {"fail": "#d64545", "warn": "#f0b429", "pass": "#3f9b5a", "nodata": "#b8bec6"}


def verdict_word(verdict: str, lang: str = "en") -> str:
    return t(f"chip_v_{verdict}", lang)


def counts_line(view: ClusterView, lang: str = "en") -> str:
    c = view.counts()
    return t("cluster_counts", lang).format(nodes=len(view.nodes), chips=len(view.cells), fail=c["fail"],
                                            warn=c["warn"], ok=c["pass"], nodata=c["nodata"])


def where(f: FindingView) -> str:
    """The node, and the chip or rank, a finding is about: "node-1/lm-rank1", "node node-1"."""
    if f.device is None:
        return f"node {f.node}" if f.node else "N/A"
    return device_key(f.node, f.device)


def reason_text(r: NodeReason, lang: str = "en") -> str:
    """One reason of a node's verdict, from its code."""
    return message(r.code, r.values, lang, fallback=r.code)


def node_row(n: NodeView, view: ClusterView, lang: str = "en") -> list[str]:
    """(node, rank, status, chips read/expected, verdict, reasons) of one node."""
    mine = [c for c in view.cells if c.node == n.name]
    read = sum(1 for c in mine if c.verdict != "nodata")
    chips = f"{read}/{n.chips_expected}" if n.chips_expected is not None else str(read)
    why = "; ".join(reason_text(r, lang) for r in n.reasons) or t("node_ok", lang)
    status = node_status_name(n.status, lang) if n.status else "N/A"
    return [n.name, "N/A" if n.rank is None else str(n.rank), status, chips, verdict_word(n.verdict, lang), why]


def peer_rows(view: ClusterView, lang: str = "en") -> list[list[str]]:
    """(kind, severity, where, metric, deviation, what) of each straggler and outlier."""
    rows = []
    for f in view.peers:
        dev = f.evidence.get("deviation_pct") or (f.evidence.get("details") or {}).get("deviation_pct")
        rows.append([kind_name(f.kind, lang), severity_name(f.severity, lang), where(f), metric_name(f.metric, lang),
                     "N/A" if dev is None else f"{float(dev):+.1f} %", finding_text(f, lang)])
    return rows


def version_table(view: ClusterView, lang: str = "en") -> tuple[str, list[list[str]]]:
    """A sentence and (field, value on most nodes (count), other values by node) rows: the
    fields that differ first, marked; at most 40 agreeing fields after them."""
    rows = list(view.versions)
    if not rows:
        return t("version_none", lang), []
    differ = [r for r in rows if r.differs]
    names = [n.name for n in view.nodes]
    out = []
    for r in differ + [r for r in rows if not r.differs][: max(0, 40 - len(differ))]:
        value, count = r.common()
        others: dict[str, list[str]] = {}
        for node, v in zip(names, r.values, strict=True):
            if v != value:
                others.setdefault("N/A" if v is None else v, []).append(node)
        other = "; ".join(f"{v}: {_names(ns)}" for v, ns in sorted(others.items()))
        mark = "* " if r.differs else ""
        out.append([f"{mark}{r.key}", f"{'N/A' if value is None else value} ({count}/{len(names)})", other or "—"])
    head = (t("versions_differ", lang).format(n=len(differ), m=len(rows)) if differ
            else t("versions_agree", lang).format(n=len(rows)))
    return head, out


def _names(nodes: Sequence[str], most: int = 8) -> str:
    return ", ".join(nodes[:most]) + (f" (+{len(nodes) - most})" if len(nodes) > most else "")


def statement_lines(data: ReportData, view: ClusterView, lang: str = "en") -> list[str]:
    """The cluster's chip-hours (understated, and why) and the judge's clean-run statement."""
    chips = sum(1 for c in view.cells if c.verdict != "nodata")
    hours = data.chip_hours
    unit = data.chip_unit or "chip-hours"
    lines = [t("cluster_hours", lang).format(nodes=len(view.nodes), chips=chips,
                                             hours="N/A" if hours is None else num(float(hours)), unit=unit)]
    lines.append(t("cluster_no_statement", lang) if data.clean_statement is None
                 else message(data.clean_statement.code, data.clean_statement.values, lang,
                              fallback=data.clean_statement.text))
    return lines


def chip_row(c: ChipCell, minimum: float, lang: str = "en") -> list[str]:
    """(node, chip, verdict, coverage, util mean, temp max, power mean, health, ECC, link,
    findings) of a chip."""
    s = c.summary
    kinds = ", ".join(f"{kind_name(k, lang)} ({severity_name(sev, lang)})" for k, sev in c.findings)
    if c.low_coverage and not kinds:
        kinds = t("r_coverage", lang).format(got=pct(c.coverage), min=pct(minimum))
    return [c.node, c.chip, verdict_word(c.verdict, lang), pct(c.coverage),
            "N/A" if s is None or s.util_mean_pct is None else f"{s.util_mean_pct:.1f}",
            "N/A" if s is None or s.temp_max_c is None else f"{s.temp_max_c:.1f}",
            "N/A" if s is None or s.power_mean_w is None else f"{s.power_mean_w:.1f}",
            *(chip_columns(s, lang) if s is not None else ("N/A", "N/A", "N/A")),
            kinds or "—"]


def chip_heads(lang: str = "en") -> list[str]:
    """The headings of ``chip_row``."""
    return [t(k, lang) for k in ("node_col", "device", "verdict", "cov_lowest", "util_mean", "temp_max", "power_mean",
                                 "chip_health", "chip_ecc", "chip_link", "findings")]
