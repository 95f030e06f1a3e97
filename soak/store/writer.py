"""The buffered sample writer the daemon's sampler feeds, one tick at a time."""

from __future__ import annotations

import threading
import time
from typing import Any

from soak.store.samples import SampleStore
from soak.telemetry.records import Snapshot


class BatchWriter:
    """Buffers sample rows and commits them together; a crash loses at most one batch.

    The buffer is bounded: if the database stays unwritable, the error is raised to the
    caller (the daemon stops cleanly) instead of rows piling up in memory.
    """

    def __init__(self, store: SampleStore, run_id: str, *, max_rows: int, max_delay_s: float,
                 node: str | None = None) -> None:
        self.store = store
        self.run_id = run_id
        self.node = node
        self.max_rows = max_rows
        self.max_delay_s = max_delay_s
        self._rows: list[dict[str, Any]] = []
        self._first_at: float | None = None
        self._lock = threading.Lock()
        self.rows_written = 0
        self.ticks = 0

    def add(self, snapshot: Snapshot) -> None:
        rows = SampleStore.snapshot_rows(self.run_id, snapshot)
        if self.node is not None:
            for r in rows:
                r["device"] = f"{self.node}/{r['device']}"
        with self._lock:
            self._rows.extend(rows)
            self.ticks += 1
            if self._first_at is None:
                self._first_at = time.monotonic()
            due = (
                len(self._rows) >= self.max_rows
                or time.monotonic() - self._first_at >= self.max_delay_s
            )
        if due:
            self.flush()

    __call__ = add  # usable directly as a Sampler sink

    def flush(self) -> int:
        with self._lock:
            rows, self._rows, self._first_at = self._rows, [], None
            if not rows:
                return 0
            self.store.add_sample_rows(rows)
            self.rows_written += len(rows)
            return len(rows)

    def pending(self) -> int:
        return len(self._rows)
