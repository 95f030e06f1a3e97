"""The sample series of the store: each tick's chip and host readings, written and read back.

``SampleStore`` is a part of ``soak.store.Store``. A run's readings are stored per
``(run, node, device)`` series (``sample_series``; node None on a single-node run) in the
``samples`` table; readers get them as rows, as database-side bucket means, or as per-chip
statistics over the whole run, each with its node and device apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import and_, case, func, insert, select
from sqlalchemy.engine import Connection, Engine

from soak.store import schema as S
from soak.store.engine import Database
from soak.store.records import HOST_DEVICE
from soak.telemetry.records import HEALTH_WORDS, DeviceSample, HostSample, Snapshot

SeriesKey = tuple[str, str | None, str]  # (run_id, node, device)

# A sample row as a tuple, the form the daemon's writer buffers and COPY sends: its series
# (run, node, device), then ``ROW_COLUMNS``, every column of ``samples`` but the series id. A
# tick is thousands of rows written in a batch, and Python per column and row (a dict of each)
# was most of a writer's CPU: ``_device_tuple`` reads a device's row off its record in one
# expression (named attributes are read faster than through ``operator.attrgetter``).
ROW_COLUMNS: tuple[str, ...] = (
    "ts", "util_pct", "temp_c", "power_w", "hbm_used_bytes", "hbm_total_bytes", "host_rss_bytes",
    "comm_timeouts_total", "ddr_used_bytes", "ddr_total_bytes", "ecc_single_bit_errors", "ecc_double_bit_errors",
    "ecc_single_bit_isolated_pages", "ecc_double_bit_isolated_pages", "xid_errors", "link_up_count", "detail_ts", "up",
    "healthy", "link_up", "health", "error")
if sorted(ROW_COLUMNS) != sorted(c.name for c in S.samples.c if c.name != "series_id"):
    raise AssertionError("ROW_COLUMNS (and _device_tuple, _host_tuple) must name every column of samples")
SAMPLE_TUPLE_KEYS: tuple[str, ...] = ("run_id", "node", "device", *ROW_COLUMNS)
_COPY_COLUMNS: tuple[str, ...] = ("series_id", *ROW_COLUMNS)
_tuple_values = itemgetter(*SAMPLE_TUPLE_KEYS)


def _device_tuple(run_id: str, node: str | None, ts: float, d: DeviceSample) -> tuple[Any, ...]:
    """A device's row (``SAMPLE_TUPLE_KEYS``): its record's fields; no host RSS or comm-timeout total."""
    return (run_id, node, d.device, ts, d.util_pct, d.temp_c, d.power_w, d.hbm_used_bytes, d.hbm_total_bytes,
            None, None, d.ddr_used_bytes, d.ddr_total_bytes, d.ecc_single_bit_errors, d.ecc_double_bit_errors,
            d.ecc_single_bit_isolated_pages, d.ecc_double_bit_isolated_pages, d.xid_errors, d.link_up_count,
            d.detail_ts, bool(d.up), d.healthy, d.link_up, d.health, d.error)


def _host_tuple(run_id: str, node: str | None, ts: float, hs: HostSample | None,
                timeouts: int | None) -> tuple[Any, ...]:
    """The host's row (``SAMPLE_TUPLE_KEYS``): its readings go in the device columns that mean
    the same thing (CPU in util_pct, memory in the ddr columns)."""
    if hs is None:
        return (run_id, node, HOST_DEVICE, ts, None, None, None, None, None, None, timeouts,
                None, None, None, None, None, None, None, None, None, False, None, None, None, None)
    return (run_id, node, HOST_DEVICE, ts, hs.cpu_pct, None, None, None, None, hs.workload_rss_bytes, timeouts,
            hs.mem_used_bytes, hs.mem_total_bytes, None, None, None, None, None, None, None, True, None, None, None,
            None)


def sample_tuple(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """A sample row (a mapping, as ``snapshot_rows`` makes it) as a tuple of ``SAMPLE_TUPLE_KEYS``."""
    try:
        return _tuple_values(row)
    except KeyError:  # a row kept by an older writer may lack a newer column: None, as in an INSERT
        return tuple(row.get(c) for c in SAMPLE_TUPLE_KEYS)


class SampleStore(Database):
    """Sample series writes and reads (a base of ``Store``)."""

    def __init__(self, engine: Engine, url: str) -> None:
        super().__init__(engine, url)
        # (run_id, node, device) -> sample_series.id, filled as series are created or first seen.
        self._series: dict[SeriesKey, int] = {}

    # ------------------------------------------------------------------ writing
    @staticmethod
    def snapshot_rows(run_id: str, snapshot: Snapshot, node: str | None = None) -> list[dict[str, Any]]:
        """The sample rows of one tick: one per device, plus one ``host`` row (of ``node`` in
        a cluster run).

        Every row has every column, so one executemany takes them all. A device has no
        host RSS or comm-timeout total: metrics a record lacks are None.
        """
        return [dict(zip(SAMPLE_TUPLE_KEYS, t, strict=True)) for t in SampleStore.snapshot_tuples(run_id, snapshot, node)]

    @staticmethod
    def snapshot_tuples(run_id: str, snapshot: Snapshot, node: str | None = None) -> list[tuple[Any, ...]]:
        """``snapshot_rows`` as tuples of ``SAMPLE_TUPLE_KEYS`` (``sample_tuple``)."""
        ts = snapshot.ts
        rows = [_device_tuple(run_id, node, ts, d) for d in snapshot.devices]
        hs = snapshot.host_sample
        timeouts = sum(snapshot.comm_timeouts.values()) if snapshot.comm_timeouts else None
        if hs is not None or timeouts is not None:
            rows.append(_host_tuple(run_id, node, ts, hs, timeouts))
        return rows

    def add_snapshot(self, run_id: str, snapshot: Snapshot) -> int:
        """Write one tick in one transaction; returns the rows written."""
        rows = self.snapshot_rows(run_id, snapshot)
        self.add_sample_rows(rows)
        return len(rows)

    def add_sample_rows(self, rows: Sequence[Mapping[str, Any]] | Sequence[tuple[Any, ...]]) -> None:
        """Sample rows as ``snapshot_rows`` makes them (with ``run_id``, ``device`` and, in a
        cluster run, ``node``), or all as tuples of ``SAMPLE_TUPLE_KEYS`` (``snapshot_tuples``,
        the daemon's writer).

        The (run, node, device) series ids are looked up or created in the same transaction
        as the rows, so a failed write leaves no series behind. A second row of a device at
        the same ``ts`` is the same reading and is dropped.
        """
        if not rows:
            return
        tuples: Sequence[tuple[Any, ...]] = rows if isinstance(rows[0], tuple) else [sample_tuple(r) for r in rows]
        keys = {t[:3] for t in tuples}

        def insert_rows(conn: Connection, by_copy: bool) -> dict[SeriesKey, int]:
            ids, new = self._series_ids(conn, keys)
            if by_copy:
                self._copy(conn, S.samples, _COPY_COLUMNS, [(ids[t[:3]],) + t[3:] for t in tuples])
                return new
            out = [{"series_id": ids[t[:3]], **dict(zip(ROW_COLUMNS, t[3:], strict=True))} for t in tuples]
            conn.execute(self._insert_ignoring_duplicates(S.samples), out)
            return new

        # Cached only once committed: a rolled-back series id must not be reused. Every
        # series known: the COPY is all the batch writes, and its own transaction.
        self._series.update(self._retry_copy(insert_rows, alone=keys <= self._series.keys()))

    def _series_ids(
        self, conn: Any, keys: set[SeriesKey]
    ) -> tuple[dict[SeriesKey, int], dict[SeriesKey, int]]:
        """Ids of (run_id, node, device) series, creating missing ones; (all, not yet cached)."""
        ids = {k: self._series[k] for k in keys if k in self._series}
        missing = keys - ids.keys()
        if not missing:
            return ids, {}
        ss = S.sample_series
        runs = {run for run, _, _ in missing}
        found = {
            (r.run_id, r.node, r.device): r.id
            for r in conn.execute(select(ss.c.id, ss.c.run_id, ss.c.node, ss.c.device).where(ss.c.run_id.in_(runs)))
        }
        # sorted: the same ids on every backend
        for key in sorted(missing - found.keys(), key=lambda k: (k[0], k[1] or "", k[2])):
            found[key] = conn.execute(
                insert(ss).values(run_id=key[0], node=key[1], device=key[2])
            ).inserted_primary_key[0]
        new = {k: found[k] for k in missing}
        ids.update(new)
        return ids, new

    # ------------------------------------------------------------------ reading
    def run_series(self, run_id: str) -> list[tuple[int, str | None, str]]:
        """(series id, node, device) of the run's sample series, in id order."""
        ss = S.sample_series
        stmt = select(ss.c.id, ss.c.node, ss.c.device).where(ss.c.run_id == run_id).order_by(ss.c.id)
        return [(r[0], r[1], r[2]) for r in self._read(stmt)]

    def devices(self, run_id: str) -> list[tuple[str | None, str]]:
        """(node, device) of every device the run has readings of, by node then device."""
        return sorted(((node, dev) for _, node, dev in self.run_series(run_id)), key=lambda p: (p[0] or "", p[1]))

    def count_samples(self, run_id: str) -> int:
        t, ss = S.samples, S.sample_series
        stmt = (
            select(func.count())
            .select_from(t)
            .where(t.c.series_id.in_(select(ss.c.id).where(ss.c.run_id == run_id)))
        )
        return int(self._read(stmt)[0][0])

    def fault_evidence(self, run_id: str) -> dict[tuple[str | None, str], tuple[int, int, int]]:
        """Per chip (node, device; the host row left out): how many readings held its health
        word, its ECC counts and its port's state, the evidence of the device-faults criterion."""
        t, ss = S.samples, S.sample_series
        stmt = (
            select(ss.c.node, ss.c.device, func.count(t.c.health), func.count(t.c.ecc_double_bit_errors),
                   func.count(t.c.link_up))
            .select_from(t.join(ss, t.c.series_id == ss.c.id))
            .where(ss.c.run_id == run_id, ss.c.device != HOST_DEVICE)
            .group_by(ss.c.node, ss.c.device)
        )
        return {(r[0], r[1]): (int(r[2]), int(r[3]), int(r[4])) for r in self._read(stmt)}

    def chip_fault_readings(self, run_id: str) -> dict[tuple[str | None, str], dict[str, Any]]:
        """Per chip (node, device; the host row left out) what its fault views read over the
        run, in one GROUP BY: ``health`` (the worst health word seen: Critical, Alarm, Warning,
        OK, else the tool's own word, such as UNKNOWN), ``ecc_double_min`` / ``ecc_double_max``
        and ``ecc_single_min`` / ``ecc_single_max`` (the uncorrectable and correctable counts),
        ``link_readings`` and ``link_down_readings``. A view that never answered gives None,
        never 0. ``chip_stats(faults=True)`` reads the same in its own scan."""
        t = S.sample_rows
        stmt = (select(t.c.node, t.c.device, *_fault_columns(t))
                .where(t.c.run_id == run_id, t.c.device != HOST_DEVICE).group_by(t.c.node, t.c.device))
        return {(r[0], r[1]): _fault_values(dict(r._mapping)) for r in self._read(stmt)}

    def last_sample_ts(self, run_id: str, node: str | None = None) -> float | None:
        """The newest reading of the run (of one node's devices, when given)."""
        t, ss = S.samples, S.sample_series
        series = select(ss.c.id).where(ss.c.run_id == run_id)
        if node is not None:
            series = series.where(ss.c.node == node)
        stmt = select(func.max(t.c.ts)).where(t.c.series_id.in_(series))
        return self._read(stmt)[0][0]

    def load_samples(
        self,
        run_id: str,
        device: str | None = None,
        bucket_s: float | None = None,
        start: float | None = None,
        end: float | None = None,
        *,
        node: str | None = None,
    ) -> list[dict[str, Any]]:
        """Sample rows (with ``node`` and ``device``) ordered by node, device, then time; of
        one ``device`` and one ``node`` when given.

        With ``bucket_s`` the database averages each device's rows per bucket (``ts`` is the
        bucket start; ``up`` is the worst of the bucket, so a gap stays visible), which keeps a
        72 h x 16-chip chart to a few thousand points per device.
        """
        t = S.sample_rows
        where = [t.c.run_id == run_id]
        if device is not None:
            where.append(t.c.device == device)
        if node is not None:
            where.append(t.c.node == node)
        if start is not None:
            where.append(t.c.ts >= start)
        if end is not None:
            where.append(t.c.ts <= end)
        metrics = list(S.SAMPLE_METRIC_COLUMNS)
        if not bucket_s:
            cols = [t.c.ts, t.c.node, t.c.device, t.c.up, t.c.healthy, *[t.c[m] for m in metrics]]
            stmt = select(*cols).where(and_(*where)).order_by(t.c.node, t.c.device, t.c.ts)
            return [dict(r._mapping) for r in self._read(stmt)]
        bucket = self._time_bucket(t.c.ts, bucket_s).label("ts")
        up_int = func.min(case((t.c.up, 1), else_=0)).label("up")
        healthy_int = func.min(case((t.c.healthy.is_(None), None), (t.c.healthy, 1), else_=0))
        stmt = (
            select(
                bucket,
                t.c.node,
                t.c.device,
                up_int,
                healthy_int.label("healthy"),
                *[func.avg(t.c[m]).label(m) for m in metrics],
                func.count().label("n"),
            )
            .where(and_(*where))
            .group_by(t.c.node, t.c.device, bucket)
            .order_by(t.c.node, t.c.device, bucket)
        )
        out = []
        for r in self._read(stmt):
            d = dict(r._mapping)
            d["ts"] = float(d["ts"])
            d["up"] = bool(d["up"])
            d["healthy"] = None if d["healthy"] is None else bool(d["healthy"])
            for m in metrics:
                if d[m] is not None:
                    d[m] = float(d[m])
            out.append(d)
        return out

    def chip_stats(self, run_id: str, *, faults: bool = False) -> dict[tuple[str | None, str], dict[str, Any]]:
        """Per-device statistics over the whole run, keyed ``(node, device)``, in one GROUP BY;
        the host rows left out.

        Keys: ``samples`` (rows, gaps included), ``util_mean_pct``, ``util_min_pct``,
        ``temp_max_c``, ``power_mean_w``, ``power_max_w``, ``hbm_peak_bytes``,
        ``hbm_total_bytes``, ``first_ts``, ``last_ts``; all floats, None where the device never
        reported the metric. Computed from the rows, not from bucket means, which would hide
        the true minimum and maximum. With ``faults``, each also has ``faults``: what
        ``chip_fault_readings`` gives, read in the same scan.
        """
        t = S.sample_rows
        stmt = (
            select(
                t.c.node,
                t.c.device,
                func.count().label("samples"),
                func.avg(t.c.util_pct).label("util_mean_pct"),
                func.min(t.c.util_pct).label("util_min_pct"),
                func.max(t.c.temp_c).label("temp_max_c"),
                func.avg(t.c.power_w).label("power_mean_w"),
                func.max(t.c.power_w).label("power_max_w"),
                func.max(t.c.hbm_used_bytes).label("hbm_peak_bytes"),
                func.max(t.c.hbm_total_bytes).label("hbm_total_bytes"),
                func.min(t.c.ts).label("first_ts"),
                func.max(t.c.ts).label("last_ts"),
            )
            .where(t.c.run_id == run_id, t.c.device != HOST_DEVICE)
            .group_by(t.c.node, t.c.device)
            .order_by(t.c.node, t.c.device)
        )
        if faults:
            stmt = stmt.add_columns(*_fault_columns(t))
        out: dict[tuple[str | None, str], dict[str, Any]] = {}
        for r in self._read(stmt):
            d = dict(r._mapping)
            key = (d.pop("node"), d.pop("device"))
            fault = _fault_values(d) if faults else None
            out[key] = {k: (None if v is None else float(v)) for k, v in d.items()}
            if fault is not None:
                out[key]["faults"] = fault
        return out


def _fault_columns(t: Any) -> list[Any]:
    """The aggregates of a chip's fault views (``Store.chip_fault_readings``), labelled."""
    word = func.lower(t.c.health)
    rank = case(*((word == w.lower(), r) for r, w in enumerate(HEALTH_WORDS)), else_=-1)
    return [func.max(rank).label("f_health_rank"), func.max(t.c.health).label("f_health_word"),
            func.min(t.c.ecc_double_bit_errors).label("f_ecc_double_min"),
            func.max(t.c.ecc_double_bit_errors).label("f_ecc_double_max"),
            func.min(t.c.ecc_single_bit_errors).label("f_ecc_single_min"),
            func.max(t.c.ecc_single_bit_errors).label("f_ecc_single_max"),
            func.count(t.c.link_up).label("f_link_readings"),
            func.sum(case((t.c.link_up.is_(False), 1), else_=0)).label("f_link_down_readings")]


def _fault_values(d: dict[str, Any]) -> dict[str, Any]:
    """The fault readings of one row of ``_fault_columns``, taken out of ``d``."""
    f = {k[2:]: d.pop(k) for k in [k for k in d if k.startswith("f_")]}
    rank, links = f.pop("health_rank"), int(f["link_readings"] or 0)
    word = f.pop("health_word")
    f["health"] = None if rank is None else (HEALTH_WORDS[int(rank)] if int(rank) >= 0 else word)
    f["link_readings"] = links
    f["link_down_readings"] = int(f["link_down_readings"] or 0) if links else None
    return f
