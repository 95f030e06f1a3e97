"""The report's tables as rows of text: events, thresholds, accounting, coverage.

- ``event_rows``: the event timeline, routine events (checkpoints) condensed into one line;
- ``threshold_text``: a detector's thresholds, declared phases summarised;
- ``accounting_rows`` / ``interruption_rows`` / ``coverage_rows``: where the planned time went
  and how well each chip was read;
- ``chips_figure`` / ``nodes_figure``: the run's chips as the judge counted them, and its nodes
  by name (the cover and the app's header).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, tzinfo
from typing import Any

from soak.analysis.chip_verdicts import chip_count
from soak.analysis.evidence import is_host, lowest_metric
from soak.report.i18n import t
from soak.report.model import EventView, ReportData
from soak.report.names import CAUSE_NAMES, event_name, metric_name, pick
from soak.report.sentences import event_text
from soak.report.units import dur, dur_share, pct, plain, span, when

# -- the run's chips and nodes -----------------------------------------------------------------


def chips_figure(data: ReportData, lang: str = "en") -> str:
    """How many chips the run had, as the judge counted them (expected, and read where fewer);
    without a judgement, the chips with readings."""
    counted = chip_count(data.coverage)
    if counted is None:
        return str(sum(1 for c in data.chips if not is_host(c.device)))
    expected, seen = counted
    return str(expected) if seen >= expected else t("chips_read_of", lang).format(seen=seen, expected=expected)


def nodes_figure(data: ReportData, lang: str = "en", most: int = 8) -> str | None:
    """A cluster run's nodes: "3 nodes: node-0, node-1, node-2", the first ``most`` of many;
    None for a run on one node."""
    if data.cluster is None:
        return None
    names = [n.name for n in data.cluster.nodes]
    shown = ", ".join(names[:most]) + (f", … (+{len(names) - most})" if len(names) > most else "")
    return t("nodes_line", lang).format(n=len(names), names=shown)


# -- events ----------------------------------------------------------------------------------

ROUTINE_EVENTS = ("checkpoint",)
_MAX_SAME = 12  # more events of one kind than this are condensed too


def event_rows(events: Sequence[EventView], tz: tzinfo = UTC, lang: str = "en") -> list[tuple[str, str, str, str]]:
    """(time, event, device, message) rows; routine or very frequent kinds as one line each with
    count and cadence, placed at their first occurrence."""
    by_kind: dict[str, list[EventView]] = {}
    for e in events:
        by_kind.setdefault(e.kind, []).append(e)
    condensed = {k for k, es in by_kind.items() if len(es) > 1 and (k in ROUTINE_EVENTS or len(es) > _MAX_SAME)}
    rows: list[tuple[str, str, str, str]] = []
    done: set[str] = set()
    for e in events:
        if e.kind in condensed:
            if e.kind in done:
                continue
            done.add(e.kind)
            es = by_kind[e.kind]
            gaps = sorted(b.ts - a.ts for a, b in zip(es, es[1:], strict=False))
            cadence = gaps[len(gaps) // 2] if gaps else None
            who = sorted({x.device for x in es if x.device})
            msg = (f"{len(es)} 次，约每 {dur(cadence)} 一次，{when(es[0].ts, tz)} 至 {when(es[-1].ts, tz)}" if lang == "zh"
                   else f"{len(es)} times, about every {dur(cadence)}, {when(es[0].ts, tz)} to {when(es[-1].ts, tz)}")
            rows.append((span(es[0].ts, es[-1].ts, tz), f"{event_name(e.kind, lang)} ×{len(es)}", ", ".join(who[:3]), msg))
            continue
        rows.append((when(e.ts, tz, seconds=True), event_name(e.kind, lang), e.device or "", event_text(e, lang, tz)))
    return rows


# -- thresholds, phases ------------------------------------------------------------------------


def phase_text(phases: Iterable[Mapping[str, Any]], lang: str = "en", tz: tzinfo = UTC) -> str:
    """Declared phases summarised: count, cadence, duration of each named phase. One window
    (a restart's) is said by its times: its length is not the interruption's downtime, which
    the report states once, and a second duration beside it would read as another figure."""
    out = []
    for ph in phases:
        if not isinstance(ph, Mapping):
            continue
        name = event_name(str(ph.get("name")), lang)
        windows = [w for w in ph.get("windows") or [] if isinstance(w, Sequence) and len(w) == 2]
        parts = []
        if ph.get("every_s"):
            parts.append(f"每 {dur(ph['every_s'])}" if lang == "zh" else f"every {dur(ph['every_s'])}")
        if ph.get("duration_s"):
            parts.append(f"持续 {dur(ph['duration_s'])}" if lang == "zh" else f"lasting {dur(ph['duration_s'])}")
        if windows:
            starts = sorted(float(a) for a, _ in windows)
            lengths = sorted(float(b) - float(a) for a, b in windows)
            gaps = sorted(b - a for a, b in zip(starts, starts[1:], strict=False))
            typical = lengths[len(lengths) // 2]
            if len(windows) == 1:
                a, b = (float(x) for x in windows[0])
                parts.append(f"1 个时段，{span(a, b, tz)}" if lang == "zh" else f"1 window, {span(a, b, tz)}")
            elif lang == "zh":
                parts.append(f"{len(windows)} 个时段，每段约 {dur(typical)}" + (f"，约每 {dur(gaps[len(gaps) // 2])} 一次" if gaps else ""))
            else:
                parts.append(f"{len(windows)} window{'s' if len(windows) != 1 else ''} of about {dur(typical)}"
                             + (f", about every {dur(gaps[len(gaps) // 2])}" if gaps else ""))
        out.append(f"{name}: {', '.join(parts) or 'N/A'}" if lang != "zh" else f"{name}：{'，'.join(parts) or 'N/A'}")
    return "; ".join(out) if lang != "zh" else "；".join(out)


def threshold_text(thresholds: Mapping[str, Any], lang: str = "en", tz: tzinfo = UTC) -> list[str]:
    """One "key = value" line per threshold; sections one line each; phases summarised."""
    lines = []
    for k in sorted(thresholds):
        v = thresholds[k]
        if k == "phases" and isinstance(v, Sequence):
            lines.append(f"phases = {phase_text(v, lang, tz) or 'N/A'}")
        elif isinstance(v, Mapping):
            lines.append(f"{k}: " + ", ".join(f"{sk} = {plain(sv)}" for sk, sv in sorted(v.items())))
        else:
            lines.append(f"{k} = {plain(v)}")
    return lines


# -- accounting and coverage -----------------------------------------------------------------


def accounting_rows(acc: Mapping[str, Any] | None, lang: str = "en") -> list[tuple[str, str]]:
    """Where the planned time went, as (label, value) rows."""
    if not acc:
        return []
    rows = [
        (t("acc_planned", lang), dur(acc.get("planned_s"))),
        (t("acc_ran", lang), dur(None if acc.get("window_end") is None else acc["window_end"] - acc["window_start"])),
        (t("acc_training", lang), dur_share(acc.get("training_s"), acc.get("planned_s"))),
        (t("acc_judged", lang), pct(acc.get("judged_availability"))),
        # no time down reads "none", not a "0 s" that looks like a figure measured as zero
        (t("acc_down", lang), t("none_word", lang) if acc.get("unexcused_down_s") == 0 else dur(acc.get("unexcused_down_s"))),
        (t("acc_longest", lang), dur(acc.get("longest_s"))),
    ]
    return rows


# an interruption's cause -> the kind of the event that began it (at its start, or where soak
# knew of it: ``detected``), whose recorded values say its message in every language
_MADE_BY = {"crash": "crash", "hang": "hang", "daemon down": "gap", "node lost": "node_lost", "stopped": "stop",
            "gave up": "stop"}


def _interruption_text(i: Mapping[str, Any], events: Sequence[EventView], tz: tzinfo, lang: str) -> str:
    """An interruption's message in ``lang``: its event's, rendered from what that event
    recorded; as recorded where no event matches (a stretch clipped to the soak's window)."""
    if lang != "en" and i.get("cause") == "startup":
        return t("startup_message", lang)
    kind, at = _MADE_BY.get(str(i.get("cause"))), i.get("detected") if i.get("detected") is not None else i.get("start")
    if lang != "en" and kind is not None and at is not None:
        e = next((e for e in events if e.kind == kind and abs(e.ts - float(at)) < 1e-3
                  and (e.workload is None or e.workload == i.get("workload"))), None)
        if e is not None:
            return event_text(e, lang, tz)
    return i.get("message") or ""


def interruption_rows(acc: Mapping[str, Any] | None, tz: tzinfo = UTC, lang: str = "en",
                      events: Sequence[EventView] = ()) -> list[tuple[str, str, str, str, str]]:
    """(from, how long, cause, counted?, message) per interruption; injected faults say so;
    ``events`` the run's, whose recorded values say a message in ``lang``."""
    out = []
    for i in (acc or {}).get("interruptions") or []:
        cause = pick(CAUSE_NAMES, i.get("cause"), lang)
        if i.get("injected"):
            cause = f"注入的{cause}（预期的演练故障）" if lang == "zh" else f"injected {cause} (expected canary)"
        excused = i.get("injected") or i.get("cause") == "startup"
        counted = t("acc_excused", lang) if excused else t("acc_counted", lang)
        out.append((when(i.get("start"), tz), dur(i.get("duration_s")), cause, counted,
                    _who(i.get("workload"), _interruption_text(i, events, tz, lang), lang)))
    return out


def _who(workload: str | None, message: str | None, lang: str = "en") -> str:
    """"lm: crashed (exit 1)", the workload named once."""
    message = message or ""
    if not workload or message.startswith((f"{workload}:", f"{workload}：")):
        return message
    return f"{workload}{'：' if lang == 'zh' else ': '}{message}" if message else workload


def coverage_rows(cov: Mapping[str, Any] | None, lang: str = "en") -> list[tuple[str, str, str]]:
    """(chip, lowest covered share and its metric, every metric's share) per chip."""
    out = []
    for chip, metrics in sorted(((cov or {}).get("ratios") or {}).items()):
        if not metrics:
            continue
        low_m = lowest_metric(metrics)
        out.append((chip, f"{pct(metrics[low_m])} ({metric_name(low_m, lang)})",
                    ", ".join(f"{metric_name(m, lang)} {pct(r)}" for m, r in sorted(metrics.items()))))
    return out

