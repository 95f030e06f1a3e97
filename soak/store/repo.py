"""The repository API over the soak store: the only code that writes or reads its tables.

``Store.open(url)`` takes an SQLAlchemy URL (``sqlite:///run/soak.db``,
``postgresql+psycopg://user@host/db``, ``sqlite://`` for memory) or a plain file path, and
creates or checks the schema. ``Store`` is made of its parts, one module each: the runs and
their log (``runs``), the sample series (``samples``), traces and exports (``trace``) and
cluster runs (``cluster``), all over one engine (``engine``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import insert, inspect, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, OperationalError

from soak.errors import StoreError, mask_url
from soak.store import schema as S
from soak.store.cluster import ClusterStore
from soak.store.engine import (
    RETRY_WAIT_S,
    WRITE_ATTEMPTS,
    describe,
    is_transient,
    normalize_url,
    open_engine,
)
from soak.store.trace import TraceStore
from soak.store.writer import BatchWriter

log = logging.getLogger("soak.store")


class Store(TraceStore, ClusterStore):
    """A handle on one soak database. Thread-safe; cheap to keep open for a whole run."""

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, url: str | os.PathLike[str], *, create: bool = True) -> Store:
        """Open (and on first use create) the store at ``url``; checks the schema version.

        Raises ``StoreError`` with one line for a bad URL, an unwritable path or a version
        mismatch.
        """
        norm = normalize_url(url)
        engine = open_engine(norm, create=create)
        store = cls(engine, mask_url(norm))
        try:
            # many creators of one new SQLite file queue for its write lock; on a loaded host
            # the queue can outlast one busy timeout (20 at once on two cores: one was told
            # "database is locked"), so a locked schema transaction is tried again
            for attempt in range(1, WRITE_ATTEMPTS + 1):
                try:
                    store._init_schema(create)
                    break
                except OperationalError as exc:
                    if not (store.is_sqlite and is_transient(exc)) or attempt == WRITE_ATTEMPTS:
                        raise
                    log.warning("store %s: schema busy (attempt %d/%d): %s", store.url, attempt, WRITE_ATTEMPTS,
                                describe(exc))
                    time.sleep(RETRY_WAIT_S * attempt)
        except StoreError:
            engine.dispose()
            raise
        except DBAPIError as exc:
            engine.dispose()
            raise StoreError(f"store {mask_url(norm)}: {describe(exc)}") from None
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
            for step in S.MIGRATIONS[version]:
                if isinstance(step, str):
                    conn.execute(text(step))
                else:
                    step(conn)
            version += 1
        S.metadata.create_all(conn, checkfirst=True)
        conn.execute(update(S.meta).where(S.meta.c.key == "schema_version").values(value=str(version)))

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writing samples
    def writer(self, run_id: str, *, max_rows: int = 512, max_delay_s: float = 5.0,
               node: str | None = None) -> BatchWriter:
        """A buffered sample writer: commits every ``max_rows`` rows or ``max_delay_s``.

        ``node`` (a cluster run) is stored with each of its rows, so the chips of every node
        stay apart in one run."""
        return BatchWriter(self, run_id, max_rows=max_rows, max_delay_s=max_delay_s, node=node)
