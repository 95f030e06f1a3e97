"""``soak report pdf`` and ``soak runs show`` on a ``soak.db`` with damaged pages: a report,
or one ``soak: error:`` line naming the store, never an ``sqlite3.DatabaseError`` traceback."""

from __future__ import annotations

import random
import shutil

import pytest

from soak.store import Store
from tests.fuzz.fuzz_helpers import fuzz_cases, fuzz_seed, run_cli
from tests.report.synth import write_run

pytestmark = [pytest.mark.slow, pytest.mark.compute]  # pyproject.toml
PAGE = 4096


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    run_dir = root / "fz"
    run_dir.mkdir()
    with Store.open(run_dir / "soak.db") as store:
        write_run(store, "fz", chips=1, hours=0.2, interval_s=30.0, findings=True)
        store.update_run("fz", run_dir=str(run_dir))
    return run_dir / "soak.db"


def _cases(rng: random.Random, pages: int, count: int) -> list[tuple[int, int]]:
    """Page 1 (the header and the schema), then ``count`` spans of the tables' pages, damaged in turn."""
    return [(0, 100), (16, 2), (28, 4), *((rng.randrange(1, pages) * PAGE + rng.randrange(PAGE - 64), 64)
                                          for _ in range(count))]


def _damaged_copy(small_store, runs, offset: int, damage: bytes):
    shutil.copytree(small_store.parent, runs / "fz")
    with open(runs / "fz" / "soak.db", "r+b") as fh:
        fh.seek(offset)
        fh.write(damage)


def test_report_of_a_store_with_damaged_pages_is_a_report_or_one_line(tmp_path, small_store) -> None:
    seed = fuzz_seed(5)
    rng = random.Random(seed)
    cases = _cases(rng, small_store.stat().st_size // PAGE, fuzz_cases(6))
    refused = 0
    for i, (offset, n) in enumerate(cases):
        runs = tmp_path / f"case{i}"
        _damaged_copy(small_store, runs, offset, bytes(rng.randrange(256) for _ in range(n)))
        for argv in (["runs", "show", "fz", "--data-dir", str(runs)],
                     ["report", "pdf", "fz", "--data-dir", str(runs), "-o", str(runs / "r.pdf"), "--unsigned"]):
            out = run_cli(argv, f"seed {seed} case {i}: {argv[:2]} with {n} bytes damaged at offset {offset}")
            if out.rc == 2:
                refused += 1
                assert "store" in out.err, out.err
                break
    assert refused >= 3  # the header cases at least


def test_seed_5_case_196_a_schema_with_bytes_that_are_no_utf8_is_one_line(tmp_path, small_store) -> None:
    # Found at seed 5 with 300 cases: SQLite quotes the damaged schema's token in its message,
    # and Python's sqlite3 raised UnicodeDecodeError decoding that message (a traceback).
    rng = random.Random(5)
    cases = _cases(rng, small_store.stat().st_size // PAGE, 300)
    damage = [bytes(rng.randrange(256) for _ in range(n)) for _offset, n in cases]  # drawn in the fuzz's order
    _damaged_copy(small_store, tmp_path, cases[196][0], damage[196])
    out = run_cli(["runs", "show", "fz", "--data-dir", str(tmp_path)], "seed 5 case 196")
    assert out.rc == 2 and "store" in out.err and "the database file is damaged" in out.err, out.err


def test_a_schema_token_that_is_no_utf8_is_one_line(tmp_path, small_store) -> None:
    # the same cause, made on purpose: the runs table's SQL in the schema, bytes that are no UTF-8
    runs = tmp_path / "runs"
    shutil.copytree(small_store.parent, runs / "fz")
    db = runs / "fz" / "soak.db"
    data = bytearray(db.read_bytes())
    at = data.index(b"CREATE TABLE runs")
    data[at + 13:at + 17] = b"'\xc7\xff\xfe"  # "runs" -> an open quote, then bytes no UTF-8 decoder takes
    db.write_bytes(bytes(data))
    for argv in (["runs", "show", "fz", "--data-dir", str(runs)],
                 ["report", "pdf", "fz", "--data-dir", str(runs), "-o", str(tmp_path / "r.pdf"), "--unsigned"]):
        out = run_cli(argv, f"{argv[:2]} on a schema with bytes that are no UTF-8")
        assert out.rc == 2 and "the database file is damaged" in out.err, out.err
