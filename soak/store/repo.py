"""The repository API over the soak store: the only code that writes or reads its tables.

``Store.open(url)`` takes an SQLAlchemy URL (``sqlite:///run/soak.db``,
``postgresql+psycopg://user@host/db``, ``sqlite://`` for memory) or a plain file path.
SQLite runs in WAL mode so readers (the report app) never block the daemon's writes.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    Integer,
    and_,
    case,
    cast,
    create_engine,
    delete,
    event,
    func,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError
from sqlalchemy.pool import StaticPool

from soak.errors import StoreError
from soak.store import schema as S
from soak.store.cluster import ClusterStore
from soak.store.records import (
    FINDING_KEYS,
    HOST_DEVICE,
    RUN_STATUSES,
    STEP_TRACE_METRICS,
    EventRecord,
    ExportRows,
    FindingRecord,
    RunRecord,
    node_of,
    rank_device,
)
from soak.telemetry.records import Snapshot

log = logging.getLogger("soak.store")

# Attempts of one write while the database answers 'locked' or 'busy', and the wait before
# attempt n+1 (n times this many seconds).
WRITE_ATTEMPTS = 3
RETRY_WAIT_S = 0.2

T = TypeVar("T")


def _normalize_url(url: str | os.PathLike[str]) -> str:
    url = str(url)
    if "://" in url:
        return url
    return f"sqlite:///{Path(url).expanduser().absolute()}"


def _safe(url: str) -> str:
    """The URL for messages and logs, password masked."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL carries no password we could find
        return url


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # sqlite3 ignores some PRAGMAs inside an implicit transaction; run them in autocommit.
    previous = dbapi_connection.isolation_level
    dbapi_connection.isolation_level = None
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()
    dbapi_connection.isolation_level = previous


# A store call over a network that went silent ends after this long instead of TCP's
# ~15 min of retransmissions: the agent's loop, which watches its workload for hangs and
# kills it, is the loop that makes the call. libpq options in the URL's query win.
PG_CALL_BOUND_S = 20


def _pg_bounds(url: str) -> dict[str, Any]:
    from sqlalchemy.engine import make_url

    bounds = {"connect_timeout": 10, "tcp_user_timeout": PG_CALL_BOUND_S * 1000, "keepalives": 1,
              "keepalives_idle": PG_CALL_BOUND_S // 2, "keepalives_interval": PG_CALL_BOUND_S // 4,
              "keepalives_count": 2}
    given = make_url(url).query
    return {k: v for k, v in bounds.items() if k not in given}


def _describe(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    return str(orig).splitlines()[0] if str(orig) else type(orig).__name__


def _is_transient(exc: BaseException) -> bool:
    msg = _describe(exc).lower()
    return "locked" in msg or "busy" in msg


class Store(ClusterStore):
    """A handle on one soak database. Thread-safe; cheap to keep open for a whole run."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.url = url
        self.is_sqlite = engine.dialect.name == "sqlite"
        # One writer at a time inside this process: SQLite allows only one anyway, and the
        # in-memory database shares a single connection.
        self._lock = threading.RLock()
        # (run_id, device) -> sample_series.id, filled as series are created or first seen.
        self._series: dict[tuple[str, str], int] = {}

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, url: str | os.PathLike[str], *, create: bool = True) -> Store:
        """Open (and on first use create) the store at ``url``; checks the schema version.

        Raises ``StoreError`` with one line for a bad URL, an unwritable path or a version
        mismatch.
        """
        norm = _normalize_url(url)
        kwargs: dict[str, Any] = {}
        memory = norm in ("sqlite://", "sqlite:///:memory:")
        if norm.startswith("sqlite"):
            if memory:
                kwargs = {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
            else:
                path = Path(norm.split(":///", 1)[1])
                if not path.exists():
                    if not create:
                        raise StoreError(f"store {path}: no such database")
                    parent = path.parent
                    if not parent.is_dir():
                        raise StoreError(f"store {path}: folder {parent} does not exist")
                    if not os.access(parent, os.W_OK):
                        raise StoreError(f"store {path}: folder {parent} is not writable")
                elif not os.access(path, os.W_OK) and create:
                    raise StoreError(f"store {path}: database file is not writable")
                kwargs = {"connect_args": {"check_same_thread": False, "timeout": 10}}
        try:
            if norm.startswith("postgresql"):
                kwargs = {"connect_args": _pg_bounds(norm)}
            engine = create_engine(norm, **kwargs)
        except (ArgumentError, NoSuchModuleError, ValueError) as exc:
            raise StoreError(f"store URL {_safe(norm)!r}: {_describe(exc)}") from None
        except ImportError as exc:
            hint = " (pip install 'soak[pg]')" if norm.startswith("postgresql") else ""
            raise StoreError(f"store URL {_safe(norm)!r}: database driver missing: {exc.name or exc}{hint}") from None
        if engine.dialect.name == "sqlite" and not memory:
            event.listen(engine, "connect", _sqlite_pragmas)
        store = cls(engine, _safe(norm))
        try:
            store._init_schema(create)
        except StoreError:
            engine.dispose()
            raise
        except DBAPIError as exc:
            engine.dispose()
            raise StoreError(f"store {_safe(norm)}: {_describe(exc)}") from None
        return store

    # A reader (``create=False``: ``soak runs``, the app, ``soak cluster status``) may open a
    # store while its daemon is still creating it. It never creates the schema: until the
    # version row is there it is refused with one line. It does upgrade an older schema in
    # place, as a creator would: the report of an old run's store needs the new columns, and
    # the upgrade is one transaction, so no other opener ever sees it half done. A store
    # already at this version was made whole in one transaction: opening it writes nothing.
    def _init_schema(self, create: bool) -> None:
        with self._lock:
            with self._schema_transaction(write=False) as conn:
                version = self._version(conn)
            if version == str(S.SCHEMA_VERSION):
                return
            self._check_version(version, create)
            with self._schema_transaction(write=True) as conn:
                # again, holding the write lock: another opener may have finished meanwhile
                version = self._version(conn)
                self._check_version(version, create)
                if version is None:
                    S.metadata.create_all(conn, checkfirst=True)
                    conn.execute(insert(S.meta).values(key="schema_version", value=str(S.SCHEMA_VERSION)))
                elif version != str(S.SCHEMA_VERSION):
                    self._migrate(conn, int(version))

    @contextmanager
    def _schema_transaction(self, *, write: bool) -> Iterator[Connection]:
        """One transaction over the whole schema: the version row and every table appear at once.

        PostgreSQL has transactional DDL; its writers also take an advisory lock, so the agents
        of a cluster run opening one database at once create it once. pysqlite (legacy
        transaction control) commits before each CREATE or ALTER, which let a reader see
        ``soak_meta`` without its version row; so SQLite runs in autocommit here with our own
        BEGIN and COMMIT. ``BEGIN IMMEDIATE`` takes the write lock before reading the version:
        concurrent creators queue on it (the busy timeout) and the later ones find the schema
        made. A reader's plain BEGIN reads one snapshot and takes no write lock.
        """
        if not self.is_sqlite:
            with self.engine.begin() as conn:
                if write and self.engine.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(7150001)"))
                yield conn
            return
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
            except BaseException:
                # SQLite ends the transaction itself on some errors (a full disk)
                dbapi = conn.connection.dbapi_connection
                if dbapi is not None and dbapi.in_transaction:
                    conn.exec_driver_sql("ROLLBACK")
                raise
            conn.exec_driver_sql("COMMIT")

    @staticmethod
    def _version(conn: Connection) -> str | None:
        """The schema version row's value; None where there is no row (or no ``soak_meta``)."""
        if not inspect(conn).has_table(S.meta.name):
            return None
        row = conn.execute(select(S.meta.c.value).where(S.meta.c.key == "schema_version")).first()
        return None if row is None else str(row[0])

    def _check_version(self, version: str | None, create: bool) -> None:
        """Refuse what this opener must not make or read; pass what it may create or upgrade."""
        if version is None:
            if not create:
                raise StoreError(f"store {self.url}: no soak schema yet (being created, or not a soak database)")
            return
        if version == str(S.SCHEMA_VERSION) or (version.isdigit() and int(version) in S.MIGRATIONS):
            return
        # Checked before anything is created: a database of another version must not gain this
        # version's tables on the way to being refused.
        raise StoreError(
            f"store {self.url}: schema version {version}, this soak reads version "
            f"{S.SCHEMA_VERSION} (open it with the soak release that wrote it, or use a new database)"
        )

    def _migrate(self, conn: Connection, version: int) -> None:
        """Upgrade a database in place, one version at a time, in the caller's transaction."""
        while version in S.MIGRATIONS:
            log.warning("store %s: upgrading schema version %d to %d", self.url, version, version + 1)
            for ddl in S.MIGRATIONS[version]:
                conn.execute(text(ddl))
            version += 1
        S.metadata.create_all(conn, checkfirst=True)
        conn.execute(update(S.meta).where(S.meta.c.key == "schema_version").values(value=str(version)))

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writing
    def _retry(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in one transaction under the writer lock; every write goes through here.

        Only 'locked/busy' is retried (another process holds SQLite's write lock for longer
        than the busy timeout); each retry is logged. Anything else is one ``StoreError``.
        """
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                with self._lock, self.engine.begin() as conn:
                    return work(conn)
            except OperationalError as exc:
                if _is_transient(exc) and attempt < WRITE_ATTEMPTS:
                    log.warning("store busy (attempt %d/%d): %s", attempt, WRITE_ATTEMPTS, _describe(exc))
                    time.sleep(RETRY_WAIT_S * attempt)
                    continue
                raise StoreError(f"store {self.url}: write failed: {_describe(exc)}") from None
            except DBAPIError as exc:
                raise StoreError(f"store {self.url}: write failed: {_describe(exc)}") from None
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    def _write(self, statement: Any, rows: Sequence[Mapping[str, Any]] | None = None) -> Any:
        """Run one statement (with ``rows``: executemany) in its own transaction."""
        if rows is None:
            return self._retry(lambda conn: conn.execute(statement))
        if not rows:
            return None
        return self._retry(lambda conn: conn.execute(statement, list(rows)))

    def create_run(
        self,
        run_id: str,
        *,
        host: str,
        plan: Mapping[str, Any],
        started_ts: float,
        planned_end_ts: float | None = None,
        manifest: Mapping[str, Any] | None = None,
        workload: str | None = None,
        backend: str | None = None,
        time_scale: float = 1.0,
        run_dir: str | None = None,
    ) -> None:
        if self.get_run(run_id) is not None:
            raise StoreError(f"run {run_id} already exists in {self.url}")
        self._write(
            insert(S.runs).values(
                id=run_id,
                host=host,
                workload=workload,
                backend=backend,
                plan=json.dumps(plan, default=str),
                manifest=None if manifest is None else json.dumps(manifest, default=str),
                started_ts=started_ts,
                planned_end_ts=planned_end_ts,
                status="running",
                time_scale=time_scale,
                restarts=0,
                run_dir=run_dir,
            )
        )

    def update_run(self, run_id: str, **values: Any) -> None:
        """Change run columns (status, restarts, manifest, verdict, ...)."""
        if "manifest" in values and values["manifest"] is not None:
            values["manifest"] = json.dumps(values["manifest"], default=str)
        if "plan" in values:
            values["plan"] = json.dumps(values["plan"], default=str)
        self._write(update(S.runs).where(S.runs.c.id == run_id).values(**values))

    def finish_run(
        self, run_id: str, *, status: str, ended_ts: float, verdict: str | None = None
    ) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {RUN_STATUSES}")
        self.update_run(run_id, status=status, ended_ts=ended_ts, verdict=verdict)

    @staticmethod
    def snapshot_rows(run_id: str, snapshot: Snapshot) -> list[dict[str, Any]]:
        """The sample rows of one tick: one per device, plus one ``host`` row.

        Every row has every column, so one executemany takes them all. A device has no
        host RSS or comm-timeout total: metrics a record lacks are None.
        """
        rows: list[dict[str, Any]] = []
        for d in snapshot.devices:
            rows.append(
                {
                    "run_id": run_id,
                    "ts": snapshot.ts,
                    "device": d.device,
                    **{c: getattr(d, c) for c in S.SAMPLE_STATE_COLUMNS},
                    **{m: getattr(d, m, None) for m in S.SAMPLE_METRIC_COLUMNS},
                    "up": bool(d.up),
                }
            )
        hs = snapshot.host_sample
        timeouts = sum(snapshot.comm_timeouts.values()) if snapshot.comm_timeouts else None
        if hs is not None or timeouts is not None:
            host = dict.fromkeys((*S.SAMPLE_STATE_COLUMNS, *S.SAMPLE_METRIC_COLUMNS))
            host.update(up=hs is not None, comm_timeouts_total=timeouts)
            if hs is not None:
                # The host's readings go in the device columns that mean the same thing.
                host.update(
                    util_pct=hs.cpu_pct,
                    host_rss_bytes=hs.workload_rss_bytes,
                    ddr_used_bytes=hs.mem_used_bytes,
                    ddr_total_bytes=hs.mem_total_bytes,
                )
            rows.append({"run_id": run_id, "ts": snapshot.ts, "device": HOST_DEVICE, **host})
        return rows

    def add_snapshot(self, run_id: str, snapshot: Snapshot) -> int:
        """Write one tick in one transaction; returns the rows written."""
        rows = self.snapshot_rows(run_id, snapshot)
        self.add_sample_rows(rows)
        return len(rows)

    def add_sample_rows(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Sample rows as ``snapshot_rows`` makes them (with ``run_id`` and ``device``).

        The (run, device) series ids are looked up or created in the same transaction as
        the rows, so a failed write leaves no series behind. A second row of a device at the
        same ``ts`` is the same reading and is dropped.
        """
        if not rows:
            return

        def insert_rows(conn: Connection) -> dict[tuple[str, str], int]:
            ids, new = self._series_ids(conn, {(r["run_id"], r["device"]) for r in rows})
            out = []
            for r in rows:
                row = {k: v for k, v in r.items() if k not in ("run_id", "device")}
                row["series_id"] = ids[(r["run_id"], r["device"])]
                out.append(row)
            conn.execute(self._insert_ignoring_duplicates(S.samples), out)
            return new

        # Cached only once committed: a rolled-back series id must not be reused.
        self._series.update(self._retry(insert_rows))

    def _series_ids(
        self, conn: Any, keys: set[tuple[str, str]]
    ) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
        """Ids of (run_id, device) series, creating missing ones; (all, not yet cached)."""
        ids = {k: self._series[k] for k in keys if k in self._series}
        missing = keys - ids.keys()
        if not missing:
            return ids, {}
        ss = S.sample_series
        runs = {run for run, _ in missing}
        found = {
            (r.run_id, r.device): r.id
            for r in conn.execute(select(ss.c.id, ss.c.run_id, ss.c.device).where(ss.c.run_id.in_(runs)))
        }
        for key in sorted(missing - found.keys()):  # sorted: the same ids on every backend
            found[key] = conn.execute(
                insert(ss).values(run_id=key[0], device=key[1])
            ).inserted_primary_key[0]
        new = {k: found[k] for k in missing}
        ids.update(new)
        return ids, new

    def _insert_ignoring_duplicates(self, table: Any) -> Any:
        name = self.engine.dialect.name
        if name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(table).on_conflict_do_nothing()
        if name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            return sqlite_insert(table).on_conflict_do_nothing()
        return insert(table)

    def writer(self, run_id: str, *, max_rows: int = 512, max_delay_s: float = 5.0,
               node: str | None = None) -> BatchWriter:
        """A buffered sample writer: commits every ``max_rows`` rows or ``max_delay_s``.

        ``node`` (a cluster run) stores each device as ``node/device``, so the chips of every
        node stay apart in one run; ``node_of`` reads it back."""
        return BatchWriter(self, run_id, max_rows=max_rows, max_delay_s=max_delay_s, node=node)

    def add_steps(self, run_id: str, rows: Iterable[Mapping[str, Any]], node: str | None = None) -> None:
        """Aggregated step rows (keys as the ``steps`` table; run_id and node are filled in)."""
        cols = set(S.steps.c.keys()) - {"id"}
        out = [{**{k: r.get(k) for k in cols}, "run_id": run_id, "node": r.get("node") or node} for r in rows]
        self._write(insert(S.steps), out)

    def add_event(
        self,
        run_id: str,
        kind: str,
        *,
        ts: float,
        end_ts: float | None = None,
        workload: str | None = None,
        rank: int | None = None,
        message: str | None = None,
        detail: Mapping[str, Any] | None = None,
        node: str | None = None,
    ) -> None:
        if kind not in S.EVENT_KINDS:
            raise ValueError(f"event kind {kind!r} is not one of {S.EVENT_KINDS}")
        self._write(
            insert(S.events).values(
                run_id=run_id,
                ts=ts,
                end_ts=end_ts,
                kind=kind,
                workload=workload,
                rank=rank,
                message=message,
                detail=json.dumps(dict(detail or {}), default=str),
                node=node,
            )
        )

    def replace_findings(self, run_id: str, findings: Iterable[Mapping[str, Any]], *, node: str | None = None,
                         kinds: Sequence[str] | None = None) -> int:
        """Replace the run's findings with ``findings`` (analysis dicts), atomically.

        ``node`` and ``kinds`` narrow what is replaced: a cluster node agent replaces its own
        chips' findings (``node``, the single-chip kinds), the leader the peer comparison's
        (``kinds``), neither touching the other's."""
        rows = []
        for f in findings:
            rows.append(
                {
                    "run_id": run_id,
                    "kind": str(f["kind"]),
                    "device": None if f.get("device") is None else str(f.get("device")),
                    "metric": f.get("metric"),
                    "start_ts": f.get("start"),
                    "end_ts": f.get("end"),
                    "severity": f.get("severity"),
                    "summary": f.get("summary"),
                    "detail": json.dumps(
                        {k: v for k, v in f.items() if k not in FINDING_KEYS}, default=str
                    ),
                    "node": f.get("node") or node_of(f.get("device")),
                }
            )

        f = S.findings
        scope = [f.c.run_id == run_id]
        if node is not None:
            scope.append(f.c.node == node)
        if kinds is not None:
            scope.append(f.c.kind.in_(list(kinds)))

        def replace(conn: Connection) -> None:
            conn.execute(delete(f).where(*scope))
            if rows:
                conn.execute(insert(S.findings), rows)

        self._retry(replace)
        return len(rows)

    def checkpoint_wal(self) -> None:
        """Fold the SQLite WAL back into the database so it cannot grow without bound."""
        if not self.is_sqlite:
            return
        with self._lock, self.engine.connect() as conn:
            conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))

    # ------------------------------------------------------------------ reading
    def _read(self, statement: Any) -> list[Any]:
        try:
            with self.engine.connect() as conn:
                return list(conn.execute(statement))
        except DBAPIError as exc:
            raise StoreError(f"store {self.url}: read failed: {_describe(exc)}") from None

    def _read_tuples(self, statement: Any) -> list[tuple[Any, ...]]:
        """All rows as plain tuples through the driver's cursor: SQLAlchemy's Row objects cost
        about a second per 400 k rows, which is most of a 72 h export."""
        dialect = self.engine.dialect
        compiled = statement.compile(dialect=dialect)
        params = compiled.construct_params()
        args: Any = tuple(params[n] for n in compiled.positiontup) if dialect.paramstyle == "qmark" else params
        try:
            raw = self.engine.raw_connection()
            try:
                cur = raw.cursor()
                cur.execute(str(compiled), args)
                out = [tuple(r) for r in cur.fetchall()]
                cur.close()
                return out
            finally:
                raw.close()
        except (DBAPIError, dialect.loaded_dbapi.Error) as exc:
            raise StoreError(f"store {self.url}: read failed: {_describe(exc)}") from None

    def _time_bucket(self, ts: Any, bucket_s: float) -> Any:
        """The start of the ``bucket_s``-wide bucket holding ``ts``, computed by the database."""
        if bucket_s <= 0:
            raise ValueError("bucket_s must be > 0")
        if self.engine.dialect.name == "postgresql":
            return func.floor(ts / bucket_s) * bucket_s
        # CAST truncates in SQLite; unix times are positive, so this is floor.
        return cast(ts / bucket_s, Integer) * bucket_s

    @staticmethod
    def _run_record(row: Any) -> RunRecord:
        m = row._mapping
        return RunRecord(
            id=m["id"],
            host=m["host"],
            workload=m["workload"],
            backend=m["backend"],
            plan=json.loads(m["plan"]) if m["plan"] else {},
            manifest=json.loads(m["manifest"]) if m["manifest"] else None,
            started_ts=m["started_ts"],
            planned_end_ts=m["planned_end_ts"],
            ended_ts=m["ended_ts"],
            status=m["status"],
            verdict=m["verdict"],
            time_scale=m["time_scale"],
            restarts=m["restarts"] or 0,
            run_dir=m["run_dir"],
            nodes=m["nodes"] or 1,
            generation=m["generation"] or 0,
            plan_digest=m["plan_digest"],
        )

    def list_runs(self) -> list[RunRecord]:
        """All runs, newest first."""
        rows = self._read(select(S.runs).order_by(S.runs.c.started_ts.desc(), S.runs.c.id))
        return [self._run_record(r) for r in rows]

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._read(select(S.runs).where(S.runs.c.id == run_id))
        return self._run_record(rows[0]) if rows else None

    def _run_series(self, run_id: str) -> list[tuple[int, str]]:
        """(series id, device) of the run's sample series, in id order."""
        ss = S.sample_series
        return [
            (r[0], r[1])
            for r in self._read(select(ss.c.id, ss.c.device).where(ss.c.run_id == run_id).order_by(ss.c.id))
        ]

    def devices(self, run_id: str) -> list[str]:
        return sorted(dev for _, dev in self._run_series(run_id))

    def count_samples(self, run_id: str) -> int:
        t, ss = S.samples, S.sample_series
        stmt = (
            select(func.count())
            .select_from(t)
            .where(t.c.series_id.in_(select(ss.c.id).where(ss.c.run_id == run_id)))
        )
        return int(self._read(stmt)[0][0])

    def last_sample_ts(self, run_id: str, node: str | None = None) -> float | None:
        """The newest reading of the run (of one node's devices, ``node/…``, when given)."""
        t, ss = S.samples, S.sample_series
        series = select(ss.c.id).where(ss.c.run_id == run_id)
        if node is not None:
            series = series.where(ss.c.device.startswith(f"{node}/", autoescape=True))
        stmt = select(func.max(t.c.ts)).where(t.c.series_id.in_(series))
        return self._read(stmt)[0][0]

    def load_samples(
        self,
        run_id: str,
        device: str | None = None,
        bucket_s: float | None = None,
        start: float | None = None,
        end: float | None = None,
    ) -> list[dict[str, Any]]:
        """Sample rows ordered by device then time.

        With ``bucket_s`` the database averages each device's rows per bucket (``ts`` is the
        bucket start; ``up`` is the worst of the bucket, so a gap stays visible), which keeps a
        72 h x 16-chip chart to a few thousand points per device.
        """
        t = S.sample_rows
        where = [t.c.run_id == run_id]
        if device is not None:
            where.append(t.c.device == device)
        if start is not None:
            where.append(t.c.ts >= start)
        if end is not None:
            where.append(t.c.ts <= end)
        metrics = list(S.SAMPLE_METRIC_COLUMNS)
        if not bucket_s:
            cols = [t.c.ts, t.c.device, t.c.up, t.c.healthy, *[t.c[m] for m in metrics]]
            stmt = select(*cols).where(and_(*where)).order_by(t.c.device, t.c.ts)
            return [dict(r._mapping) for r in self._read(stmt)]
        bucket = self._time_bucket(t.c.ts, bucket_s).label("ts")
        up_int = func.min(case((t.c.up, 1), else_=0)).label("up")
        healthy_int = func.min(case((t.c.healthy.is_(None), None), (t.c.healthy, 1), else_=0))
        stmt = (
            select(
                bucket,
                t.c.device,
                up_int,
                healthy_int.label("healthy"),
                *[func.avg(t.c[m]).label(m) for m in metrics],
                func.count().label("n"),
            )
            .where(and_(*where))
            .group_by(t.c.device, bucket)
            .order_by(t.c.device, bucket)
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

    def chip_stats(self, run_id: str) -> dict[str, dict[str, float | None]]:
        """Per-device statistics over the whole run, in one GROUP BY; the host row left out.

        Keys: ``samples`` (rows, gaps included), ``util_mean_pct``, ``util_min_pct``,
        ``temp_max_c``, ``power_mean_w``, ``power_max_w``, ``hbm_peak_bytes``,
        ``hbm_total_bytes``, ``first_ts``, ``last_ts``; all floats, None where the device never
        reported the metric. Computed from the rows, not from bucket means, which would hide
        the true minimum and maximum.
        """
        t = S.sample_rows
        stmt = (
            select(
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
            .group_by(t.c.device)
            .order_by(t.c.device)
        )
        out: dict[str, dict[str, float | None]] = {}
        for r in self._read(stmt):
            d = dict(r._mapping)
            dev = d.pop("device")
            out[dev] = {k: (None if v is None else float(v)) for k, v in d.items()}
        return out

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

    def heartbeat_marks(self, run_id: str, event_kinds: Iterable[str], node: str | None = None,
                        ) -> dict[tuple[str, int], tuple[float | None, float | None]]:
        """Per (workload, rank): the ``ts`` of the last step row and of the last event of
        ``event_kinds`` stored from its heartbeats (of ``node`` in a cluster run); where a
        resumed daemon reads on."""
        st, ev = S.steps, S.events
        marks: dict[tuple[str, int], list[float | None]] = {}
        steps = (select(st.c.workload, st.c.rank, func.max(st.c.ts))
                 .where(st.c.run_id == run_id, *([st.c.node == node] if node is not None else []))
                 .group_by(st.c.workload, st.c.rank))
        for wl, rank, ts in self._read(steps):
            marks.setdefault((wl, int(rank)), [None, None])[0] = ts
        events = (select(ev.c.workload, ev.c.rank, func.max(ev.c.ts))
                  .where(ev.c.run_id == run_id, ev.c.kind.in_(list(event_kinds)), ev.c.workload.is_not(None),
                         ev.c.rank.is_not(None), *([ev.c.node == node] if node is not None else []))
                  .group_by(ev.c.workload, ev.c.rank))
        for wl, rank, ts in self._read(events):
            marks.setdefault((wl, int(rank)), [None, None])[1] = ts
        return {k: (v[0], v[1]) for k, v in marks.items()}

    def load_steps(self, run_id: str, rank: int | None = None) -> list[dict[str, Any]]:
        t = S.steps
        where = [t.c.run_id == run_id]
        if rank is not None:
            where.append(t.c.rank == rank)
        stmt = select(t).where(and_(*where)).order_by(t.c.workload, t.c.rank, t.c.ts)
        return [
            {k: v for k, v in r._mapping.items() if k not in ("id", "run_id")}
            for r in self._read(stmt)
        ]

    def load_events(self, run_id: str, kind: str | None = None) -> list[EventRecord]:
        t = S.events
        where = [t.c.run_id == run_id]
        if kind is not None:
            where.append(t.c.kind == kind)
        stmt = select(t).where(and_(*where)).order_by(t.c.ts, t.c.id)
        return [
            EventRecord(
                ts=r.ts,
                kind=r.kind,
                end_ts=r.end_ts,
                workload=r.workload,
                rank=r.rank,
                message=r.message,
                detail=json.loads(r.detail) if r.detail else {},
                node=r.node,
            )
            for r in self._read(stmt)
        ]

    def load_findings(self, run_id: str) -> list[FindingRecord]:
        t = S.findings
        stmt = select(t).where(t.c.run_id == run_id).order_by(t.c.start_ts, t.c.id)
        return [
            FindingRecord(
                kind=r.kind,
                device=r.device,
                metric=r.metric,
                start=r.start_ts,
                end=r.end_ts,
                severity=r.severity,
                summary=r.summary,
                detail=json.loads(r.detail) if r.detail else {},
            )
            for r in self._read(stmt)
        ]

    def load_trace(
        self, run_id: str, chunk_rows: int = 20000, bucket_s: float | None = None, *,
        node: str | None = None, start: float | None = None,
    ) -> Iterator[tuple[float, str, str, float]]:
        """The run as long-format ``(ts, device, metric, value)``, the analysis' input.

        Device metrics come from the samples (None values left out: a gap, not a zero);
        ``STEP_TRACE_METRICS`` from the steps, with device ``<workload>-rank<R>``.
        Read in chunks so a 72 h run never sits in memory as rows. With ``bucket_s`` the
        device metrics are bucket means computed in SQL (the daemon's online analysis of a
        long run); the steps stay as stored.

        ``node`` (a cluster run) reads that node's chips and ranks alone, devices named as
        on the node (``npu0-0``, not ``node/npu0-0``); ``start`` the rows from then on.
        """
        t = S.samples
        metrics = S.SAMPLE_METRIC_COLUMNS
        prefix = "" if node is None else f"{node}/"
        series = [(sid, dev[len(prefix):]) for sid, dev in self._run_series(run_id) if dev.startswith(prefix)]
        if bucket_s:
            for _sid, dev in series:
                for r in self.load_samples(run_id, device=prefix + dev, bucket_s=bucket_s, start=start):
                    for m in metrics:
                        if r[m] is not None:
                            yield (r["ts"], dev, m, float(r[m]))
        # Device by device (series id order), each in time order: the primary key's order,
        # read in chunks from the last timestamp seen.
        for sid, dev in [] if bucket_s else series:
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
                            yield (r[0], dev, m, float(v))
                if len(rows) < chunk_rows:
                    break
                last_ts = rows[-1][0]
        s = S.steps
        where = [s.c.run_id == run_id]
        if node is not None:
            where.append(s.c.node == node)
        if start is not None:
            where.append(s.c.ts >= start)
        stmt = (
            select(s.c.ts, s.c.workload, s.c.rank, *[s.c[m] for m in STEP_TRACE_METRICS])
            .where(*where)
            .order_by(s.c.ts)
        )
        for r in self._read(stmt):
            dev = rank_device(r[1], r[2])
            for m, v in zip(STEP_TRACE_METRICS, r[3:], strict=True):
                if v is not None:
                    yield (r[0], dev, m, float(v))

    def export_rows(self, run_id: str) -> ExportRows:
        """The run's raw rows in two queries, as plain tuples (see ``ExportRows``).

        The same values and order as ``load_trace`` before it is made long (gaps are None
        here), read without SQLAlchemy's per-row objects: a report turns a 72 h run into its
        CSV and arrays from these in a few seconds.
        """
        t = S.sample_rows
        metrics = S.SAMPLE_METRIC_COLUMNS
        samples = self._read_tuples(
            select(t.c.ts, t.c.device, *[t.c[m] for m in metrics])
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

    def export_csv(self, run_id: str, path: str | os.PathLike[str]) -> int:
        """Write the run's long-format trace CSV (``timestamp,device,metric,value``)."""
        n = 0
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["timestamp", "device", "metric", "value"])
            for ts, dev, metric, value in self.load_trace(run_id):
                w.writerow([repr(float(ts)), dev, metric, repr(value)])
                n += 1
        return n


class BatchWriter:
    """Buffers sample rows and commits them together; a crash loses at most one batch.

    The buffer is bounded: if the database stays unwritable, the error is raised to the
    caller (the daemon stops cleanly) instead of rows piling up in memory.
    """

    def __init__(self, store: Store, run_id: str, *, max_rows: int, max_delay_s: float,
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
        rows = Store.snapshot_rows(self.run_id, snapshot)
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
