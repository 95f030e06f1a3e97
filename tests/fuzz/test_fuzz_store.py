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


def test_report_of_a_store_with_damaged_pages_is_a_report_or_one_line(tmp_path, small_store) -> None:
    seed = fuzz_seed(5)
    rng = random.Random(seed)
    pages = small_store.stat().st_size // PAGE
    # page 1 (the header and the schema), then pages of the tables, damaged in turn
    cases = [(0, 100), (16, 2), (28, 4), *((rng.randrange(1, pages) * PAGE + rng.randrange(PAGE - 64), 64)
                                            for _ in range(fuzz_cases(6)))]
    refused = 0
    for i, (offset, n) in enumerate(cases):
        runs = tmp_path / f"case{i}"
        shutil.copytree(small_store.parent, runs / "fz")
        with open(runs / "fz" / "soak.db", "r+b") as fh:
            fh.seek(offset)
            fh.write(bytes(rng.randrange(256) for _ in range(n)))
        for argv in (["runs", "show", "fz", "--data-dir", str(runs)],
                     ["report", "pdf", "fz", "--data-dir", str(runs), "-o", str(runs / "r.pdf"), "--unsigned"]):
            out = run_cli(argv, f"seed {seed} case {i}: {argv[:2]} with {n} bytes damaged at offset {offset}")
            if out.rc == 2:
                refused += 1
                assert "store" in out.err, out.err
                break
    assert refused >= 3  # the header cases at least
