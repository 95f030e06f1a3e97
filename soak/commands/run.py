"""``soak run``: run a soak from a plan file and/or flags, or resume one whose daemon died."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from soak.config import SIZES, WORKLOADS, plan_from_dict, read_plan_data
from soak.errors import ConfigError
from soak.runfolder import DB_NAME, DEFAULT_DATA_DIR
from soak.telemetry import BACKENDS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run",
        help="run a soak test (the daemon): workloads, telemetry, restarts, verdict",
        description="Run a soak test from PLAN.toml and/or flags (flags override the plan). "
        "Exit status: 0 finished and passed (or stopped cleanly), 1 failed, 2 bad input.",
    )
    p.add_argument("plan", nargs="?", metavar="PLAN.toml", help="run plan (docs/daemon.md)")
    p.add_argument("--resume", metavar="RUN_ID", help="continue a run whose daemon died, to its original end")
    p.add_argument("--duration", help="run length, e.g. 72h, 30m, 90s (run.duration)")
    p.add_argument("--workload", action="append", choices=WORKLOADS,
                   help="workload to run (repeatable; replaces the plan's workloads)")
    p.add_argument("--size", choices=SIZES, help="workload preset size")
    p.add_argument("--nproc", type=int, help="ranks per workload on this node")
    p.add_argument("--backend", choices=BACKENDS, help="telemetry backend (devices.backend)")
    p.add_argument("--inject", action="append", metavar="SPEC", help="fault to inject (repeatable), e.g. crash:40")
    p.add_argument("--time-scale", type=float, help="accelerated time line, sim backend only (run.time_scale)")
    p.add_argument("--sim-scenario", help="simulated fleet scenario (sim.scenario)")
    p.add_argument("--sim-chips", type=int, help="simulated chips (sim.chips)")
    p.add_argument("--interval", help="telemetry tick, wall time, e.g. 1s (sampling.interval)")
    p.add_argument("--db", help=f"store URL (default: <run folder>/{DB_NAME})")
    p.add_argument("--data-dir", help=f"folder of run folders (default: ./{DEFAULT_DATA_DIR})")
    p.add_argument("--run-id", help="id of the new run (default: <UTC time>-<host>)")
    p.add_argument("--listen", help="HOST:PORT for /metrics; '' for none (exporter.listen)")
    p.add_argument("--web-config", metavar="FILE",
                   help="TLS and basic auth of /metrics, node_exporter's web config format (exporter.web_config)")
    p.add_argument("--no-preflight", action="store_true", help="skip the environment self-check")
    p.add_argument("--max-restarts", type=int, help="give up after this many restarts (restart.max_restarts)")
    p.add_argument("--hang-timeout", help="no step progress for this long = hung, e.g. 10m (restart.hang_timeout)")
    c = p.add_argument_group("cluster run (docs/cluster.md)")
    c.add_argument("--nodes", type=int, help="nodes in the run; > 1 joins a cluster run (cluster.nodes)")
    c.add_argument("--node-rank", type=int, help="this node's rank 0..N-1 (default: from JOB_COMPLETION_INDEX, "
                   "VC_TASK_INDEX, PET_NODE_RANK or SLURM_NODEID)")
    c.add_argument("--node-name", help="this node's name (default: NODE_NAME, else the host name)")
    c.add_argument("--rendezvous", metavar="HOST:PORT", help="torchrun c10d rendezvous on node rank 0 (cluster.rendezvous)")
    c.add_argument("--advertise", metavar="HOST", help="the address the other nodes reach this node at when the "
                   "rendezvous moves to it (cluster.advertise; default: rank 0 the rendezvous host, the others "
                   "their route's local address to it)")
    p.add_argument("--progress-every", type=float, default=5.0, metavar="S",
                   help="seconds between progress lines (default: 5)")
    p.set_defaults(func=main)


_PLAN_FLAGS = ("duration", "workload", "size", "nproc", "backend", "inject", "time_scale", "sim_scenario",
               "sim_chips", "interval", "db", "data_dir", "run_id", "listen", "web_config", "no_preflight", "max_restarts",
               "hang_timeout", "nodes", "node_rank", "node_name", "rendezvous", "advertise")


def _set(data: dict[str, Any], section: str, key: str, value: Any) -> None:
    if value is not None:
        table = data.setdefault(section, {})
        if not isinstance(table, dict):  # `run = 5` or `[[run]]` in the plan
            raise ConfigError(f"{section} must be a table")
        table[key] = value


def plan_data(args: argparse.Namespace) -> dict[str, Any]:
    """The plan file's tables with the flags laid over them."""
    data: dict[str, Any] = read_plan_data(args.plan) if args.plan else {}
    _set(data, "run", "duration", args.duration)
    _set(data, "run", "time_scale", args.time_scale)
    _set(data, "run", "db", args.db)
    _set(data, "run", "data_dir", args.data_dir)
    _set(data, "run", "id", args.run_id)
    if args.no_preflight:
        _set(data, "run", "preflight", False)
    _set(data, "devices", "backend", args.backend)
    _set(data, "sampling", "interval", args.interval)
    _set(data, "exporter", "listen", args.listen)
    _set(data, "exporter", "web_config", args.web_config)
    _set(data, "restart", "max_restarts", args.max_restarts)
    _set(data, "restart", "hang_timeout", args.hang_timeout)
    _set(data, "sim", "scenario", args.sim_scenario)
    _set(data, "sim", "chips", args.sim_chips)
    _set(data, "cluster", "nodes", args.nodes)
    _set(data, "cluster", "node_rank", args.node_rank)
    _set(data, "cluster", "node_name", args.node_name)
    _set(data, "cluster", "rendezvous", args.rendezvous)
    _set(data, "cluster", "advertise", args.advertise)
    if args.inject:
        _set(data, "faults", "inject", list(args.inject))
    if args.workload:
        data["workloads"] = [{"name": w} for w in args.workload]
    if args.size is not None or args.nproc is not None:
        workloads = data.setdefault("workloads", [{"name": "lm"}])
        for w in workloads if isinstance(workloads, list) else ():  # not a list: plan_from_dict says so
            if isinstance(w, dict):
                if args.size is not None:
                    w["size"] = args.size
                if args.nproc is not None:
                    w["nproc"] = args.nproc
    return data


def main(args: argparse.Namespace) -> int:
    from soak.daemon.lifecycle import Daemon

    if args.resume and args.plan:
        raise ConfigError("--resume continues a run with its own plan; give RUN_ID without PLAN.toml")
    if not args.resume and not args.plan and not args.duration:
        raise ConfigError("soak run needs PLAN.toml, or at least --duration (e.g. --duration 5m --workload lm)")
    overrides: dict[str, Any] = {}
    if args.resume:
        given = {k: v for k, v in vars(args).items() if v not in (None, False) and k in _PLAN_FLAGS}
        extra = sorted(set(given) - {"db", "listen", "data_dir"})
        if extra:
            raise ConfigError(f"--resume keeps the run's own plan; --{extra[0].replace('_', '-')} cannot change it "
                              "(only --db, --listen and --data-dir may be given)")
        overrides = {f"run.{k}" if k == "db" else "exporter.listen": v for k, v in given.items() if k != "data_dir"}
    plan = plan_from_dict(plan_data(args))
    daemon = Daemon(plan, resume=args.resume, out=sys.stderr, progress_every_s=args.progress_every,
                    resume_overrides=overrides)
    return daemon.run()
