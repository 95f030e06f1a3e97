"""`soak report serve`: a missing --data-dir, a busy port or an address not on this host is
one line, exit 2, before Streamlit starts; a SIGTERM takes the server down with it."""

from __future__ import annotations

import os
import signal
import socket
import time

import pytest

from soak.cli import main
from tests.report.serve_helpers import start_server


def test_missing_data_dir(tmp_path, capsys) -> None:
    missing = tmp_path / "no-runs-here"
    rc = main(["report", "serve", "--data-dir", str(missing), "--port", "8511"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith(f"soak: error: --data-dir {missing}: no such folder")
    assert "\n" not in err


def test_busy_port(tmp_path, capsys) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        rc = main(["report", "serve", "--data-dir", str(tmp_path), "--port", str(port)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == f"soak: error: --address 127.0.0.1 --port {port}: cannot listen (Address already in use)"


def test_address_not_on_this_host(tmp_path, capsys) -> None:
    # 192.0.2.1 is TEST-NET-1 (RFC 5737): never assigned to a local interface; bind fails locally.
    rc = main(["report", "serve", "--data-dir", str(tmp_path), "--address", "192.0.2.1", "--port", "8512"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith("soak: error: --address 192.0.2.1 --port 8512: cannot listen (")


# `soak report serve` stopped with SIGTERM (systemd, kill) takes the Streamlit server down
# with it: the port is free again, no orphan keeps serving.


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


def _handshake(port: int, host: str, origin: str | None = None) -> str:
    """The status line the app's WebSocket answers an upgrade with, sent with ``host``."""
    request = (f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
               f"Origin: {origin or 'http://' + host}\r\n\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request.encode())
        return s.recv(4096).decode(errors="replace").split("\r\n", 1)[0]


@pytest.mark.slow
def test_the_app_refuses_a_foreign_host_and_prints_its_signing_token(tmp_path):
    # a page on rebind.example whose name resolves to 127.0.0.1 drove the app (DNS rebinding)
    server, port, log = start_server(tmp_path, tmp_path / "serve.log")
    try:
        assert " 101 " in _handshake(port, f"127.0.0.1:{port}")
        assert " 101 " in _handshake(port, f"localhost:{port}")
        assert " 403 " in _handshake(port, f"rebind.example:{port}")
        # a page elsewhere that dials 127.0.0.1 itself (cross-site WebSocket): its Origin is refused
        assert " 403 " in _handshake(port, f"127.0.0.1:{port}", "http://evil.example")
        printed = log.read()
        assert f"serving on http://127.0.0.1:{port}/" in printed
        token = printed.split("?token=", 1)[1].split()[0]
        assert len(token) >= 40
        assert token not in " ".join(open(f"/proc/{server.pid}/cmdline").read().split("\0"))
    finally:
        server.close()
        log.close()
