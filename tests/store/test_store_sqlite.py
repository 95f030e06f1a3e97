"""SQLite-specific behaviour: WAL, file paths, unwritable locations, data kept across reopen."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from soak.errors import StoreError
from soak.store import Store
from soak.telemetry.records import DeviceSample, Snapshot
from tests.conftest import skip_unless_ci

T0 = 1_764_000_000.0


def _snap(ts: float) -> Snapshot:
    return Snapshot(ts=ts, host="h", devices=(DeviceSample(device="cpu", backend="cpu", util_pct=5.0),))


def test_plain_path_opens_sqlite_in_wal_mode(tmp_path) -> None:
    s = Store.open(tmp_path / "soak.db")
    with s.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 10000
    s.close()


def test_reader_is_not_blocked_by_an_open_write_transaction(tmp_path) -> None:
    db = tmp_path / "soak.db"
    s = Store.open(db)
    s.create_run("r", host="h", plan={}, started_ts=T0)
    s.add_snapshot("r", _snap(T0))
    writer = sqlite3.connect(db)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO samples (series_id, ts, up) SELECT id, 1, 1 FROM sample_series WHERE run_id = 'r'")
    try:
        # WAL: the reader sees the committed row at once, without waiting for the writer
        assert s.count_samples("r") == 1
    finally:
        writer.rollback()
        writer.close()
        s.close()


def test_committed_rows_survive_reopen(tmp_path) -> None:
    db = tmp_path / "soak.db"
    s = Store.open(f"sqlite:///{db}")
    s.create_run("r", host="h", plan={"a": 1}, started_ts=T0)
    s.add_snapshot("r", _snap(T0))
    s.close()
    s2 = Store.open(db)
    assert s2.count_samples("r") == 1 and s2.get_run("r").plan == {"a": 1}
    s2.close()


def test_missing_folder_is_one_clear_error(tmp_path) -> None:
    with pytest.raises(StoreError, match=r"folder .*nope does not exist"):
        Store.open(tmp_path / "nope" / "soak.db")


@pytest.fixture
def unwritable_dir(tmp_path) -> Iterator[Path]:
    """A folder this process cannot write: mode 0500, or for root (who writes anywhere, and
    CI runs as root) a read-only bind mount of it."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    mounted = False
    if os.geteuid() == 0:
        for cmd in (["mount", "--bind", str(ro), str(ro)], ["mount", "-o", "remount,bind,ro", str(ro)]):
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            if r.returncode != 0:
                if mounted:
                    subprocess.run(["umount", str(ro)], capture_output=True, timeout=30)
                skip_unless_ci(f"root, and no read-only bind mount here: {r.stderr.strip()}")
            mounted = True
    try:
        yield ro
    finally:
        if mounted:
            subprocess.run(["umount", str(ro)], capture_output=True, timeout=30)
        ro.chmod(0o700)


def test_unwritable_folder_is_one_clear_error(unwritable_dir) -> None:
    with pytest.raises(StoreError, match="is not writable"):
        Store.open(unwritable_dir / "soak.db")
    assert not (unwritable_dir / "soak.db").exists()


def test_bad_url_is_one_clear_error() -> None:
    with pytest.raises(StoreError, match="store URL"):
        Store.open("nosuchdialect://x/y")


def test_open_without_create_refuses_missing_file(tmp_path) -> None:
    with pytest.raises(StoreError, match="no such database"):
        Store.open(tmp_path / "absent.db", create=False)


def test_errors_never_print_the_database_password() -> None:
    with pytest.raises(StoreError) as err:
        Store.open("postgresql+psycopg://soak:s3cret@127.0.0.1:1/soak")
    assert "s3cret" not in str(err.value) and "***" in str(err.value)
