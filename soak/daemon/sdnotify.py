"""systemd's notify protocol: one datagram to ``$NOTIFY_SOCKET`` (READY=1, WATCHDOG=1, STATUS=).

Written out rather than linking libsystemd, as systemd's authors recommend; a no-op when the
daemon does not run under a ``Type=notify`` unit.
"""

from __future__ import annotations

import os
import socket


def notify(*fields: str) -> bool:
    """Send ``fields`` (e.g. ``"READY=1"``, ``"STATUS=running"``); True when sent."""
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr.startswith("@"):  # abstract namespace
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(addr)
            sock.sendall("\n".join(fields).encode())
        return True
    except OSError:
        return False


def watchdog_interval_s() -> float | None:
    """Half of ``$WATCHDOG_USEC`` (how often to send WATCHDOG=1), or None when not asked."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        return int(usec) / 2e6
    except ValueError:
        return None
