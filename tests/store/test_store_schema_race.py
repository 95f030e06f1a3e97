"""Many processes create one new store at once while a reader polls it.

The daemon creates its store while ``soak runs``, the app or a test's poll opens it with
``create=False``. pysqlite commits each CREATE TABLE on its own, so a reader once found
``soak_meta`` without its version row, inserted the row itself, and the creator then died on
``UNIQUE constraint failed: soak_meta.key``; two creators collided on ``table soak_meta
already exists``. A reader never writes the schema, and the schema appears whole or not at all.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from soak.errors import StoreError
from soak.store import Store
from soak.store import schema as S
from tests.store.store_poller import NOT_YET, race

N_CREATORS = 20


def _create(url: str, go: Any, results: Any) -> None:
    go.wait()
    try:
        Store.open(url).close()
        results.put(None)
    except StoreError as exc:
        results.put(str(exc))


def _version_rows(db: Path) -> list[tuple[str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT value FROM soak_meta WHERE key = 'schema_version'").fetchall()


def test_twenty_creators_and_a_polling_reader_on_one_new_store(store_url: str) -> None:
    if store_url == "sqlite://":
        pytest.skip("a memory database does not outlive its handle")
    target = store_url.removeprefix("sqlite:///")  # the SQLite file as the poller globs it
    errors, result = race(target, _create, [(store_url,)] * N_CREATORS, timeout_s=60)

    assert [e for e in errors if e is not None] == []
    assert result.writes == []
    # what a reader may be told while the store is being made: nothing else
    assert [r for r in result.refusals if not r.endswith(("no such database", NOT_YET))] == []
    assert result.complete == [target]
    with Store.open(store_url, create=False) as store, store.engine.connect() as conn:
        rows = conn.execute(select(S.meta.c.value).where(S.meta.c.key == "schema_version")).all()
    assert [tuple(r) for r in rows] == [(str(S.SCHEMA_VERSION),)]


def test_a_reader_finding_soak_meta_without_its_version_row_refuses_and_writes_nothing(tmp_path) -> None:
    # What a reader used to see halfway through a creator's schema: the first table, empty.
    db = tmp_path / "soak.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE soak_meta (key VARCHAR(64) PRIMARY KEY, value VARCHAR(256) NOT NULL)")
    with pytest.raises(StoreError) as err:
        Store.open(db, create=False)
    assert str(err.value) == f"store sqlite:///{db}: {NOT_YET}"
    assert _version_rows(db) == []
    with Store.open(db) as creator:  # the creator, coming after, finishes the schema
        assert creator.list_runs() == []
    assert _version_rows(db) == [(str(S.SCHEMA_VERSION),)]


def test_a_reader_of_an_empty_sqlite_file_is_told_there_is_no_soak_schema(tmp_path) -> None:
    db = tmp_path / "soak.db"
    sqlite3.connect(db).close()
    with pytest.raises(StoreError, match="no soak schema yet"):
        Store.open(db, create=False)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []


def test_a_creator_queued_past_one_busy_timeout_tries_the_schema_again(tmp_path, monkeypatch) -> None:
    # 20 creators of one new file on a loaded 2-core host queued longer than SQLite's busy
    # timeout, and one was told "database is locked": the schema transaction is tried again
    import threading
    import time

    from soak.store import engine

    monkeypatch.setattr(engine, "BUSY_TIMEOUT_MS", 100)
    db = tmp_path / "soak.db"
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("BEGIN IMMEDIATE")  # another creator's write lock, held 0.5 s
    release = threading.Timer(0.5, lambda: holder.execute("COMMIT"))
    started = time.monotonic()  # before the timer starts: a test thread paused here once saw 0.43 s
    release.start()
    try:
        with Store.open(db) as store:
            assert store.list_runs() == []
    finally:
        release.join()
        holder.close()
    assert time.monotonic() - started >= 0.5  # it did wait for the lock, past one busy timeout
    assert _version_rows(db) == [(str(S.SCHEMA_VERSION),)]
