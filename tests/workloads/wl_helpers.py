"""Helpers for workload tests: start ranks under torchrun, read heartbeats, kill a group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soak.workloads.launch import build_command
from tests import procs

FAST = ["--heartbeat-interval-s", "0.05", "--comm-timeout-s", "20"]


def read_heartbeats(run_dir: Path, workload: str, rank: int = 0) -> list[dict[str, Any]]:
    path = run_dir / "heartbeats" / f"{workload}-rank{rank}.jsonl"
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    # the last line may be half-written while the rank runs
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


class Launcher:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.procs: list[procs.Proc] = []

    def command(self, workload: str, *, steps: int | None = None, duration_s: float | None = None,
                inject: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> list[str]:
        return build_command(workload, self.run_dir, 2, "tiny", steps=steps, duration_s=duration_s,
                             inject=inject, extra=[*FAST, *extra])

    def start(self, workload: str, **kw: Any) -> procs.Proc:
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        n = len(self.procs)
        proc = procs.start(["nice", *self.command(workload, **kw)], self.run_dir, f"torchrun-{n}",
                           out=self.run_dir / f"torchrun-{n}.log", merge_output=True, env=env)
        self.procs.append(proc)
        return proc

    def run(self, workload: str, timeout: float = 60, **kw: Any) -> int:
        """Its exit status; past ``timeout`` torchrun and its ranks are killed and the test fails
        with the end of its log."""
        return self.start(workload, **kw).wait_exit(timeout)

    def wait_for(self, cond: Callable[[], object], timeout: float = 60) -> None:
        """Poll ``cond``; fail at once when a started torchrun ends that the test did not end."""
        procs.wait_until(cond, self.procs, timeout, interval_s=0.05)

    @staticmethod
    def kill(proc: procs.Proc) -> None:
        proc.kill_group(timeout_s=30)  # torchrun and every rank: a node losing power

    def log(self, i: int = -1) -> str:
        n = len(self.procs) + i if i < 0 else i
        return (self.run_dir / f"torchrun-{n}.log").read_text(errors="replace")

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                self.kill(p)


def run_module(args: list[str], env: dict[str, str] | None = None, timeout: float = 60):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
