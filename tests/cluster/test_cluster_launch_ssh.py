"""``soak cluster launch`` against a real sshd on loopback (see conftest.py).

The agents are a fake ``soak`` (a shell script given as ``--remote-soak``) that prints its
arguments and the copied plan, then progress lines; files in a state folder tell each node
how many steps to make, which exit status to end with, and whether to ignore SIGTERM. One
test runs the real ``soak run --help`` remotely.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from soak.cli import main
from tests import procs

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

PLAN = """\
[run]
duration = "1h"
db = "postgresql+psycopg://soak@db.example:5432/soak"

[[workloads]]
name = "lm"
"""

FAKE_AGENT = r"""#!/bin/sh
# A stand-in for `soak run PLAN --nodes N --node-rank R --node-name NAME ...`.
state=@STATE@
echo "args: $*"
name=
prev=
for a in "$@"; do [ "$prev" = "--node-name" ] && name=$a; prev=$a; done
echo "plan: $(head -n 1 "$2") from $2"
steps=$(cat "$state/$name.steps" 2>/dev/null || echo 3)
code=$(cat "$state/$name.exit" 2>/dev/null || echo 0)
if [ -e "$state/$name.ignore_term" ]; then trap '' TERM; else
  trap 'echo "got SIGTERM, stopping"; exit 0' TERM; fi
# the pid file says it is ready for a signal: written once its trap is set
echo $$ > "$state/$name.pid"
i=0
while [ "$i" -lt "$steps" ]; do echo "step $i"; i=$((i + 1)); sleep 0.2; done
exit "$code"
"""


@pytest.fixture
def cluster(tmp_path, sshd):
    """A hostfile of two nodes on the test sshd, a plan, a fake agent and its state folder."""
    state = tmp_path / "state"
    state.mkdir()
    agent = tmp_path / "fake-soak"
    agent.write_text(FAKE_AGENT.replace("@STATE@", str(state)))
    agent.chmod(0o755)
    hosts = tmp_path / "hosts"
    hosts.write_text(f"# two nodes, one sshd\n{sshd.user}@127.0.0.1:{sshd.port} name=n0\n"
                     f"\n127.0.0.1:{sshd.port} name=n1  # user from ssh\n")
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    args = ["cluster", "launch", "--hostfile", str(hosts), "--remote-soak", str(agent),
            "--run-id", "acc-01", *sshd.launch_args(), str(plan)]
    return {"state": state, "args": args, "hosts": hosts, "plan": plan, "agent": agent}


def _gone(pids: list[int], limit_s: float) -> None:
    procs.wait_until(lambda: not any(procs.alive(p) for p in pids), (), limit_s, what=f"the remote agents {pids} to be gone")


def test_agents_get_rank_name_and_copied_plan_and_worst_status_is_returned(cluster, capsys):
    (cluster["state"] / "n1.exit").write_text("3")
    assert main(cluster["args"]) == 3
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    by_node = {n: [ln for ln in lines if ln.startswith(f"[{n}] ")] for n in ("n0", "n1")}
    assert len(lines) == len(by_node["n0"]) + len(by_node["n1"])  # every line prefixed
    for rank, node in enumerate(("n0", "n1")):
        args = by_node[node][0]
        m = re.fullmatch(rf"\[{node}\] args: run (/\S+/soak-cluster\.\w+/plan\.toml) --nodes 2 "
                         rf"--node-rank {rank} --node-name {node} --rendezvous "
                         r"127\.0\.0\.1:29400 --run-id acc-01", args)
        assert m, args
        assert by_node[node][1] == f"[{node}] plan: [run] from {m.group(1)}"
        assert by_node[node][2:] == [f"[{node}] step {i}" for i in range(3)]
        # the wrapper removed the plan's private folder when the agent ended
        assert not Path(m.group(1)).parent.exists()
    assert "soak cluster: n1 ended with status 3" in captured.err
    assert "soak cluster: exit status 3 (non-zero: n1 3)" in captured.err


def test_extra_arguments_and_rendezvous_reach_every_agent(cluster, capsys):
    (cluster["state"] / "n0.steps").write_text("0")
    (cluster["state"] / "n1.steps").write_text("0")
    args = [*cluster["args"][:-1], "--rendezvous", "10.0.0.1:29500", str(cluster["plan"]),
            "--", "--duration", "2h"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\[n1\] args: run \S+ --nodes 2 --node-rank 1 --node-name n1 "
                     r"--rendezvous 10\.0\.0\.1:29500 --run-id acc-01 --duration 2h$", out, re.M)


def _launch_in_background(cluster, *extra: str) -> procs.Proc:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    args = [*cluster["args"][:-1], *extra] if extra else cluster["args"]
    return procs.start([sys.executable, "-m", "soak", *args], cluster["state"].parent, "launcher", env=env)


def _pids_when_running(cluster, launcher: procs.Proc) -> list[int]:
    state = cluster["state"]
    procs.wait_until(lambda: all((state / f"{n}.pid").exists() for n in ("n0", "n1")), launcher, 30,
                     what="both agents to start")
    pids = [int((state / f"{n}.pid").read_text()) for n in ("n0", "n1")]
    assert all(procs.alive(p) for p in pids)
    return pids


def test_ctrl_c_stops_every_remote_agent(cluster):
    for n in ("n0", "n1"):
        (cluster["state"] / f"{n}.steps").write_text("100000")
    proc = _launch_in_background(cluster)
    try:
        pids = _pids_when_running(cluster, proc)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.close()
    assert proc.returncode == 0, err  # the fake stops cleanly on SIGTERM, as the daemon does
    assert "stopping every agent (SIGINT)" in err
    # the agents' own last words come back, prefixed: they were stopped, not cut off
    assert "[n0] got SIGTERM, stopping" in out.splitlines()
    assert "[n1] got SIGTERM, stopping" in out.splitlines()
    _gone(pids, 10)


def test_agent_ignoring_sigterm_is_killed_after_the_grace(cluster):
    for n in ("n0", "n1"):
        (cluster["state"] / f"{n}.steps").write_text("100000")
    (cluster["state"] / "n1.ignore_term").write_text("")
    proc = _launch_in_background(cluster, "--stop-grace", "2", str(cluster["plan"]))
    try:
        pids = _pids_when_running(cluster, proc)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.close()
    assert "[n0] got SIGTERM, stopping" in out.splitlines()
    assert not any(line.startswith("[n1] got SIGTERM") for line in out.splitlines())
    assert proc.returncode == 128 + signal.SIGKILL, err  # n1's agent died of SIGKILL
    _gone(pids, 10)


def test_killed_launcher_still_stops_the_remote_agents(cluster):
    """SIGKILL leaves no chance to clean up: the hang-up alone must stop the agents."""
    for n in ("n0", "n1"):
        (cluster["state"] / f"{n}.steps").write_text("100000")
    proc = _launch_in_background(cluster)
    try:
        pids = _pids_when_running(cluster, proc)
        proc.kill()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.close()
    _gone(pids, 20)


def test_unreachable_host_starts_no_agent(cluster, sshd, capsys):
    closed = sshd.port + 1 if sshd.port < 65535 else sshd.port - 1
    cluster["hosts"].write_text(f"127.0.0.1:{sshd.port} name=n0\n127.0.0.1:{closed} name=n1\n")
    assert main(cluster["args"]) == 255
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("soak: error: copying the plan to n1 (127.0.0.1) failed: ssh: "
                             f"connect to host 127.0.0.1 port {closed}: Connection refused")
    assert err[0].endswith("; no agent was started")
    assert not (cluster["state"] / "n0.pid").exists()


def test_real_soak_run_help_runs_remotely(cluster, tmp_path, capsys):
    """The real command line of this checkout, through ssh: `soak run PLAN ... --help`."""
    soak = tmp_path / "soak"
    soak.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m soak \"$@\"\n")
    soak.chmod(0o755)
    args = [a if a != str(cluster["agent"]) else str(soak) for a in cluster["args"]]
    assert main([*args, "--", "--help"]) == 0
    out = capsys.readouterr().out.splitlines()
    for node in ("n0", "n1"):
        assert f"[{node}] usage: soak run [-h] [--resume RUN_ID] [--duration DURATION]" in out
        assert any(line.startswith(f"[{node}] Run a soak test from PLAN.toml") for line in out)
