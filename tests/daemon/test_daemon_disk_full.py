"""A run whose disk fills, on a real 8 MiB tmpfs with ``jobs.min_free = "0"``: the run is
stopped (not left 'running'), the disk and stop events are recorded, what was recorded
before is kept, and no half-written checkpoint stays behind."""

from __future__ import annotations

import errno
import threading
import time
from pathlib import Path

import pytest

from soak.errors import StoreError
from soak.store import Store
from tests.daemon.conftest import fake_plan

pytestmark = pytest.mark.slow
CKPT = 1_500_000


def _plan(mnt: Path, tmp_path: Path):
    plan = fake_plan(tmp_path, run={"duration": "60s"}, jobs={"min_free": "0", "disk_check_every": "0.2s"})
    data = plan.to_dict()
    data["run"]["data_dir"] = str(mnt / "runs")
    from soak.config import plan_from_dict

    return plan_from_dict(data)


def _fill(path: Path, chunk: int, pause_s: float, stop: threading.Event) -> None:
    """Another writer on the same disk, ``chunk`` bytes at a time until it is full or ``stop``."""
    with open(path, "wb") as fh:
        while not stop.is_set():
            try:
                fh.write(b"\0" * chunk)
                fh.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                return
            time.sleep(pause_s)


def _check_stopped_and_clean(run_dir: Path) -> None:
    assert not list((run_dir / "checkpoints").glob("*/.step_*.pt.tmp-*"))
    assert not (run_dir / ".disk-reserve").exists()
    with Store.open(run_dir / "soak.db", create=False) as s:
        run = s.get_run("r1")
        assert run.status == "stopped" and run.ended_ts is not None
        disk = s.load_events("r1", kind="disk")
        assert len(disk) == 1 and disk[0].detail["min_free_bytes"] == 0
        assert s.load_events("r1", kind="stop")[0].detail["reason"] == "disk"
        assert s.count_samples("r1") > 0  # what was recorded before is kept


# alone: the disk fills on a timer and the daemon must see it between two of its 0.2 s checks;
# other tests sharing the CPU would delay the check past the filling.
@pytest.mark.alone
def test_disk_filling_slowly_stops_the_run_before_a_checkpoint_fails(small_tmpfs, tmp_path, run_daemon) -> None:
    """min_free 0 once meant 'never stop': now the next checkpoint's size is counted too."""
    stop = threading.Event()
    tr = run_daemon(_plan(small_tmpfs, tmp_path), "--ckpt-every", "10", "--ckpt-bytes", str(CKPT))
    run_dir = small_tmpfs / "runs" / "r1"
    tr.wait_for(lambda: list((run_dir / "checkpoints").glob("*/step_*.pt")))
    filler = threading.Thread(target=_fill, args=(small_tmpfs / "filler", 1 << 16, 0.1, stop), daemon=True)
    filler.start()
    # the other writer pauses when the run stops (one that goes on filling the disk would
    # leave no room for any record)
    threading.Thread(target=lambda: (tr.wait_for(lambda: tr.daemon.stop_reason is not None), stop.set()),
                     daemon=True).start()
    try:
        with pytest.raises(StoreError, match=r"needs 1\.4 MiB\); stopping before it fills \(run r1 stopped"):
            tr.join(60)
    finally:
        stop.set()
        filler.join(10)
    _check_stopped_and_clean(run_dir)


def test_disk_filled_at_once_stops_the_run_and_removes_the_half_checkpoint(small_tmpfs, tmp_path,
                                                                          run_daemon) -> None:
    """The disk fills between two free-space checks: the checkpoint being written fails half
    way and the store cannot write; the run still ends 'stopped' with its events. (No timer
    races here: the disk is full before the daemon's next look, however loaded the machine.)"""
    plan = _plan(small_tmpfs, tmp_path)
    data = plan.to_dict()
    data["jobs"]["disk_check_every"] = "1h"  # only the first check, at the start
    from soak.config import plan_from_dict

    tr = run_daemon(plan_from_dict(data), "--ckpt-every", "10", "--ckpt-bytes", str(CKPT))
    run_dir = small_tmpfs / "runs" / "r1"
    tr.wait_for(lambda: list((run_dir / "checkpoints").glob("*/step_*.pt"))
                and tr.daemon.started.store.count_samples("r1") > 0)
    _fill(small_tmpfs / "filler", 1 << 16, 0.0, threading.Event())
    with pytest.raises(StoreError, match=r"\(run r1 stopped, its data kept\)"):
        tr.join(60)
    _check_stopped_and_clean(run_dir)
