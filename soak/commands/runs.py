"""``soak runs list|show``: the runs in a store (or in every run folder of a data dir)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from soak.analysis.evidence import is_host
from soak.analysis.messages import hm
from soak.device_names import device_key
from soak.errors import InputError, StoreError, UnknownRun, mask_url
from soak.output import add_format, fmt, print_json
from soak.runfolder import DB_NAME, DEFAULT_DATA_DIR, db_path, find_stores, run_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("runs", help="list soak runs and show one (status, verdict, events, findings)")
    sub = p.add_subparsers(dest="runs_command", metavar="ACTION")
    for name, helptext in (("list", "list runs, newest first"), ("show", "show one run")):
        q = sub.add_parser(name, help=helptext)
        if name == "show":
            q.add_argument("run_id", metavar="RUN_ID")
        q.add_argument("--db", help=f"store URL (default: each run folder's {DB_NAME} under --data-dir)")
        q.add_argument("--data-dir", default=f"./{DEFAULT_DATA_DIR}", help=f"folder of run folders (default: ./{DEFAULT_DATA_DIR})")
        add_format(q)
        q.set_defaults(func=_list if name == "list" else _show)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def _stores(args: argparse.Namespace, run_id: str | None = None) -> list[str]:
    if args.db:
        return [args.db]
    root = Path(args.data_dir)
    if run_id is not None:
        db = db_path(run_dir(root, run_id))
        if not db.is_file():
            raise UnknownRun(f"run {run_id}: no {db}; give --db URL if the run used another store", data_dir=root)
        return [str(db)]
    # An empty data dir has no runs; a missing one is a typo or the wrong machine, and
    # "no runs" there would read as an answer.
    if not root.is_dir():
        what = "not a folder" if root.exists() else "no such folder"
        raise InputError(f"--data-dir {root}: {what}, expected the folder of run folders")
    return [str(p) for p in find_stores(root)]


def _when(ts: float | None) -> str | None:
    try:
        return None if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))
    except (OverflowError, ValueError, OSError):  # not a time (an infinite planned end)
        return None


def _list(args: argparse.Namespace) -> int:
    from soak.store import Store

    runs: dict[str, dict[str, Any]] = {}
    for url in _stores(args):
        try:
            with Store.open(url, create=False) as store:
                for r in store.list_runs():
                    d = r.as_dict()
                    d.pop("plan")
                    d.pop("manifest")
                    runs.setdefault(r.id, d)
        except StoreError as exc:
            if args.db:
                raise
            # One unreadable run folder (another schema version, a damaged file) must not
            # hide every other run: name it on stderr and go on.
            print(f"soak runs: skipped {exc}", file=sys.stderr)
    rows = sorted(runs.values(), key=lambda d: d["started_ts"], reverse=True)
    if args.format == "json":
        print_json(rows)
        return 0
    if not rows:
        print(f"no runs ({mask_url(args.db) if args.db else args.data_dir})")
        return 0
    print(f"{'RUN_ID':<32} {'STARTED (UTC)':<20} {'STATUS':<9} {'VERDICT':<8} {'RESTARTS':>8} {'NODES':>5}  WORKLOAD")
    for d in rows:
        print(f"{d['id']:<32} {fmt(_when(d['started_ts'])):<20} {d['status']:<9} {fmt(d['verdict']):<8} "
              f"{d['restarts']:>8} {d.get('nodes') or 1:>5}  {fmt(d['workload'])}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from soak.judge import reliability_of_run
    from soak.store import Store

    (url,) = _stores(args, None if args.db else args.run_id)
    with Store.open(url, create=False) as store:
        run = store.get_run(args.run_id)
        if run is None:
            raise UnknownRun.not_in_store(args.run_id, store.url)
        events = store.load_events(run.id)
        findings = store.load_findings(run.id)
        out = {
            **run.as_dict(),
            "samples": store.count_samples(run.id),
            "devices": sorted(device_key(node, dev) for node, dev in store.devices(run.id)),
            "last_sample_ts": store.last_sample_ts(run.id),
            "events": [e.as_dict() for e in events],
            "findings": [{**f.as_dict(), "node": f.node} for f in findings],
            "cluster_nodes": [n.as_dict() for n in store.cluster_nodes(run.id)],
        }
        reliability = reliability_of_run(store, run.id)
        out["reliability"] = None if reliability is None else reliability.to_dict()
    if args.format == "json":
        print_json(out)
        return 0
    end = run.ended_ts or out["last_sample_ts"]
    if end is not None and run.planned_end_ts is not None:
        end = min(end, run.planned_end_ts)  # what ran of the plan, as the report's accounting counts it
    # The duration asked for is the plan's; the soak counts from the workloads' start, after
    # the preflight, which is shown on its own.
    asked = ((run.plan or {}).get("run") or {}).get("duration")  # seconds, as the plan file said
    if not isinstance(asked, int | float) and run.planned_end_ts is not None:
        asked = run.planned_end_ts - run.started_ts
    soak_start = run.started_ts
    if run.planned_end_ts is not None and asked is not None:
        soak_start = max(run.started_ts, run.planned_end_ts - asked)
    pre = max(0.0, soak_start - run.started_ts)
    # durations as the report writes them, so the terminal and the PDF say one figure
    ran = None if end is None else hm(end - soak_start)
    planned = None if asked is None else hm(asked)
    # the chips as the report counts them: the host's own readings are no chip
    hosts = [d for d in out["devices"] if is_host(d)]
    chips = len(out["devices"]) - len(hosts)
    print(f"run       {run.id}  ({run.host})")
    print(f"status    {run.status}, verdict {fmt(run.verdict)}, restarts {run.restarts}")
    print(f"time      {_when(run.started_ts)} -> {fmt(_when(run.ended_ts))} UTC ({fmt(ran)} of {fmt(planned)}"
          + (f", preflight {hm(pre)} before" if pre >= 1 else "")
          + (f", time scale {run.time_scale:g}" if run.time_scale != 1 else "") + ")")
    print(f"workload  {fmt(run.workload)} on {fmt(run.backend)}; {out['samples']} samples of "
          f"{chips} chip(s){' and the host' if hosts else ''}")
    if run.nodes > 1:
        nodes = out["cluster_nodes"]
        print(f"nodes     {len(nodes)} of {run.nodes} joined: "
              + ", ".join(f"{n['name']} ({n['status']})" for n in nodes) + f"  (soak cluster status {run.id})")
    if reliability is not None:
        for line in reliability.statements():
            print(f"reliability  {line}")
    print(f"findings  {len(findings)}")
    for f in findings:
        print(f"  [{f.severity}] {f.kind} {fmt(f.device)}/{fmt(f.metric)}: {f.summary}")
    shown = [e for e in events if e.kind != "checkpoint"]
    print(f"events    {len(events)} ({len(events) - len(shown)} checkpoints not listed)")
    for e in shown[-40:]:
        who = "" if e.workload is None else f" {e.workload}" + ("" if e.rank is None else f"/{e.rank}")
        print(f"  {_when(e.ts)} {e.kind:<12}{who} {fmt(e.message)}")
    return 0
