"""Helpers of the exporter tests: free loopback ports, bounded HTTP polling, started processes.

The processes a test starts through its ``spawn`` fixture are watched by every ``wait_for`` of
that test: one that ends unasked fails the wait at once, with its stderr."""

from __future__ import annotations

import os
import socket
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests import procs

ROOT = Path(__file__).resolve().parents[2]
_spawned: list[procs.Proc] = []  # the running test's processes, watched by wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout_s: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return resp.read().decode()


def wait_for(fn: Callable[[], object], timeout_s: float, what: str) -> object:
    """Call ``fn`` until it returns something truthy (a failed request counts as not yet); fail
    at once when a process the test spawned has ended unasked."""
    return procs.wait_until(fn, _spawned, timeout_s, what=what, interval_s=0.2,
                            retry_on=(OSError, urllib.error.URLError, ValueError, KeyError))


def scrape_when(url: str, needle: str, timeout_s: float) -> str:
    """The first /metrics text that holds ``needle`` (the server may answer before it does)."""
    def has() -> str:
        text = http_get(url)
        return text if needle in text else ""

    return str(wait_for(has, timeout_s, f"{url} showing {needle}"))


def spawner(folder: Path) -> tuple[Callable[..., procs.Proc], Callable[[], None]]:
    """(spawn, cleanup): spawn starts a process in its own group, output in files in ``folder``;
    cleanup kills whatever of them is left."""
    _spawned.clear()

    def _spawn(argv: list[str], **kw: object) -> procs.Proc:
        p = procs.start(argv, folder, env=dict(os.environ, PYTHONPATH=str(ROOT)), **kw)
        _spawned.append(p)
        return p

    def _cleanup() -> None:
        for p in _spawned:
            p.close()
        _spawned.clear()

    return _spawn, _cleanup


def soak_exporter_argv(port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "soak", "exporter", "--listen", f"127.0.0.1:{port}", *extra]
