"""A served fleet (the sim backend's) answers exactly as the simulator started for each call,
through the same runner, and answers by itself once its server is gone."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from soak.errors import ToolError
from soak.telemetry.backends import SimBackend
from soak.telemetry.npu_smi import NpuSmiReader
from soak.telemetry.runner import Runner
from soak.telemetry.sim import CONFIG_NAME, SimConfig, install
from soak.telemetry.sim.serve import SimServer

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not SimServer.available(), reason="abstract sockets are Linux's")

CALLS = (
    ["info"],
    ["info", "-m"],
    ["info", "-t", "usages", "-i", "1", "-c", "0"],
    ["info", "-t", "ecc", "-i", "0"],
    ["info", "-t", "health", "-i", "2", "-c", "0"],
    ["info", "-t", "board", "-i", "9"],  # no such card: the tool's error and status
    ["info", "-t", "bogus"],
    ["frobnicate"],
    [],
)


def _call(script: Path, *argv: str) -> tuple[int, str, str]:
    r = subprocess.run([str(script), *argv], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def _server_name(script: Path) -> str:
    """The name of the server the installed script asks."""
    return script.read_text().split("client.py ")[1].split()[0]


def _call_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "soak-sim-call"]


@pytest.fixture
def served(tmp_path: Path):  # noqa: ANN201
    config = SimConfig.build(chips=3, fixed_elapsed_s=7200.0, scenario="healthy,health_alarm:at_h=1,chips=2")
    backend = SimBackend(sim_config=config, sim_dir=tmp_path / "served")
    yield backend
    backend.close()


def test_a_served_fleet_answers_every_call_as_the_simulator_started_for_it(served: SimBackend,
                                                                        tmp_path: Path) -> None:
    script = served.sim_dir / "npu-smi"
    assert "client.py" in script.read_text()
    plain = install(tmp_path / "plain", served.sim_config)
    for argv in CALLS:
        assert _call(script, *argv) == _call(plain, *argv), argv
    assert _call(script, "info")[1].count(" 910B3 ") == 3
    hccn = (["-i", "1", "-link", "-g"], ["-i", "0", "-net_health", "-g"], ["-i", "7", "-link", "-g"], ["-x"])
    for argv in hccn:
        assert _call(served.sim_dir / "hccn_tool", *argv) == _call(plain.parent / "hccn_tool", *argv), argv


def test_a_fault_switched_on_in_the_config_is_served_at_the_next_call(served: SimBackend) -> None:
    script = served.sim_dir / "npu-smi"
    reader = NpuSmiReader(npu_smi=str(script), runner=Runner(timeout_s=30))
    assert len(reader.info().chips) == 3
    served.sim_config.with_faults("dcmi:ret=-8020").save(served.sim_dir / CONFIG_NAME)
    with pytest.raises(ToolError, match="dcmi module initialize failed. ret is -8020") as err:
        reader.info()
    assert err.value.kind == "error_text"


def test_a_hung_served_call_is_killed_by_the_runner_and_its_server_call_ends(served: SimBackend) -> None:
    served.sim_config.with_faults("hang:seconds=600,on=info").save(served.sim_dir / CONFIG_NAME)
    reader = NpuSmiReader(npu_smi=str(served.sim_dir / "npu-smi"), runner=Runner(timeout_s=0.5))
    started = time.monotonic()
    with pytest.raises(ToolError) as err:
        reader.info()
    assert err.value.kind == "timeout" and time.monotonic() - started < 10
    # the server's call saw its caller go: no thread sleeps out the fault's ten minutes
    deadline = time.monotonic() + 10
    while _call_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _call_threads()
    # the views the fault does not cover still answer
    assert reader.usages(0, 0)


def test_once_the_server_is_gone_the_installed_tools_run_the_simulator_themselves(tmp_path: Path) -> None:
    # the backend lives in a process killed with SIGKILL, as a daemon can be: its fleet's
    # scripts are left in the run folder, and whatever calls them must still get answers
    code = ("import sys; from soak.telemetry.backends import SimBackend; from soak.telemetry.sim import SimConfig; "
            "b = SimBackend(sim_config=SimConfig.build(chips=2, fixed_elapsed_s=60.0), sim_dir=sys.argv[1]); "
            "print('ready', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "fleet")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        line = proc.stdout.readline()
        assert line == "ready\n", proc.stderr.read()
        script = tmp_path / "fleet" / "npu-smi"
        served = _call(script, "info")
        assert served[0] == 0 and served[1].count(" 910B3 ") == 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert "client.py" in script.read_text()
    assert _call(script, "info") == served  # the same answer, from the simulator started for it
    assert _call(tmp_path / "fleet" / "hccn_tool", "-i", "1", "-link", "-g") == (0, "link status: UP\n", "")


def test_a_closed_backend_stops_serving(tmp_path: Path) -> None:
    backend = SimBackend(chips=2, sim_dir=tmp_path / "fleet")
    script = backend.sim_dir / "npu-smi"
    name = _server_name(script)
    assert _call(script, "info")[0] == 0
    backend.close()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s, pytest.raises(ConnectionRefusedError):
        s.connect("\0" + name)


def _ask(name: str, argv: list[str]) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect("\0" + name)
        payload = "\0".join(argv).encode()
        s.sendall(b"%d\n" % len(payload) + payload)
        return b"".join(iter(lambda: s.recv(65536), b""))


def test_the_server_answers_only_for_its_own_fleet(served: SimBackend, tmp_path: Path) -> None:
    # an abstract socket is open to every local process, and the server runs as the daemon's
    # user: a call naming another config (which names a folder to write plog lines into) gets
    # no answer from it, and the installed client then runs the simulator as its caller
    name = _server_name(served.sim_dir / "npu-smi")
    own = str(served.sim_dir / CONFIG_NAME)
    assert _ask(name, ["--config", own, "info"]).startswith(b"0 0\n+---")
    other = install(tmp_path / "other", SimConfig.build(chips=1, fixed_elapsed_s=60.0)).parent / CONFIG_NAME
    assert _ask(name, ["--config", str(other), "info"]) == b""
    client = ROOT / "soak" / "telemetry" / "sim" / "client.py"
    r = subprocess.run([sys.executable, "-S", "-I", str(client), name, "--config", str(other), "info"],
                       capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and r.stdout.count(" 910B3 ") == 1, r.stderr


# What another user of the node runs against the server: the system's Python, as `nobody`.
_NOBODY_FLOOD = r"""
import socket, sys, time
name, n = sys.argv[1], int(sys.argv[2])
socks, closed = [], 0
for i in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0" + name)
    if i % 2:  # half say nothing at all, half begin a 64 GiB request
        try:
            s.sendall(b"%d\n" % (1 << 36) + b"x" * 4096)
        except OSError:
            pass
    socks.append(s)
deadline = time.monotonic() + 10
for s in socks:
    s.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        closed += s.recv(1) == b""
    except ConnectionResetError:
        closed += 1
    except OSError:
        pass
print(closed, flush=True)
"""

_IMPOSTOR = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1])
s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.recv(65536)
    c.sendall(b"0 0\nIMPOSTOR ANSWER\n")
    c.close()
"""


def _runuser() -> list[str]:
    if os.getuid() != 0 or not Path("/usr/sbin/runuser").exists():
        pytest.skip("needs root and runuser to act as another user")
    return ["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-I", "-c"]


def test_another_users_connections_are_closed_unread_and_cost_no_thread(served: SimBackend) -> None:
    name = _server_name(served.sim_dir / "npu-smi")
    threads_before = threading.active_count()
    started = time.monotonic()
    r = subprocess.run([*_runuser(), _NOBODY_FLOOD, name, "200"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # every one of nobody's 200 connections was closed by the server, none left waiting for
    # the rest of its 64 GiB, and the server never grew a thread per connection
    assert int(r.stdout) == 200 and time.monotonic() - started < 10
    assert threading.active_count() <= threads_before + 1
    assert not _call_threads()
    assert _call(served.sim_dir / "npu-smi", "info")[0] == 0  # its own user's calls still answered


def test_a_request_over_64_kib_or_a_silent_caller_is_dropped_and_calls_are_bounded(tmp_path: Path) -> None:
    from soak.telemetry.sim import serve

    config = install(tmp_path / "fleet", SimConfig.build(chips=1, fixed_elapsed_s=60.0)).parent / CONFIG_NAME
    server = SimServer(config, idle_timeout_s=0.5, max_calls=4)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect("\0" + server.name)
            s.settimeout(5)
            s.sendall(b"%d\n" % (serve.MAX_REQUEST_BYTES + 1))
            assert s.recv(1) == b""  # refused by its length, before a byte of the body
        idle = []
        for _ in range(6):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect("\0" + server.name)
            s.settimeout(5)
            idle.append(s)
        time.sleep(0.2)
        assert len(_call_threads()) <= 4  # the fifth and sixth were closed at once
        started = time.monotonic()
        for s in idle:
            assert s.recv(1) == b""
            s.close()
        assert time.monotonic() - started < 3  # the silent ones closed after idle_timeout_s
        assert _ask(server.name, ["--config", str(config), "info"]).startswith(b"0 0\n+---")
    finally:
        server.close()


def test_the_client_asks_no_server_of_another_user(tmp_path: Path) -> None:
    # `nobody` binds the abstract name first; the client (root here) must not print its answer
    config = install(tmp_path / "fleet", SimConfig.build(chips=1, fixed_elapsed_s=60.0)).parent / CONFIG_NAME
    name = "soak-sim-impostor-" + os.urandom(4).hex()
    impostor = subprocess.Popen([*_runuser(), _IMPOSTOR, name], stdout=subprocess.PIPE, text=True)
    try:
        assert impostor.stdout.readline() == "ready\n"
        client = ROOT / "soak" / "telemetry" / "sim" / "client.py"
        r = subprocess.run([sys.executable, "-S", "-I", str(client), name, "--config", str(config), "info"],
                           capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert "IMPOSTOR" not in r.stdout
        assert r.returncode == 0 and r.stdout.count(" 910B3 ") == 1, r.stderr  # the simulator's own answer
    finally:
        impostor.kill()
        impostor.wait(10)
