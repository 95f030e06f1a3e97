"""The judgement's sentences in the report's language, rendered from their codes.

A finding, a criterion, a reason of the verdict and a finding event carry the ``code`` and
``values`` the judge gave them (``soak.analysis.messages``); the report writes them with the
table of its language (English: ``soak.analysis.messages.ENGLISH``, Chinese:
``soak.report.i18n.CHINESE``) and its own names for machine keys, times in the report's zone.
Nothing here reads a sentence back: one without a code (an analysis older than the codes
that could not be judged again, a trace's free text) is shown as written.

An event's message (``event_text``) is the daemon's English as recorded; another language
says it from the values recorded beside it (``soak.report.event_text``,
``soak.report.i18n.EVENT_CHINESE``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, tzinfo
from typing import Any

from soak.analysis.messages import ENGLISH, Formats, hm, hours, say
from soak.analysis.messages import pct as share
from soak.device_names import device_key
from soak.report.event_text import event_code, recorded
from soak.report.i18n import CHINESE, EVENT_CHINESE, t
from soak.report.model import FindingView
from soak.report.names import (
    CAUSE_NAMES,
    LINK_WHEN_NAMES,
    PREFLIGHT_NAMES,
    UNIT_NAMES,
    event_name,
    kind_name,
    metric_name,
    node_status_name,
    pick,
    severity_name,
)
from soak.report.units import dur, num, when

TABLES: dict[str, Mapping[str, str]] = {"en": ENGLISH, "zh": CHINESE}
"""The message table of each language of the report."""

EVENT_TABLES: dict[str, Mapping[str, str]] = {"zh": EVENT_CHINESE}
"""The events' messages of each language but English (which shows them as recorded)."""

_SCOPE = {"node": ("node", "同节点"), "cluster": ("cluster", "集群内")}


def formats(lang: str = "en", tz: tzinfo = UTC) -> Formats:
    """How the report writes a value of each named format in ``lang``: names of machine keys
    in the language, times in ``tz``."""
    return {
        "hm": hm, "hours": hours, "pct": share, "utc": lambda ts: when(ts, tz),
        "metric": lambda m: metric_name(m, lang), "kind": lambda k: kind_name(k, lang),
        "scope": lambda s: pick(_SCOPE, s, lang), "event": lambda e: event_name(e, lang),
        "cause": lambda c: pick(CAUSE_NAMES, c, lang), "node_status": lambda s: node_status_name(s, lang),
        "preflight": lambda s: pick(PREFLIGHT_NAMES, s, lang), "unit": lambda u: pick(UNIT_NAMES, u, lang),
        "severity": lambda s: severity_name(None if s is None else str(s).lower(), lang),
        "dur": dur, "secs": lambda x: f"{num(float(x))} s", "share": lambda k: t(f"share_{k}", lang),
        "capture_label": lambda k: t(f"label_{k}", lang), "link_when": lambda w: pick(LINK_WHEN_NAMES, w, lang),
        "procs": lambda w: t("workload_procs", lang).format(**w),
    }


def message(code: str | None, values: Mapping[str, Any] | None, lang: str = "en", tz: tzinfo = UTC,
            fallback: str | None = None) -> str:
    """The sentence of ``code`` over ``values`` in ``lang``; ``fallback`` (or "N/A") when the
    code is unknown to this version (an older or newer analysis)."""
    table = TABLES.get(lang, ENGLISH)
    if not code or code not in table or values is None:
        return fallback or "N/A"
    return say(code, values, table, formats(lang, tz))


def finding_text(f: Any, lang: str = "en", tz: tzinfo = UTC) -> str:
    """What a finding (a ``FindingView`` or an ``EventView`` of a finding) says, in ``lang``."""
    return message(getattr(f, "code", None), getattr(f, "values", None), lang, tz,
                   fallback=getattr(f, "summary", None) or getattr(f, "message", None))


def event_text(e: Any, lang: str = "en", tz: tzinfo = UTC) -> str:
    """What an event (an ``EventView``) says, in ``lang``: in English its message as recorded;
    in another language rendered from the values recorded beside it (``soak.report.event_text``),
    or as recorded where it has none (an older run, a message of free text)."""
    if e.kind == "finding":
        text = finding_text(e, lang, tz)
        if getattr(e, "withdrawn", False):
            text += t("finding_withdrawn", lang).format(when=when(e.withdrawn_ts, tz))
        elif getattr(e, "superseded", False):
            text += t("finding_superseded", lang)
        return text
    table = EVENT_TABLES.get(lang)
    said = None if table is None else event_code(e)
    if said is None or said[0] not in table:
        return recorded(e.message)
    return say(said[0], said[1], table, formats(lang, tz))


def reason_text(r: Any, lang: str = "en", tz: tzinfo = UTC) -> str:
    """One reason of the verdict (a ``Message``) in ``lang``; its times in ``tz``."""
    return message(r.code, r.values, lang, tz, fallback=r.text)


def met_word(met: bool | None, lang: str = "en") -> str:
    """One casing everywhere: "Met" / "Missed" / "Not judged"."""
    return t({True: "met_yes", False: "met_no", None: "met_na"}[met], lang)


def _capital(text: str, lang: str) -> str:
    return text[:1].upper() + text[1:] if lang == "en" else text


def criterion_cells(c: Any, lang: str = "en") -> tuple[str, str, str, str]:
    """(name, required, measured, met) of a ``Criterion`` for a table row."""
    values = c.values if c.code else None
    return (_capital(message(c.code, values, lang, fallback=c.name), lang),
            message(c.required_code, values, lang, fallback=c.required),
            message(c.measured_code, values, lang, fallback=c.measured),
            met_word(c.met, lang))


DECIDED_MOST = 3  # the failing findings the verdict line names; the rest are counted


def decided_by(findings: Sequence[FindingView], lang: str = "en") -> str:
    """What the verdict line says decided it: the failing findings (kind and where, the
    first few of them), or that none failed and how many warned."""
    fails = [f for f in findings if f.severity == "fail"]
    if not fails:
        warns = sum(1 for f in findings if f.severity == "warn")
        return t("decided_warns", lang).format(n=warns) if warns else t("decided_none", lang)
    named = [f"{_where(f, lang)}: {kind_name(f.kind, lang)}" for f in fails[:DECIDED_MOST]]
    if len(fails) > DECIDED_MOST:
        named.append(t("decided_more", lang).format(n=len(fails) - DECIDED_MOST))
    return t("decided_by", lang).format(what="; ".join(named))


def _where(f: FindingView, lang: str) -> str:
    if f.device is None:
        return t("where_job", lang) if f.node is None else f"{t('node', lang).lower()} {f.node}"
    return device_key(f.node, f.device)
