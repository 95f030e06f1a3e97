"""The "Reliability" section: the run's ETTR, time lost by cause, MTTF bound and repeat
offenders, as rows the PDF and the app both render.

Every figure comes from the analysis document's ``reliability`` (``soak.analysis.reliability``)
and the store's node records (``soak.fleet``); nothing is computed again here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, tzinfo
from typing import Any

from soak.report.i18n import t
from soak.report.names import CAUSE_NAMES, pick
from soak.report.sentences import message
from soak.report.units import dur, num, pct, when, written_share

PRODUCTIVE, INJECTED = "productive", "injected"
COLORS = {
    PRODUCTIVE: "#1a7f37", INJECTED: "#8c8c8c", "startup": "#c9d6e3", "stopped": "#d9d9d9", "not_run": "#eeeeee",
    "ahead": "#f7f7f7",
    "crash": "#b22222", "hang": "#e07b39", "node_lost": "#6f42c1", "daemon_down": "#d4a017", "gave_up": "#7a1f1f",
    "restart": "#f0a0a0", "link": "#8b4513", "store_outage": "#b8860b", "redone": "#cd5c5c", "data_stall": "#4682b4",
    "checkpoint": "#87ceeb", "link_test": "#9fb8d0",
}


@dataclass(frozen=True)
class Part:
    """One part of the planned time: its cause, name, seconds and share of the plan."""

    key: str
    name: str
    seconds: float
    share: float | None
    color: str


def parts(rel: Mapping[str, Any] | None, lang: str = "en") -> list[Part]:
    """Productive time, injected canaries and every cause with time lost, in that order; they
    add up to the planned time."""
    if not rel:
        return []
    planned = rel.get("planned_s") or 0.0
    items = [(PRODUCTIVE, rel.get("productive_s") or 0.0), (INJECTED, rel.get("injected_s") or 0.0),
             *((c, s or 0.0) for c, s in (rel.get("lost_s") or {}).items())]
    return [Part(k, pick(CAUSE_NAMES, k, lang), s, None if planned <= 0 else s / planned, COLORS.get(k, "#555555"))
            for k, s in items if s > 0]


def _floored_pct(share: float | None) -> str:
    """A share as every figure says one (rounded down: never larger than it is)."""
    return pct(share)


def part_rows(rel: Mapping[str, Any] | None, lang: str = "en") -> list[tuple[str, str, str]]:
    """(cause, how long, share of the planned time) per part."""
    planned = (rel or {}).get("planned_s")
    # the share of the duration as written (dur_share): the two read back to each other
    return [(p.name, dur(p.seconds), written_share(p.seconds, planned))
            for p in parts(rel, lang)]


def lines(rel: Mapping[str, Any] | None, lang: str = "en", tz: tzinfo = UTC) -> list[str]:
    """The section's sentences in ``lang``: ETTR, failures, the MTTF bound, the projections
    to larger jobs and what the bound means."""
    return [message(s.get("code"), s.get("values"), lang, tz, fallback=s.get("summary"))
            for s in (rel or {}).get("statements") or []]


def node_heads(lang: str = "en") -> list[str]:
    return [t(k, lang) for k in ("node_col", "rel_node_hours", "rel_productive", "rel_ettr", "rel_failures",
                                 "rel_last_failure")]


def node_rows(rel: Mapping[str, Any] | None, lang: str = "en", tz: tzinfo = UTC) -> list[list[str]]:
    """(node, node-hours, productive time, ETTR, failures by cause, last failure) per node of
    a run of several nodes; none for one node (the run's own figures are its)."""
    nodes = (rel or {}).get("per_node") or []
    if len(nodes) < 2:
        return []
    out = []
    for n in nodes:
        ettr = n.get("ettr")
        fails = n.get("failures") or {}
        said = ", ".join(f"{pick(CAUSE_NAMES, c, lang)} {k}" for c, k in fails.items() if k)
        out.append([str(n.get("node")), num(n.get("node_hours")), dur(n.get("productive_s")),
                    _floored_pct(ettr), said or "0",
                    when(n.get("last_failure"), tz) if n.get("last_failure") is not None else "—"])
    return out


def offender_lines(offenders: tuple[Mapping[str, Any], ...] | None, lang: str = "en") -> list[str]:
    """The repeat offenders among the run's nodes (``soak.fleet.NodeHistory.to_dict``); one
    line saying there is none; nothing when the store was not asked."""
    if offenders is None:
        return []
    if not offenders:
        return [message("reliability.no_repeat_offender", {}, lang)]
    most = 6
    return [message("reliability.repeat_offender",
                    {"node": o["name"], "runs": len(o["failed_runs"]), "run_ids": list(o["failed_runs"][:most]),
                     "more": max(0, len(o["failed_runs"]) - most)}, lang)
            for o in offenders]
