"""``soak nodes --db URL``: every node seen across the store's runs, repeat offenders first, and every
chip that reported a fault, by serial, with its history."""

from __future__ import annotations

import argparse
import time

from soak.output import add_format, print_json


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("nodes", help="every node seen across a store's runs: hours, failures, findings, "
                                            "repeat offenders; every chip's fault history by serial")
    p.add_argument("--db", required=True, help="store URL (sqlite:///PATH, PATH or postgresql+psycopg://...)")
    add_format(p)
    p.set_defaults(func=_nodes)


def _when(ts: float | None) -> str:
    return "N/A" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def _nodes(args: argparse.Namespace) -> int:
    from soak import fleet
    from soak.store import Store

    with Store.open(args.db, create=False) as store:
        nodes = fleet.read(store)
        chips = fleet.read_chips(store)
    if args.format == "json":
        print_json({"nodes": [n.to_dict() for n in nodes], "repeat_runs": fleet.REPEAT_RUNS,
                    "chips": [c.to_dict() for c in chips]})
        return 0
    if not nodes:
        print(f"no nodes ({store.url}: no runs)")
        return 0
    print(f"{'NODE':<24} {'RUNS':>4} {'NODE-H':>8} {'CRASH':>5} {'HANG':>4} {'LOST':>4} {'FAILED IN':>9}  "
          f"{'LAST FAILURE (UTC)':<19}  FINDINGS")
    for n in nodes:
        kinds = ", ".join(f"{k} {c}" for k, c in n.findings.items()) or "-"
        mark = "  REPEAT OFFENDER" if n.repeat_offender else ""
        print(f"{n.name:<24} {len(n.runs):>4} {n.node_hours:>8.2f} {n.failures.get('crash', 0):>5} "
              f"{n.failures.get('hang', 0):>4} {n.failures.get('node_lost', 0):>4} {len(n.failed_runs):>9}  "
              f"{_when(n.last_failure):<19}  {kinds}{mark}")
    _print_chips(chips)
    return 0


def _print_chips(chips: list) -> None:
    """The chips by serial with their fault history, the repeat offender first."""
    print()
    if not chips:
        print("no chip reported a fault in any run")
        return
    print(f"{'CHIP SERIAL':<20} {'WHERE':<24} {'RUN':<24} {'FIRST (UTC)':<19}  {'SIGNAL':<20} {'CODE':<10} "
          f"{'SEVERITY':<8} TIMES")
    for c in chips:
        mark = "  REPEAT OFFENDER" if c.repeat_offender else ""
        for i, f in enumerate(c.faults):
            head = (c.serial or "N/A", ", ".join(c.places)) if i == 0 else ("", "")
            print(f"{head[0]:<20} {head[1]:<24} {f.run_id:<24} {_when(f.ts):<19}  {f.signal:<20} {f.code or '-':<10} "
                  f"{f.severity:<8} {f.times}{mark if i == 0 else ''}")
