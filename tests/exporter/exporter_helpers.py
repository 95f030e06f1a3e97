"""Helpers of the exporter tests: free loopback ports, bounded HTTP polling, process cleanup."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout_s: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return resp.read().decode()


def wait_for(fn: Callable[[], object], timeout_s: float, what: str) -> object:
    """Call ``fn`` until it returns something truthy (exceptions count as not yet)."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except (OSError, urllib.error.URLError, ValueError, KeyError) as exc:
            last = exc
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout_s} s (last: {last!r})")


def scrape_when(url: str, needle: str, timeout_s: float) -> str:
    """The first /metrics text that holds ``needle`` (the server may answer before it does)."""
    def has() -> str:
        text = http_get(url)
        return text if needle in text else ""

    return str(wait_for(has, timeout_s, f"{url} showing {needle}"))


def spawner() -> tuple[Callable[..., subprocess.Popen[str]], Callable[[], None]]:
    procs: list[subprocess.Popen[str]] = []

    def _spawn(argv: list[str], **kw: object) -> subprocess.Popen[str]:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True, **kw)  # type: ignore[call-overload]
        procs.append(p)
        return p

    def _cleanup() -> None:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)

    return _spawn, _cleanup


def soak_exporter_argv(port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "soak", "exporter", "--listen", f"127.0.0.1:{port}", *extra]
