"""The "Numerical correctness" table of the PDF and the app: every numerical event of the run
(a wrong result, a NaN/Inf, a loss spike: ``soak.analysis.numerics``), one row each as the
daemon stored it, with the chip it names, its serial, the check, the error against its
tolerance and how a rerun settled it; and the criterion's evidence (checks per chip) in one
line above it. What an event means for the verdict is the judge's; this only shows it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, tzinfo
from typing import Any

from soak.analysis import numerics as nm
from soak.report.i18n import t
from soak.report.model import Criterion
from soak.report.names import kind_name, metric_name, severity_name
from soak.report.sentences import message
from soak.report.units import when

MAX_ROWS = 40  # a chip wrong at every check would fill pages: the rest are counted


@dataclass(frozen=True)
class NumericRow:
    """One stored numerical event."""

    ts: float
    kind: str  # sdc | nonfinite | loss_spike
    node: str | None
    chip: str | None  # None: no chip named (nobody settled, or every chip alike)
    serial: str | None
    rank: int | None  # the suspect rank
    step: int | None
    check: str  # the check's family (gemm, replica, ...) or what was non-finite (loss, grad_norm)
    error: float | None
    tolerance: float | None
    cls: str | None  # chip | transient | everywhere | None
    severity: str


def numeric_rows(events: Iterable[Any]) -> tuple[NumericRow, ...]:
    """The run's numerical events, fail first, then in time order."""
    out = []
    for e in nm.events_of(events):
        d = e.detail
        chip = d.get("chip") if e.where is not None else None
        out.append(NumericRow(e.ts, e.kind, e.node, chip, d.get("serial") if chip else None, e.suspect, e.step,
                              e.metric, d.get("error"), d.get("tolerance"), e.cls,
                              str(d.get("severity") or nm.base_severity(e.kind, d))))
    rank = {"fail": 0, "warn": 1}
    return tuple(sorted(out, key=lambda r: (rank.get(r.severity, 2), r.ts)))


_CLASS = {"chip": ("this chip (recurs)", "本芯片（复现）"), "transient": ("transient (did not recur)", "瞬时（未复现）"),
          "everywhere": ("every chip (the model's numerics)", "所有芯片（模型数值）")}


def _cls(r: NumericRow, lang: str) -> str:
    if r.cls in _CLASS:
        return _CLASS[r.cls][1 if lang == "zh" else 0]
    if r.rank is not None:  # a direct comparison against a reference: wrong on its own chip
        return t("nm_direct", lang)
    return t("nm_unsettled", lang)


def _num(v: Any) -> str:
    return "N/A" if not isinstance(v, int | float) else f"{v:.3g}"


def rows(data: Sequence[NumericRow], tz: tzinfo = UTC, lang: str = "en", *, with_node: bool = False) -> list[tuple[str, ...]]:
    """(time, [node,] chip, serial, rank, step, what, check, error, tolerance, class, severity)."""
    return [(when(r.ts, tz, seconds=True), *((r.node or "N/A",) if with_node else ()), r.chip or t("nm_no_chip", lang),
             r.serial or "N/A", "N/A" if r.rank is None else str(r.rank), "N/A" if r.step is None else str(r.step),
             kind_name(r.kind, lang), metric_name(r.check, lang), _num(r.error), _num(r.tolerance), _cls(r, lang),
             severity_name(r.severity, lang))
            for r in data]


def header(lang: str = "en", *, with_node: bool = False) -> list[str]:
    keys = ["nm_time", *(["node"] if with_node else []), "df_chip", "serial", "nm_rank", "nm_step", "nm_what",
            "nm_check", "nm_error", "nm_tolerance", "nm_class", "nm_severity"]
    return [t(k, lang) for k in keys]


def evidence_line(criteria: Sequence[Criterion], lang: str = "en") -> str:
    """The criterion's measured line (checks per chip, steps covered) in ``lang``; that it was
    not judged where the run holds no criterion of it (a run judged before it existed)."""
    c = next((c for c in criteria if c.code == "criterion.numerics"), None)
    if c is None or not c.measured_code:
        return t("nm_unjudged", lang)
    values: Mapping[str, Any] = c.values
    return message(c.measured_code, values, lang, fallback=c.measured)
