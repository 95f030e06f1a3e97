"""`soak run` agents of one cluster run on this machine, and what the cluster tests read of
them: each agent is a node with its own simulated fleet and data folder, all sharing one
PostgreSQL store and a torchrun c10d rendezvous on loopback.

Every wait here fails the moment an agent it watches has ended, with its output and its
``daemon.log`` (``tests/procs.py``)."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psutil

from soak.clock import ScaledClock
from soak.errors import StoreError
from soak.store import Store
from tests import procs

T = TypeVar("T")
RUN_ID = "c1"


class Agent:
    def __init__(self, tmp: Path, db: str, rank: int, nodes: int, port: int, *extra: str,
                 workload: str = "lm", duration: str = "40s", run_id: str = RUN_ID,
                 wrap: tuple[str, ...] = (), interval: str = "2s") -> None:
        # a reading every 2 s: each costs a call of the simulated npu-smi (a Python start, ~0.1 s
        # of CPU on a slow host), and what these runs prove is counted in readings, not seconds;
        # runs that compare peers' readings bucket by bucket ask for more
        self.name = f"node-{rank}"
        self.dir = tmp / self.name
        self.run_dir = self.dir / run_id
        self.daemon_log = procs.daemon_log(self.run_dir)
        self._start("agent", [*wrap, sys.executable, "-m", "soak", "run", "--duration", duration, "--workload",
                                workload, "--backend", "sim", "--sim-chips", "2", "--nproc", "1", "--no-preflight",
                                "--listen", "", "--interval", interval, "--data-dir", str(self.dir), "--db", db,
                                "--run-id", run_id, "--nodes", str(nodes), "--node-rank", str(rank),
                                "--node-name", self.name, "--rendezvous", f"127.0.0.1:{port}",
                                "--progress-every", "2", *extra])

    def _start(self, log_name: str, argv: list[str]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log = self.dir / f"{log_name}.log"
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        # its own process group: SIGKILLing the group takes the agent and its workers
        self.proc = procs.start(argv, self.dir, self.name, out=self.log, merge_output=True, env=env)

    @classmethod
    def resumed(cls, gone: Agent, db: str, run_id: str = RUN_ID) -> Agent:
        """The node of ``gone`` coming back: ``soak run --resume`` of its run, in its folder."""
        back = cls.__new__(cls)
        back.name, back.dir, back.run_dir, back.daemon_log = gone.name, gone.dir, gone.run_dir, gone.daemon_log
        back._start("agent-back", [sys.executable, "-m", "soak", "run", "--resume", run_id, "--data-dir",
                                          str(gone.dir), "--db", db])
        return back

    def wait(self, timeout_s: float = 180.0) -> int:
        """Its exit status; still running after ``timeout_s``, it is killed and the test fails
        with the end of its output and of its daemon.log."""
        return self.proc.wait_exit(timeout_s, logs=[self.daemon_log])

    def kill(self) -> None:
        self.proc.kill_group()

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def workload(self) -> list[int]:
        """Its torchrun (``daemon.json``) and every process under it, torchrun first."""
        return tree(json.loads((self.run_dir / "daemon.json").read_text())["workload_pgids"][0])

    def readings_taken(self) -> int:
        """The ticks its sampler took (``daemon.log``, written when the agent stops): what the
        store must hold of each of its chips."""
        return int(re.findall(r"sampler: (\d+) ticks read chips", self.daemon_log.read_text(encoding="utf-8"))[-1])


def wait_all(agents: list[Agent], timeout_s: float = 180.0) -> list[int]:
    """Every agent's exit status; none is left running whatever happens."""
    try:
        return [a.wait(timeout_s) for a in agents]
    finally:
        kill_all(agents)


def kill_all(agents: list[Agent]) -> None:
    for a in agents:
        if a.proc.poll() is None:
            a.kill()


def stop_all(agents: list[Agent], timeout_s: float = 180.0) -> list[int]:
    """SIGTERM to each agent's own process (as systemd, Kubernetes and Slurm signal it), then
    every exit status: the run ends stopped, judged by the node holding the lease."""
    for a in agents:
        a.proc.terminate()
    return wait_all(agents, timeout_s)


def wait_for(cond: Callable[[], T], timeout_s: float, what: str, agents: list[Agent]) -> T:
    """Poll ``cond`` until it returns something true, and return that; fail at once when one of
    ``agents`` has ended, with its output and daemon.log. A store without its tables yet (the
    first agent still making them) counts as "not yet"."""
    return procs.wait_until(cond, [a.proc for a in agents], timeout_s, what=what, interval_s=0.5,
                            logs=[a.daemon_log for a in agents], retry_on=(StoreError,))


def world_size(message: str | None) -> int | None:
    """The world size a rank's start event gives (JSON written by soak.workloads.common)."""
    try:
        return json.loads(message or "").get("world_size")
    except (ValueError, AttributeError):
        return None


def ranks_stepping(db_url: str) -> int:
    """How many ranks of the run have stored a step (0 before the first agent made the tables)."""
    try:
        with Store.open(db_url, create=False) as store:
            return len({s["rank"] for s in store.load_steps(RUN_ID)})
    except StoreError:
        return 0


def events(db_url: str, kind: str) -> list:
    """The run's stored events of one kind, in order."""
    with Store.open(db_url, create=False) as store:
        return store.load_events(RUN_ID, kind=kind)


def node_records(db_url: str) -> list:
    with Store.open(db_url, create=False) as store:
        return store.cluster_nodes(RUN_ID) if store.get_run(RUN_ID) else []


def judge_training(db_url: str, count: int) -> str | None:
    """The judging lease's holder of the run once all ``count`` nodes train; None before."""
    try:
        with Store.open(db_url, create=False) as store:
            run = store.get_run(RUN_ID)
            training = [n for n in store.cluster_nodes(RUN_ID) if n.status == "running"] if run else []
    except StoreError:
        return None
    return run.leader if len(training) == count else None


def exit_times(agents: list[Agent], timeout_s: float) -> list[float]:
    """When each agent exited (monotonic); one still running after ``timeout_s`` fails the
    test with its output, and every agent is ended whatever happens."""
    ended: dict[int, float] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while len(ended) < len(agents) and time.monotonic() < deadline:
            for i, a in enumerate(agents):
                if i not in ended and a.proc.poll() is not None:
                    ended[i] = time.monotonic()
            time.sleep(0.1)
        for a in agents:
            a.wait(1)  # fails with its output and daemon.log if it is still there
    finally:
        kill_all(agents)
    return [ended[i] for i in range(len(agents))]


def tree(pid: int) -> list[int]:
    """``pid`` and every process under it (torchrun's ranks run in sessions of their own)."""
    try:
        top = psutil.Process(pid)
        return [pid, *(p.pid for p in top.children(recursive=True))]
    except psutil.NoSuchProcess:
        return []


def step_beats(folder: Path) -> Iterator[dict[str, Any]]:
    """Every step heartbeat this node's ranks wrote (its run folder)."""
    for path in (folder / "heartbeats").glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                beat = json.loads(line)
            except ValueError:  # a line being written
                continue
            if beat.get("event") == "step":
                yield beat


def first_step(folder: Path, after: float, size: int) -> float | None:
    """Wall time of the first step after ``after`` of a rank in a job of ``size`` ranks (this
    node's heartbeat files), or None."""
    return min((b["ts"] for b in step_beats(folder) if b["ts"] > after and b.get("world_size") == size),
               default=None)


def readings_stored(db_url: str, agent: Agent) -> dict[str, int]:
    """For each of the agent's chips, how many distinct readings the store holds."""
    with Store.open(db_url, create=False) as store:
        chips = sorted(d for _, n, d in store.run_series(RUN_ID) if n == agent.name and d.startswith("npu"))
        return {d: len({r["ts"] for r in store.load_samples(RUN_ID, d, node=agent.name)}) for d in chips}


def run_clock(db_url: str) -> ScaledClock:
    """The run's time line, which its events, samples and step rows are stamped on (an hour a
    wall second at ``--time-scale 3600``); heartbeats and what a test times are wall."""
    with Store.open(db_url, create=False) as store:
        rec = store.get_run(RUN_ID)
    return ScaledClock.of_run(rec)
