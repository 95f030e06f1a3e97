"""Who this node is in a cluster run, and whether the nodes run the same software.

The rank comes from the plan or flag, else from the launcher's environment: a Kubernetes
Indexed Job sets ``JOB_COMPLETION_INDEX``, Volcano ``VC_TASK_INDEX``, Kubeflow's PyTorchJob
``PET_NODE_RANK``, Slurm ``SLURM_NODEID``.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from typing import Any

from soak.errors import ConfigError
from soak.manifest import NOT_DRIFT, flatten

log = logging.getLogger("soak.cluster")

RANK_VARIABLES = ("JOB_COMPLETION_INDEX", "VC_TASK_INDEX", "PET_NODE_RANK", "SLURM_NODEID")


def node_rank(configured: int | None, nodes: int, env: Mapping[str, str] | None = None) -> int:
    """This node's rank: the plan's (or flag's), else the launcher's environment."""
    env = os.environ if env is None else env
    if configured is not None:
        rank, source = configured, "cluster.node_rank"
    else:
        found = [(v, env[v]) for v in RANK_VARIABLES if env.get(v, "").strip()]
        if not found:
            raise ConfigError(f"cluster.nodes = {nodes}: give this node's rank (--node-rank R), or run it under a "
                              f"launcher that sets one of {', '.join(RANK_VARIABLES)}")
        source, text = found[0]
        try:
            rank = int(text)
        except ValueError:
            raise ConfigError(f"{source}={text!r}: a node rank must be an integer") from None
    if not 0 <= rank < nodes:
        raise ConfigError(f"{source} = {rank}: the node rank must be 0..{nodes - 1}")
    return rank


def node_name(configured: str | None, env: Mapping[str, str] | None = None) -> str:
    """The plan's name, else ``NODE_NAME`` (the Kubernetes node, by the downward API), else the host."""
    env = os.environ if env is None else env
    name = configured or env.get("NODE_NAME", "").strip() or socket.gethostname().split(".")[0] or "node"
    from soak.cluster.hostfile import NODE_NAME_RULE, valid_node_name

    if not valid_node_name(name):
        source = "cluster.node_name" if configured else "NODE_NAME" if env.get("NODE_NAME", "").strip() else "host name"
        raise ConfigError(f"{source} {name!r}: a node name must be {NODE_NAME_RULE}")
    return name


def node_address(advertise: str | None, rendezvous: str, rank: int) -> str:
    """The address the other nodes reach this node at: where the job's rendezvous goes when
    it moves to this node (its host lost). ``cluster.advertise`` when given; else on node rank
    0 the host of ``cluster.rendezvous`` (the plan names rank 0's address there); else the
    local address this node's route to that host leaves from, the network the nodes share
    (a connected UDP socket: no packet is sent); else the host name."""
    if advertise:
        return advertise
    host, _, port = rendezvous.rpartition(":")
    host = host.strip("[]")
    if rank == 0:
        return host
    try:
        found = socket.getaddrinfo(host, int(port), type=socket.SOCK_DGRAM)
    except (OSError, ValueError):
        found = []
    for family, kind, proto, _, addr in found:
        try:
            with socket.socket(family, kind, proto) as s:
                s.connect(addr)
                return str(s.getsockname()[0])
        except OSError:
            continue
    log.warning("no route to the rendezvous host %s: the other nodes reach this one by its host name, %s "
                "(set cluster.advertise if they cannot)", host, socket.gethostname())
    return socket.gethostname()


def endpoint(address: str, port: int | str) -> str:
    """``HOST:PORT`` as torchrun reads it, an IPv6 address in brackets."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def _locked(key: str) -> bool:
    """The manifest keys every node must share: versions of driver, firmware, CANN, the
    frameworks and packages, Python. Serials, host names and counts may differ."""
    if key in NOT_DRIFT or key.startswith("host."):
        return False
    last = key.rsplit(".", 1)[-1]
    return last.endswith("version") or key.startswith("packages.") or key == "python"


def locked_versions(manifests: Mapping[str, Mapping[str, Any] | None]) -> dict[str, dict[str, str | None]]:
    """``{locked field: {node: value}}`` over every node's manifest (a node without the field
    is absent from its mapping): the version check's table, and the report's."""
    flat = {node: dict(flatten(m or {})) for node, m in manifests.items()}
    keys = sorted({k for f in flat.values() for k in f if _locked(k)})
    return {key: {node: (None if f.get(key) is None else str(f.get(key))) for node, f in flat.items() if key in f}
            for key in keys}


def version_drift(manifests: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """One line per locked field whose value differs between nodes, naming nodes and values."""
    lines = []
    for key, per in locked_versions(manifests).items():
        values: dict[str, list[str]] = {}
        for node in sorted(manifests):
            values.setdefault(str(per.get(node)), []).append(node)
        if len(values) > 1:
            said = "; ".join(f"{', '.join(nodes)}: {value}" for value, nodes in sorted(values.items()))
            lines.append(f"version lock: {key} differs between nodes ({said})")
    return lines
