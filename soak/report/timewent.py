"""The "Where the time went" section: rows the app and the PDF both render.

Each finding the daemon asked a capture for is shown beside the same rank's baseline: the
share of the captured steps in data loading, forward, backward, optimizer, communication and
idle gaps, the five operators with the most self time, and the CPU fallbacks. Which capture
explains which finding is decided once, in ``soak.analysis.captures`` (via the loader).
"""

from __future__ import annotations

from dataclasses import dataclass

from soak.analysis.captures import SHARES
from soak.device_names import device_key
from soak.report.i18n import t
from soak.report.model import CaptureView, FindingView, ReportData, fmt
from soak.report.names import kind_name
from soak.report.sentences import finding_text

TOP = 5


@dataclass(frozen=True)
class Section:
    title: str  # the finding (or "baseline" on a run without one)
    note: str | None  # the cause, or why there is no capture
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    capture: CaptureView | None


def _where(f: FindingView) -> str:
    """The chip or rank a finding is about, on its node; the node alone for a whole node."""
    if f.device is None:
        return "N/A" if f.node is None else f.node
    return device_key(f.node, f.device)


def sections(data: ReportData, lang: str = "en") -> list[Section]:
    """One section per finding with a capture link (kind of ``TRIGGER_KINDS``), else the
    baseline alone; empty when the run has no capture."""
    by_id = {c.id: c for c in data.captures}
    base = next((c for c in data.captures if c.label == "baseline" and not c.error), None)
    out = []
    done: set[int] = set()
    for f in data.findings:
        if f.capture is None and not _triggering(f):
            continue
        cap = by_id.get(f.capture) if f.capture is not None else None
        title = f"{kind_name(f.kind, lang)} · {_where(f)}: {finding_text(f, lang)}"
        if cap is None:
            out.append(Section(title, t("no_capture_for_finding", lang), (), (), None))
            continue
        if cap.id in done:  # one global stall, several chips: one table
            continue
        done.add(cap.id)
        more = [g for g in data.findings if g.capture == cap.id and g is not f]
        if more:
            title += "; " + "; ".join(f"{kind_name(g.kind, lang)} · {_where(g)}" for g in more)
        b = next((c for c in data.captures if c.label == "baseline" and not c.error
                  and (c.workload, c.rank) == (cap.workload, cap.rank)), base)
        cols = [x for x in (b, cap) if x is not None]
        header = ("", *((t("baseline_col", lang),) if b is not None else ()), t("capture_col", lang))
        out.append(Section(f"{title} → {t('capture_link', lang).format(id=cap.id)}", cause(cap, lang),
                           header, tuple(table(cols, lang)), cap))
    if not out and base is not None:
        out.append(Section(t("baseline_col", lang), cause(base, lang), ("", t("baseline_col", lang)),
                           tuple(table([base], lang)), base))
    return out


def _triggering(f: FindingView) -> bool:
    from soak.analysis.captures import TRIGGER_KINDS

    return f.kind in TRIGGER_KINDS and f.severity != "info"


def cause(c: CaptureView, lang: str) -> str | None:
    if c.error:
        return t("capture_failed", lang).format(error=c.error)
    if c.dominant is None or c.shares.get(c.dominant) is None:
        return None
    return t("cause", lang).format(phase=t(f"share_{c.dominant}", lang), share=_pct(c.shares[c.dominant]))


def table(cols: list[CaptureView], lang: str) -> list[tuple[str, ...]]:
    """Rows: what each capture is, steps/s, the shares, the dominant one, top operators,
    CPU fallbacks and the trace; one column per capture."""

    def row(label: str, fn) -> tuple[str, ...]:
        return (label, *(fn(c) for c in cols))

    rows = [
        row(t("capture_what", lang), lambda c: f"#{c.id} {t('label_' + c.label, lang)}, "
            f"{c.workload or 'N/A'}-rank{fmt(c.rank)}, {fmt(c.first_step)}–{fmt(c.last_step)}"),
        row(t("steps_per_s", lang), lambda c: fmt(c.steps_per_s)),
    ]
    rows += [row(t(f"share_{k}", lang), lambda c, k=k: _pct(c.shares.get(k))) for k in SHARES]
    rows.append(row(t("dominant", lang), lambda c: t(f"share_{c.dominant}", lang) if c.dominant else "N/A"))
    for i in range(TOP):
        rows.append(row(t("top_op", lang).format(n=i + 1),
                        lambda c, i=i: f"{c.top_ops[i][0]} ({c.top_ops[i][1]:.1f} ms)" if i < len(c.top_ops) else "–"))
    rows.append(row(t("cpu_fallbacks", lang), lambda c: _fallbacks(c, lang)))
    rows.append(row(t("trace", lang), lambda c: c.trace or "N/A"))
    return rows


def _fallbacks(c: CaptureView, lang: str) -> str:
    if c.cpu_fallbacks is None:
        return t("fallbacks_na", lang) if c.backend == "cpu" else "N/A"
    if not c.cpu_fallbacks:
        return t("none_word", lang)
    return ", ".join(name for name, _ms, _n in c.cpu_fallbacks[:TOP])


def _pct(x: float | None) -> str:
    return "N/A" if x is None else f"{x:.0%}"
