"""One daemon per run folder: an ``fcntl`` lock on ``<run folder>/daemon.lock``.

The kernel drops the lock when the holder dies (even by SIGKILL), so a stale lock file never
blocks ``soak run --resume``; a live holder makes a second daemon fail with one line.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from soak.errors import StoreError


class RunLock:
    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "daemon.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"run folder {self.path.parent}: cannot create lock file: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise StoreError(
                f"run {self.path.parent.name} is in use by another soak daemon (pid {holder}); "
                "stop it first"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
