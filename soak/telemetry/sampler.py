"""The background sampler: one :class:`Snapshot` per tick, handed to every sink.

Default interval (:data:`DEFAULT_INTERVAL_S`, for ``soak exporter --interval`` and the plan's
``sampling.interval`` alike): 5 s. A 15 s Prometheus scrape always finds a fresh snapshot, a
1-minute utilization dropout or a hang shows within a few ticks, and it is cheap: one
``npu-smi info`` per tick (tens of ms on a real node) plus slower detail queries, and a 72 h
x 16-chip run stores near 0.1 GB.

Memory is bounded: the sampler keeps only the latest snapshot and a few counters per
reader; sinks get each snapshot once and must keep their own bounded state. A sink that
raises is logged and counted, and the loop goes on; so does a backend that raises (a bug:
backends are written never to).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from soak.clock import ScaledClock
from soak.telemetry.records import ReaderStatus, Snapshot

log = logging.getLogger("soak.telemetry")

DEFAULT_INTERVAL_S = 5.0

Sink = Callable[[Snapshot], object]


@dataclass(frozen=True, slots=True)
class ReaderTotals:
    """Cumulative self-metrics of one reader since the sampler started."""

    reader: str
    calls: int
    errors: int
    last_duration_s: float | None
    last_success_ts: float | None  # snapshot time (the sampler's time line) of the last success
    last_error: str | None


class Sampler:
    """Runs ``backend.read()`` every ``interval_s`` on a daemon thread.

    ``latest()`` is what the exporter serves; ``tick()`` runs one cycle in the caller's
    thread (tests). ``clock`` is only used to time-stamp a failed tick's placeholder
    snapshot; backends stamp their own.
    """

    def __init__(
        self,
        backend: object,
        interval_s: float = DEFAULT_INTERVAL_S,
        sinks: Iterable[Sink] = (),
        clock: ScaledClock | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be greater than 0")
        self.backend = backend
        self.interval_s = float(interval_s)
        self.sinks: tuple[Sink, ...] = tuple(sinks)
        self.clock = clock
        self._lock = threading.Lock()
        self._latest: Snapshot | None = None
        self._latest_mono: float | None = None
        self._totals: dict[str, ReaderTotals] = {}
        self.ticks = 0
        self.sink_errors = 0
        self.backend_errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- reading -------------------------------------------------------------------------
    def latest(self) -> Snapshot | None:
        with self._lock:
            return self._latest

    def age_s(self) -> float | None:
        """Wall seconds since the latest snapshot was taken (None: none yet)."""
        with self._lock:
            mono = self._latest_mono
        return None if mono is None else time.monotonic() - mono

    def reader_totals(self) -> dict[str, ReaderTotals]:
        with self._lock:
            return dict(self._totals)

    # -- the loop ------------------------------------------------------------------------
    def tick(self) -> Snapshot:
        started = time.monotonic()
        try:
            snap = self.backend.read()  # type: ignore[attr-defined]
        except Exception as exc:  # backends never raise by design; if one does, keep going
            self.backend_errors += 1
            log.exception("backend read failed")
            ts = self.clock.now() if self.clock else time.time()
            snap = Snapshot(ts=ts, host="", readers=(ReaderStatus("backend", False, time.monotonic() - started, repr(exc)),))
        with self._lock:
            self._latest = snap
            self._latest_mono = started
            for st in snap.readers:
                self._account(st, snap.ts)
            self.ticks += 1
        for sink in self.sinks:
            try:
                sink(snap)
            except Exception:
                self.sink_errors += 1
                log.exception("sink %r failed; the sampler goes on", getattr(sink, "__name__", sink))
        return snap

    def _account(self, st: ReaderStatus, ts: float) -> None:
        old = self._totals.get(st.reader)
        self._totals[st.reader] = ReaderTotals(
            reader=st.reader,
            calls=(old.calls if old else 0) + 1,
            errors=(old.errors if old else 0) + (0 if st.ok else 1),
            last_duration_s=st.duration_s,
            last_success_ts=ts if st.ok else (old.last_success_ts if old else None),
            last_error=None if st.ok else st.error,
        )

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.tick()
            next_at += self.interval_s
            now = time.monotonic()
            if next_at < now:  # a tick overran (slow tool): start the next now, don't burst
                next_at = now
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def start(self) -> Sampler:
        if self._thread is not None and self._thread.is_alive():
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop after the current tick (a tool call in flight finishes or times out first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
