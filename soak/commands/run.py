"""``soak run``: run a soak from a plan file and/or flags, or resume one whose daemon died."""

from __future__ import annotations

import argparse
import copy
import os
import sys
from pathlib import Path
from typing import Any

from soak.config import SIZES, WORKLOADS, Plan, check_run_id, plan_from_dict, read_plan_data
from soak.errors import ConfigError
from soak.faultcodes import load_table
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
    p.add_argument("--detail-interval", help="how often each chip's fault views (health, ECC, ports) are read, "
                                             "wall time, e.g. 10s (sampling.detail_interval)")
    p.add_argument("--db", help=f"store URL (default: <run folder>/{DB_NAME}); its password is used, never recorded")
    p.add_argument("--db-password-file", metavar="FILE",
                   help="the store's password, read from FILE (a mounted Secret): kept out of argv and the URL")
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


# flag -> the plan key it sets (section, key); the flags lie over the plan file's keys
_FLAG_KEYS: dict[str, tuple[str, str]] = {
    "duration": ("run", "duration"), "time_scale": ("run", "time_scale"), "db": ("run", "db"),
    "data_dir": ("run", "data_dir"), "run_id": ("run", "id"), "backend": ("devices", "backend"),
    "interval": ("sampling", "interval"), "detail_interval": ("sampling", "detail_interval"),
    "listen": ("exporter", "listen"), "web_config": ("exporter", "web_config"),
    "max_restarts": ("restart", "max_restarts"), "hang_timeout": ("restart", "hang_timeout"),
    "sim_scenario": ("sim", "scenario"), "sim_chips": ("sim", "chips"), "nodes": ("cluster", "nodes"),
    "node_rank": ("cluster", "node_rank"), "node_name": ("cluster", "node_name"),
    "rendezvous": ("cluster", "rendezvous"), "advertise": ("cluster", "advertise"),
}
_PLAN_FLAGS = (*_FLAG_KEYS, "workload", "size", "nproc", "inject", "no_preflight")


def _set(data: dict[str, Any], section: str, key: str, value: Any) -> None:
    if value is not None:
        table = data.setdefault(section, {})
        if not isinstance(table, dict):  # `run = 5` or `[[run]]` in the plan
            raise ConfigError(f"{section} must be a table")
        table[key] = value


def plan_data(args: argparse.Namespace, file_data: dict[str, Any]) -> dict[str, Any]:
    """The plan file's tables (``file_data``, changed in place) with the flags laid over them."""
    data = file_data
    for flag, (section, key) in _FLAG_KEYS.items():
        _set(data, section, key, getattr(args, flag))
    if args.no_preflight:
        _set(data, "run", "preflight", False)
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


def _flag_named(message: str, args: argparse.Namespace) -> str | None:
    """The flag given on this command line that set the key ``message`` is about."""
    for flag, (section, key) in _FLAG_KEYS.items():
        if getattr(args, flag) is not None and message.startswith(f"{section}.{key} "):
            return flag
    for flag in ("size", "nproc"):
        if getattr(args, flag) is not None and message.startswith("workloads[") and f"].{flag} " in message:
            return flag
    if args.inject and message.startswith("faults.inject"):
        return "inject"
    return None


def checked_plan(args: argparse.Namespace) -> Plan:
    """The plan of ``soak run``: the plan file with the flags laid over it, checked. A key the
    file got wrong is named with the file (``plan p.toml: run.durashun is not a known key``), a
    value a flag gave with the flag; what a flag replaces in the file is never judged."""
    file_data: dict[str, Any] = read_plan_data(args.plan) if args.plan else {}  # its errors name it
    try:
        return plan_from_dict(plan_data(args, copy.deepcopy(file_data)))
    except ConfigError as exc:
        message = str(exc)
        if args.plan and _fails_alone(file_data, message):
            raise ConfigError(f"plan {args.plan}: {message}") from None
        flag = _flag_named(message, args)
        if flag is not None:
            raise ConfigError(f"--{flag.replace('_', '-')}: {message}") from None
        raise


def _fails_alone(file_data: dict[str, Any], message: str) -> bool:
    """Whether the plan file, without the flags, is wrong in the same way."""
    try:
        plan_from_dict(file_data)
    except ConfigError as exc:
        return str(exc) == message
    return False


def main(args: argparse.Namespace) -> int:
    from soak.daemon.console import hold_std_streams
    from soak.daemon.lifecycle import Daemon
    from soak.store.engine import DB_PASSWORD_FILE_ENV

    if args.resume:
        check_run_id(args.resume, "--resume")  # a path ('../x') would resume a run outside the data dir
    hold_std_streams()  # before the run opens a file that a closed fd 2 would hand it
    if args.resume and args.plan:
        raise ConfigError("--resume continues a run with its own plan; give RUN_ID without PLAN.toml")
    if not args.resume and not args.plan and not args.duration:
        raise ConfigError("soak run needs PLAN.toml, or at least --duration (e.g. --duration 5m --workload lm)")
    if args.db_password_file:
        # the path (never the password) reaches every store this process and its soak
        # children open: soak.store.engine reads it where a URL has no password
        os.environ[DB_PASSWORD_FILE_ENV] = str(Path(args.db_password_file).expanduser().absolute())
    overrides: dict[str, Any] = {}
    if args.resume:
        given = {k: v for k, v in vars(args).items() if v not in (None, False) and k in _PLAN_FLAGS}
        extra = sorted(set(given) - {"db", "listen", "data_dir"})
        if extra:
            raise ConfigError(f"--resume keeps the run's own plan; --{extra[0].replace('_', '-')} cannot change it "
                              "(only --db, --listen and --data-dir may be given)")
        overrides = {f"run.{k}" if k == "db" else "exporter.listen": v for k, v in given.items() if k != "data_dir"}
    plan = checked_plan(args)
    if not args.resume:
        # read as the run will: a bad file stops here, before the run folder exists
        load_table(plan.faults.codes_file, key="faults.codes_file")
    daemon = Daemon(plan, resume=args.resume, out=sys.stderr, progress_every_s=args.progress_every,
                    resume_overrides=overrides)
    return daemon.run()
