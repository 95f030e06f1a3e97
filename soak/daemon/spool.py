"""The daemon's writes ride out a store that does not answer.

Every write of the running daemon (sample rows, step rows, events, the run row's restarts)
goes through one ``StoreSpool``. While the store answers, it writes straight through. The
first write that fails (after the store's own few seconds of retries) starts an outage: that
record and every one after it are appended, in order, to ``store-spool.jsonl`` in the run
folder (one JSON object a line, flushed at once, so a killed daemon keeps them), and the
daemon goes on training and sampling. ``poll`` tries the store again with backoff; once it
answers, the spool is written to it line by line, oldest first, and removed, and one
``store_outage`` event records the outage (node, start, end, duration, records).

Bounds: an outage longer than ``cluster.store_outage_max`` (wall) or a spool past
``SPOOL_MAX_BYTES`` ends the run's daemon cleanly with the spool kept (``overdue``);
``soak run --resume RUN_ID`` writes it to the store before anything else (``replay_file``).

A store outage is the test rig's, not the machine under test's: the chips trained on and
every reading is kept, so it is no interruption in the verdict's accounting (``soak.analysis.
evidence.account`` counts crashes, hangs, a daemon down and stops).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soak.errors import StoreError
from soak.store import BatchWriter, Store

log = logging.getLogger("soak.daemon")

SPOOL_MAX_BYTES = 256 << 20
"""The spool's bound: a 16-chip node sampled each second spools about 40 MB an hour."""
RETRY_FIRST_S = 1.0  # wall seconds to the first try once the store failed, doubled after each try
RETRY_MAX_S = 5.0


def replay_file(store: Store, run_id: str, path: Path) -> int:
    """Write a spool file's records to ``store`` in order and remove it; the records written.

    A record is dropped from the file as soon as it is written, so a replay that fails half
    way (``StoreError``) leaves exactly the records still to write. (A replay killed between
    a write and that rewrite writes that one record again: sample rows drop the repeat.)
    """
    if not path.exists():
        return 0
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    done = 0
    try:
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:  # a line cut by a crash while it was appended: nothing was kept
                log.warning("spool %s: unreadable record skipped: %.80s", path, line)
                done += 1
                continue
            _apply(store, run_id, record)
            done += 1
    finally:
        rest = lines[done:]
        if rest:
            tmp = path.with_suffix(".tmp")
            tmp.write_text("".join(f"{ln}\n" for ln in rest), encoding="utf-8")
            os.replace(tmp, path)
        else:
            path.unlink(missing_ok=True)
    return done


def _apply(store: Store, run_id: str, record: dict[str, Any]) -> None:
    op = record.get("op")
    if op == "samples":
        store.add_sample_rows(record["rows"])
    elif op == "steps":
        store.add_steps(run_id, record["rows"], node=record.get("node"))
    elif op == "event":
        store.add_event(run_id, **record["event"])
    elif op == "run":
        store.update_run(run_id, **record["values"])
    else:
        raise ValueError(f"unknown spool record {op!r}")


class StoreSpool:
    """The one path of the running daemon's store writes (see the module's docstring)."""

    def __init__(self, store: Store, run_id: str, path: Path, *, node: str | None, now: Callable[[], float],
                 outage_max_s: float, max_bytes: int = SPOOL_MAX_BYTES) -> None:
        self.store = store
        self.run_id = run_id
        self.path = path
        self.node = node
        self.now = now  # the run's clock: event times
        self.outage_max_s = outage_max_s
        self.max_bytes = max_bytes
        self._lock = threading.RLock()
        self.down_since: float | None = None  # run clock
        self._down_wall: float | None = None  # monotonic
        self._error = ""
        self._next_try = 0.0
        self._wait = RETRY_FIRST_S
        self.records = 0  # spooled in this outage
        self.spool_bytes = path.stat().st_size if path.exists() else 0
        self.back_at: float | None = None  # monotonic: when the last outage ended
        # SQLite is a file in the run folder: when it cannot be written, neither can a spool
        # beside it (a full or read-only disk); its failures stay the daemon's to stop on
        self.enabled = not store.is_sqlite
        self.spool_error: str | None = None  # the spool itself could not be written
        self.outages = 0

    # ------------------------------------------------------------------ writing
    @property
    def down(self) -> bool:
        return self.down_since is not None

    def event(self, kind: str, *, ts: float, **kw: Any) -> None:
        event = {"kind": kind, "ts": ts, **kw}
        self._write({"op": "event", "event": event}, lambda: self.store.add_event(self.run_id, **event))

    def steps(self, rows: list[dict[str, Any]], node: str | None) -> None:
        self._write({"op": "steps", "rows": rows, "node": node},
                    lambda: self.store.add_steps(self.run_id, rows, node=node))

    def update_run(self, **values: Any) -> None:
        self._write({"op": "run", "values": values}, lambda: self.store.update_run(self.run_id, **values))

    def samples(self, writer: BatchWriter, *, force: bool = False) -> None:
        """Write the writer's rows once due (``force``: whatever it holds); during an outage
        they go to the spool."""
        with self._lock:
            if not self.down:
                if not (force or writer.due()):
                    return
                asked, asked_wall = self.now(), time.monotonic()
                try:
                    writer.flush()
                    return
                except StoreError as exc:
                    if not self.enabled:
                        raise
                    self._went_down(exc, asked, asked_wall)
            rows = writer.take()
            if rows:
                self._append({"op": "samples", "rows": rows})

    def _write(self, record: dict[str, Any], call: Callable[[], None]) -> None:
        with self._lock:
            if not self.down:
                asked, asked_wall = self.now(), time.monotonic()
                try:
                    call()
                    return
                except StoreError as exc:
                    if not self.enabled:
                        raise
                    self._went_down(exc, asked, asked_wall)
            self._append(record)

    def lost(self, exc: StoreError) -> None:
        """A store call outside this path (a read) failed as the store went away."""
        if not self.enabled:
            raise exc
        with self._lock:
            if not self.down:
                self._went_down(exc, self.now(), time.monotonic())

    def _went_down(self, exc: StoreError, since: float, since_wall: float) -> None:
        # the outage starts with the call that failed (the store's own retries took seconds)
        self.down_since, self._down_wall = since, since_wall
        self._error = str(exc)
        self._wait = RETRY_FIRST_S
        self._next_try = time.monotonic() + self._wait
        self.records = 0
        log.error("store does not answer: %s; spooling to %s until it does (at most %.0f s)",
                  exc, self.path, self.outage_max_s)

    def _append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"), default=str) + "\n"
        try:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
        except OSError as exc:  # the record is lost; overdue() stops the daemon
            if self.spool_error is None:
                log.error("spool %s not written: %s", self.path, exc.strerror or exc)
            self.spool_error = str(exc.strerror or exc)
            return
        self.records += 1
        self.spool_bytes += len(line.encode())

    # ------------------------------------------------------------------ coming back
    def poll(self, *, force: bool = False) -> bool:
        """During an outage, try the store (no more often than the backoff allows unless
        ``force``); once it answers, write the spool and record the outage. True when the
        store is (back) up."""
        with self._lock:
            if not self.down:
                return True
            if not force and time.monotonic() < self._next_try:
                return False
            try:
                back = self.store.reachable()
                if back:
                    written = replay_file(self.store, self.run_id, self.path)
            except StoreError as exc:
                back = False
                self._error = str(exc)
            if not back:
                self._wait = min(RETRY_MAX_S, self._wait * 2)
                self._next_try = time.monotonic() + self._wait
                return False
            self._came_back(written)
            return True

    def _came_back(self, written: int) -> None:
        start, end = self.down_since, self.now()
        assert start is not None and self._down_wall is not None
        wall = time.monotonic() - self._down_wall
        where = f" on node {self.node}" if self.node else ""
        detail = {"node": self.node, "start": start, "end": end, "duration_s": round(end - start, 3),
                  "wall_s": round(wall, 3), "records": self.records, "replayed": written, "error": self._error}
        self.down_since = self._down_wall = None
        self.spool_bytes = 0
        self.back_at = time.monotonic()
        self.outages += 1
        log.warning("store back after %.1f s%s: %d spooled records written", wall, where, written)
        self.event("store_outage", ts=start, end_ts=end, node=self.node, detail=detail,
                   message=f"store did not answer for {wall:.0f} s{where}; {written} spooled records written")

    # ------------------------------------------------------------------ bounds
    def overdue(self) -> str | None:
        """Why the daemon must stop now (the outage or the spool past its bound), else None."""
        if not self.down or self._down_wall is None:
            return None
        away = time.monotonic() - self._down_wall
        if away > self.outage_max_s:
            return f"the store did not answer for {away:.0f} s (cluster.store_outage_max is {self.outage_max_s:g} s)"
        if self.spool_error is not None:
            return f"the spool {self.path} could not be written ({self.spool_error})"
        if self.spool_bytes > self.max_bytes:
            return f"the spool of what the store did not take passed {self.max_bytes >> 20} MiB"
        return None

    def kept_line(self, run_id: str) -> str:
        """The one line a daemon stopped with its spool kept ends with."""
        away = 0.0 if self._down_wall is None else time.monotonic() - self._down_wall
        error = self._error.removeprefix(f"store {self.store.url}: ")
        try:
            kept = sum(1 for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip())
        except OSError:
            kept = self.records
        return (f"run {run_id}: the store {self.store.url} did not answer for {away:.0f} s ({error}); this node "
                f"stopped, {kept} records kept in {self.path}; soak run --resume {run_id} writes them to the store")
