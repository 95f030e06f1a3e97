"""A cut link between two "nodes": node 0 in this network namespace, node 1 in a namespace of
its own joined to it by a veth pair. The rendezvous, gloo and (through a forwarder the test
starts) PostgreSQL all cross the pair; bringing the pair down cuts node 1 off from all three,
the way a failed NIC or switch port would."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from soak.errors import StoreError
from soak.store import Store
from tests import procs
from tests.cluster.agents import events

pytestmark = [pytest.mark.slow, pytest.mark.pg, pytest.mark.xdist_group("cluster-b")]  # tests/conftest.py

HANG_TIMEOUT_S = 30.0  # above a start-up (torch import, rendezvous, first step) on a loaded 2-core machine
STOP_GRACE_S = 5.0
# The bound on node 1's processes after the cut: its hang timeout or its next store call
# failing, then the grace after SIGTERM, and 15 s for its next looks on a loaded machine
GONE_WITHIN_S = HANG_TIMEOUT_S + STOP_GRACE_S + 15


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@dataclass(frozen=True)
class Link:
    ns: str  # node 1's namespace
    root_if: str  # the pair's end in this namespace
    ns_if: str  # node 1's end, brought down to cut the link
    root_addr: str
    ns_addr: str


@pytest.fixture
def link():
    """A namespace with a veth pair to this one, removed afterwards."""
    if shutil.which("ip") is None:
        pytest.skip("iproute2 (ip) is not installed")
    tag = uuid.uuid4().hex[:6]
    net = random.randrange(1, 254)
    ln = Link(ns=f"soak-{tag}", root_if=f"skr{tag}", ns_if=f"skn{tag}",
              root_addr=f"10.213.{net}.1", ns_addr=f"10.213.{net}.2")
    made = _ip("netns", "add", ln.ns)
    if made.returncode != 0:
        pytest.skip(f"ip netns add is not permitted here: {made.stderr.strip()}")
    try:
        for cmd in (["link", "add", ln.root_if, "type", "veth", "peer", "name", ln.ns_if],
                    ["link", "set", ln.ns_if, "netns", ln.ns],
                    ["addr", "add", f"{ln.root_addr}/30", "dev", ln.root_if],
                    ["link", "set", ln.root_if, "up"],
                    ["-n", ln.ns, "addr", "add", f"{ln.ns_addr}/30", "dev", ln.ns_if],
                    ["-n", ln.ns, "link", "set", ln.ns_if, "up"],
                    ["-n", ln.ns, "link", "set", "lo", "up"]):
            r = _ip(*cmd)
            if r.returncode != 0:
                pytest.skip(f"ip {' '.join(cmd)}: {r.stderr.strip()}")
        yield ln
    finally:
        _ip("link", "del", ln.root_if)  # takes its peer with it
        _ip("netns", "del", ln.ns)


def _free_port(addr: str = "127.0.0.1") -> int:
    import socket

    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _run_processes(folder: Path) -> list[psutil.Process]:
    """The torchrun and workload processes started for ``folder`` (a node's data folder)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if str(folder) in cmd and ("torch.distributed.run" in cmd or "soak.workloads" in cmd):
            found.append(p)
    return found


def _kill_everything_under(folder: Path) -> None:
    for p in psutil.process_iter(["cmdline"]):
        if str(folder) in " ".join(p.info["cmdline"] or []):
            try:
                p.kill()
            except psutil.Error:
                pass


def test_a_cut_link_leaves_no_hung_torchrun_on_the_cut_off_node(tmp_path, db_url, link) -> None:
    if shutil.which("socat") is None:
        pytest.skip("socat is not installed (it carries PostgreSQL into the namespace)")
    from sqlalchemy.engine import make_url

    # PostgreSQL listens on loopback only: a forwarder on the pair's address out here carries
    # it, and both nodes name the store by that address (the URL is part of the plan they
    # share), so node 1's connections cross the pair themselves and see it cut.
    pg = make_url(db_url)
    fwd_port = _free_port(link.root_addr)
    forwarder = procs.start(
        ["socat", f"TCP-LISTEN:{fwd_port},bind={link.root_addr},reuseaddr,fork",
         f"TCP:{pg.host or '127.0.0.1'}:{pg.port or 5432}"], tmp_path, "socat")
    store_url = pg.set(host=link.root_addr, port=fwd_port).render_as_string(hide_password=False)
    plan = tmp_path / "plan.toml"
    plan.write_text('[cluster]\nnode_silence = "6s"\njoin_timeout = "2m"\n'
                    f'[restart]\nhang_timeout = "{HANG_TIMEOUT_S:g}s"\nstop_grace = "{STOP_GRACE_S:g}s"\n',
                    encoding="utf-8")
    rdzv = f"{link.root_addr}:{_free_port(link.root_addr)}"
    agents: list[procs.Proc] = []
    dirs = [tmp_path / "node-0", tmp_path / "node-1"]
    for rank, (prefix, ifname) in enumerate([([], link.root_if), (["ip", "netns", "exec", link.ns], link.ns_if)]):
        dirs[rank].mkdir()
        argv = [*prefix, sys.executable, "-m", "soak", "run", str(plan), "--duration", "20m", "--workload", "lm",
                "--backend", "sim", "--sim-chips", "2", "--nproc", "1", "--no-preflight", "--listen", "",
                "--interval", "2s", "--data-dir", str(dirs[rank]), "--db", store_url, "--run-id", "c1",
                "--nodes", "2", "--node-rank", str(rank), "--node-name", f"node-{rank}", "--rendezvous", rdzv,
                "--progress-every", "2"]
        # gloo would pick the address of this host's name, which the other namespace cannot reach
        env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": ifname}
        agents.append(procs.start(argv, dirs[rank], f"node-{rank}", out=dirs[rank] / "agent.log", merge_output=True,
                                  env=env))
    leader, _cut_off = agents
    daemon_logs = [procs.daemon_log(d / "c1") for d in dirs]

    def log(rank: int) -> str:
        return (dirs[rank] / "agent.log").read_text(errors="replace")[-2000:]

    def both_stepping() -> bool:
        with Store.open(db_url, create=False) as store:
            return len({s["node"] for s in store.load_steps("c1")}) == 2

    try:
        procs.wait_until(both_stepping, [*agents, forwarder], 240, what="both nodes stepping", logs=daemon_logs,
                         retry_on=(StoreError,), interval_s=0.5)  # StoreError: no tables yet
        running = _run_processes(dirs[1])
        assert running, "no torchrun on node 1 while it steps"
        # node 1's end: this end keeps its address, so node 0 still reaches the store
        assert _ip("-n", link.ns, "link", "set", link.ns_if, "down").returncode == 0
        # whichever ends the agent's wait first (hang_timeout after the last step, or its next
        # store call failing: PG_CALL_BOUND_S), then the grace after SIGTERM and its next looks
        _gone, alive = psutil.wait_procs(running, timeout=GONE_WITHIN_S)
        left = [(p.pid, " ".join(p.info["cmdline"] or [])[:120]) for p in alive if p.is_running()]
        assert not left, f"{len(left)} processes of node 1 still there {GONE_WITHIN_S:.0f} s after the cut: {left}\n{log(1)}"
        # node 0 finds it lost (node_silence 6 s and its next look), then is stopped: it
        # judges the run and its verdict fails on the lost node
        procs.wait_until(lambda: events(db_url, "node_lost"), [leader, forwarder], 60, what="node 0 to find node 1 lost", logs=daemon_logs[:1])
        leader.terminate()
        rc = leader.wait_exit(120, logs=daemon_logs[:1])
        with Store.open(db_url, create=False) as store:
            nodes = {n.name: n.status for n in store.cluster_nodes("c1")}
            run = store.get_run("c1")
    finally:
        for a in agents:
            a.close()
        _kill_everything_under(tmp_path)
        forwarder.stop(grace_s=10)
    lost = events(db_url, "node_lost")
    assert [e.node for e in lost] == ["node-1"], lost
    assert nodes["node-1"] == "lost" and nodes["node-0"] == "stopped", nodes
    assert run is not None and run.status == "stopped" and run.verdict == "fail" and rc == 1, (rc, log(0))
