"""`soak report serve` stopped with SIGTERM (systemd, kill) takes the Streamlit server down
with it: the port is free again, no orphan keeps serving."""

from __future__ import annotations

import os
import signal
import socket
import time

import pytest

from tests.report.serve_helpers import start_server


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
def test_sigterm_stops_the_server(tmp_path):
    server, port, log = start_server(tmp_path, tmp_path / "serve.log")
    try:
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
