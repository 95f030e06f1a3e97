"""``soak cluster``: a soak across several nodes, one agent per node."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from soak.cluster.launch import DEFAULT_STOP_GRACE_S
from soak.cluster.status import add_status_parser
from soak.output import add_format, print_json
from soak.runfolder import DEFAULT_DATA_DIR


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cluster",
        help="soak several nodes as one run: start the agents, see their state",
        description="A cluster soak: every node runs `soak run --nodes N --node-rank R ...` "
        "and they join one run in a shared store (docs/cluster.md).",
    )
    sub = parser.add_subparsers(dest="cluster_command", metavar="ACTION")
    for add in ACTIONS:
        add(sub)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def add_launch(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "launch",
        help="start one agent per host of a hostfile over ssh, stream their output",
        description="Copy PLAN to every host of HOSTS and run `soak run PLAN --nodes N "
        "--node-rank R --node-name NAME --rendezvous HOST:PORT --run-id ID` there over the "
        "system ssh client (BatchMode: keys or an ssh agent, never a password prompt). Output "
        "lines come back prefixed by [node name]. Ctrl-C or SIGTERM stops every agent (again: "
        "cut the connections at once). Exit status: the worst of the agents; 255 when a host "
        "cannot be reached (then no agent is started); 2 for a bad hostfile or plan.",
        epilog="HOSTS: one host a line, `[user@]host[:port] [name=NODE_NAME]`, `#` comments; "
        "node rank = line order. Arguments after `--` go to every `soak run`.",
    )
    p.add_argument("--hostfile", required=True, metavar="HOSTS",
                   help="the nodes, in rank order")
    p.add_argument("plan", metavar="PLAN.toml", help="run plan copied to every node")
    p.add_argument("agent_args", nargs="*", metavar="ARG",
                   help="after --: extra arguments for every `soak run`")
    p.add_argument("--rendezvous", metavar="HOST:PORT",
                   help="torchrun c10d endpoint (default: the plan's cluster.rendezvous, else "
                   "the first host, port 29400)")
    p.add_argument("--run-id", help="id of the run all nodes join (default: the plan's "
                   "run.id, else <UTC time>-<this host>)")
    p.add_argument("--remote-soak", default="soak", metavar="PATH",
                   help="soak on the hosts, e.g. /opt/soak/venv/bin/soak (default: soak on "
                   "the remote PATH)")
    p.add_argument("--ssh-option", action="append", default=[], metavar="OPTION",
                   help="ssh -o option, e.g. ProxyJump=bastion (repeatable; wins over "
                   "soak's defaults)")
    p.add_argument("--ssh-identity", metavar="FILE", help="ssh -i private key file")
    p.add_argument("--stop-grace", type=int, default=DEFAULT_STOP_GRACE_S, metavar="S",
                   help="seconds an agent has to stop after SIGTERM before its processes are "
                   f"killed (default: {DEFAULT_STOP_GRACE_S})")
    p.set_defaults(func=_launch)


def add_replay(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help="write what a node kept while the store was away to the store",
        description="A node whose store did not answer for longer than cluster.store_outage_max "
        "stopped with what it could not write kept in its run folder (store-spool.jsonl). Write "
        "it to the store now, in order, without resuming the run (soak run --resume RUN_ID writes "
        "it too, then goes on). Refused while a daemon holds the run folder.",
    )
    p.add_argument("run_id", metavar="RUN_ID", help="the run (its folder under --data-dir)")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help=f"folder of run folders (default: ./{DEFAULT_DATA_DIR})")
    p.add_argument("--db", help="store URL (default: the run's plan.toml run.db, else its folder's soak.db)")
    add_format(p)
    p.set_defaults(func=_replay)


def add_judge(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "judge",
        help="judge a cluster run no agent judged (all killed), from what the store holds",
        description="A cluster run is judged by the agent holding its judging lease. Where none "
        "did (every agent killed, the judge gone), judge it now from the store: nodes silent past "
        "cluster.node_silence are marked lost, the nodes whose agents did not end get their last "
        "analysis, and the run is recorded finished, stopped or failed (no agent finished it) with "
        "its verdict. Refused while a live agent holds the lease of the running run, or for a run "
        "judged already, unless --force. Exit status: 0 judged, 1 verdict fail, 2 refused.",
    )
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--db", required=True, help="the cluster's shared store URL (postgresql+psycopg://...)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the analysis there (report/analysis.json's format)")
    p.add_argument("--force", action="store_true",
                   help="judge even while an agent holds the lease, or again after a verdict")
    add_format(p)
    p.set_defaults(func=_judge)


# Each action of `soak cluster` adds its parser here.
ACTIONS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (add_launch, add_status_parser, add_replay,
                                                                      add_judge)


def _judge(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from soak.cluster_judge import judge_after
    from soak.errors import InputError
    from soak.store import Store

    out = Path(args.output) if args.output else None
    if out is not None and not out.parent.is_dir():  # said before the run is recorded
        raise InputError(f"-o {out}: no folder {out.parent}")
    with Store.open(args.db, create=False) as store:
        done = judge_after(store, args.run_id, force=args.force)
    if out is not None and done.analysis is not None:
        try:
            out.write_text(json.dumps(done.analysis, indent=1, sort_keys=True, default=str), encoding="utf-8")
        except OSError as exc:
            raise InputError(f"-o {out}: {exc.strerror or exc} (the run's verdict is recorded: "
                             f"soak cluster status {args.run_id})") from None
    if args.format == "json":
        print_json(done.to_dict())
    else:
        print(done.line())
    return 1 if done.verdict == "fail" else 0


def _replay(args: argparse.Namespace) -> int:
    from soak import runfolder as layout
    from soak.config import load_plan
    from soak.daemon.lock import RunLock
    from soak.daemon.spool import replay_file
    from soak.errors import UnknownRun
    from soak.store import Store

    folder = layout.run_dir(args.data_dir, args.run_id)
    if not folder.is_dir():
        raise UnknownRun(f"run {args.run_id}: no run folder {folder}", data_dir=args.data_dir)
    spool = layout.store_spool_path(folder)
    db = args.db
    if db is None and layout.plan_path(folder).is_file():
        db = load_plan(layout.plan_path(folder)).run.db
    db = db or str(layout.db_path(folder))
    written = 0
    with RunLock(folder):  # a running daemon writes its own spool; two writers would repeat records
        if spool.exists():
            with Store.open(db, create=False) as store:
                if store.get_run(args.run_id) is None:
                    raise UnknownRun.not_in_store(args.run_id, store.url)
                written = replay_file(store, args.run_id, spool)
    left = 0 if not spool.exists() else sum(1 for ln in spool.read_text(encoding="utf-8").splitlines() if ln.strip())
    if args.format == "json":
        print_json({"run_id": args.run_id, "spool": str(spool), "written": written, "left": left})
    elif not written and not left:
        print(f"run {args.run_id}: nothing to replay (no {spool})")
    else:
        print(f"run {args.run_id}: {written} records written to the store from {spool}")
    return 0


def _launch(args: argparse.Namespace) -> int:
    from soak.cluster import launch
    from soak.cluster.hostfile import read_hostfile
    from soak.errors import InputError

    if args.stop_grace < 0:
        raise InputError(f"--stop-grace must be 0 or more seconds, got {args.stop_grace}")
    hosts = read_hostfile(args.hostfile)
    plan = launch.prepare(hosts, args.plan, rendezvous=args.rendezvous, run_id=args.run_id,
                          remote_soak=args.remote_soak, agent_args=args.agent_args,
                          stop_grace_s=args.stop_grace)
    ssh = launch.SshConfig(options=tuple(args.ssh_option), identity=args.ssh_identity)
    return launch.run(plan, ssh)
