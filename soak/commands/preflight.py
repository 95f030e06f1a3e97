"""``soak preflight``: check that this node is fit to start a soak (exit 1 when a check fails)."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from soak.errors import InputError
from soak.output import add_format, fmt, print_json


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "preflight", help="self-check of devices, tools, host and versions before a soak",
        description="Run every preflight check; each reports pass, fail, skip or warn with the "
        "value it measured and why. Exit 0 when none fails, 1 when one does, 2 for bad input.")
    p.add_argument("--backend", choices=("auto", "npu", "cuda", "cpu"), default="auto",
                   help="devices to check (default: auto = npu, else cuda, else cpu)")
    p.add_argument("--npu-smi", default=None, metavar="PATH",
                   help="npu-smi executable (default: npu-smi on PATH; a simulated fleet works)")
    p.add_argument("--expect-chips", type=int, default=None, metavar="N",
                   help="number of chips/GPUs this node must show")
    p.add_argument("--run-dir", default=".", metavar="DIR", help="where the run folder will be")
    p.add_argument("--manifest-lock", default=None, metavar="FILE",
                   help="lock file from 'soak manifest lock': fail on version drift")
    p.add_argument("--mem-fraction", type=float, default=0.5,
                   help="fraction of each device's memory to allocate (default: 0.5)")
    p.add_argument("--collective-timeout-s", type=float, default=60.0,
                   help="timeout of the collective check (default: 60)")
    p.add_argument("--only", action="append", default=None, metavar="CHECK",
                   help="run only this check (repeatable)")
    add_format(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from soak.preflight import run_preflight

    # A path the user typed that is not there is a typo to name (exit 2), not a skipped check.
    if args.npu_smi and shutil.which(args.npu_smi) is None:
        raise InputError(f"--npu-smi {args.npu_smi}: no such executable")
    if args.manifest_lock and not Path(args.manifest_lock).is_file():
        raise InputError(f"--manifest-lock {args.manifest_lock}: no such file (write one with "
                         "'soak manifest lock FILE')")
    result = run_preflight(
        backend=args.backend, npu_smi=args.npu_smi, expect_chips=args.expect_chips,
        run_dir=args.run_dir, manifest_lock=args.manifest_lock, mem_fraction=args.mem_fraction,
        collective_timeout_s=args.collective_timeout_s, only=args.only,
    )
    if args.format == "json":
        print_json(result.to_dict())
    else:
        print(f"preflight: {result.status.upper()}  (backend {fmt(result.backend)})")
        for c in result.checks:
            value = "" if c.value is None else _value(c.value, c.unit)
            print(f"  {c.status.upper():<5} {c.name:<15} {value:<24} {c.reason or ''}")
    return 0 if result.ok else 1


def _value(value: object, unit: str | None) -> str:
    if unit == "bytes" and isinstance(value, int | float) and not isinstance(value, bool):
        for div, name in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if value >= div:
                return f"{value / div:.3g} {name}"
    if unit == "devices" and value == 1:
        unit = "device"
    return f"{_num(value)} {unit or ''}".rstrip()


def _num(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, int) and value >= 2**30:
        return f"{value / 2**30:.1f} Gi"
    return fmt(value)
