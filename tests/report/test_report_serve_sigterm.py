"""`soak report serve` stopped with SIGTERM (systemd, kill) takes the Streamlit server down
with it: the port is free again, no orphan keeps serving."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
def test_sigterm_stops_the_server(tmp_path):
    port = _free_port()
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 - closed in finally
    server = subprocess.Popen(
        [sys.executable, "-m", "soak", "report", "serve", "--data-dir", str(tmp_path), "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    if r.read() == b"ok":
                        break
            except OSError:
                pass
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "server did not come up in 60 s"
            time.sleep(0.5)
        server.send_signal(signal.SIGTERM)  # only the process we started, not its group
        server.wait(timeout=30)
        deadline = time.monotonic() + 10
        while _port_open(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _port_open(port), "something still serves the port after SIGTERM"
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        else:
            try:
                os.killpg(server.pid, signal.SIGKILL)  # an orphan left in the session, if any
            except ProcessLookupError:
                pass
        log.close()
