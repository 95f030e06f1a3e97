"""``soak.workloads.torchrun``: torchrun whose c10d stores listen on the address given, in a
job across two agents as a cluster run starts it (was: every interface)."""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
from datetime import UTC
from pathlib import Path

import pytest

from soak.workloads.launch import Rendezvous, build_command
from tests import listeners, procs
from tests.workloads.wl_helpers import FAST


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_two_agents_train_with_their_stores_on_the_given_address(tmp_path: Path) -> None:
    endpoint = f"127.0.0.1:{_free_port()}"
    agents = []
    for node, is_host in (("n0", True), ("n1", False)):
        argv = build_command("gemm", tmp_path / node, 1, duration_s=60, extra=FAST, rendezvous=Rendezvous(
            nnodes=2, endpoint=endpoint, rdzv_id="t-g0", is_host=is_host, join_timeout_s=60,
            local_addr="127.0.0.1"))
        agents.append(procs.start(argv, tmp_path / "procs", node, env={**os.environ, "PYTHONUNBUFFERED": "1"}))
    try:
        def both_training() -> list[listeners.Listener]:
            # each node's folder holds its own rank's heartbeats (rank 0 or 1, as the rendezvous ranked it)
            beats = [p for p in tmp_path.glob("n*/heartbeats/gemm-rank*.jsonl") if p.stat().st_size]
            if len(beats) < 2:
                return []
            return [x for a in agents for x in listeners.listeners(a.pid)]

        found = procs.wait_until(both_training, agents, 120, interval_s=0.3)
    finally:
        for a in agents:
            a.close()
    wildcard = [x for x in found if x.wildcard]
    assert not wildcard, "\n".join(f"{x.address}:{x.port} pid {x.pid} {x.cmdline[:120]}" for x in wildcard)
    # the host agent's rendezvous store is the endpoint given
    host, port = endpoint.rsplit(":", 1)
    assert any(x.address == host and x.port == int(port) and x.pid == agents[0].pid for x in found)


def test_soak_c10d_without_is_host_is_refused(tmp_path: Path) -> None:
    # torch's guess from the host name could host the store where the other nodes cannot reach
    res = subprocess.run([sys.executable, "-m", "soak.workloads.torchrun", "--nnodes=1",
                          "--rdzv-backend=soak-c10d", "--rdzv-endpoint=127.0.0.1:0", "--nproc-per-node=1",
                          "-m", "soak.workloads.gemm", "--run-dir", str(tmp_path), "--steps", "1"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0
    assert "soak-c10d needs is_host in --rdzv-conf" in res.stderr
    assert not (tmp_path / "heartbeats").exists()


def test_listening_socket_binds_the_address_given_not_all() -> None:
    from soak.workloads.torchrun import listening_socket

    with listening_socket("127.0.0.1", 0) as s:
        assert s.getsockname()[0] == "127.0.0.1"
    with listening_socket("localhost", 0) as s:
        assert s.getsockname()[0] in ("127.0.0.1", "::1")


def test_a_name_that_resolves_to_loopback_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # Debian's /etc/hosts: "127.0.1.1 node0"; the other nodes would dial node0's real address
    import soak.workloads.torchrun as tr

    real = socket.getaddrinfo
    monkeypatch.setattr(tr.socket, "getaddrinfo", lambda host, *a, **k: real("127.0.1.1", *a, **k)
                        if host == "node0" else real(host, *a, **k))
    with pytest.raises(OSError, match="node0 resolves to 127.0.1.1 on this host"):
        tr.listening_socket("node0", 0)


class _Payload:
    """A pickle that runs a shell command when loaded (what the issue's attacker wrote)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (self.command,)


@pytest.mark.slow
def test_a_pickle_written_into_a_cluster_rendezvous_store_is_refused_not_run(tmp_path: Path) -> None:
    # A cluster run's stores are on the network, where no namespace hides them: a host that
    # reaches the port (the id is <run>-g<N>) wrote a pickle into the state and the agent ran it
    import base64

    port = _free_port()
    marker = tmp_path / "ran"
    argv = build_command("gemm", tmp_path / "n0", 1, duration_s=60, extra=FAST, rendezvous=Rendezvous(
        nnodes=2, endpoint=f"127.0.0.1:{port}", rdzv_id="t-g0", is_host=True, join_timeout_s=60,
        local_addr="127.0.0.1"))
    agent = procs.start(argv, tmp_path / "procs", "n0", env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        key = "torch.rendezvous.t-g0"
        store = procs.wait_until(lambda: _client(port), agent, 120, interval_s=0.5)
        procs.wait_until(lambda: store.check([key]), agent, 60, interval_s=0.2)  # the agent is waiting for n1
        store.set(key, base64.b64encode(pickle.dumps(_Payload(f"touch {marker}"))))
        agent.wait(timeout=90)
    finally:
        agent.close()
    assert not marker.exists()
    out = agent.stdout_text() + agent.stderr_text()
    assert "soak: refused the rendezvous state in the store (posix.system)" in out, out[-3000:]


def _client(port: int):
    from datetime import timedelta

    from torch.distributed import TCPStore

    try:
        return TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=2))
    except Exception:
        return None


def test_the_rendezvous_state_check_takes_torchs_state_and_nothing_else() -> None:
    from datetime import datetime

    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _NodeDesc, _RendezvousState

    from soak.workloads.torchrun import check_state

    state = _RendezvousState()
    node = _NodeDesc("10.0.0.1", 42, 0)
    state.participants[node] = 0
    state.wait_list.add(node)
    state.last_heartbeats[node] = datetime.now(UTC)
    state.deadline = datetime.now()
    check_state(pickle.dumps(state))
    for bad in (_Payload("true"), {"x": __import__("collections").OrderedDict()}):
        with pytest.raises(pickle.UnpicklingError):
            check_state(pickle.dumps(bad))
