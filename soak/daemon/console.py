"""What the daemon says at the terminal, and its log's copy of it.

A soak runs for days; its terminal may not. ``soak run plan.toml | head -5``, a ``tee`` that
died, a ``less`` that was quit, an ssh session that hung up, ``2>&-``: none of them may end the
run. ``Console`` is the one stream every part of the daemon writes to: each whole line goes to
the run's ``daemon.log`` (logger ``soak.console``), then to the terminal while it is there. The
first write the terminal refuses (EPIPE, EIO, a closed file) ends the terminal's part for the
rest of the run; the log goes on, and says once that it did.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import TextIO

log = logging.getLogger("soak.console")


class Console:
    """A write-only text stream (``write``, ``flush``) over ``stream``, which may be None (no
    terminal at all). Written to from the daemon's threads; a line is logged once it is whole.

    ``status`` is for the progress line, said every few seconds: the terminal gets each one,
    the log one every ``status_log_every_s`` (a 72 h soak would otherwise fill the log with them)."""

    def __init__(self, stream: TextIO | None, *, status_log_every_s: float = 60.0) -> None:
        self.stream = stream
        self.status_log_every_s = status_log_every_s
        self._partial = ""
        self._last_status_logged: float | None = None
        self._lock = threading.Lock()

    @property
    def gone(self) -> bool:
        """Whether the terminal is gone: what is said from now on is in the log only."""
        return self.stream is None

    def write(self, text: str) -> int:
        with self._lock:
            self._partial += text
            *lines, self._partial = self._partial.split("\n")
            for line in lines:
                log.info("%s", line)
            self._to_stream(text)
        return len(text)

    def status(self, line: str) -> None:
        """A progress line: on the terminal always, in the log now and then."""
        now = time.monotonic()
        with self._lock:
            if self._last_status_logged is None or now - self._last_status_logged >= self.status_log_every_s:
                self._last_status_logged = now
                log.info("%s", line)
            self._to_stream(line + "\n")
            self._flush()

    def flush(self) -> None:
        with self._lock:
            self._flush()

    def _to_stream(self, text: str) -> None:
        if self.stream is None:
            return
        try:
            self.stream.write(text)
        except (OSError, ValueError) as exc:
            self._lost(exc)

    def _flush(self) -> None:
        if self.stream is None:
            return
        try:
            self.stream.flush()
        except (OSError, ValueError) as exc:
            self._lost(exc)

    def _lost(self, exc: BaseException) -> None:
        stream, self.stream = self.stream, None
        log.warning("the terminal is gone (%s): what the daemon says from now on is in this log only",
                    exc.strerror if isinstance(exc, OSError) and exc.strerror else exc)
        _quiet(stream)


def _quiet(stream: TextIO | None) -> None:
    """``stream``'s file descriptor pointed at /dev/null: what else writes there (a warning, the
    interpreter's last flush at exit, a child started later) neither fails nor changes the
    daemon's exit status, and text held in its buffer is written nowhere."""
    try:
        fd = stream.fileno() if stream is not None else None
    except (OSError, ValueError, AttributeError):  # a closed file, an in-memory stream
        fd = None
    if fd is None:
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def hold_std_streams() -> None:
    """A standard stream closed when the daemon started (``soak run 2>&-``) opened on
    /dev/null, before the run opens any file: a store or log opened on fd 2 would otherwise
    receive whatever is written to stderr. ``sys.stdout``/``sys.stderr`` then stand for it."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        devnull = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        if devnull != fd:
            os.dup2(devnull, fd)
            os.close(devnull)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                                    closefd=False))
