"""A TCP relay a test puts between a client and PostgreSQL, to stop and start: the shared
server is never restarted, and the client sees what a restart shows it (its connections
dropped, new ones refused until the relay is back)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time

from tests.conftest import skip_unless_ci


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Relay:
    """socat on ``127.0.0.1:port`` forwarding to ``host:target_port``. ``stop`` ends it and
    every connection it carries (socat forks one child per connection: its whole process
    group goes); ``start`` listens again on the same port."""

    def __init__(self, host: str, target_port: int) -> None:
        if shutil.which("socat") is None:
            skip_unless_ci("socat is not installed")
        self.host, self.target_port = host, target_port
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 10.0) -> None:
        self.proc = subprocess.Popen(["socat", f"TCP-LISTEN:{self.port},bind=127.0.0.1,reuseaddr,fork",
                                      f"TCP:{self.host}:{self.target_port}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while True:  # listening before the caller's first connect
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"socat did not listen on port {self.port}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self.proc = None

    def url(self, url: str) -> str:
        """``url`` (a PostgreSQL URL) going through this relay."""
        from sqlalchemy.engine import make_url

        return make_url(url).set(host="127.0.0.1", port=self.port).render_as_string(hide_password=False)
