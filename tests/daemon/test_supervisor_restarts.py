"""A workload's restarts as its supervisor counts them, with real child processes: its own
crash is a restart counted against ``max_restarts``; a restart of the whole cluster job for
another node's failure (``restart_now``) starts the next attempt at once and is not."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from soak.daemon.supervisor import RUNNING, RestartPolicy, Supervisor

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
CRASHER = [sys.executable, "-c", "raise SystemExit(3)"]


def _supervisor(tmp_path: Path, argv: list[str], events: list[tuple[str, dict]]) -> Supervisor:
    return Supervisor("w", lambda attempt: argv, tmp_path, RestartPolicy(max_restarts=1, backoff_initial_s=0.0,
                                                                          stop_grace_s=1.0),
                      progress=lambda name: None, emit=lambda kind, msg, detail: events.append((kind, detail)))


def _tick_until(sup: Supervisor, cond, timeout_s: float = 20.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, (sup.state, sup.attempt, sup.restarts)
        sup.tick()
        time.sleep(0.02)


def test_a_cluster_job_restart_is_not_counted_against_max_restarts(tmp_path) -> None:
    events: list[tuple[str, dict]] = []
    sup = _supervisor(tmp_path, SLEEPER, events)
    sup.start()
    try:
        for n in (2, 3, 4):  # more often than max_restarts allows: none of them counted
            first = sup.pid
            sup.restart_now("the cluster job restarts")
            _tick_until(sup, lambda n=n: sup.state == RUNNING and sup.attempt == n)
            assert sup.pid != first
        assert sup.restarts == 0
        assert [(k, d["counted"]) for k, d in events if k == "restart"] == [("restart", False)] * 3
    finally:
        sup.stop()


def test_its_own_crash_is_counted_and_the_next_gives_up(tmp_path) -> None:
    events: list[tuple[str, dict]] = []
    sup = _supervisor(tmp_path, CRASHER, events)
    sup.start()
    try:
        _tick_until(sup, lambda: sup.state == "gave_up")
        assert sup.restarts == 1 and sup.attempt == 2
        assert [(k, d["counted"]) for k, d in events if k == "restart"] == [("restart", True)]
    finally:
        sup.stop()


def test_a_job_restart_while_it_waits_on_its_own_crash_leaves_that_restart_counted(tmp_path) -> None:
    events: list[tuple[str, dict]] = []
    sup = Supervisor("w", lambda attempt: CRASHER if attempt == 1 else SLEEPER, tmp_path,
                     RestartPolicy(max_restarts=3, backoff_initial_s=30.0, stop_grace_s=1.0),
                     progress=lambda name: None, emit=lambda kind, msg, detail: events.append((kind, detail)))
    sup.start()
    try:
        _tick_until(sup, lambda: sup.state == "waiting")  # crashed, 30 s backoff
        sup.restart_now("the cluster job restarts")  # starts at once, still its crash's restart
        _tick_until(sup, lambda: sup.state == RUNNING and sup.attempt == 2)
        assert sup.restarts == 1
    finally:
        sup.stop()
