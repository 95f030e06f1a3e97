"""Helpers of the daemon tests: plans for the fake workload, an in-thread daemon runner."""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from soak.config import Plan, plan_from_dict
from soak.daemon.lifecycle import Daemon
from soak.runfolder import run_dir
from tests.procs import daemon_log, wait_until

HERE = Path(__file__).parent
FAKE = HERE / "fake_workload.py"


def fake_plan(tmp_path: Path, **sections: dict[str, Any]) -> Plan:
    data: dict[str, Any] = {
        "run": {"duration": "20s", "data_dir": str(tmp_path / "runs"), "id": "r1", "preflight": False},
        "devices": {"backend": "cpu"},
        "workloads": [{"name": "lm"}],
        "sampling": {"interval": "0.5s", "flush_every": "1s"},
        "exporter": {"listen": ""},
        "restart": {"backoff_initial": "0.2s", "backoff_max": "1s", "hang_timeout": "3s", "stop_grace": "2s"},
        "jobs": {"analysis_every": "2s", "min_free": "1MB"},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return plan_from_dict(data)


def fake_argv(*extra: str) -> Callable[..., list[str]]:
    def argv(w: Any, run_dir: Path, attempt: int, wall_left_s: float) -> list[str]:
        return [sys.executable, str(FAKE), "--run-dir", str(run_dir), "--name", w.name,
                "--duration-s", f"{wall_left_s + 5:.1f}", *extra]

    return argv


class ThreadRun:
    """The daemon in a thread of the test process, with its workloads as real processes."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.rc: int | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.rc = self.daemon.run()
        except BaseException as exc:  # surfaced by join()
            self.error = exc

    def start(self) -> ThreadRun:
        self.thread.start()
        return self

    def wait_for(self, cond: Callable[[], object], timeout_s: float = 30.0) -> None:
        """Poll ``cond``; fail at once when the daemon thread ends first (with its error and the
        tail of the run's daemon.log), or after ``timeout_s`` with the same."""
        wait_until(cond, self, timeout_s, logs=[daemon_log(self.run_dir())], interval_s=0.05,
                   retry_on=(AttributeError, IndexError))  # the daemon has not built that part yet

    def run_dir(self) -> Path:
        started = self.daemon.started
        if started is not None:
            return started.run_dir
        return run_dir(self.daemon.plan.run.data_dir, self.daemon.resume_id or self.daemon.plan.run.id or "")

    def ended(self) -> bool:
        return not self.thread.is_alive()

    def report(self) -> str:
        if self.thread.is_alive():
            return "daemon thread running"
        if self.error is None:
            return f"daemon thread ended: run() returned {self.rc}"
        lines = "".join(traceback.format_exception(self.error)).splitlines()
        return "daemon thread ended by an exception:\n" + "\n".join(lines[-30:])

    def join(self, timeout_s: float = 60.0) -> int:
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "daemon did not finish"
        if self.error is not None:
            raise self.error
        assert self.rc is not None
        return self.rc


@pytest.fixture
def run_daemon() -> Callable[..., ThreadRun]:
    started: list[ThreadRun] = []

    def start(plan: Plan, *extra: str) -> ThreadRun:
        tr = ThreadRun(Daemon(plan, argv_factory=fake_argv(*extra), progress_every_s=1.0,
                              out=open("/dev/null", "w"), loop_interval_s=0.05, step_window_s=1.0)).start()
        started.append(tr)
        return tr

    yield start
    for tr in started:  # never leave a daemon or workload behind a failed test
        if tr.thread.is_alive():
            tr.daemon.request_stop("test teardown")
            tr.thread.join(30)


@pytest.fixture
def small_tmpfs(tmp_path) -> Path:
    """An 8 MiB tmpfs mounted for the test (root only), unmounted after it."""
    import os
    import subprocess

    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot mount a tmpfs in CI: {r.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs (needs root): {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)
