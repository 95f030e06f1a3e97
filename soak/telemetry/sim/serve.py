"""A resident server of the simulated tools' calls.

``SimServer`` answers the simulator's calls (``call.answer``) from a process that has already
imported it: the fleet's scripts then start ``client.py`` (an interpreter and ``_socket``, a
quarter of the CPU of a full start), which sends its arguments here. It listens on a Linux
abstract socket (no file to leave behind when its process is killed, no path length limit) with
a random name; the fleet's scripts fall back to the full simulator when nothing answers on it.
"""

from __future__ import annotations

import os
import secrets
import socket
import struct
import sys
import threading
import traceback
from collections.abc import Callable

from soak.telemetry.sim.call import answer

# A request is the simulator's argv: a config path and a few words. Anything longer is no call.
MAX_REQUEST_BYTES = 64 << 10
# A client sends its request as soon as it connects; one silent this long is dropped.
IDLE_TIMEOUT_S = 5.0
# Calls answered at once: a tick and its detail pass make a handful; beyond this a connection is
# closed unanswered (the installed client then runs the simulator itself).
MAX_CALLS = 32


def _read_request(conn: socket.socket) -> list[str] | None:
    data = b""
    while b"\n" not in data:
        if len(data) > 16:  # the length is at most 5 digits
            return None
        chunk = conn.recv(4096)
        if not chunk:
            return None
        data += chunk
    head, _, payload = data.partition(b"\n")
    if not head.isdigit() or int(head) > MAX_REQUEST_BYTES:
        return None
    size = int(head)
    while len(payload) < size:
        chunk = conn.recv(size - len(payload))
        if not chunk:
            return None
        payload += chunk
    return payload.decode().split("\0") if size else []


def peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end of the Unix socket ``conn`` (``SO_PEERCRED``)."""
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                          struct.calcsize("3i")))
    return int(uid)


def _caller_waits(conn: socket.socket) -> Callable[[float], bool]:
    def wait(seconds: float) -> bool:
        # The client sends nothing after its request: readable means it closed (the
        # caller's timeout killed it), and a hang fault's hour ends with it.
        conn.settimeout(seconds)
        try:
            return conn.recv(1) != b""
        except TimeoutError:
            return True
        except OSError:
            return False
        finally:
            conn.settimeout(None)
    return wait


class SimServer:
    """Answers ``client.py`` calls on the abstract socket ``name`` from daemon threads, one per
    call (the sampler's tick and its detail pass call at once). ``close`` stops listening.

    Any local process in this network namespace can connect to an abstract socket, and the
    server runs as the daemon's user (root on an Ascend node): it answers only callers of its
    own user (another user's connection is closed before anything of it is read), and only for
    its own fleet's ``config`` (a config names a folder the simulator writes plog lines into).
    A request is at most ``MAX_REQUEST_BYTES``, a silent caller is dropped after
    ``idle_timeout_s``, and at most ``max_calls`` are answered at once."""

    def __init__(self, config: str | os.PathLike[str], *, idle_timeout_s: float = IDLE_TIMEOUT_S,
                 max_calls: int = MAX_CALLS) -> None:
        self.config = os.fspath(config)
        self.idle_timeout_s = idle_timeout_s
        self._calls = threading.BoundedSemaphore(max_calls)
        self.name = f"soak-sim-{secrets.token_hex(8)}"
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind("\0" + self.name)
        self._sock.listen(64)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="soak-sim-server", daemon=True)
        self._thread.start()

    @staticmethod
    def available() -> bool:
        """Abstract sockets are Linux's; elsewhere the fleet runs the full simulator."""
        return sys.platform.startswith("linux")

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            try:
                # another user's connection is closed before a byte of it is read
                if peer_uid(conn) != os.getuid() or not self._calls.acquire(blocking=False):
                    conn.close()  # answered by nothing: the client runs the simulator itself
                    continue
            except OSError:
                conn.close()
                continue
            try:
                threading.Thread(target=self._call, args=(conn,), name="soak-sim-call", daemon=True).start()
            except RuntimeError:  # no thread to be had
                self._calls.release()
                conn.close()

    def _call(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(self.idle_timeout_s)
                argv = _read_request(conn)
                if argv is None or argv[:2] != ["--config", self.config]:
                    return  # answered by nothing: the client runs the simulator itself
                try:
                    out, err, rc = answer(argv, wait=_caller_waits(conn))
                except Exception:  # what the simulator would print before dying
                    out, err, rc = "", traceback.format_exc(), 1
                err_bytes = err.encode()
                conn.settimeout(self.idle_timeout_s)  # a caller that does not read its answer
                conn.sendall(b"%d %d\n" % (rc, len(err_bytes)) + err_bytes + out.encode())
            except (OSError, ValueError):
                pass  # the caller went away (its timeout), or sent no request
            finally:
                self._calls.release()

    def close(self) -> None:
        self._closed.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(5)
