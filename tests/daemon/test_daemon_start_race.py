"""Twenty daemons start at once while a reader polls their stores, as ``soak runs`` would.

A daemon used to die at start (exit 2, its ``daemon.log`` empty) when a reader opened its
store in the moment between the store's first table and its version row: the reader wrote
the row, and the daemon's own insert failed on ``UNIQUE constraint failed: soak_meta.key``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from soak.daemon.lifecycle import Daemon
from soak.errors import StoreError
from soak.store import Store
from tests.daemon.conftest import fake_argv, fake_plan
from tests.store.store_poller import NOT_YET, race

N_DAEMONS = 20


def _daemon(tmp_path: Path, run_id: str, go: Any, results: Any) -> None:
    """One daemon, stopped as soon as its run has started (as by Ctrl-C): the start is the test."""
    plan = fake_plan(tmp_path, run={"id": run_id})
    daemon = Daemon(plan, argv_factory=fake_argv(), out=open(os.devnull, "w"), progress_every_s=60.0,
                    loop_interval_s=0.05, step_window_s=1.0)

    def stop_once_started() -> None:
        while daemon.started is None:
            time.sleep(0.01)
        daemon.request_stop("test: started")

    threading.Thread(target=stop_once_started, daemon=True).start()
    os.nice(10)  # the reader, not niced, polls on time while twenty daemons share two cores
    go.wait()
    try:
        results.put((run_id, daemon.run()))
    except BaseException as exc:  # reported to the test, which names it
        results.put((run_id, f"{type(exc).__name__}: {exc}"))


@pytest.mark.slow
def test_twenty_daemons_start_while_a_reader_polls_their_stores(tmp_path) -> None:
    runs = tmp_path / "runs"
    ids = [f"d{i:02d}" for i in range(N_DAEMONS)]
    ended, result = race(str(runs / "*" / "soak.db"), _daemon, [(tmp_path, run_id) for run_id in ids])
    outcomes = dict(ended)

    assert {run_id: rc for run_id, rc in outcomes.items() if rc not in (0, 1)} == {}
    assert result.writes == []
    # what a reader may be told while a store is being made: nothing else
    assert [r for r in result.refusals if not r.endswith(("no such database", NOT_YET))] == []
    assert sorted(result.complete) == sorted(str(runs / run_id / "soak.db") for run_id in ids)
    for run_id in ids:
        with Store.open(runs / run_id / "soak.db", create=False) as store:
            run = store.get_run(run_id)
            assert run is not None and run.status == "stopped", (run_id, run)
            assert any(e.workload is None for e in store.load_events(run_id, "start"))  # the run's own
        assert "daemon not started" not in (runs / run_id / "logs" / "daemon.log").read_text()


def test_a_daemon_refused_its_store_at_start_says_why_in_daemon_log(tmp_path) -> None:
    db = tmp_path / "other.db"
    with Store.open(db) as other:  # a store another soak release wrote
        with other.engine.begin() as conn:
            conn.exec_driver_sql("UPDATE soak_meta SET value = '999' WHERE key = 'schema_version'")
    plan = fake_plan(tmp_path, run={"db": str(db)})
    with pytest.raises(StoreError, match="schema version 999") as err:
        Daemon(plan, argv_factory=fake_argv(), out=open(os.devnull, "w")).run()
    lines = (tmp_path / "runs" / "r1" / "logs" / "daemon.log").read_text().splitlines()
    assert len(lines) == 1
    assert lines[0].endswith(f" ERROR soak.daemon: daemon not started: {err.value}")
