"""The store URL's password: masked in every line soak prints, gone from a URL copied back
from a record, and taken from ``SOAK_DB_PASSWORD_FILE`` where the URL has none."""

from __future__ import annotations

import pytest

from soak.cli import main
from soak.errors import mask_url, redact
from soak.store.engine import DB_PASSWORD_FILE_ENV, normalize_url


@pytest.mark.parametrize("url,shown", [
    ("postgresql+psycopg://soak:S3cret@db:5432/soak", "postgresql+psycopg://soak:***@db:5432/soak"),
    # a password may hold '/' and ':' (SQLAlchemy reads it up to the '@')
    ("postgresql+psycopg://soak:a/b:c@db/soak?sslmode=require", "postgresql+psycopg://soak:***@db/soak?sslmode=require"),
    ("postgresql+psycopg://soak@db/soak?password=S3cret&sslmode=require",
     "postgresql+psycopg://soak@db/soak?password=***&sslmode=require"),
    ("postgresql+psycopg://soak@db/soak", "postgresql+psycopg://soak@db/soak"),
    ("sqlite:////data/a:b@c/soak.db", "sqlite:////data/a:b@c/soak.db"),
    ("postgresql+psycopg://soak:***@db/soak", "postgresql+psycopg://soak:***@db/soak"),
])
def test_mask_url(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_redact_masks_a_url_inside_a_line() -> None:
    assert redact("store postgresql://u:S3cret@h/db: write failed") == "store postgresql://u:***@h/db: write failed"


# A URL SQLAlchemy cannot parse (a port that is no number) was printed as given, password
# and all: the masking only worked on URLs it could parse.
def test_an_unparsable_store_url_is_printed_masked(capsys) -> None:
    assert main(["runs", "list", "--db", "postgresql+psycopg://soak:S3cretPW@db:port/soak"]) == 2
    err = capsys.readouterr().err
    assert "soak:***@db:port/soak" in err and "S3cretPW" not in err, err


def test_a_masked_url_copied_from_a_record_has_no_password() -> None:
    # libpq then takes it from PGPASSWORD or its password file, soak from SOAK_DB_PASSWORD_FILE
    assert normalize_url("postgresql+psycopg://soak:***@db:5432/soak") == "postgresql+psycopg://soak@db:5432/soak"
    assert normalize_url("postgresql+psycopg://soak:x***@db/soak") == "postgresql+psycopg://soak:x***@db/soak"


def test_an_unreadable_password_file_is_one_line(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv(DB_PASSWORD_FILE_ENV, str(tmp_path / "missing"))
    assert main(["runs", "list", "--db", "postgresql+psycopg://soak@127.0.0.1:1/soak"]) == 2
    err = capsys.readouterr().err
    assert err == f"soak: error: {DB_PASSWORD_FILE_ENV} {tmp_path / 'missing'}: no such file\n"


@pytest.mark.pg
def test_the_password_file_gives_the_connection_its_password(db_url: str, tmp_path, monkeypatch) -> None:
    from soak.store import Store

    secret = tmp_path / "db-password"
    secret.write_text("S3cret-from-file\n")
    monkeypatch.setenv(DB_PASSWORD_FILE_ENV, str(secret))
    with Store.open(db_url, create=True) as store:
        raw = store.engine.raw_connection()
        try:
            assert raw.driver_connection.info.password == "S3cret-from-file"
        finally:
            raw.close()
        assert "S3cret" not in store.url
    # a password in the URL wins over the file
    with Store.open(db_url.replace("://postgres@", "://postgres:in-url@"), create=False) as store:
        raw = store.engine.raw_connection()
        try:
            assert raw.driver_connection.info.password == "in-url"
        finally:
            raw.close()


# A run recorded before soak masked its plan keeps the password in its row: every report of
# it (the PDF's plan appendix, the app, `soak runs show`) read it from there.
def test_a_password_in_an_old_run_row_is_masked_when_read(tmp_path, capsys) -> None:
    from soak.store import Store

    db = tmp_path / "r1" / "soak.db"
    db.parent.mkdir()
    with Store.open(db) as store:
        store.create_run("r1", host="h", plan={"run": {"db": "postgresql+psycopg://soak:S3cretPW@db/soak"}},
                         started_ts=1_764_000_000.0, backend="sim")
        assert store.get_run("r1").plan["run"]["db"] == "postgresql+psycopg://soak:***@db/soak"
    assert main(["runs", "show", "r1", "--data-dir", str(tmp_path), "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert "S3cretPW" not in out and "soak:***@db/soak" in out
