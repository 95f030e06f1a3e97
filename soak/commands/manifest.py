"""``soak manifest``: show the version manifest, write a lock file, check drift against one."""

from __future__ import annotations

import argparse
from typing import Any

from soak.output import add_format, fmt, print_json


def _sources(p: argparse.ArgumentParser) -> None:
    p.add_argument("--npu-smi", default="npu-smi", help="npu-smi executable (default: on PATH)")
    p.add_argument("--cann-root", default=None,
                   help="CANN toolkit folder (default: /usr/local/Ascend/ascend-toolkit/latest)")
    p.add_argument("--driver-root", default=None,
                   help="Ascend driver folder (default: /usr/local/Ascend/driver)")
    p.add_argument("--firmware-root", default=None,
                   help="Ascend firmware folder (default: /usr/local/Ascend/firmware)")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("manifest", help="hardware/software version manifest and drift check",
                              description="Print the version manifest of this host; 'lock FILE' "
                              "writes it, 'check FILE' prints drift field by field (exit 1).")
    _sources(p)
    add_format(p)
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    lock = sub.add_parser("lock", help="write the manifest to FILE")
    lock.add_argument("file", metavar="FILE", help="lock file to write, e.g. cluster.lock.json")
    _sources(lock)
    check = sub.add_parser("check", help="compare this host with FILE; exit 1 on drift")
    check.add_argument("file", metavar="FILE", help="lock file written by 'soak manifest lock'")
    _sources(check)
    add_format(check)
    p.set_defaults(func=run, action=None)


def _collect(args: argparse.Namespace) -> dict[str, Any]:
    from soak.manifest import CANN_ROOT, DRIVER_ROOT, FIRMWARE_ROOT, collect_manifest

    return collect_manifest(npu_smi=args.npu_smi, cann_root=args.cann_root or CANN_ROOT,
                            driver_root=args.driver_root or DRIVER_ROOT,
                            firmware_root=args.firmware_root or FIRMWARE_ROOT)


def run(args: argparse.Namespace) -> int:
    from soak.manifest import diff_manifest, flatten, load_lock, write_lock

    if args.action == "lock":
        manifest = _collect(args)
        write_lock(args.file, manifest)
        print(f"wrote {args.file}")
        return 0
    if args.action == "check":
        locked = load_lock(args.file)
        drift = diff_manifest(locked, _collect(args))
        if args.format == "json":
            print_json({"lock": args.file, "drift": [d.to_dict() for d in drift]})
        elif not drift:
            print(f"no drift against {args.file}")
        else:
            width = max(len(d.key) for d in drift)
            print(f"{len(drift)} field(s) drifted from {args.file}:")
            for d in drift:
                print(f"  {d.key:<{width}}  locked {fmt(d.locked)}  now {fmt(d.current)}")
        return 1 if drift else 0
    manifest = _collect(args)
    if args.format == "json":
        print_json(manifest)
        return 0
    rows = list(flatten(manifest))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {fmt(value)}")
    return 0
