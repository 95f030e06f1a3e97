"""One soak database's engine: opening it from a URL, and the one path every statement takes.

``open_engine`` takes an SQLAlchemy URL (``sqlite:///run/soak.db``,
``postgresql+psycopg://user@host/db``, ``sqlite://`` for memory) as ``normalize_url`` makes
it from a URL or a plain file path. SQLite runs in WAL mode so readers (the report app) never
block the daemon's writes; a PostgreSQL call is bounded in time.

``Database`` is the base of every part of ``soak.store.Store``: the engine, the writer lock
and the one retry and error path. The parts run each statement through its ``_retry``,
``_write``, ``_read`` or ``_read_tuples``: only transient errors are retried, each attempt
logged ('locked/busy' a few times; a lost or refused connection for a few seconds, long enough
for a pooled connection to be replaced, short enough that the daemon's loop, which watches its
workloads for hangs, is not held), and anything else is one ``StoreError``. The bulk rows
(samples, steps) go into PostgreSQL by ``COPY`` (``_retry_copy``, ``_copy``): the server
parses no statement per row and the client formats no parameters, which is most of what an
INSERT of many rows costs both.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    REAL,
    BigInteger,
    Boolean,
    Float,
    Integer,
    Table,
    cast,
    create_engine,
    event,
    func,
    insert,
    text,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    NoSuchModuleError,
    OperationalError,
)
from sqlalchemy.pool import StaticPool

from soak.errors import StoreError, mask_url, unmasked_url

log = logging.getLogger("soak.store")

# Attempts of one write while the database answers 'locked' or 'busy', and the wait before
# attempt n+1 (n times this many seconds).
WRITE_ATTEMPTS = 3
RETRY_WAIT_S = 0.2
# How long one SQLite statement waits for another process's write lock before "locked".
BUSY_TIMEOUT_MS = 10000
# A connection that was dropped or refused (the server restarted, a relay or proxy went away)
# is tried again for this long, waiting RETRY_WAIT_S, then twice that, up to RECONNECT_WAIT_MAX_S
# between attempts; then the call raises. A longer outage is the caller's to ride out (the
# daemon spools what it could not write: soak.daemon.spool).
RECONNECT_WITHIN_S = 5.0
RECONNECT_WAIT_MAX_S = 1.0
# A pooled PostgreSQL connection idle for longer than this is pinged before use: a restart of
# the server while it sat in the pool is then not seen at all. One used again sooner is not
# (a writer that drains a backlog batch after batch would pay a round trip per batch, about a
# tenth of what a batch costs it and the server); if the server went away in that moment the
# statement fails on it as lost, and the one retry path (``Database._attempts``) makes a new one.
PING_IDLE_S = 1.0

T = TypeVar("T")

# How rows go into PostgreSQL by COPY: "binary" (each value in the server's own binary form,
# nothing for either side to print or parse) or "text", which costs the writers about a tenth
# more CPU per row (benchmarks/bench_cluster.py --copy-format).
PG_COPY_FORMAT = "binary"


DB_PASSWORD_FILE_ENV = "SOAK_DB_PASSWORD_FILE"
"""A file holding the store's password (``soak run --db-password-file``, a Kubernetes Secret
mounted as a file): used where the URL has none, so the password is in no argv, URL or record."""


def normalize_url(url: str | os.PathLike[str]) -> str:
    """An SQLAlchemy URL of ``url`` (a URL, or a SQLite file's path). A URL copied from a
    record (``soak:***@db``) has no password: libpq takes it from ``PGPASSWORD`` or its
    password file (``PGPASSFILE``, ``~/.pgpass``), or soak from ``SOAK_DB_PASSWORD_FILE``."""
    url = str(url)
    if "://" in url:
        return unmasked_url(url)
    return f"sqlite:///{Path(url).expanduser().absolute()}"


def _password_from_file(environ: Mapping[str, str] = os.environ) -> str | None:
    path = environ.get(DB_PASSWORD_FILE_ENV)
    if not path:
        return None
    from soak.tomlfile import read_regular_text

    text = read_regular_text(path, DB_PASSWORD_FILE_ENV, StoreError, 64 << 10)
    password = text.split("\n", 1)[0].rstrip("\r")  # the first line, as a mounted Secret holds it
    if not password:
        raise StoreError(f"{DB_PASSWORD_FILE_ENV} {path}: the file is empty")
    return password


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # sqlite3 ignores some PRAGMAs inside an implicit transaction; run them in autocommit.
    previous = dbapi_connection.isolation_level
    dbapi_connection.isolation_level = None
    cur = dbapi_connection.cursor()
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    try:
        cur.execute("PRAGMA journal_mode=WAL")  # the first statement that reads the schema
    except UnicodeDecodeError as exc:
        raise damaged_schema(exc) from None
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()
    dbapi_connection.isolation_level = previous


def damaged_schema(exc: UnicodeDecodeError) -> Exception:
    """The database error that a damaged SQLite file raised as a ``UnicodeDecodeError``.

    SQLite quotes the token it could not parse in its message ("malformed database schema
    (runs) - unrecognized token: ..."); on a damaged schema page that token is bytes that are
    not UTF-8, and Python's sqlite3 fails decoding the message instead of raising the error.
    The message is kept, its bad bytes replaced, as the ``sqlite3.DatabaseError`` it was."""
    import sqlite3

    raw = exc.object if isinstance(exc.object, bytes | bytearray) else b""
    said = bytes(raw).decode("utf-8", "replace").splitlines()[0] if raw else "undecodable error message"
    said = "".join(c if c.isprintable() else "?" for c in said)  # one line, no control characters
    return sqlite3.DatabaseError(f"the database file is damaged: {said}")


# A store call over a network that went silent ends after this long instead of TCP's
# ~15 min of retransmissions: the agent's loop, which watches its workload for hangs and
# kills it, is the loop that makes the call. libpq options in the URL's query win.
PG_CALL_BOUND_S = 20


def _pg_bounds(url: str) -> dict[str, Any]:
    from sqlalchemy.engine import make_url

    bounds = {"connect_timeout": 10, "tcp_user_timeout": PG_CALL_BOUND_S * 1000, "keepalives": 1,
              "keepalives_idle": PG_CALL_BOUND_S // 2, "keepalives_interval": PG_CALL_BOUND_S // 4,
              "keepalives_count": 2}
    parsed = make_url(url)
    args: dict[str, Any] = {k: v for k, v in bounds.items() if k not in parsed.query}
    if parsed.password is None and "password" not in parsed.query:
        password = _password_from_file()
        if password is not None:
            args["password"] = password
    return args


def describe(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    return str(orig).splitlines()[0] if str(orig) else type(orig).__name__


def is_transient(exc: BaseException) -> bool:
    msg = describe(exc).lower()
    return "locked" in msg or "busy" in msg


# What libpq and psycopg say when the connection is gone or cannot be made (PostgreSQL
# restarted or shut down, the network or a relay in between dropped it); lower case.
_DISCONNECT_TEXT = (
    "connection refused", "connection reset", "terminating connection", "server closed the connection",
    "connection is closed", "connection already closed", "no connection to the server",
    "the database system is starting up",
    "the database system is shutting down", "ssl connection has been closed", "broken pipe",
    "consuming input failed", "connection timed out",
)


def is_disconnect(exc: BaseException) -> bool:
    """Whether ``exc`` says the database connection was lost or refused (not a bad statement)."""
    if getattr(exc, "connection_invalidated", False):
        return True
    msg = describe(exc).lower()
    return any(t in msg for t in _DISCONNECT_TEXT)


def open_engine(norm: str, *, create: bool) -> Engine:
    """The engine of ``norm`` (a URL as ``normalize_url`` makes it); nothing is connected yet.

    Raises ``StoreError`` with one line for a bad URL, a missing driver, or a SQLite file
    that is missing (``create=False``) or cannot be written where it is.
    """
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
        if engine.dialect.name == "postgresql":
            event.listen(engine, "checkin", _idle_since)
            event.listen(engine, "checkout", functools.partial(_ping_if_idle, engine.dialect))
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise StoreError(f"store URL {mask_url(norm)!r}: {describe(exc)}") from None
    except ImportError as exc:
        hint = " (pip install 'soak[pg]')" if norm.startswith("postgresql") else ""
        raise StoreError(f"store URL {mask_url(norm)!r}: database driver missing: {exc.name or exc}{hint}") from None
    if engine.dialect.name == "sqlite" and not memory:
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _idle_since(dbapi_conn: Any, record: Any) -> None:
    record.info["idle_since"] = time.monotonic()


def _ping_if_idle(dialect: Any, dbapi_conn: Any, record: Any, proxy: Any) -> None:
    """SQLAlchemy's pre-ping (the dialect's, in autocommit) of a pooled connection that sat
    idle for ``PING_IDLE_S`` or more (not of one just made): the pool replaces one that fails
    it before a statement runs on it."""
    idle_since = record.info.pop("idle_since", None)
    if idle_since is None or time.monotonic() - idle_since < PING_IDLE_S:
        return
    try:
        dialect.do_ping(dbapi_conn)
    except Exception as exc:  # noqa: BLE001 (any failure: the pool drops it and makes another)
        raise DisconnectionError(f"pooled connection failed its ping: {describe(exc)}") from exc


class _CopyRefused(Exception):
    """COPY refused a batch for its rows (``Database._retry_copy`` inserts them instead)."""


def _copy_type(t: Any) -> str:
    """The PostgreSQL type a binary COPY sends a column of SQLAlchemy type ``t`` as."""
    if isinstance(t, BigInteger):
        return "int8"
    if isinstance(t, Integer):
        return "int4"
    if isinstance(t, REAL):
        return "float4"
    if isinstance(t, Float):
        return "float8"
    if isinstance(t, Boolean):
        return "bool"
    return "text"


@functools.cache
def _copy_oids(table: Table, columns: tuple[str, ...]) -> list[int]:
    """The type oids a binary COPY of ``columns`` of ``table`` sends (worked out once: looked
    up by name for every batch, they cost a writer more than a row does)."""
    from psycopg.postgres import types

    return [types[_copy_type(table.c[c].type)].oid for c in columns]


class Database:
    """The engine of one soak database and the one path its statements take (see above)."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.url = url
        self.is_sqlite = engine.dialect.name == "sqlite"
        # One writer at a time inside this process: SQLite allows only one anyway, and the
        # in-memory database shares a single connection.
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ writing
    def _attempts(self, what: str, call: Callable[[], T]) -> T:
        """``call`` until it returns; the one place a transient error is retried.

        'locked/busy' (another process holds SQLite's write lock for longer than the busy
        timeout) is tried ``WRITE_ATTEMPTS`` times; a lost or refused connection is tried
        again for ``RECONNECT_WITHIN_S`` (the pool's connections are dropped, a new one is
        made). Each retry is logged. Anything else, or the last failure, is one ``StoreError``
        naming the store and what failed (``what``: "write", "read").

        A write whose connection dropped during its commit may have been committed: the
        tables a retried write can repeat into (samples) drop the repeat.
        """
        errors: tuple[type[BaseException], ...] = (DBAPIError,)
        dbapi_error = getattr(self.engine.dialect.loaded_dbapi, "Error", None)
        if isinstance(dbapi_error, type):
            errors = (DBAPIError, dbapi_error)
        t0 = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                return call()
            except UnicodeDecodeError as exc:  # SQLite's message on a damaged file (damaged_schema)
                raise StoreError(f"store {self.url}: {what} failed: {describe(damaged_schema(exc))}") from None
            except errors as exc:
                elapsed = time.monotonic() - t0
                if isinstance(exc, OperationalError) and is_transient(exc) and attempt < WRITE_ATTEMPTS:
                    log.warning("store busy (attempt %d/%d): %s", attempt, WRITE_ATTEMPTS, describe(exc))
                    time.sleep(RETRY_WAIT_S * attempt)
                    continue
                if is_disconnect(exc):
                    wait = min(RECONNECT_WAIT_MAX_S, RETRY_WAIT_S * 2 ** (attempt - 1))
                    if elapsed + wait < RECONNECT_WITHIN_S:
                        log.warning("store %s: connection lost (attempt %d, %.1f s): %s; trying again in %.1f s",
                                    self.url, attempt, elapsed, describe(exc), wait)
                        if not self.is_sqlite:  # (SQLite's memory database lives in its one connection)
                            self.engine.dispose()  # the other pooled connections went with it
                        time.sleep(wait)
                        continue
                    log.error("store %s: no connection for %.1f s (%d attempts)", self.url, elapsed, attempt)
                raise StoreError(f"store {self.url}: {what} failed: {describe(exc)}") from None

    def _retry(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in one transaction under the writer lock; every write goes through here
        (transient errors retried: ``_attempts``)."""

        def once() -> T:
            with self._lock, self.engine.begin() as conn:
                return work(conn)

        return self._attempts("write", once)

    def _retry_copy(self, work: Callable[[Connection, bool], T], *, alone: bool = False) -> T:
        """``work(conn, by_copy)`` in one transaction as ``_retry`` runs it. On PostgreSQL it is
        first run with ``by_copy`` True (``work`` writes its rows with ``_copy``); when that
        fails for anything but a lost connection (a reading already stored, which COPY cannot
        skip as the INSERT's ON CONFLICT does; a value COPY takes in no other type, such as a
        float in an integer column, which the INSERT casts) the whole transaction is rolled
        back and the same rows are written again with ``by_copy`` False, in a new one. Either
        way the batch is committed whole or not at all.

        ``alone``: with ``by_copy`` the work is its one COPY and nothing else, so that COPY runs
        as its own transaction (PostgreSQL commits one statement whole or not at all): no
        BEGIN and no COMMIT, two round trips of the four a batch would take."""
        if self.engine.dialect.name != "postgresql":
            return self._retry(lambda conn: work(conn, False))

        def once() -> T:
            with self._lock:
                try:
                    if alone:
                        with self.engine.connect() as conn:
                            dbapi = conn.connection.driver_connection
                            dbapi.autocommit = True
                            try:
                                return work(conn, True)
                            finally:
                                if not dbapi.closed:
                                    dbapi.autocommit = False
                    with self.engine.begin() as conn:
                        return work(conn, True)
                except _CopyRefused as exc:
                    log.info("store %s: COPY refused the batch (%s); inserting it instead", self.url, exc)
                with self.engine.begin() as conn:
                    return work(conn, False)

        return self._attempts("write", once)

    @staticmethod
    def _copy(conn: Connection, table: Table, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """``rows`` (tuples in ``columns`` order) into ``table`` by PostgreSQL's COPY, inside
        ``conn``'s transaction or as one of its own (``_retry_copy``)."""
        cols = ", ".join(f'"{c}"' for c in columns)
        binary = PG_COPY_FORMAT == "binary"
        sql = f'COPY "{table.name}" ({cols}) FROM STDIN' + (" (FORMAT BINARY)" if binary else "")
        raw = conn.connection.driver_connection
        try:
            with raw.cursor() as cur, cur.copy(sql) as cp:
                if binary:
                    cp.set_types(_copy_oids(table, tuple(columns)))
                write = cp.write_row
                for r in rows:
                    write(r)
        except Exception as exc:  # noqa: BLE001 (what COPY refused, the INSERT says again or takes)
            if is_disconnect(exc) or is_transient(exc):
                raise
            raise _CopyRefused(describe(exc)) from exc

    def reachable(self) -> bool:
        """One try, no retry: whether the database answers a trivial query now (a caller that
        waits for a store to come back asks this between its own waits)."""
        try:
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            return True
        except DBAPIError as exc:
            log.info("store %s does not answer: %s", self.url, describe(exc))
            if not self.is_sqlite:
                self.engine.dispose()
            return False

    def _write(self, statement: Any, rows: Sequence[Mapping[str, Any]] | None = None) -> Any:
        """Run one statement (with ``rows``: executemany) in its own transaction."""
        if rows is None:
            return self._retry(lambda conn: conn.execute(statement))
        if not rows:
            return None
        return self._retry(lambda conn: conn.execute(statement, list(rows)))

    def _insert_ignoring_duplicates(self, table: Any) -> Any:
        name = self.engine.dialect.name
        if name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(table).on_conflict_do_nothing()
        if name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            return sqlite_insert(table).on_conflict_do_nothing()
        return insert(table)

    def checkpoint_wal(self) -> None:
        """Fold the SQLite WAL back into the database so it cannot grow without bound."""
        if not self.is_sqlite:
            return
        with self._lock, self.engine.connect() as conn:
            conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))

    # ------------------------------------------------------------------ reading
    def _read(self, statement: Any) -> list[Any]:
        def once() -> list[Any]:
            with self.engine.connect() as conn:
                return list(conn.execute(statement))

        return self._attempts("read", once)

    def _read_tuples(self, statement: Any) -> list[tuple[Any, ...]]:
        """All rows as plain tuples through the driver's cursor: SQLAlchemy's Row objects cost
        about a second per 400 k rows, which is most of a 72 h export."""
        dialect = self.engine.dialect
        compiled = statement.compile(dialect=dialect)
        params = compiled.construct_params()
        args: Any = tuple(params[n] for n in compiled.positiontup) if dialect.paramstyle == "qmark" else params

        def once() -> list[tuple[Any, ...]]:
            raw = self.engine.raw_connection()
            try:
                cur = raw.cursor()
                cur.execute(str(compiled), args)
                out = [tuple(r) for r in cur.fetchall()]
                cur.close()
                return out
            finally:
                raw.close()

        return self._attempts("read", once)

    def _time_bucket(self, ts: Any, bucket_s: float) -> Any:
        """The start of the ``bucket_s``-wide bucket holding ``ts``, computed by the database."""
        if bucket_s <= 0:
            raise ValueError("bucket_s must be > 0")
        if self.engine.dialect.name == "postgresql":
            return func.floor(ts / bucket_s) * bucket_s
        # CAST truncates in SQLite; unix times are positive, so this is floor.
        return cast(ts / bucket_s, Integer) * bucket_s
