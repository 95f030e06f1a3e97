"""``soak sim``: install and steer a simulated Ascend fleet (an ``npu-smi`` on PATH)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from soak.errors import InputError
from soak.output import add_format, print_json


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sim",
        help="simulated Ascend NPU fleet (an npu-smi speaking the real formats)",
        description="Simulated Ascend NPU fleet: install an npu-smi executable driven by scenarios.",
    )
    sub = parser.add_subparsers(dest="sim_command", metavar="ACTION")

    inst = sub.add_parser("install", help="write DIR/npu-smi and its config; put DIR first on PATH")
    inst.add_argument("dir", metavar="DIR", help="folder for the npu-smi script (created)")
    inst.add_argument("--family", choices=("910b", "910_93", "310p"), default="910b",
                      help="chip family and table layout (default: 910b)")
    inst.add_argument("--chips", type=int, default=8, help="number of chips (default: 8)")
    inst.add_argument("--scenario", action="append", default=None,
                      help="NAME[:key=value,...][,NAME...]; repeatable (default: healthy)")
    inst.add_argument("--fault", action="append", default=[],
                      help="tool fault NAME[:key=value,...]: slow, hang, garbage, dcmi, vanish")
    inst.add_argument("--seed", type=int, default=0, help="noise seed (default: 0)")
    inst.add_argument("--time-scale", type=float, default=1.0,
                      help="scaled seconds per wall second, e.g. 720 plays 72 h in 6 min (default: 1)")
    inst.add_argument("--origin", type=float, default=None,
                      help="unix time the fleet's time line starts (default: now); give the daemon the same")
    inst.add_argument("--plog-dir", default=None, help="folder the comm_timeouts scenario writes plog files to")
    inst.add_argument("--npu-id-base", type=int, default=0, help="first NPU id (default: 0)")
    inst.add_argument("--at-h", type=float, default=None, help="freeze the time line at this hour")
    add_format(inst)
    inst.set_defaults(func=_install)

    fault = sub.add_parser("fault", help="replace the tool faults of an installed fleet (takes effect at once)")
    fault.add_argument("dir", metavar="DIR")
    fault.add_argument("--fault", action="append", default=[], help="as for install; repeatable; 'none' or no --fault clears them")
    fault.set_defaults(func=_fault)

    lst = sub.add_parser("list", help="the scenarios and faults with their parameters and defaults")
    add_format(lst)
    lst.set_defaults(func=_list)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _install(args: argparse.Namespace) -> int:
    from soak.telemetry.sim import SimConfig, install

    config = SimConfig.build(
        scenario=args.scenario or ["healthy"],
        fault=args.fault,
        family=args.family,
        chips=args.chips,
        seed=args.seed,
        time_scale=args.time_scale,
        origin=time.time() if args.origin is None else args.origin,
        plog_dir=os.path.abspath(args.plog_dir) if args.plog_dir else None,
        fixed_elapsed_s=None if args.at_h is None else args.at_h * 3600.0,
        npu_id_base=args.npu_id_base,
    )
    script = install(args.dir, config)
    if args.format == "json":
        print_json({"npu_smi": str(script), "origin": config.origin, "time_scale": config.time_scale,
                    "family": config.family, "chips": config.chips,
                    "scenarios": [s.name for s in config.scenarios], "faults": [f.name for f in config.faults]})
    else:
        print(f"installed {script} ({config.family}, {config.chips} chips, "
              f"scenarios {', '.join(s.name for s in config.scenarios)}; origin {config.origin:.3f}, "
              f"time scale {config.time_scale:g})")
        print(f'use it:  export PATH="{script.parent}:$PATH"', file=sys.stderr)
    return 0


def _fault(args: argparse.Namespace) -> int:
    from soak.telemetry.sim import CONFIG_NAME, SimConfig

    path = Path(args.dir) / CONFIG_NAME
    if not path.is_file():
        raise InputError(f"{args.dir}: no simulated fleet here (missing {CONFIG_NAME}); run 'soak sim install' first")
    # "none" (as the help says) clears them, like giving no --fault at all.
    faults = [f for f in args.fault if f.strip().lower() != "none"]
    SimConfig.load(path).with_faults(faults).save(path)
    print(f"faults now: {', '.join(faults) or 'none'}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from soak.telemetry.sim import FAULTS, SCENARIOS

    if args.format == "json":
        print_json({"scenarios": SCENARIOS, "faults": FAULTS})
        return 0
    for title, table in (("scenarios", SCENARIOS), ("faults", FAULTS)):
        print(f"{title}:")
        for name, params in table.items():
            print(f"  {name:<14} " + ", ".join(f"{k}={v}" for k, v in params.items()))
    return 0
