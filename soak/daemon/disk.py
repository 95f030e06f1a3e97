"""The run folder's disk: the watch that stops a run before its disk fills, the space held
back for a run's last records, and whether a failed run failed for want of space."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soak import runfolder as layout
from soak.daemon.jobs import disk_free_bytes

log = logging.getLogger("soak.daemon")
_FILLED = "the disk filled"  # the stop's reason once the disk is full (the event's detail: filled)

RESERVE_BYTES = 1 << 20


class DiskWatch:
    """Free space on the run folder's disk against what the run needs; ``stop`` is asked
    with the reason ``disk`` when it falls short."""

    def __init__(self, run_dir: Path, run_id: str, min_free_bytes: int, stop: Callable[[str], None]) -> None:
        self.run_dir = run_dir
        self.run_id = run_id
        self.min_free_bytes = min_free_bytes
        self.stop = stop
        self.message: str | None = None  # why the run stopped, once it did
        self.detail: dict[str, Any] = {}

    def need(self) -> tuple[int, int]:
        """(free bytes, bytes the run needs): ``jobs.min_free`` plus the largest checkpoint,
        which the next checkpoint writes beside the old ones before it rotates them."""
        return disk_free_bytes(self.run_dir), self.min_free_bytes + layout.largest_checkpoint_bytes(self.run_dir)

    def check(self) -> None:
        free, need = self.need()
        if free < need:
            self.stop_run(free, need)

    def stop_run(self, free: int, need: int, why: str = "stopping before it fills") -> None:
        # The event is written once the workloads are stopped and temporary files removed
        # (the daemon's finish): on a full disk the store may not take it now.
        msg = f"only {free / 2**20:.1f} MiB free on the run folder's disk (needs {need / 2**20:.1f} MiB); {why}"
        log.error(msg)
        self.message = f"{self.run_dir}: {msg} (run {self.run_id} stopped, its data kept)"
        self.detail = {"free_bytes": free, "need_bytes": need, "min_free_bytes": self.min_free_bytes,
                       "run_dir": str(self.run_dir), "filled": why == _FILLED}
        self.stop("disk")

    def out_of_space(self, fatal: BaseException | None) -> bool:
        """Whether a run that failed with ``fatal`` failed for want of disk space (the store or
        a checkpoint could not be written): then it is stopped as the watch stops it."""
        text = str(fatal or "").lower()
        free, need = self.need()
        if free < need or "disk is full" in text or "no space left" in text:
            self.stop_run(free, need, _FILLED)
            return True
        return False

    def hold_reserve(self) -> None:
        """Hold ``RESERVE_BYTES`` of the run folder's disk, given back when the run ends: a run
        stopped by a full disk can still record why and that it stopped."""
        try:
            with open(self.run_dir / layout.RESERVE, "wb") as fh:
                fh.write(b"\0" * RESERVE_BYTES)  # written, not truncated: a sparse file holds nothing
        except OSError as exc:
            log.warning("no disk reserve for the last records: %s", exc.strerror or exc)
            self.release_reserve()

    def release_reserve(self) -> None:
        (self.run_dir / layout.RESERVE).unlink(missing_ok=True)
