"""The judgement's sentences in the report's language, rendered from their codes.

A finding, a criterion, a reason of the verdict and a finding event carry the ``code`` and
``values`` the judge gave them (``soak.analysis.messages``); the report writes them with the
table of its language (English: ``soak.analysis.messages.ENGLISH``, Chinese:
``soak.report.i18n.CHINESE``) and its own names for machine keys, times in the report's zone.
Nothing here reads a sentence back: one without a code (an analysis older than the codes
that could not be judged again, a trace's free text) is shown as written.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, tzinfo
from typing import Any

from soak.analysis.messages import ENGLISH, Formats, hm, say
from soak.analysis.messages import pct as share
from soak.report.i18n import CHINESE, t
from soak.report.names import (
    CAUSE_NAMES,
    PREFLIGHT_NAMES,
    UNIT_NAMES,
    event_name,
    kind_name,
    metric_name,
    node_status_name,
    pick,
    severity_name,
)
from soak.report.units import when

TABLES: dict[str, Mapping[str, str]] = {"en": ENGLISH, "zh": CHINESE}
"""The message table of each language of the report."""

_SCOPE = {"node": ("node", "同节点"), "cluster": ("cluster", "集群内")}


def formats(lang: str = "en", tz: tzinfo = UTC) -> Formats:
    """How the report writes a value of each named format in ``lang``: names of machine keys
    in the language, times in ``tz``."""
    return {
        "hm": hm, "pct": share, "utc": lambda ts: when(ts, tz),
        "metric": lambda m: metric_name(m, lang), "kind": lambda k: kind_name(k, lang),
        "scope": lambda s: pick(_SCOPE, s, lang), "event": lambda e: event_name(e, lang),
        "cause": lambda c: pick(CAUSE_NAMES, c, lang), "node_status": lambda s: node_status_name(s, lang),
        "preflight": lambda s: pick(PREFLIGHT_NAMES, s, lang), "unit": lambda u: pick(UNIT_NAMES, u, lang),
        "severity": lambda s: severity_name(None if s is None else str(s).lower(), lang),
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
