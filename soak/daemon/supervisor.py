"""Supervising one workload's torchrun: start, detect exit/crash/hang, kill, restart.

Each attempt runs in its own process group (``start_new_session``) so a kill reaches
torchrun and every rank it spawned. With ``die_with_agent`` (every workload the daemon
starts) torchrun is also tied to the agent's life: the agent SIGKILLed, Linux SIGKILLs
torchrun, and its ranks follow (``soak.workloads.common.die_with_parent``), so a workload
never trains unsupervised, and a cluster node whose agent is gone leaves the job at once
instead of hosting the rendezvous as an orphan. Linux sends that signal when the *thread*
that forked the child ends: the daemon starts workloads only from ``tick()``, on the thread
that runs its loop, which lives as long as the daemon. Restarts wait an exponential backoff
and the workload resumes from its last checkpoint by itself; after ``max_restarts`` the
supervisor gives up. The supervisor never blocks: ``tick()`` is called from the daemon's loop.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("soak.daemon")


@dataclass(frozen=True)
class RestartPolicy:
    max_restarts: int = 5
    backoff_initial_s: float = 5.0
    backoff_max_s: float = 300.0
    hang_timeout_s: float = 600.0
    stop_grace_s: float = 15.0

    def backoff_s(self, restarts_so_far: int) -> float:
        return min(self.backoff_initial_s * (2 ** restarts_so_far), self.backoff_max_s)


# states
RUNNING, WAITING, DONE, GAVE_UP, STOPPED = "running", "waiting", "done", "gave_up", "stopped"


def _pdeathsig_kill() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGKILL the child when its parent dies; None where
    that cannot be asked (not Linux, no ``prctl``). Resolved here, before any fork: the child
    only makes the one system call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1
    agent = os.getpid()

    def tie() -> None:
        prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != agent:  # the agent died between the fork and prctl: nobody would ask
            os.kill(os.getpid(), signal.SIGKILL)

    return tie


def kill_group(pid: int, sig: int) -> bool:
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


class Supervisor:
    """One workload. ``argv_for(attempt)`` builds the command of each attempt.

    ``progress(name)`` returns the wall time of the workload's last step progress (from the
    heartbeat follower), or None before the first one. ``emit(kind, message, detail)``
    records an event.
    """

    def __init__(
        self,
        name: str,
        argv_for: Callable[[int], list[str]],
        log_dir: Path,
        policy: RestartPolicy,
        progress: Callable[[str], float | None],
        emit: Callable[[str, str, dict[str, Any]], None],
        env: dict[str, str] | None = None,
        restarts: int = 0,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        die_with_agent: bool = False,
    ) -> None:
        self.name = name
        self.argv_for = argv_for
        self.log_dir = log_dir
        self.policy = policy
        self.progress = progress
        self.emit = emit
        self.env = env
        self.restarts = restarts  # carried over on resume
        self._uncounted = False  # the next start is restart_now's: not this workload's restart
        self.attempt = 0
        self.state = WAITING
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_wall: float | None = None
        self.next_start = 0.0
        self.last_exit: int | None = None
        self._mono = monotonic
        self._wall = wall
        # started from the daemon's loop thread (tick): the parent death Linux watches is the
        # agent's own, not a short-lived helper thread's
        self._preexec = _pdeathsig_kill() if die_with_agent else None

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def _start(self) -> None:
        self.attempt += 1
        argv = self.argv_for(self.attempt)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        logfile = self.log_dir / f"{self.name}-{self.attempt}.log"
        with open(logfile, "ab") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env=self.env, close_fds=True, preexec_fn=self._preexec,
            )
        self.started_wall = self._wall()
        self.state = RUNNING
        log.info("%s: attempt %d started, pid %d: %s", self.name, self.attempt, self.proc.pid, " ".join(argv))

    def start(self) -> None:
        self._start()

    def _schedule_restart(self, why: str, detail: dict[str, Any]) -> None:
        if self.restarts >= self.policy.max_restarts:
            self.state = GAVE_UP
            self.emit("stop", f"{self.name}: gave up after {self.restarts} restarts ({why})",
                      {**detail, "restarts": self.restarts, "gave_up": True})
            log.error("%s: gave up after %d restarts", self.name, self.restarts)
            return
        delay = self.policy.backoff_s(self.restarts)
        self.next_start = self._mono() + delay
        self.state = WAITING
        log.warning("%s: %s; restart in %.1f s", self.name, why, delay)

    def tick(self) -> str:
        """Advance the state machine; returns the state."""
        if self.state == RUNNING and self.proc is not None:
            rc = self.proc.poll()
            if rc is None:
                last = self.progress(self.name)
                ref = max(x for x in (last, self.started_wall) if x is not None)
                stalled = self._wall() - ref
                if stalled > self.policy.hang_timeout_s:
                    self._kill()
                    detail = {"attempt": self.attempt, "stalled_s": round(stalled, 1), "pid": self.proc.pid}
                    self.emit("hang", f"{self.name}: no step progress for {stalled:.1f} s, killed", detail)
                    self._schedule_restart("hung", detail)
            elif rc == 0:
                self.last_exit = 0
                self.state = DONE
                self.emit("exit", f"{self.name}: finished (exit 0)", {"attempt": self.attempt, "exit_code": 0})
            else:
                self.last_exit = rc
                # the ranks may outlive torchrun: clear the whole group
                kill_group(self.proc.pid, signal.SIGKILL)
                how = f"signal {-rc}" if rc < 0 else f"exit {rc}"
                detail = {"attempt": self.attempt, "exit_code": rc}
                self.emit("crash", f"{self.name}: crashed ({how})", detail)
                self._schedule_restart(f"crashed ({how})", detail)
        elif self.state == WAITING and self._mono() >= self.next_start:
            first, counted = self.attempt == 0, not self._uncounted
            self._uncounted = False
            self._start()
            if not first:
                if counted:
                    # counted once the new process exists: a reader on another thread that sees
                    # restart n also sees attempt n+1's pid, never the reaped one before it
                    self.restarts += 1
                what = f"restart {self.restarts}" if counted else "restarted with the cluster job, not counted"
                self.emit("restart", f"{self.name}: {what} (attempt {self.attempt})",
                          {"attempt": self.attempt, "restarts": self.restarts, "pid": self.pid, "counted": counted})
        return self.state

    def _kill(self) -> None:
        """SIGTERM the group, wait the grace time, then SIGKILL."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            kill_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=self.policy.stop_grace_s)
            except subprocess.TimeoutExpired:
                pass
        kill_group(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
            log.error("%s: pid %d survived SIGKILL", self.name, self.proc.pid)

    def restart_now(self, why: str) -> None:
        """End the running attempt and start the next one at once, not counted as this
        workload's restart (a cluster job restarting for another node's failure)."""
        running = self.state == RUNNING
        if running:
            self._kill()
        if self.state in (RUNNING, WAITING):
            log.warning("%s: %s; starting attempt %d", self.name, why, self.attempt + 1)
            self.next_start = self._mono()
            self.state = WAITING
            # waiting on its own failure's backoff, that restart stays counted
            self._uncounted = self._uncounted or running

    def stop(self) -> None:
        if self.state == RUNNING:
            self._kill()
        if self.state not in (DONE, GAVE_UP):
            self.state = STOPPED
