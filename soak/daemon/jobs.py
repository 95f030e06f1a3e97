"""Periodic jobs of the daemon, on an APScheduler 3.x ``BackgroundScheduler``.

One in-memory job store (nothing pickled; the run's state lives in our own tables), one
instance of each job at a time, a backlog folded into one run (``coalesce``). Jobs never
raise into the scheduler: a failure is logged and the next period tries again, except a
store failure, which the daemon turns into a clean stop.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from soak.config import Plan
from soak.errors import SoakError

log = logging.getLogger("soak.daemon")


def disk_free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


MIN_ANALYSIS_WALL_S = 5.0  # an accelerated run still leaves the analysis time to finish


def analysis_period_s(plan: Plan) -> float:
    """The online analysis' wall-clock period: ``jobs.analysis_every`` on the run's own time
    line, so an accelerated run (``soak demo``: 8 h in 2 min) shows its findings while it runs."""
    scale = plan.run.time_scale if plan.run.time_scale > 0 else 1.0
    return max(MIN_ANALYSIS_WALL_S, plan.jobs.analysis_every_s / scale) if scale > 1 else plan.jobs.analysis_every_s


class Jobs:
    """Owns the scheduler; the daemon hands it one function per job (analysis, WAL
    checkpoint, disk watch, systemd watchdog), each run at the plan's period."""

    def __init__(self, plan: Plan, *, analysis: Callable[[], None], wal_checkpoint: Callable[[], None],
                 disk_check: Callable[[], None], watchdog: Callable[[], None] | None = None,
                 watchdog_every_s: float | None = None, analysis_every_s: float | None = None) -> None:
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.schedulers.background import BackgroundScheduler

        self.scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(2)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 60},
            timezone="UTC",
        )
        j = plan.jobs
        self._add("analysis", analysis, analysis_every_s or j.analysis_every_s)
        self._add("wal_checkpoint", wal_checkpoint, j.wal_checkpoint_every_s)
        self._add("disk_check", disk_check, j.disk_check_every_s)
        if watchdog is not None and watchdog_every_s:
            self._add("watchdog", watchdog, watchdog_every_s)

    def _add(self, job_id: str, fn: Callable[[], None], every_s: float) -> None:
        def guarded() -> None:
            try:
                fn()
            except SoakError as exc:
                log.error("job %s: %s", job_id, exc)
            except Exception:  # a bug in one job must not end a 72 h run
                log.exception("job %s failed", job_id)

        self.scheduler.add_job(guarded, "interval", seconds=every_s, id=job_id, replace_existing=True)

    def start(self) -> None:
        self.scheduler.start()

    def shutdown(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)
