"""``soak faults``: what a chip's fault code means, and checking an operator's fault-code file.

``soak faults lookup CODE…`` prints each code's vendor, level, severity, meaning, action and
source (``--xid`` for NVIDIA Xid numbers, ``--codes-file F`` to lay an operator's
``faultCode.json`` over the built-in table). ``soak faults check FILE`` reads such a file as a
run would and prints how many codes it gives each level; a bad file is one line, exit 2.
"""

from __future__ import annotations

import argparse

from soak.output import add_format, fmt, print_json


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("faults", help="look up Ascend fault codes and NVIDIA Xids; check a faultCode.json")
    sub = parser.add_subparsers(dest="what", metavar="WHAT")
    look = sub.add_parser("lookup", help="level, severity, meaning and action of fault codes",
                          description="Look codes up in the built-in tables (and an operator's file).")
    look.add_argument("codes", nargs="+", metavar="CODE", help="Ascend hex code as npu-smi prints it (80E01801), "
                                                               "or with --xid an Xid number")
    look.add_argument("--xid", action="store_true", help="the codes are NVIDIA Xid numbers")
    look.add_argument("--codes-file", metavar="F", help="operator's faultCode.json laid over the built-in table "
                                                        "(as the plan's faults.codes_file)")
    add_format(look)
    look.set_defaults(func=_lookup)
    check = sub.add_parser("check", help="validate an operator's faultCode.json: codes per level",
                           description="Read FILE as faults.codes_file would; exit 2 with one line when it is bad.")
    check.add_argument("file", metavar="FILE", help="file in the device plugin's faultCode.json format")
    add_format(check)
    check.set_defaults(func=_check)
    parser.set_defaults(func=lambda args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    import sys

    parser.print_help(sys.stderr)
    return 2


def _lookup(args: argparse.Namespace) -> int:
    from soak.faultcodes.table import load_table, lookup

    found = lookup(load_table(args.codes_file), args.codes, xid=args.xid)
    if args.format == "json":
        print_json({"codes": [fc.to_json() for fc in found]})
        return 0
    for i, fc in enumerate(found):
        if i:
            print()
        print(f"{fc.vendor} {'Xid ' if fc.vendor == 'nvidia' else ''}{fc.code}")
        for label, value in (("level", fc.level), ("severity", fc.severity), ("meaning", fc.meaning),
                             ("action", fc.action), ("source", fc.source)):
            print(f"  {label:<9} {fmt(value)}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from soak.faultcodes.table import builtin_table, level_counts, read_levels

    levels = read_levels(args.file)
    builtin = builtin_table()
    changed = sum(1 for code, level in levels.values()
                  if builtin.ascend(code).known and builtin.ascend(code).level != level)
    added = sum(1 for code, _ in levels.values() if not builtin.ascend(code).known)
    counts = level_counts(levels)
    if args.format == "json":
        print_json({"file": args.file, "codes": len(levels), "levels": counts,
                    "changed_from_builtin": changed, "not_in_builtin": added})
        return 0
    print(f"{args.file}: {len(levels)} codes")
    for level, n in counts.items():
        print(f"  {level:<16} {n:>4}")
    print(f"  {changed} differ from the built-in level, {added} not in the built-in table")
    return 0
