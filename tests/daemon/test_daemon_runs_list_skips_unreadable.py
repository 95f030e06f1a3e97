"""`soak runs list` over a data dir where one run folder's store cannot be read (another
schema version, a damaged file): the others are listed, the bad one named on stderr."""

from __future__ import annotations

from soak.cli import main
from soak.store import Store


def test_one_unreadable_store_does_not_hide_the_others(tmp_path, capsys) -> None:
    good = tmp_path / "r-good"
    good.mkdir()
    with Store.open(good / "soak.db") as store:
        store.create_run("r-good", host="h1", plan={}, started_ts=1_790_000_000.0)
    bad = tmp_path / "r-bad"
    bad.mkdir()
    (bad / "soak.db").write_bytes(b"this is not an SQLite database" * 100)
    rc = main(["runs", "list", "--data-dir", str(tmp_path)])
    cap = capsys.readouterr()
    assert rc == 0
    assert "r-good" in cap.out
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("soak runs: skipped ") and "r-bad" in lines[0]


def test_with_one_named_store_the_error_stays_an_error(tmp_path, capsys) -> None:
    bad = tmp_path / "soak.db"
    bad.write_bytes(b"this is not an SQLite database" * 100)
    rc = main(["runs", "list", "--db", str(bad)])
    assert rc == 2
    assert capsys.readouterr().err.startswith("soak: error: ")
