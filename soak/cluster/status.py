"""``soak cluster status RUN_ID``: a cluster run's nodes, their state and the run's events.

The JSON is a contract: ``{"run_id", "status", "verdict", "leader", "lease_left_s", "nodes":
[{"name", "status", "chips", "last_seen", "seen_ago_s", "restarts", ...}], "events": [{"ts",
"kind", "node", "message"}]}``; a lost node has status ``lost`` and an event of kind
``node_lost`` naming it. ``last_seen`` is on the store's clock; ``seen_ago_s`` measures it with
that clock. ``leader`` holds the judging lease (after the end: judged the run; None: nobody
yet), ``lease_left_s`` its term left on the store's clock (negative: expired; None: released
with the verdict, or never taken).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from typing import Any

from soak.errors import UnknownRun
from soak.output import add_format, fmt, print_json

# events worth a cluster operator's eye (steps, checkpoints and findings have their own views)
CLUSTER_EVENTS = ("start", "stop", "node_joined", "node_lost", "cluster_restart", "crash", "hang", "restart",
                  "preflight", "gap", "resume", "disk", "outage", "store_outage", "clock_drift")


def add_status_parser(sub: argparse._SubParsersAction) -> None:
    q = sub.add_parser("status", help="a cluster run's nodes (joined, state, last seen, restarts) and events")
    q.add_argument("run_id", metavar="RUN_ID")
    q.add_argument("--db", required=True, help="the cluster's shared store URL (postgresql+psycopg://...)")
    add_format(q)
    q.set_defaults(func=run_status)


def cluster_status(store: Any, run_id: str) -> dict[str, Any]:
    rec = store.get_run(run_id)
    if rec is None:
        raise UnknownRun.not_in_store(run_id, store.url)
    findings = findings_per_node(store.load_findings(run_id))
    now = store.store_now()  # last_seen is on the store's clock (soak.cluster.member)
    nodes = [{
        "name": n.name, "rank": n.rank, "host": n.host, "status": n.status, "chips": n.chips,
        "last_seen": n.last_seen, "seen_ago_s": None if n.last_seen is None else max(0.0, now - n.last_seen), "joined": n.joined_ts, "ended": n.ended_ts, "restarts": n.restarts,
        "preflight": n.preflight, "findings": findings.get(n.name, 0), "listen": n.listen,
    } for n in store.cluster_nodes(run_id)]
    events = [{"ts": e.ts, "kind": e.kind, "node": e.node, "message": e.message}
              for e in store.load_events(run_id) if e.kind in CLUSTER_EVENTS]
    return {"run_id": rec.id, "status": rec.status, "verdict": rec.verdict, "nodes_planned": rec.nodes,
            "generation": rec.generation, "leader": rec.leader,
            "lease_left_s": None if rec.lease_until is None else rec.lease_until - now,
            "nodes": nodes, "events": events}


def lease_words(data: dict[str, Any]) -> str:
    """Who judges the run, as the status line says it."""
    leader, left = data["leader"], data["lease_left_s"]
    if leader is None:  # (a run that ended before training, at the version lock, has none)
        return "no judge yet" if data["status"] == "running" else "no judge"
    if left is None:
        return f"judged by {leader}"
    if left < 0:
        return f"judge {leader} (lease expired {-left:.0f} s ago)"
    return f"judge {leader} (lease {left:.0f} s left)"


def findings_per_node(findings: Iterable[Any]) -> dict[str, int]:
    """How many findings each node has, by each finding's ``node``: a node agent's findings on
    its own chips and ranks, the leader's about a chip, a rank or a whole node."""
    out: dict[str, int] = {}
    for f in findings:
        if f.node:
            out[f.node] = out.get(f.node, 0) + 1
    return out


def run_status(args: argparse.Namespace) -> int:
    from soak.store import Store

    with Store.open(args.db, create=False) as store:
        data = cluster_status(store, args.run_id)
    if args.format == "json":
        print_json(data)
        return 0
    out = sys.stdout
    out.write(f"cluster run {data['run_id']}: {data['status']}, verdict {fmt(data['verdict'])}, "
              f"{len(data['nodes'])} of {data['nodes_planned']} nodes, job generation {data['generation']}, "
              f"{lease_words(data)}\n")
    out.write(f"{'rank':>4}  {'node':<20} {'status':<9} {'chips':>5} {'restarts':>8} {'findings':>8}  last seen\n")
    for n in data["nodes"]:
        ago = "N/A" if n["seen_ago_s"] is None else f"{n['seen_ago_s']:.0f} s ago"
        out.write(f"{n['rank']:>4}  {n['name']:<20} {n['status']:<9} {fmt(n['chips']):>5} {n['restarts']:>8} "
                  f"{n['findings']:>8}  {ago}\n")
    for e in data["events"][-20:]:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e["ts"]))
        out.write(f"  {when}  {e['kind']:<15} {e['node'] or '':<12} {e['message'] or ''}\n")
    return 0
