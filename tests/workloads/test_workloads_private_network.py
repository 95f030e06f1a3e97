"""A single-node run's c10d stores, out of every other local user's reach (was: on 127.0.0.1, where
``nobody`` wrote a pickle into the rendezvous key and the root agent ran it): the agent and its
ranks live in a network namespace of their own whose loopback no other process reaches."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

from soak.workloads.launch import LOCAL, Rendezvous, build_command
from tests import listeners, otheruser, procs
from tests.workloads.wl_helpers import FAST

# As another user: connect to each port on 127.0.0.1 and, where that works, write a key into the
# TCPStore there as torch's own client does (the attack wrote the rendezvous state's key)
PROBE = r"""
import json, socket, sys
from datetime import timedelta
out = {}
for port in map(int, sys.argv[1:]):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except OSError as exc:
        out[port] = f"unreachable: {exc.strerror or exc}"
        continue
    from torch.distributed import TCPStore
    try:
        store = TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=10))
        store.set("written-by-another-user", b"x")
        out[port] = "written"
    except Exception as exc:
        out[port] = f"refused: {exc}"
print(json.dumps(out))
"""


def _probe_as_nobody(ports: list[int]) -> dict[int, str]:
    python, env = otheruser.python()
    done = otheruser.run([python, "-c", PROBE, *map(str, ports)], env=env, timeout_s=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return {int(k): v for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


@pytest.mark.slow
def test_another_local_user_cannot_reach_a_single_node_runs_stores(tmp_path: Path) -> None:
    otheruser.require()
    from soak.workloads.torchrun import bound_store

    # the probe works: a store of the test's own on loopback takes nobody's write
    control = bound_store("127.0.0.1", 0, timeout=timedelta(seconds=60))
    argv = build_command("gemm", tmp_path / "run", 1, duration_s=120, extra=FAST)
    agent = procs.start(argv, tmp_path / "procs", "agent",
                        env={**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"})
    try:
        def training() -> list[listeners.Listener]:
            # the rank beats once torchrun's rendezvous and the store it shares with the ranks stand
            if not any(p.stat().st_size for p in (tmp_path / "run").glob("heartbeats/gemm-rank*.jsonl")):
                return []
            return [x for x in listeners.listeners(agent.pid) if x.pid == agent.pid]

        stores = procs.wait_until(training, agent, 180, interval_s=0.5)
        ports = sorted({x.port for x in stores})
        found = _probe_as_nobody([control.port, *ports])
        assert agent.poll() is None, agent.report()
    finally:
        agent.close()
    assert found[control.port] == "written" and control.check(["written-by-another-user"])
    # both of the agent's stores (the rendezvous and the one its ranks share) are on its own
    # loopback, in a network namespace that is not this one
    assert len(ports) >= 2 and all(x.address == "127.0.0.1" for x in stores), stores
    assert all(x.netns != os.readlink("/proc/self/ns/net") for x in stores), stores
    assert all(found[p].startswith("unreachable") for p in ports), found


def test_a_user_other_than_root_gets_a_private_network_through_a_user_namespace() -> None:
    # what a non-root agent does: its own user namespace (same uid and gid), then the network one
    otheruser.require()
    python, env = otheruser.python()
    code = ("import json, os, socket\n"
            "from soak.workloads.torchrun import private_network\n"
            "before = os.readlink('/proc/self/ns/net'); ids = (os.getuid(), os.getgid())\n"
            "why = private_network()\n"
            "s = socket.create_server(('127.0.0.1', 0)); socket.create_connection(s.getsockname()).close()\n"
            "print(json.dumps([why, before != os.readlink('/proc/self/ns/net'), ids == (os.getuid(), os.getgid()),\n"
            "                  os.environ.get('GLOO_SOCKET_IFNAME')]))\n")
    done = otheruser.run([python, "-c", code], env=env, timeout_s=60)
    assert done.returncode == 0, done.stderr[-3000:]
    why, moved, same_ids, gloo = json.loads(done.stdout.strip().splitlines()[-1])
    if why is not None:
        pytest.skip(f"this kernel refuses user namespaces to {otheruser.USER}: {why}")
    assert moved and same_ids and gloo == "lo"


def test_a_non_root_agent_holds_its_rendezvous_and_ranks_in_a_namespace_of_its_own() -> None:
    # the whole of torchrun as nobody: the rendezvous stands in the private namespace and the
    # rank it starts runs there, as the same user
    otheruser.require()
    python, env = otheruser.python()
    assert "--private-network" in LOCAL  # what every single-node run gives
    argv = [python, "-m", "soak.workloads.torchrun", *LOCAL, "--nproc-per-node=1", "--max-restarts=0",
            "--no-python", "/bin/sh", "-c", 'echo "rank: $(readlink /proc/self/ns/net) $(id -u) $GLOO_SOCKET_IFNAME"']
    done = otheruser.run(argv, env=env, timeout_s=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "without a private network" not in done.stdout + done.stderr
    rank = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("rank: ")]
    assert len(rank) == 1 and rank[0][0] != os.readlink("/proc/self/ns/net"), done.stdout
    assert rank[0][1:] == [str(otheruser.uid()), "lo"]


def test_without_a_private_network_the_run_says_so_and_goes_on(monkeypatch, capsys) -> None:
    import torch.distributed.run

    import soak.workloads.torchrun as tr

    given: list[list[str]] = []
    monkeypatch.setattr(tr, "private_network", lambda: "Operation not permitted")
    monkeypatch.setattr(torch.distributed.run, "main", lambda argv: given.append(argv))
    tr.main(["--private-network", "--nnodes=1", "--nproc-per-node=1", "-m", "x"])
    assert given == [["--nnodes=1", "--nproc-per-node=1", "-m", "x"]]  # never passed to torch
    assert capsys.readouterr().err == (
        "soak: the rendezvous runs without a private network (Operation not permitted): its stores on "
        "127.0.0.1 are reachable by every local user of this host, who could run code as this agent\n")


def test_a_cluster_run_keeps_the_hosts_network() -> None:
    # the nodes must reach each other's stores: no private namespace there
    argv = build_command("gemm", "/r", 1, rendezvous=Rendezvous(nnodes=2, endpoint="10.0.0.1:29400",
                                                                rdzv_id="r-g0", is_host=True))
    assert "--private-network" not in argv
    assert "--private-network" in build_command("gemm", "/r", 1)
