"""Follow HCCL plog files and count communication timeouts, like ``tail -F`` on a folder.

CANN writes one plog file per process (``plog-<pid>_<yyyymmddhhmmssmmm>.log`` under
``~/ascend/log/{debug,run}/plog/``), starts new files as processes start and rotates full
ones. :class:`PlogFollower` keeps, per file identity (device + inode), the byte offset read
so far; each :meth:`PlogFollower.poll` reads only what was appended since, picks up new
files, keeps reading a file that was renamed by rotation, and starts a file again from the
top when it was truncated. A partial last line is left for the next poll.

Line kinds (patterns from HCCL plog lines and torch_npu/ACL messages):

==================== =====================================================================
``socket_timeout``   ``wait socket establish timeout`` (HCCL_CONNECT_TIMEOUT), ``get socket
                     timeout``, ``EI0006`` "Getting socket times out"
``p2p_timeout``      ``connected p2p timeout``, ``Wait timeout for get P2P status`` (EI9999)
``notify_timeout``   ``EI0002`` "The wait execution of the Notify register times out",
                     ``notify wait timeout`` (HCCL_EXEC_TIMEOUT on the device side)
``exec_timeout``     ACL 507048 "The execution of the internal task times out"; torch_npu
                     ``dispatch timeout`` of a process-group work
``heartbeat_cqe_error`` ``[Heartbeat]cqe err status[..]``: a peer's RDMA completion failed
``link_error``       the ``LINK_ERROR_INFO`` table header (one per table, not per row)
``watchdog_timeout`` torch_npu ``Watchdog caught collective operation timeout``
==================== =====================================================================

One event can print lines of two kinds (a socket timeout is followed by its
``LINK_ERROR_INFO`` table; an exec timeout by its ``EI0002`` cause); each kind is counted
once per event.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

KINDS: tuple[str, ...] = (
    "socket_timeout",
    "p2p_timeout",
    "notify_timeout",
    "exec_timeout",
    "heartbeat_cqe_error",
    "link_error",
    "watchdog_timeout",
)

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("watchdog_timeout", re.compile(r"Watchdog caught collective operation timeout")),
    (
        "socket_timeout",
        re.compile(
            r"wait socket establish timeout|get socket timeout|\bEI0006\b|Getting socket times out"
        ),
    ),
    ("p2p_timeout", re.compile(r"connected p2p timeout|Wait timeout for get P2P status")),
    (
        "notify_timeout",
        re.compile(
            r"\bEI0002\b|notify wait timeout|The wait execution of the Notify register times out"
        ),
    ),
    (
        "exec_timeout",
        re.compile(r"The execution of the internal task times out|\bdispatch timeout\b"),
    ),
    ("heartbeat_cqe_error", re.compile(r"\[Heartbeat\]\s*cqe err")),
    ("link_error", re.compile(r"_LINK_ERROR_INFO_")),
)

_COMBINED = re.compile("|".join(f"(?P<{kind}>{pat.pattern})" for kind, pat in _PATTERNS))

# Every pattern above contains one of these literals. Finding them with str.find is ~100x
# faster than running the regex over every position of a mostly-INFO log; only the lines
# around a hit are classified.
_ANCHORS: tuple[str, ...] = ("timeout", "times out", "EI000", "cqe err", "LINK_ERROR_INFO")

_CHUNK = 1 << 20  # read at most this much per file per step, so a huge new file streams
_MAX_LINE = 1 << 20  # a "line" longer than this without a newline is consumed anyway
# What one poll reads, in all and from one file: the poll runs inside the sampling tick, so a
# huge new file (a 4 GiB sparse one stalled a tick 29 s) is read over many polls instead.
# HCCL writes kilobytes a second; 8 MiB a poll keeps up with far more.
MAX_FILE_BYTES_PER_POLL = 8 << 20
MAX_POLL_BYTES = 32 << 20


def classify_line(line: str) -> str | None:
    """The timeout/link kind one log line reports, or None.

    When a line holds words of two kinds, the earlier kind in ``_PATTERNS`` wins.
    """
    if not _COMBINED.search(line):
        return None
    for kind, pattern in _PATTERNS:
        if pattern.search(line):
            return kind
    return None


def _count_into(counts: dict[str, int], text: str) -> None:
    """Add one count per matching line of ``text`` (each line counted at most once)."""
    line_starts: set[int] = set()
    for anchor in _ANCHORS:
        i = text.find(anchor)
        while i >= 0:
            line_starts.add(text.rfind("\n", 0, i) + 1)
            end = text.find("\n", i)
            if end < 0:
                break
            i = text.find(anchor, end)
    for start in line_starts:
        end = text.find("\n", start)
        kind = classify_line(text[start : len(text) if end < 0 else end])
        if kind is not None:
            counts[kind] += 1


def _is_log(name: str) -> bool:
    # plog-123_2025....log, rotated copies such as plog-123_....log.1, and any *.log
    return name.endswith(".log") or bool(re.search(r"\.log\.\d+$", name))


class PlogFollower:
    """Cumulative counts of comm-timeout lines in every log file under ``directory``.

    Files already there when the follower is made are followed from their current end
    (``from_start=False``, like ``tail -F -n0``) so old runs' logs are not counted again;
    pass ``from_start=True`` to count them too. Files that appear later are read from
    their first byte. The folder may not exist yet; it is picked up once it does.
    """

    def __init__(self, directory: str | os.PathLike[str], *, from_start: bool = False) -> None:
        self.directory = Path(directory)
        self._offsets: dict[tuple[int, int], int] = {}
        self._counts: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.lines_read = 0
        self.bytes_read = 0
        if not from_start:
            for ident, _path, st in self._scan():
                self._offsets[ident] = st.st_size

    def _scan(self) -> Iterator[tuple[tuple[int, int], Path, os.stat_result]]:
        if not self.directory.is_dir():
            return
        for root, _dirs, names in os.walk(self.directory):  # never into a linked folder
            for name in names:
                if not _is_log(name):
                    continue
                path = Path(root) / name
                try:
                    st = path.lstat()
                except FileNotFoundError:
                    continue  # removed between listing and stat
                # a regular file only: a symlink (to /proc/kcore, to another user's file), a
                # FIFO or a device is never opened
                if not stat.S_ISREG(st.st_mode):
                    continue
                yield (st.st_dev, st.st_ino), path, st

    def poll(self) -> Mapping[str, int]:
        """Read what was appended since the last poll; return the cumulative counts by kind."""
        seen: set[tuple[int, int]] = set()
        budget = MAX_POLL_BYTES
        for ident, path, st in sorted(self._scan(), key=lambda item: str(item[1])):
            if ident in seen:
                continue  # a hard link: same file under two names
            seen.add(ident)
            offset = self._offsets.get(ident, 0)
            if st.st_size < offset:
                offset = 0  # truncated (copytruncate rotation): the file starts over
            if st.st_size > offset and budget > 0:
                start = offset
                offset = self._read(path, ident, offset, min(budget, MAX_FILE_BYTES_PER_POLL))
                budget -= offset - start
            self._offsets[ident] = offset
        # forget files that are gone, so a later file reusing the inode starts at byte 0
        for ident in list(self._offsets):
            if ident not in seen:
                del self._offsets[ident]
        return dict(self._counts)

    def _read(self, path: Path, ident: tuple[int, int], offset: int, limit: int) -> int:
        try:
            # O_NOFOLLOW: a name swapped for a symlink after the scan is not followed;
            # O_NONBLOCK: nor does a name swapped for a FIFO hang the tick
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return offset
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if (st.st_dev, st.st_ino) != ident:
                return offset  # replaced between scan and open; next poll sees the new one
            fh.seek(offset)
            pos = offset  # file position of the first byte not yet counted
            pending = b""
            left = limit
            while left > 0:
                chunk = fh.read(min(_CHUNK, left))
                left -= len(chunk)
                if not chunk:
                    break
                data = pending + chunk
                cut = data.rfind(b"\n")
                if cut < 0:
                    if len(data) < _MAX_LINE:
                        pending = data
                        continue
                    cut = len(data) - 1
                self._count(data[: cut + 1])
                pos += cut + 1
                pending = data[cut + 1 :]
            return pos

    def _count(self, block: bytes) -> None:
        self.bytes_read += len(block)
        self.lines_read += block.count(b"\n")
        _count_into(self._counts, block.decode("utf-8", errors="replace"))

    def counts(self) -> Mapping[str, int]:
        """The counts so far, without reading."""
        return dict(self._counts)


def count_text(text: str) -> Mapping[str, int]:
    """Counts by kind for a whole text (a workload log, a captured stderr)."""
    counts = dict.fromkeys(KINDS, 0)
    _count_into(counts, text)
    return counts
