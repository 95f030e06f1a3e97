"""Start ``soak report serve`` for a test and wait until Streamlit answers its health check."""

from __future__ import annotations

import re
import socket
import sys
import urllib.request
from pathlib import Path
from typing import IO

from tests import procs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data_dir: Path, log_path: Path, timeout_s: float = 60) -> tuple[procs.Proc, int, IO[str]]:
    """(server, port, its log open for reading): the caller stops the server and closes the log
    in a finally. A server that dies before it answers fails at once, with its log."""
    port = free_port()
    server = procs.start(
        [sys.executable, "-m", "soak", "report", "serve", "--data-dir", str(data_dir), "--port", str(port)],
        log_path.parent, "report-serve", out=log_path, merge_output=True,
    )

    def healthy() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
            return r.read() == b"ok"

    try:
        procs.wait_until(healthy, server, timeout_s, what="the server's health check", retry_on=(OSError,),
                         interval_s=0.5)
    except BaseException:
        server.close()
        raise
    return server, port, open(log_path, encoding="utf-8", errors="replace")


def session_url(log_path: Path, port: int) -> str:
    """The address ``soak report serve`` printed to open the app's session: with its token,
    without which the app shows nothing but how to open it."""
    for line in log_path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = re.search(rf"(http://127\.0\.0\.1:{port}/\?token=[\w-]+)", line)
        if m:
            return m.group(1)
    raise AssertionError(f"soak report serve printed no address with a token: {log_path.read_text()!r}")
