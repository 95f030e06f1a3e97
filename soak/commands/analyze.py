"""``soak analyze``: findings and verdict for a trace CSV or a recorded run."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from soak.analysis.verdict import where
from soak.errors import InputError, UnknownRun, mask_url
from soak.output import add_format, fmt, print_json
from soak.runfolder import DB_NAME, DEFAULT_DATA_DIR, db_path, run_dir


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
    p.add_argument("--db", help=f"store URL or SQLite path for RUN_ID (default: DATA_DIR/RUN_ID/{DB_NAME})")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help=f"folder of run folders (default: ./{DEFAULT_DATA_DIR})")
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


def _judge_run(args: argparse.Namespace, profile: Any, phases: list[Any]) -> Any:
    """Judge a recorded run as the daemon did: its own plan, profile, phases and criteria
    (``--profile`` replaces the plan's profile, ``--phase`` adds phases)."""
    from soak.judge import judge_run
    from soak.store import Store

    if args.db:
        url = args.db
    else:
        path = db_path(run_dir(args.data_dir, args.source))
        if not path.is_file():
            raise UnknownRun(f"{args.source}: not a file, and no run store at {path}; give --db URL if the run "
                             "used another store", data_dir=args.data_dir)
        url = str(path)
    store = Store.open(url, create=False)
    try:
        judged = judge_run(store, args.source, profile=profile, phases=phases, now=args.now)
    finally:
        store.close()
    if judged is None:
        raise UnknownRun(f"{args.source}: no such file, and no such run in {mask_url(store.url)}",
                         db=mask_url(store.url))
    if judged.analysis.start is None:
        raise InputError(f"run {args.source}: no readings stored; there is nothing to judge")
    return judged


def run(args: argparse.Namespace) -> int:
    from soak.analysis import Profile, Trace
    from soak.analysis.profile import Phase
    from soak.judge import judge_trace

    if args.evaluate:
        from soak.analysis.evaluate import main as evaluate_main

        return evaluate_main(["--format", args.format])
    if not args.source:
        raise InputError("soak analyze: give a TRACE.csv or a RUN_ID (or --evaluate)")
    phases = [Phase.parse(spec) for spec in args.phase]
    if os.path.exists(args.source) or args.source.endswith(".csv"):
        trace = Trace.from_csv(args.source)
        _require_evidence(trace, args.source)
        profile = Profile.from_toml(args.profile) if args.profile else Profile.default()
        judged = judge_trace(trace, profile, phases, now=args.now)
    else:
        # without --profile: the run's own acceptance profile, as the daemon judged it
        judged = _judge_run(args, Profile.from_toml(args.profile) if args.profile else None, phases)
    if args.format == "json":
        print_json(judged.to_dict())
    else:
        _print_table(judged)
    return 1 if args.exit_code and judged.verdict == "fail" else 0


def _require_evidence(trace: Any, source: str) -> None:
    """No evidence is never a pass: a trace without one reading of a known metric is bad input."""
    from soak.analysis.links import METRIC as LINK_METRIC
    from soak.telemetry.records import METRICS

    known = (*METRICS, "tokens_per_s", LINK_METRIC)
    if not any(m in known for m in trace.metrics):
        seen = ", ".join(trace.metrics[:5]) or "none"
        raise InputError(f"{source}: no reading of a known metric ({', '.join(known)}); metrics found: {seen}")


def _when(ts: float | None) -> str:
    return "N/A" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def _print_table(judged: Any) -> None:
    out = sys.stdout
    result = judged.analysis
    verdict = (judged.verdict or "not judged").upper()
    out.write(f"verdict: {verdict}  ({len(result.findings)} finding(s), profile {result.profile})\n")
    for c in judged.criteria:
        blind = bool((c.get("values") or {}).get("blind"))  # a detector blind at this sampling
        if c["met"] is False or blind or c["name"] in ("runtime", "availability", "evidence coverage",
                                                       "crashes and hangs"):
            met = {True: "met", False: "MISSED", None: "N/A"}[c["met"]]
            out.write(f"  {c['name']:<22} {met:<6} {c['measured']}  (required {c['required']})\n")
    if judged.verdict != "pass":
        for r in judged.reasons:
            if not r.startswith(("FAIL", "WARN")):
                out.write(f"  {r}\n")
    if result.findings:
        out.write(f"{'severity':<8} {'kind':<23} {'device':<14} {'metric':<15} {'start (UTC)':<19}  "
                  f"{'end (UTC)':<19}  {'slope/h':>10} {'period_s':>8} {'count':>5}  summary\n")
    for f in result.findings:
        slope = fmt(None if f.slope_per_hour is None else f"{f.slope_per_hour:.4g}")
        period = fmt(None if f.period_s is None else round(f.period_s))
        out.write(
            f"{f.severity:<8} {f.kind:<23} {where(f):<14} {f.metric:<15} {_when(f.start):<19}  "
            f"{_when(f.end):<19}  {slope:>10} {period:>8} {fmt(f.count):>5}  {f.summary}\n"
        )
    if judged.clean_statement:
        out.write(f"{judged.clean_statement}\n")
