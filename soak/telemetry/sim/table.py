"""Text layouts of ``npu-smi``, reproduced byte for byte.

The widths and separators come from real captures (910B A2: 98 columns, 27/15/52; 910_93 A3:
the same with a ``Chip  Phy-ID`` header and a full-width rule between the two chips of one NPU
id; 310P: 106 columns, 31/17/54) and from the printf formats of the tool's print module
(``%-5d/ `` makes a 5-digit value touch the slash). Values are given already decided: this
module only lays them out, so tests can re-render a recorded table and compare bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

USAGE_LINE = "Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]"


@dataclass(frozen=True, slots=True)
class TableRow:
    """One chip in the ``npu-smi info`` table. ``None`` prints as the tool's own filler."""

    npu_id: int
    chip_id: int
    name: str
    health: str
    bus_id: str
    power_w: float | None  # None prints "-" (A3 chip 1) or "NA" (310P)
    temp_c: int | None
    aicore_pct: int | None
    mem_used_mb: int
    mem_total_mb: int
    hbm_used_mb: int | None = None
    hbm_total_mb: int | None = None
    phy_id: int | None = None  # A3 only
    device_id: int | None = None  # 310P only
    hugepages_used: int = 0
    hugepages_total: int = 0


@dataclass(frozen=True, slots=True)
class ProcRow:
    npu_id: int
    chip_id: int
    pid: int
    name: str
    memory_mb: int


def _na(value: object, filler: str = "NA") -> str:
    return filler if value is None else str(value)


def _power(value: float | None, filler: str) -> str:
    return filler if value is None else f"{value:.1f}"


def render_info_table(
    layout: str, version: str, rows: Sequence[TableRow], procs: Sequence[ProcRow] | None
) -> str:
    """The ``npu-smi info`` table. ``layout`` is ``a2`` (910B), ``a3`` (910_93) or ``310p``.

    ``procs`` None leaves the process section out; an NPU id without a process prints the
    tool's "No running processes found" line.
    """
    if layout == "310p":
        return _render_310p(version, rows, procs)
    return _render_910(layout, version, rows, procs)


def _groups(rows: Sequence[TableRow]) -> list[list[TableRow]]:
    out: list[list[TableRow]] = []
    for row in rows:
        if out and out[-1][0].npu_id == row.npu_id:
            out[-1].append(row)
        else:
            out.append([row])
    return out


def _render_910(
    layout: str, version: str, rows: Sequence[TableRow], procs: Sequence[ProcRow] | None
) -> str:
    full = "+" + "-" * 96 + "+"
    split = "+" + "-" * 27 + "+" + "-" * 15 + "+" + "-" * 52 + "+"
    double = "+" + "=" * 27 + "+" + "=" * 15 + "+" + "=" * 52 + "+"
    chip_header = "Chip  Phy-ID" if layout == "a3" else "Chip"
    out = [
        full,
        f"| npu-smi {version:<24} Version: {version:<53}|",
        split,
        "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|",
        f"| {chip_header:<26}| Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |",
        double,
    ]
    power_filler = "-" if layout == "a3" else "NA"
    for group in _groups(rows):
        for k, r in enumerate(group):
            if k:
                out.append(full)
            out.append(
                f"| {r.npu_id:<5} {r.name:<20}| {r.health:<13} | "
                f"{_power(r.power_w, power_filler):<12}{_na(r.temp_c):<18}"
                f"{r.hugepages_used:<5}/ {r.hugepages_total:<14}|"
            )
            first = f"{r.chip_id:<5} {_na(r.phy_id):<20}" if layout == "a3" else f"{r.chip_id:<26}"
            out.append(
                f"| {first}| {r.bus_id:<13} | {_na(r.aicore_pct):<12}"
                f"{r.mem_used_mb:<5}/ {r.mem_total_mb:<11}"
                f"{_na(r.hbm_used_mb):<5}/ {_na(r.hbm_total_mb):<14}|"
            )
        out.append(double)
    if procs is not None:
        out += _process_section(
            rows, procs, split, double,
            "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |",
            lambda npu: f"| {'No running processes found in NPU ' + str(npu):<95}|",
            lambda p: f"| {p.npu_id:<7} {p.chip_id:<18}| {p.pid:<13} | {p.name:<24} | {p.memory_mb:<24}|",
        )
    return "\n".join(out) + "\n"


def _render_310p(version: str, rows: Sequence[TableRow], procs: Sequence[ProcRow] | None) -> str:
    full = "+" + "-" * 104 + "+"
    split = "+" + "-" * 31 + "+" + "-" * 17 + "+" + "-" * 54 + "+"
    double = "+" + "=" * 31 + "+" + "=" * 17 + "+" + "=" * 54 + "+"
    out = [
        full,
        f"| npu-smi {version:<40} Version: {version:<44} |",
        split,
        "| NPU     Name                  | Health          | Power(W)     Temp(C)           Hugepages-Usage(page) |",
        "| Chip    Device                | Bus-Id          | AICore(%)    Memory-Usage(MB)                        |",
        double,
    ]
    for group in _groups(rows):
        for k, r in enumerate(group):
            if k:
                out.append(split)
            out.append(
                f"| {r.npu_id:<7} {r.name:<22}| {r.health:<15} | {_power(r.power_w, 'NA'):<12} "
                f"{_na(r.temp_c):<17} {r.hugepages_used:<6}/ {r.hugepages_total:<13} |"
            )
            out.append(
                f"| {r.chip_id:<7} {_na(r.device_id):<22}| {r.bus_id:<15} | {_na(r.aicore_pct):<12} "
                f"{r.mem_used_mb:<5}/ {r.mem_total_mb:<32} |"
            )
        out.append(double)
    if procs is not None:
        out += _process_section(
            rows, procs, split, double,
            "| NPU     Chip                  | Process id      | Process name             | Process memory(MB)        |",
            lambda npu: f"| {'No running processes found in NPU ' + str(npu):<103}|",
            lambda p: f"| {p.npu_id:<7} {p.chip_id:<22}| {p.pid:<15} | {p.name:<24} | {p.memory_mb:<25} |",
        )
    return "\n".join(out) + "\n"


def _process_section(
    rows: Sequence[TableRow],
    procs: Sequence[ProcRow],
    split: str,
    double: str,
    header: str,
    none_line: Callable[[int], str],
    proc_line: Callable[[ProcRow], str],
) -> list[str]:
    """The process table under the chips: one block per NPU id, in the family's widths."""
    out = [split, header, double]
    for group in _groups(rows):
        npu = group[0].npu_id
        mine = [p for p in procs if p.npu_id == npu]
        if not mine:
            out.append(none_line(npu))
        out += [proc_line(p) for p in mine]
        out.append(double)
    return out


def kv(key: str, value: object, width: int = 30) -> str:
    """One key/value line as the tool prints it: ``\\t%-30s : %s``."""
    return f"\t{key:<{width}} : {value}"


def kv_block(pairs: Sequence[tuple[str, object]], width: int = 30) -> list[str]:
    return [kv(k, v, width) for k, v in pairs]
