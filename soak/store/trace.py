"""A run read back whole: the long-format trace the analysis takes, its fast export rows and
CSV, per-rank step series for charts, and where and how fast each rank ran.

``TraceStore`` is a part of ``soak.store.Store``. It joins the samples (``SampleStore``) with
the steps table, whose ranks appear as devices ``<workload>-rank<R>`` (``rank_device``).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
from sqlalchemy import and_, func, select

from soak.device_names import device_key
from soak.store import schema as S
from soak.store.records import STEP_TRACE_METRICS, ExportRows, rank_device
from soak.store.samples import SampleStore


class TraceStore(SampleStore):
    """Traces, exports and per-rank series (a base of ``Store``)."""

    def step_series(
        self, run_id: str, bucket_s: float | None = None
    ) -> dict[str, tuple[tuple[float, ...], tuple[float | None, ...]]]:
        """Step time per rank: ``{"<workload>-rank<R>": (times, step_time_s)}``, ranks in order.

        Each value is the mean of the stored window medians in its bucket (``bucket_s``;
        the time is the bucket start) or, without a bucket, at its timestamp.
        """
        t = S.steps
        bucket = (t.c.ts if not bucket_s else self._time_bucket(t.c.ts, bucket_s)).label("b")
        stmt = (
            select(t.c.workload, t.c.rank, bucket, func.avg(t.c.step_time_s))
            .where(t.c.run_id == run_id)
            .group_by(t.c.workload, t.c.rank, bucket)
            .order_by(t.c.workload, t.c.rank, bucket)
        )
        grouped: dict[str, tuple[list[float], list[float | None]]] = {}
        for wl, rank, b, v in self._read(stmt):
            xs, ys = grouped.setdefault(rank_device(wl, rank), ([], []))
            xs.append(float(b))
            ys.append(None if v is None else float(v))
        return {dev: (tuple(xs), tuple(ys)) for dev, (xs, ys) in grouped.items()}

    def load_trace(
        self, run_id: str, chunk_rows: int = 20000, bucket_s: float | None = None, *,
        node: str | None = None, start: float | None = None,
    ) -> Iterator[tuple[Any, ...]]:
        """The run as long-format ``(ts, device, metric, value)``, the analysis' input; a
        cluster node's readings as ``(ts, node, device, metric, value)`` (``Trace.from_rows``
        takes both).

        Device metrics come from the samples (None values left out: a gap, not a zero);
        ``STEP_TRACE_METRICS`` from the steps, with device ``<workload>-rank<R>``.
        Read in chunks so a 72 h run never sits in memory as rows. With ``bucket_s`` the
        device metrics are bucket means computed in SQL (the daemon's online analysis of a
        long run); the steps stay as stored.

        ``node`` (a cluster run) reads that node's chips and ranks alone, as
        ``(ts, device, metric, value)``; ``start`` the rows from then on.
        """
        t = S.samples
        metrics = S.SAMPLE_METRIC_COLUMNS
        # (series id, the node a row names, device): a node asked for is not repeated
        series = [(sid, None if node is not None else n, dev) for sid, n, dev in self.run_series(run_id)
                  if node is None or n == node]
        if bucket_s:
            for _sid, n, dev in series:
                place = (dev,) if n is None else (n, dev)
                for r in self.load_samples(run_id, device=dev, node=n if node is None else node,
                                           bucket_s=bucket_s, start=start):
                    for m in metrics:
                        if r[m] is not None:
                            yield (r["ts"], *place, m, float(r[m]))
        # Device by device (series id order), each in time order: the primary key's order,
        # read in chunks from the last timestamp seen.
        for sid, n, dev in [] if bucket_s else series:
            place = (dev,) if n is None else (n, dev)
            last_ts: float | None = None
            while True:
                where = [t.c.series_id == sid]
                if last_ts is not None:
                    where.append(t.c.ts > last_ts)
                elif start is not None:
                    where.append(t.c.ts >= start)
                stmt = (
                    select(t.c.ts, *[t.c[m] for m in metrics])
                    .where(and_(*where))
                    .order_by(t.c.ts)
                    .limit(chunk_rows)
                )
                rows = self._read(stmt)
                for r in rows:
                    for i, m in enumerate(metrics):
                        v = r[1 + i]
                        if v is not None:
                            yield (r[0], *place, m, float(v))
                if len(rows) < chunk_rows:
                    break
                last_ts = rows[-1][0]
        for r in self._read(self._trace_steps(run_id, node, start)):
            dev = rank_device(r[1], r[2])
            for m, v in zip(STEP_TRACE_METRICS, r[3:], strict=True):
                if v is not None:
                    yield (r[0], dev, m, float(v))

    @staticmethod
    def _trace_steps(run_id: str, node: str | None, start: float | None) -> Any:
        """The step rows a trace holds: (ts, workload, rank, ``STEP_TRACE_METRICS``) by time."""
        s = S.steps
        where = [s.c.run_id == run_id]
        if node is not None:
            where.append(s.c.node == node)
        if start is not None:
            where.append(s.c.ts >= start)
        return select(s.c.ts, s.c.workload, s.c.rank, *[s.c[m] for m in STEP_TRACE_METRICS]).where(*where) \
            .order_by(s.c.ts)

    def trace_arrays(
        self, run_id: str, bucket_s: float | None = None, *, node: str | None = None, start: float | None = None,
    ) -> dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]]:
        """``load_trace``'s readings as arrays, the analysis' input for ``Trace.from_arrays``:
        ``{(device, metric): (t, v)}``, a cluster's chips ``{(node, device, metric): (t, v)}``
        (ranks always by device); a gap is NaN (``from_arrays`` leaves it out, as
        ``load_trace`` leaves out the None). The same rows, each series read in one query as
        plain tuples into one float array: a node's 72 h at 1 Hz is 33 M values, which
        ``load_trace`` makes into as many Python tuples."""
        metrics = S.SAMPLE_METRIC_COLUMNS
        out: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = {}

        def put(place: tuple[str, ...], table: np.ndarray) -> None:
            for i, m in enumerate(metrics):
                out[(*place, m)] = (table[:, 0], table[:, 1 + i])

        t = S.samples
        for sid, n, dev in self.run_series(run_id):
            if node is not None and n != node:
                continue
            place = (dev,) if node is not None or n is None else (n, dev)
            if bucket_s:
                rows = [(r["ts"], *(r[m] for m in metrics)) for r in
                        self.load_samples(run_id, device=dev, node=n, bucket_s=bucket_s, start=start)]
            else:
                where = [t.c.series_id == sid] + ([t.c.ts >= start] if start is not None else [])
                rows = self._read_tuples(select(t.c.ts, *[t.c[m] for m in metrics]).where(*where).order_by(t.c.ts))
            if rows:
                put(place, np.array(rows, dtype=np.float64))  # None: NaN
        ranks: dict[str, list[tuple[Any, ...]]] = {}
        for r in self._read_tuples(self._trace_steps(run_id, node, start)):
            ranks.setdefault(rank_device(r[1], r[2]), []).append((r[0], *r[3:]))
        for dev, rows in ranks.items():
            table = np.array(rows, dtype=np.float64)
            for i, m in enumerate(STEP_TRACE_METRICS):
                out[(dev, m)] = (table[:, 0], table[:, 1 + i])
        return out

    def export_rows(self, run_id: str) -> ExportRows:
        """The run's raw rows in two queries, as plain tuples (see ``ExportRows``).

        The same values and order as ``load_trace`` before it is made long (gaps are None
        here), read without SQLAlchemy's per-row objects: a report turns a 72 h run into its
        CSV and arrays from these in a few seconds.
        """
        t = S.sample_rows
        metrics = S.SAMPLE_METRIC_COLUMNS
        samples = self._read_tuples(
            select(t.c.ts, t.c.node, t.c.device, *[t.c[m] for m in metrics])
            .where(t.c.run_id == run_id)
            .order_by(t.c.series_id, t.c.ts)
        )
        s = S.steps
        steps = self._read_tuples(
            select(s.c.ts, s.c.workload, s.c.rank, *[s.c[m] for m in STEP_TRACE_METRICS])
            .where(s.c.run_id == run_id)
            .order_by(s.c.ts)
        )
        return ExportRows(
            metrics=metrics,
            samples=samples,
            steps=[(r[0], rank_device(r[1], r[2]), *r[3:]) for r in steps],
        )

    def rank_places(self, run_id: str) -> dict[str, tuple[str, str]]:
        """``{rank device: (node, rank device)}`` of a cluster run's ranks (empty for one node):
        the trace's places, so a slow rank is named with its node and nodes are compared."""
        s = S.steps
        stmt = (
            select(s.c.workload, s.c.rank, s.c.node)
            .where(s.c.run_id == run_id, s.c.node.is_not(None))
            .group_by(s.c.workload, s.c.rank, s.c.node)
        )
        out: dict[str, tuple[str, str]] = {}
        for wl, rank, node in self._read_tuples(stmt):
            dev = rank_device(wl, rank)
            out[dev] = (node, dev)  # a rank that moved node after a restart: the last one read
        return out

    def rank_rates(self, run_id: str) -> list[tuple[str | None, str, int, float, int, float, float]]:
        """``(node, workload, rank, mean tflops, rows, first ts, last ts)`` of every rank that
        reported a GEMM rate, in one GROUP BY: the compute check reads no step row in Python."""
        s = S.steps
        stmt = (
            select(s.c.node, s.c.workload, s.c.rank, func.avg(s.c.tflops), func.count(s.c.tflops),
                   func.min(s.c.ts), func.max(s.c.ts))
            .where(s.c.run_id == run_id, s.c.tflops.is_not(None))
            .group_by(s.c.node, s.c.workload, s.c.rank)
            .order_by(s.c.node, s.c.workload, s.c.rank)
        )
        return [(node, wl, int(rank), float(v), int(n), float(a), float(b))
                for node, wl, rank, v, n, a, b in self._read_tuples(stmt)]

    def numeric_checks(self, run_id: str) -> list[tuple[str | None, str, int, int, int, int]]:
        """``(node, workload, rank, checks, first step, last step)`` of every rank that counted
        its numerical checks (``numeric_checks``, cumulative: the largest is the count), in one
        GROUP BY over the rows that carry it."""
        s = S.steps
        stmt = (
            select(s.c.node, s.c.workload, s.c.rank, func.max(s.c.numeric_checks), func.min(s.c.step),
                   func.max(s.c.step))
            .where(s.c.run_id == run_id, s.c.numeric_checks.is_not(None))
            .group_by(s.c.node, s.c.workload, s.c.rank)
            .order_by(s.c.node, s.c.workload, s.c.rank)
        )
        return [(node, wl, int(rank), int(n), int(a), int(b)) for node, wl, rank, n, a, b in self._read_tuples(stmt)]

    def export_csv(self, run_id: str, path: str | os.PathLike[str]) -> int:
        """Write the run's long-format trace CSV (``timestamp,device,metric,value``; a cluster
        node's device as ``node/device``, which ``soak analyze`` places on its node again)."""
        n = 0
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["timestamp", "device", "metric", "value"])
            for row in self.load_trace(run_id):
                ts, metric, value = row[0], row[-2], row[-1]
                dev = device_key(row[1], row[2]) if len(row) == 5 else row[1]
                w.writerow([repr(float(ts)), dev, metric, repr(value)])
                n += 1
        return n
