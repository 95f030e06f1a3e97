"""``soak cluster replay``: what a node kept while its store was away is written to the store
in order, without resuming the run; refused while a daemon holds the folder, in one line."""

from __future__ import annotations

import json
from pathlib import Path

from soak.cli import main
from soak.daemon.lock import RunLock
from soak.daemon.spool import StoreSpool
from soak.errors import StoreError
from soak.runfolder import store_spool_path
from soak.store import Store

T0 = 1_790_000_000.0


def _kept(folder: Path) -> None:
    """A spool as a daemon leaves it: the store went away, then a step, an event and a run
    update were kept (the spool's own writer)."""
    with Store.open(folder / "soak.db") as store:
        store.create_run("r1", host="h", plan={}, started_ts=T0, backend="sim", run_dir=str(folder))
        spool = StoreSpool(store, "r1", store_spool_path(folder), node=None, now=lambda: T0 + 5, outage_max_s=60)
        spool.enabled = True  # a SQLite store never spools in a daemon; the writer is the same
        spool.lost(StoreError("store: connection refused"))
        spool.steps([{"ts": T0 + 4, "workload": "lm", "rank": 0, "step": 7, "step_time_s": 0.2}], node=None)
        spool.event("checkpoint", ts=T0 + 4.5, workload="lm", rank=0, message="step 7")
        spool.update_run(restarts=1)


def test_replay_writes_the_kept_records_in_order_then_has_nothing_to_do(tmp_path, capsys) -> None:
    folder = tmp_path / "runs" / "r1"
    folder.mkdir(parents=True)
    _kept(folder)
    assert len(store_spool_path(folder).read_text().splitlines()) == 3
    assert main(["cluster", "replay", "r1", "--data-dir", str(tmp_path / "runs"), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["written"] == 3 and out["left"] == 0 and not store_spool_path(folder).exists()
    with Store.open(folder / "soak.db", create=False) as store:
        assert [s["step"] for s in store.load_steps("r1")] == [7]
        assert [e.kind for e in store.load_events("r1")] == ["checkpoint"]
        assert store.get_run("r1").restarts == 1
    assert main(["cluster", "replay", "r1", "--data-dir", str(tmp_path / "runs")]) == 0
    assert "nothing to replay" in capsys.readouterr().out


def test_replay_is_refused_while_a_daemon_holds_the_folder_and_for_an_unknown_run(tmp_path, capsys) -> None:
    folder = tmp_path / "runs" / "r1"
    folder.mkdir(parents=True)
    _kept(folder)
    with RunLock(folder):
        assert main(["cluster", "replay", "r1", "--data-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "in use by another soak daemon" in err[0], err
    assert len(store_spool_path(folder).read_text().splitlines()) == 3  # nothing written, nothing lost
    assert main(["cluster", "replay", "r9", "--data-dir", str(tmp_path / "runs")]) == 2
    assert "run r9: no run folder" in capsys.readouterr().err
