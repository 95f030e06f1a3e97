"""``soak profile RUN_ID``: the run's profiler captures, and the finding each one explains."""

from __future__ import annotations

import argparse
from typing import Any

from soak.analysis.captures import SHARES, captures_from_events, explain, link
from soak.errors import InputError, UnknownRun
from soak.output import add_format, fmt, print_json
from soak.runfolder import DB_NAME, DEFAULT_DATA_DIR, db_path, read_analysis, run_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("profile", help="list a run's profiler captures and summarize one")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--capture", type=int, metavar="N", help="summarize capture N (default: every capture in short)")
    p.add_argument("--db", help=f"store URL (default: the run folder's {DB_NAME} under --data-dir)")
    p.add_argument("--data-dir", default=f"./{DEFAULT_DATA_DIR}", help=f"folder of run folders (default: ./{DEFAULT_DATA_DIR})")
    add_format(p)
    p.set_defaults(func=_profile)


def _profile(args: argparse.Namespace) -> int:
    from soak.store import Store

    folder = run_dir(args.data_dir, args.run_id)
    url = args.db or str(db_path(folder))
    if not args.db and not db_path(folder).is_file():
        raise UnknownRun(f"run {args.run_id}: no {db_path(folder)}; give --db URL if the run used another store",
                         data_dir=args.data_dir)
    with Store.open(url, create=False) as store:
        run = store.get_run(args.run_id)
        if run is None:
            raise UnknownRun.not_in_store(args.run_id, store.url)
        caps = captures_from_events(store.load_events(run.id, kind="capture"))
        saved = read_analysis(run.run_dir or folder)
        findings = (saved or {}).get("findings") or [f.as_dict() for f in store.load_findings(run.id)]
    ids = link(findings, caps)
    everything = caps
    if args.capture is not None:
        chosen = [c for c in caps if c.id == args.capture]
        if not chosen:
            raise InputError(f"--capture {args.capture}: run {run.id} has captures 1..{len(caps)}"
                             if caps else f"--capture {args.capture}: run {run.id} has no captures")
        caps = chosen
    explains = {c.id: [f for f, i in zip(findings, ids, strict=True) if i == c.id] for c in caps}
    if args.format == "json":
        print_json({"run_id": run.id, "captures": [
            {**c.to_dict(), "explains": [_fkey(f) for f in explains[c.id]]} for c in caps],
            "findings": [{**_fkey(e.finding), "capture": None if e.capture is None else e.capture.id,
                          "baseline": None if e.baseline is None else e.baseline.id}
                         for e in explain(findings, everything)]})
        return 0
    if not caps:
        print(f"run {run.id}: no captures")
        return 0
    print(f"{'ID':>3} {'LABEL':<9} {'RANK':<8} {'STEPS':<11} {'STEPS/S':>8} {'DATA':>6} {'DOMINANT':<10} TRACE")
    for c in caps:
        d = c.detail
        who = f"{fmt(c.workload)}/{fmt(c.rank)}"
        steps = f"{fmt(d.get('first_step'))}-{fmt(d.get('last_step'))}"
        rate = "N/A" if d.get("steps_per_s") is None else f"{d['steps_per_s']:.1f}"
        print(f"{c.id:>3} {c.label:<9} {who:<8} {steps:<11} {rate:>8} {_pct((d.get('shares') or {}).get('data')):>6} "
              f"{fmt(d.get('dominant')):<10} {fmt(d.get('trace') or d.get('trace_dropped') or d.get('error'))}")
        for f in explains[c.id]:
            print(f"    explains [{f.get('severity')}] {f.get('kind')} on {fmt(f.get('device'))}: {f.get('summary')}")
    if args.capture is not None:
        _detail(caps[0].detail)
    return 0


def _fkey(f: Any) -> dict[str, Any]:
    return {k: f.get(k) for k in ("kind", "device", "severity", "start", "summary")}


def _pct(x: float | None) -> str:
    return "N/A" if x is None else f"{x:.0%}"


def _detail(d: dict[str, Any]) -> None:
    if d.get("error"):
        print(f"\nfailed: {d['error']}")
        return
    shares = d.get("shares") or {}
    print("\nshare of the captured time: " + ", ".join(f"{k} {_pct(shares.get(k))}" for k in SHARES))
    for title, key in (("top operators on the device (self time)", "top_device_ops"),
                       ("top operators on the host (self time)", "top_host_ops"),
                       ("CPU fallbacks", "cpu_fallbacks")):
        ops = d.get(key)
        if ops is None:
            note = d.get("cpu_fallbacks_note") if key == "cpu_fallbacks" else None
            print(f"{title}: {note or 'N/A'}")
            continue
        print(f"{title}:" + ("" if ops else " none"))
        for op in ops[:5]:
            print(f"  {op['self_ms']:>10.1f} ms {op['calls']:>6}x  {op['name']}")
