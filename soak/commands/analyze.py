"""``soak analyze``: findings and verdict for a trace CSV or a recorded run."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from soak.commands._common import add_format, fmt, print_json
from soak.errors import ConfigError, InputError, SoakError, StoreError

DEFAULT_DATA_DIR = "soak-runs"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "analyze",
        help="find memory creep, dropouts, hangs, comm timeouts, thermal and slowdowns; give a verdict",
        description=(
            "Analyse a long-format trace CSV (timestamp,device,metric,value) or a recorded run "
            "(RUN_ID, read from the store). Exit status 0 when the analysis ran (see the verdict; "
            "--exit-code makes a fail verdict exit 1), 2 on bad input."
        ),
    )
    p.add_argument("source", nargs="?", metavar="TRACE.csv|RUN_ID", help="trace CSV file, or a run id in the store")
    p.add_argument("--db", help="store URL or SQLite path for RUN_ID (default: DATA_DIR/RUN_ID/soak.db)")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="folder of run folders (default: ./soak-runs)")
    p.add_argument("--profile", metavar="FILE.toml", help="acceptance profile (thresholds, severities, phases)")
    p.add_argument(
        "--phase",
        action="append",
        default=[],
        metavar="NAME:EVERY_S,DUR_S",
        help="expected periodic phase, e.g. checkpoint:3600,60 (repeatable); drops in it are info",
    )
    p.add_argument("--now", type=float, help="unix time to treat as now (a hang still going is measured to it)")
    p.add_argument("--exit-code", action="store_true", help="exit 1 when the verdict is fail")
    p.add_argument("--evaluate", action="store_true", help="run the detector evaluation harness instead")
    add_format(p)
    p.set_defaults(func=run)


def _plan_profile_and_phases(store: Any, run: Any, want_profile: bool = True) -> tuple[Any, list[Any]]:
    """The profile and expected phases the daemon judged this run with (its own plan), so
    ``soak analyze RUN_ID`` gives the daemon's verdict; defaults for a run without a plan.
    ``want_profile=False`` (``--profile`` given) leaves the plan's profile file unread."""
    from soak.analysis import Profile
    from soak.analysis.event_phases import event_phases

    try:
        from soak.config import plan_from_dict
        from soak.daemon.jobs import build_profile, run_phases

        plan = plan_from_dict(run.plan or {})
    except (ImportError, SoakError, TypeError, ValueError):  # imported or synthetic run
        return Profile.default(), event_phases(store.load_events(run.id))
    if not want_profile:
        return None, run_phases(store, run.id, plan)
    try:
        profile = build_profile(plan)
    except SoakError as exc:  # the plan's profile file moved away since the run
        raise ConfigError(f"run {run.id}: {exc} (pass --profile FILE.toml)") from None
    return profile, run_phases(store, run.id, plan)


def _load_run(args: argparse.Namespace) -> tuple[Any, Any, list[Any]]:
    from soak.analysis import Trace

    try:
        from soak.store import Store
    except ImportError as exc:  # pragma: no cover - store is part of the package
        raise StoreError(f"the store is unavailable: {exc}") from None
    if args.db:
        url = args.db
    else:
        path = Path(args.data_dir) / args.source / "soak.db"
        if not path.is_file():
            raise StoreError(
                f"{args.source}: not a file, and no run store at {path} (pass --db URL or --data-dir DIR)"
            )
        url = str(path)
    store = Store.open(url, create=False)
    try:
        run = store.get_run(args.source)
        if run is None:
            raise StoreError(f"{args.source}: no such file, and no such run in {url}")
        trace = Trace.from_rows(store.load_trace(args.source), source=f"run {args.source}")
        profile, phases = _plan_profile_and_phases(store, run, want_profile=not args.profile)
    finally:
        store.close()
    return trace, profile, phases


def run(args: argparse.Namespace) -> int:
    from soak.analysis import Profile, Trace, analyze
    from soak.analysis.profile import Phase

    if args.evaluate:
        from soak.analysis.evaluate import main as evaluate_main

        return evaluate_main(["--format", args.format])
    if not args.source:
        raise InputError("soak analyze: give a TRACE.csv or a RUN_ID (or --evaluate)")
    profile = Profile.from_toml(args.profile) if args.profile else Profile.default()
    phases = [Phase.parse(spec) for spec in args.phase]
    if os.path.exists(args.source) or args.source.endswith(".csv"):
        trace = Trace.from_csv(args.source)
    else:
        trace, run_profile, run_phases = _load_run(args)
        phases += run_phases
        if not args.profile:  # the run's own acceptance profile, as the daemon judged it
            profile = run_profile
    result = analyze(trace, profile=profile, phases=phases, now=args.now)
    if args.format == "json":
        print_json(result.to_dict())
    else:
        _print_table(result)
    return 1 if args.exit_code and result.verdict == "fail" else 0


def _when(ts: float | None) -> str:
    return "N/A" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def _print_table(result: Any) -> None:
    out = sys.stdout
    out.write(f"verdict: {result.verdict.upper()}  ({len(result.findings)} finding(s), profile {result.profile})\n")
    if result.findings:
        out.write(f"{'severity':<8} {'kind':<23} {'device':<14} {'metric':<15} {'start (UTC)':<19}  "
                  f"{'end (UTC)':<19}  {'slope/h':>10} {'period_s':>8} {'count':>5}  summary\n")
    for f in result.findings:
        slope = fmt(None if f.slope_per_hour is None else f"{f.slope_per_hour:.4g}")
        period = fmt(None if f.period_s is None else round(f.period_s))
        out.write(
            f"{f.severity:<8} {f.kind:<23} {f.device:<14} {f.metric:<15} {_when(f.start):<19}  "
            f"{_when(f.end):<19}  {slope:>10} {period:>8} {fmt(f.count):>5}  {f.summary}\n"
        )
    out.write(f"{result.clean_statement}\n")
