"""The buffered sample writer the daemon's sampler feeds, one tick at a time."""

from __future__ import annotations

import threading
import time
from typing import Any

from soak.errors import StoreError
from soak.store.samples import SAMPLE_TUPLE_KEYS, SampleStore
from soak.telemetry.records import Snapshot

# Rows a writer holds at most while its writes fail, as a multiple of its batch: with the
# daemon's 4096-row batch about 16 MB of rows, minutes of a 16-chip node at 1 s ticks.
BUFFER_BATCHES = 8


class BatchWriter:
    """Buffers sample rows and commits them together, oldest first.

    A failed write keeps every row in the buffer (the next flush tries them again, in order);
    a crash loses at most what is buffered. The buffer is bounded (``max_buffered``, by default
    ``BUFFER_BATCHES`` batches): a tick that would pass the bound is refused with a
    ``StoreError`` and not taken, so rows never pile up in memory without end. A caller that
    rides out a longer outage takes the rows out (``take``) and keeps them elsewhere (the
    daemon's spool).
    """

    def __init__(self, store: SampleStore, run_id: str, *, max_rows: int, max_delay_s: float,
                 node: str | None = None, max_buffered: int | None = None) -> None:
        self.store = store
        self.run_id = run_id
        self.node = node
        self.max_rows = max_rows
        self.max_delay_s = max_delay_s
        self.max_buffered = max_buffered if max_buffered is not None else max_rows * BUFFER_BATCHES
        self._rows: list[tuple[Any, ...]] = []  # as SampleStore.snapshot_tuples makes them
        self._first_at: float | None = None
        self._lock = threading.Lock()  # the buffer; never held over a write
        self._flushing = threading.Lock()  # one write at a time
        self.rows_written = 0
        self.ticks = 0

    def rows(self, snapshot: Snapshot) -> list[tuple[Any, ...]]:
        """The sample rows of one tick as this writer buffers and stores them (with its node):
        tuples of ``SAMPLE_TUPLE_KEYS``, which COPY sends as they are."""
        return SampleStore.snapshot_tuples(self.run_id, snapshot, node=self.node)

    def append(self, snapshot: Snapshot) -> None:
        """Buffer one tick without writing (``due`` says when a flush is); ``StoreError`` when
        the buffer is full."""
        rows = self.rows(snapshot)
        with self._lock:
            if len(self._rows) + len(rows) > self.max_buffered:
                raise StoreError(f"store {getattr(self.store, 'url', '')}: {len(self._rows)} sample rows wait "
                                 f"for a write that keeps failing (at most {self.max_buffered} are held)")
            self._rows.extend(rows)
            self.ticks += 1
            if self._first_at is None:
                self._first_at = time.monotonic()

    def due(self) -> bool:
        """Whether the buffer is full enough or old enough to be written."""
        with self._lock:
            return bool(self._rows) and (len(self._rows) >= self.max_rows or self._first_at is None
                                         or time.monotonic() - self._first_at >= self.max_delay_s)

    def add(self, snapshot: Snapshot) -> None:
        """Buffer one tick and write the buffer once it is due."""
        self.append(snapshot)
        if self.due():
            self.flush()

    __call__ = add  # usable directly as a Sampler sink

    def flush(self) -> int:
        """Write every buffered row in one transaction; the rows leave the buffer only once it
        is committed (a ``StoreError`` leaves them all there)."""
        with self._flushing:
            with self._lock:
                rows = list(self._rows)
            if not rows:
                return 0
            # the buffer's lock is not held here: a tick that comes while the store retries
            # (seconds) is appended behind these rows, never waits for them
            self.store.add_sample_rows(rows)
            with self._lock:
                del self._rows[:len(rows)]
                self._first_at = time.monotonic() if self._rows else None
                self.rows_written += len(rows)
            return len(rows)

    def take(self) -> list[dict[str, Any]]:
        """Every buffered row, oldest first, out of the buffer (the caller keeps them now), as
        ``snapshot_rows`` makes them."""
        with self._flushing, self._lock:
            rows, self._rows, self._first_at = self._rows, [], None
        return [dict(zip(SAMPLE_TUPLE_KEYS, r, strict=True)) for r in rows]

    def pending(self) -> int:
        return len(self._rows)
