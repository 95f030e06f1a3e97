"""``soak parse``: read recorded vendor-tool output and print it as JSON (or a table).

``soak parse npu-smi FILE`` is a contract: JSON ``{"version", "chips", "processes"}`` with
fixed keys (see ``soak.telemetry.npu_table``). Unreadable input exits 2 with one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from soak.errors import InputError
from soak.output import add_format, fmt, print_json

QUERY_VIEWS = (
    "usages",
    "common",
    "temp",
    "power",
    "health",
    "ecc",
    "board",
    "memory",
    "mapping",
    "card-list",
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "parse",
        help="parse recorded vendor-tool output (npu-smi) into JSON",
        description="Parse text printed by a vendor tool. FILE '-' reads standard input.",
    )
    sub = parser.add_subparsers(dest="what", metavar="WHAT")
    table = sub.add_parser(
        "npu-smi",
        help="the 'npu-smi info' table -> {version, chips, processes}",
        description="Parse the table printed by 'npu-smi info' (any known layout).",
    )
    table.add_argument("file", metavar="FILE", help="text file with the table, or - for stdin")
    add_format(table, default="json")
    table.set_defaults(func=_run_table)

    query = sub.add_parser(
        "npu-smi-query",
        help="a key/value view: npu-smi info -t usages|health|..., -m, -l",
        description="Parse one key/value view of npu-smi and print its records as JSON.",
    )
    query.add_argument("file", metavar="FILE", help="text file with the output, or - for stdin")
    query.add_argument(
        "--view",
        choices=QUERY_VIEWS,
        required=True,
        help="which view the text is: -t <view>, mapping (info -m), card-list (info -l)",
    )
    query.set_defaults(func=_run_query)
    parser.set_defaults(func=lambda args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def read_text(name: str) -> tuple[str, str]:
    """(text, display name) of FILE or stdin; one-line InputError when it cannot be read."""
    if name == "-":
        data = sys.stdin.buffer.read()
        label = "<stdin>"
    else:
        from soak.tomlfile import read_regular_file

        label = name
        if Path(name).is_dir():
            raise InputError(f"{label}: is a directory, expected a text file")
        data = read_regular_file(name, "", InputError, 64 << 20)
    if b"\x00" in data:
        raise InputError(f"{label}: binary data, not npu-smi text")
    try:
        return data.decode("utf-8-sig"), label
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not UTF-8 text (byte {exc.start})") from None


def _run_table(args: argparse.Namespace) -> int:
    from soak.telemetry.npu_table import parse_info_table

    text, label = read_text(args.file)
    table = parse_info_table(text, source=label)
    if args.format == "json":
        print_json(table.to_json())
    else:
        _print_table(table)
    return 0


def _print_table(table) -> None:
    print(f"npu-smi version: {fmt(table.version)}")
    cols = (
        "NPU",
        "Chip",
        "Name",
        "Health",
        "Power(W)",
        "Temp(C)",
        "AICore(%)",
        "HBM(MB)",
        "Memory(MB)",
    )
    rows = []
    for c in table.chips:
        hbm = "N/A" if c.hbm_total_mb is None else f"{fmt(c.hbm_used_mb)}/{c.hbm_total_mb}"
        mem = "N/A" if c.memory_total_mb is None else f"{fmt(c.memory_used_mb)}/{c.memory_total_mb}"
        rows.append(
            (
                c.npu_id,
                c.chip_id,
                fmt(c.name),
                fmt(c.health),
                fmt(c.power_w),
                fmt(c.temp_c),
                fmt(c.aicore_util_pct),
                hbm,
                mem,
            )
        )
    _print_rows(cols, rows)
    if table.processes:
        print()
        _print_rows(
            ("NPU", "Chip", "PID", "Process", "Memory(MB)"),
            [
                (p.npu_id, p.chip_id, fmt(p.pid), fmt(p.name), fmt(p.memory_mb))
                for p in table.processes
            ],
        )
    elif table.has_process_section:
        print("\nno running processes")


def _print_rows(cols: tuple[str, ...], rows: list[tuple]) -> None:
    cells = [tuple(str(v) for v in r) for r in rows]
    widths = [
        max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(cols)
    ]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip())
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def _as_json(obj):
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {f.name: _as_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        if "extras" in out:
            out["extras"] = {k: v for k, v in obj.extras}
        return out
    if isinstance(obj, tuple | list):
        return [_as_json(v) for v in obj]
    return obj


def _run_query(args: argparse.Namespace) -> int:
    from soak.telemetry import npu_query as q

    parsers = {
        "usages": q.parse_usages,
        "common": q.parse_common,
        "temp": q.parse_temp,
        "power": q.parse_power,
        "health": q.parse_health,
        "ecc": q.parse_ecc,
        "board": q.parse_board,
        "memory": q.parse_memory,
        "mapping": q.parse_mapping,
        "card-list": q.parse_card_list,
    }
    text, label = read_text(args.file)
    records = parsers[args.view](text, source=label)
    print_json(_as_json(records))
    return 0
