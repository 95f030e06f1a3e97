"""The chips' own fault reports as the report shows them: the "Device faults" table and the
fault columns of the per-chip table.

- ``fault_views``: the run's ``device_fault`` events (``FaultChange.detail()``) taken together
  per chip and signal, and per code: one ``DeviceFaultView`` each, fail first;
- ``fault_rows``: those as rows of text, in the report's language and zone;
- ``clean_line``: what a run without any says (how many chips' reports were read, from the
  device-faults criterion's values), never an empty table;
- ``worst_health``, ``chip_columns``: a chip's health, ECC and link cells.

What a fault means for the verdict is the judge's (``soak.analysis.device_faults``); this
module only lays the recorded changes out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, tzinfo
from typing import Any

from soak.analysis.device_faults import FINDING_OF, HEALTH_SEVERITY, SEVERITY_RANK, changes_of
from soak.report.i18n import t
from soak.report.model import ChipSummary, Criterion, DeviceFaultView
from soak.report.names import pick, severity_name
from soak.report.units import when
from soak.telemetry.records import HEALTH_WORDS

# a port's down and up again are one row: the link's record
_ROW_SIGNAL = {"link_down": "link", "link_up": "link"}
# the signals whose value is a count that rose (the row says the last count)
_COUNTED = ("ecc_uncorrectable", "ecc_isolated_double", "ecc_isolated_single", "ecc_correctable", "xid", "link_flap")
_HEALTH_RANK = {w.lower(): r for r, w in enumerate(HEALTH_WORDS)}

SIGNAL_NAMES = {
    "fault_code": ("fault code", "故障码"),
    "health": ("health", "健康状态"),
    "ecc_uncorrectable": ("uncorrectable ECC", "不可纠正 ECC"),
    "ecc_isolated_double": ("double-bit isolated pages", "双比特隔离页"),
    "ecc_isolated_single": ("single-bit isolated pages", "单比特隔离页"),
    "ecc_correctable": ("correctable ECC", "可纠正 ECC"),
    "link": ("network port", "网口"),
    "link_flap": ("network port flaps", "网口闪断"),
    "xid": ("Xid", "Xid"),
    "row_remap_failed": ("row remap failed", "行重映射失败"),
    "row_remap_pending": ("row remap pending", "行重映射待复位"),
    "retired_pages_pending": ("retired pages pending", "隔离页待复位"),
}
"""A row's signal, in English and Chinese."""

_MEANINGS = {
    "health": ("the chip's health word", "芯片报告的健康状态"),
    "ecc_uncorrectable": ("double-bit (uncorrected) memory errors", "双比特（不可纠正）内存错误"),
    "ecc_isolated_double": ("memory pages isolated for double-bit errors", "因双比特错误隔离的内存页"),
    "ecc_isolated_single": ("memory pages isolated for single-bit errors", "因单比特错误隔离的内存页"),
    "ecc_correctable": ("single-bit memory errors, corrected", "单比特内存错误（已纠正）"),
    "link": ("the chip's network port went down", "芯片网口断开"),
    "link_flap": ("its port went down and up between two readings (up count)", "两次读数之间网口断开又恢复（恢复次数）"),
    "row_remap_failed": ("a memory row could not be remapped", "显存故障行无法重映射"),
    "row_remap_pending": ("a row remap waits for a GPU reset", "行重映射等待 GPU 复位"),
    "retired_pages_pending": ("a page retirement waits for a GPU reset", "页隔离等待 GPU 复位"),
}
"""What a signal without a code of its own means (a code's meaning is the chip's or the table's)."""


def fault_views(events: Iterable[Any], findings: Iterable[Any] = ()) -> tuple[DeviceFaultView, ...]:
    """The recorded fault changes per (node, chip, signal, code), worst first, then by time.
    A row is as severe as the judge's ``device_fault`` finding of its chip and signal where
    that weighs more than its changes (correctable errors above their rate or the peers', a
    port down too long): the judge decides, the table agrees with it. A finding over several
    codes is the worst code's, so a code's row keeps its own level."""
    judged: dict[tuple[str | None, str | None, str | None], str] = {}
    for f in findings:
        if getattr(f, "kind", None) == "device_fault":
            key = (f.node, f.device, f.metric)
            judged[key] = max(judged.get(key, "info"), f.severity, key=_rank)
    groups: dict[tuple[str | None, str, str, str | None], list[Any]] = {}
    for node, c in changes_of(events):
        signal = _ROW_SIGNAL.get(c.signal, c.signal)
        code = c.code if signal in ("fault_code", "xid") else None
        groups.setdefault((node, c.device, signal, code), []).append(c)
    out = []
    for (node, device, signal, code), cs in groups.items():
        cs.sort(key=lambda c: c.ts)
        raised = [c for c in cs if not c.cleared and c.signal != "link_up"]
        severity = max((c.severity for c in cs), key=_rank, default="info")
        if signal not in ("fault_code", "xid"):
            finding = judged.get((node, device, FINDING_OF.get(signal, signal)))
            if finding is not None and _rank(finding) > _rank(severity):
                severity = finding
        named = next((c for c in reversed(raised) if c.text or c.level or c.action), None) or (raised or cs)[-1]
        level = named.level
        if signal == "health":
            level = worst_health(c.level for c in raised) or level
        times = len(raised)
        counted = [c for c in cs if c.value is not None]
        out.append(DeviceFaultView(
            device=device, signal=signal, severity=severity, first_ts=cs[0].ts, last_ts=cs[-1].ts, node=node,
            serial=next((c.serial for c in cs if c.serial), None), code=code, text=named.text, level=level,
            action=named.action, times=times, value=counted[-1].value if counted else None,
            previous=counted[0].previous if counted else None,
            cleared=cs[-1].cleared or cs[-1].signal == "link_up"))
    return tuple(sorted(out, key=lambda v: (-_rank(v.severity), v.first_ts, v.node or "", v.device)))


def _rank(severity: str) -> int:
    return SEVERITY_RANK.get(severity, 1)  # a severity the table lacks: a warning


def worst_health(words: Iterable[str | None]) -> str | None:
    """The worst of the health words seen (Critical over Alarm over Warning over OK, then any
    other word, as ``Store.chip_fault_readings`` ranks them); None when none was read."""
    seen = [w for w in words if w]
    if not seen:
        return None
    return max(seen, key=lambda w: (_HEALTH_RANK.get(w.strip().lower(), -1), w))


def _times(v: DeviceFaultView, lang: str) -> str:
    """How often, and the last value where it is a count: "2 times, last 14 (from 0)"."""
    zh = lang == "zh"
    if v.signal == "link":
        what = f"断开 {v.times} 次" if zh else f"down {v.times} ×"
        return what + (("，已恢复" if zh else ", up again") if v.cleared else ("，仍断开" if zh else ", still down"))
    what = f"{v.times} 次" if zh else f"{v.times} ×"
    if v.signal in _COUNTED and v.value is not None:
        last = f"{v.value:.0f}"
        start = "0" if v.previous is None else f"{v.previous:.0f}"
        what += f"，{start} → {last}" if zh else f", {start} → {last}"
    elif v.cleared:
        what += "，已清除" if zh else ", cleared since"
    return what


def fault_rows(views: Sequence[DeviceFaultView], tz: tzinfo = UTC, lang: str = "en", *,
               with_node: bool = False) -> list[tuple[str, ...]]:
    """(first seen, [node,] chip, serial, signal, code, meaning, level, action, how often) per
    view; the level column says the severity where the chip gave no level."""
    out = []
    for v in views:
        meaning = v.text or (pick(_MEANINGS, v.signal, lang) if v.signal in _MEANINGS else "N/A")
        level = v.level or severity_name(v.severity, lang)
        if v.level and v.signal != "health":
            level = f"{v.level} ({severity_name(v.severity, lang)})" if lang != "zh" \
                else f"{v.level}（{severity_name(v.severity, lang)}）"
        row = (when(v.first_ts, tz, seconds=True), *((v.node or "N/A",) if with_node else ()), v.device,
               v.serial or "N/A", pick(SIGNAL_NAMES, v.signal, lang), v.code or "N/A", meaning, level,
               v.action or "N/A", _times(v, lang))
        out.append(row)
    return out


def fault_header(lang: str = "en", *, with_node: bool = False) -> list[str]:
    keys = ["df_first", *(["node"] if with_node else []), "df_chip", "serial", "df_signal", "df_code",
            "df_meaning", "df_level", "df_action", "df_times"]
    return [t(k, lang) for k in keys]


def fault_criterion(criteria: Sequence[Criterion]) -> Criterion | None:
    return next((c for c in criteria if c.code == "criterion.device_faults"), None)


def clean_line(criteria: Sequence[Criterion], lang: str = "en") -> str:
    """A run without a fault change: that no chip reported one, and how many chips' reports
    were read (the device-faults criterion's values); that none was read where none was."""
    c = fault_criterion(criteria)
    values: Mapping[str, Any] = c.values if c is not None else {}
    if not values:
        return t("df_none_unjudged", lang)
    if not values.get("read"):
        return t("df_none_unread", lang).format(chips=values.get("chips", "N/A"))
    line = t("df_none", lang).format(read=values.get("read"), chips=values.get("chips", "N/A"),
                                     readings=values.get("readings", "N/A"))
    missing = list(values.get("not_read") or [])
    if missing:
        line += t("df_not_read", lang).format(chips=", ".join(missing[:8]) + (" …" if len(missing) > 8 else ""))
    return line


def chip_columns(c: ChipSummary, lang: str = "en") -> tuple[str, str, str]:
    """(health, ECC uncorrectable / correctable, link) cells of a chip; "N/A" where never read."""
    health = c.health or "N/A"
    if c.ecc_uncorrectable is None and c.ecc_correctable is None:
        ecc = "N/A"
    else:
        ecc = " / ".join("N/A" if x is None else f"{x:.0f}" for x in (c.ecc_uncorrectable, c.ecc_correctable))
    if c.link_downs is None:
        link = "N/A"
    elif c.link_downs == 0:
        link = t("link_up_all", lang)
    else:
        link = t("link_down_n", lang).format(n=c.link_downs)
    return health, ecc, link


def chip_fault_fields(readings: Mapping[str, Any] | None, views: Sequence[DeviceFaultView]) -> dict[str, Any]:
    """The ``ChipSummary`` fault fields of one chip from ``Store.chip_fault_readings`` and its
    fault views: the rise of each ECC count (its last less its first reading: the counters only
    grow; a chip that arrived with errors shows them in the Device faults table), the port's
    downs as the fault watch counted them, at least one where a reading saw it down."""
    r = readings or {}

    def rise(lo: Any, hi: Any, signal: str) -> float | None:
        # the fault watch reads at every detail tick, the samples keep fewer: the larger rise
        stored = None if lo is None or hi is None else float(hi) - float(lo)
        seen = [v for v in views if v.signal == signal and v.value is not None]
        watched = seen[0].value - (seen[0].previous or 0.0) if seen else None
        return None if stored is None and watched is None else max(x for x in (stored, watched) if x is not None)

    downs = None
    if r.get("link_readings"):  # a flap is a down too, seen only in the up count
        downs = sum(v.times for v in views if v.signal in ("link", "link_flap"))
        if not downs and r.get("link_down_readings"):
            downs = 1
    health = r.get("health")
    fault_health = next((v.level for v in views if v.signal == "health"), None)
    if fault_health and HEALTH_SEVERITY.get(fault_health.lower()):
        health = worst_health([health, fault_health])
    return {"health": health,
            "ecc_uncorrectable": rise(r.get("ecc_double_min"), r.get("ecc_double_max"), "ecc_uncorrectable"),
            "ecc_correctable": rise(r.get("ecc_single_min"), r.get("ecc_single_max"), "ecc_correctable"),
            "link_downs": downs}


def views_of(views: Sequence[DeviceFaultView], node: str | None, device: str) -> list[DeviceFaultView]:
    return [v for v in views if v.node == node and v.device == device]
