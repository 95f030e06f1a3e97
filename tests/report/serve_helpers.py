"""Start ``soak report serve`` for a test and wait until Streamlit answers its health check."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data_dir: Path, log_path: Path, timeout_s: float = 60) -> tuple[subprocess.Popen, int, IO[str]]:
    """(server, port, open log): the caller stops the server and closes the log in a finally."""
    port = free_port()
    log = open(log_path, "w")  # the caller closes it
    server = subprocess.Popen(
        [sys.executable, "-m", "soak", "report", "serve", "--data-dir", str(data_dir), "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.read() == b"ok":
                    return server, port, log
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() >= deadline:
            server.kill()
            log.close()
            raise AssertionError(f"server did not come up in {timeout_s:g} s:\n{log_path.read_text()}")
        time.sleep(0.5)
