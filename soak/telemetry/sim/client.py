"""The installed ``npu-smi`` of a served fleet: ``python -S -I client.py NAME --config F ARGS``.

A sampler calls its fleet's tools every tick; starting the simulator for each call costs an
interpreter and its imports (about 40 ms of CPU, three times that on a slow host), most of a
soak test's CPU besides training. A fleet served by its backend (``soak.telemetry.sim.serve``)
answers this small client instead: it sends its arguments to the server's socket and prints
the answer as the simulator would, with its exit status. The caller still runs an executable
in a process through the one runner, with its timeout and kill.

Run by path, not as ``-m``: the ``soak`` packages' imports are what this avoids. It imports
``_socket`` alone (``socket`` adds ``enum``, doubling the client's start). When no server
answers (a backend killed with SIGKILL, or no abstract sockets on this system) it runs the
simulator itself, so an installed fleet always answers.
"""

import _socket
import os
import sys


def _fallback(argv: list[str]) -> None:
    os.execv(sys.executable, [sys.executable, "-S", "-m", "soak.telemetry.sim", *argv])


def _write(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data):]


def _server_uid(sock: "_socket.socket") -> int:
    # SO_PEERCRED: struct ucred {pid_t pid; uid_t uid; gid_t gid;}, native ints
    cred = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return int.from_bytes(cred[4:8], sys.byteorder)


def main(name: str, argv: list[str]) -> int:
    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.connect("\0" + name)
        # any local user may bind an abstract name first: only a server of the caller's own
        # user is asked (its answer is what the caller reads as the chips' state)
        if _server_uid(sock) != os.getuid():
            sock.close()
            _fallback(argv)
    except (OSError, AttributeError):  # AttributeError: no AF_UNIX here
        _fallback(argv)
    payload = "\0".join(argv).encode()
    sock.sendall(b"%d\n" % len(payload) + payload)
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
    data = b"".join(chunks)
    head, _, body = data.partition(b"\n")
    try:
        rc, err_len = (int(x) for x in head.split())
    except ValueError:  # no answer: the server refused the call, or went away mid-answer
        _fallback(argv)
    _write(2, memoryview(body)[:err_len])
    _write(1, memoryview(body)[err_len:])
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
