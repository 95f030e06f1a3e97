"""The command line that starts a workload's ranks under torchrun.

``build_command`` is what ``soak run`` and ``soak workload`` execute: one torchrun
(``soak.workloads.torchrun``: torch's, with its stores listening on one address) with
``--max-restarts 0`` (restarts belong to the supervisor, which counts them). On one node the
rendezvous is private, on a free port of 127.0.0.1 in a network namespace of the agent's own;
torchrun's own ``--standalone`` listens on every interface.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from soak.errors import InputError
from soak.workloads.inject import parse_all

WORKLOADS = ("lm", "gemm", "collective")


@dataclass(frozen=True)
class Rendezvous:
    """torchrun's multi-node rendezvous for one generation of a cluster job."""

    nnodes: int
    endpoint: str  # HOST:PORT
    rdzv_id: str  # new for every whole-job restart: a running rendezvous is not rejoined
    is_host: bool  # this node hosts the c10d store (soak.cluster.member.RendezvousHost)
    join_timeout_s: float = 600.0
    # where the other nodes reach this one (soak.cluster.node.node_address): the store this
    # node's agent shares with the job's ranks, when it is the job's agent rank 0, listens
    # there; the host node's is the rendezvous host. None: torch's guess (the host's FQDN)
    local_addr: str | None = None

# a single-node run: a free port on loopback, this node hosting it (torchrun's --standalone
# does the same on every interface), in a network namespace of its own, so that loopback is
# the agent's alone, not every local user's
LOCAL = ("--private-network", "--nnodes=1", "--rdzv-backend=soak-c10d", "--rdzv-endpoint=127.0.0.1:0",
         "--rdzv-id=local", "--rdzv-conf=is_host=1", "--local-addr=127.0.0.1")


def build_command(
    workload: str,
    run_dir: str | os.PathLike[str],
    nproc: int,
    size: str = "tiny",
    steps: int | None = None,
    duration_s: float | None = None,
    inject: Iterable[str] = (),
    extra: Iterable[str] = (),
    *,
    python: str | None = None,
    rendezvous: Rendezvous | None = None,
) -> list[str]:
    """argv for ``torchrun --nproc-per-node N -m soak.workloads.<workload> ...``.

    Raises ``InputError`` for an unknown workload, a bad ``nproc`` or an invalid inject spec,
    so a plan is rejected before anything starts.
    """
    if workload not in WORKLOADS:
        raise InputError(f"workload {workload!r}: expected one of {', '.join(WORKLOADS)}")
    if int(nproc) < 1:
        raise InputError(f"nproc {nproc!r}: must be at least 1")
    inject = list(inject)
    parse_all(inject, workload)
    # one node: a private rendezvous; several: the cluster's c10d rendezvous, whose store
    # one node hosts (rank 0, or where the job moved it): said explicitly, torchrun cannot
    # always tell (e.g. several nodes on one host)
    where = list(LOCAL) if rendezvous is None else [
        f"--nnodes={rendezvous.nnodes}", "--rdzv-backend=soak-c10d", f"--rdzv-endpoint={rendezvous.endpoint}",
        f"--rdzv-id={rendezvous.rdzv_id}",
        f"--rdzv-conf=join_timeout={rendezvous.join_timeout_s:g},is_host={int(rendezvous.is_host)}",
    ]
    if rendezvous is not None and rendezvous.is_host:
        # The workers' MASTER_ADDR is the host node's own name (getfqdn), which can be
        # "localhost" or a name the others cannot resolve; the rendezvous host is the name
        # every node reaches this one by.
        where.append(f"--local-addr={rendezvous.endpoint.rpartition(':')[0].strip('[]')}")
    elif rendezvous is not None and rendezvous.local_addr:
        where.append(f"--local-addr={rendezvous.local_addr}")
    argv = [
        python or sys.executable, "-m", "soak.workloads.torchrun", *where,
        f"--nproc-per-node={int(nproc)}", "--max-restarts=0",
        "-m", f"soak.workloads.{workload}",
        "--run-dir", str(Path(run_dir)), "--size", size,
    ]  # fmt: skip
    if steps is not None:
        argv += ["--steps", str(int(steps))]
    if duration_s is not None:
        argv += ["--duration-s", f"{float(duration_s):g}"]
    for spec in inject:
        argv += ["--inject", spec]
    argv += [str(a) for a in extra]
    check_args(workload, argv[argv.index("--run-dir"):])
    return argv


def check_args(workload: str, args: list[str]) -> None:
    """Parse a workload's options here with its own parser; ``InputError`` names the problem.

    A typo (``--bogus``, ``--size huge``) would otherwise fail in every rank, show up as
    torchrun's ChildFailedError pages and, under ``soak run``, as a restart loop.
    """
    import importlib

    from soak.workloads.common import build_parser, positive

    parser = build_parser(workload, "")

    def error(message: str) -> None:
        raise InputError(f"workload {workload}: {message}")

    def exit_(status: int = 0, message: str | None = None) -> None:
        # -h (or --he, an abbreviation) would print the help and end soak itself with exit 0
        raise InputError(f"workload {workload}: -h/--help is not an option of a run")

    parser.error = error  # type: ignore[method-assign]
    parser.exit = exit_  # type: ignore[method-assign]
    parser.print_help = lambda file=None: None  # type: ignore[method-assign]
    add_args = getattr(importlib.import_module(f"soak.workloads.{workload}"), "add_args", None)
    if add_args is not None:
        add_args(parser)
    positive(parser.parse_args(args))
