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
from typing import Any

from soak.config import Plan
from soak.errors import ConfigError, SoakError

log = logging.getLogger("soak.daemon")


def build_profile(plan: Plan) -> Any:
    """The analysis profile of this plan: its file (or the default) with the threshold
    overrides (``"thermal.threshold_c" = 90``) laid over it."""
    import tomllib

    from soak.analysis.profile import Profile

    acc = plan.acceptance
    default = acc.profile in ("", "default")
    if not acc.thresholds:
        return Profile.default() if default else Profile.from_toml(acc.profile)
    data: dict[str, Any] = {}
    if not default:
        try:
            data = tomllib.loads(Path(acc.profile).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"acceptance.profile {acc.profile}: {exc}") from None
    for dotted, value in acc.thresholds.items():
        section, _, key = dotted.partition(".")
        if key:
            data.setdefault(section, {})[key] = value
        else:
            data[section] = value
    return Profile.from_dict(data, source="acceptance.thresholds")


def plan_phases(plan: Plan, checkpoint_windows: list[tuple[float, float]]) -> list[Any]:
    """Expected phases: the plan's checkpoint cadence and the checkpoints actually seen."""
    from soak.analysis.profile import Phase

    phases = []
    if plan.phases.checkpoint_every_s:
        phases.append(Phase(name="checkpoint", every_s=plan.phases.checkpoint_every_s,
                            duration_s=plan.phases.checkpoint_duration_s))
    if checkpoint_windows:
        phases.append(Phase(name="checkpoint", windows=tuple(checkpoint_windows)))
    return phases


def run_phases(store: Any, run_id: str, plan: Plan) -> list[Any]:
    """Every expected phase of a recorded run, as the daemon, the report and ``soak analyze
    RUN_ID`` see them: the plan's checkpoint cadence, the checkpoints seen, the spans the
    events carry and each restart's downtime (crash or hang to the restart)."""
    from soak.analysis.event_phases import event_phases

    events = store.load_events(run_id)
    # a checkpoint idles the chips for about its own duration; the events mark when
    half = plan.phases.checkpoint_duration_s / 2
    windows = [(e.ts - half, e.ts + half) for e in events if e.kind == "checkpoint" and e.rank in (None, 0)]
    return plan_phases(plan, windows[-1000:]) + event_phases(events)


def run_analysis(store: Any, run_id: str, plan: Plan, now: float | None = None,
                 profile: Any = None, bucket_s: float | None = None) -> Any:
    """The ``soak.analysis.Analysis`` of everything stored so far; None without data.

    ``bucket_s`` averages the device samples in SQL first (online analysis of a long run).
    """
    from soak.analysis import analyze
    from soak.analysis.trace import Trace

    trace = Trace.from_rows(store.load_trace(run_id, bucket_s=bucket_s), source=f"run {run_id}")
    if trace.start is None:
        return None
    return analyze(trace, profile if profile is not None else build_profile(plan),
                   phases=run_phases(store, run_id, plan), now=now)


def analyze_run(store: Any, run_id: str, plan: Plan, now: float | None = None,
                profile: Any = None, bucket_s: float | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """Analyse everything stored so far: (findings as dicts, verdict; None without data)."""
    result = run_analysis(store, run_id, plan, now=now, profile=profile, bucket_s=bucket_s)
    if result is None:
        return [], None
    return [f.to_dict() for f in result.findings], result.verdict


def online_bucket_s(plan: Plan, elapsed_s: float, max_points: int = 20000) -> float | None:
    """Bucket for the online analysis: raw samples until a series would pass ``max_points``."""
    tick_s = plan.sampling.interval_s * plan.run.time_scale
    if elapsed_s / tick_s <= max_points:
        return None
    return elapsed_s / max_points


def disk_free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


class Jobs:
    """Owns the scheduler; ``on_*`` callbacks connect the jobs to the daemon."""

    def __init__(self, plan: Plan, *, analysis: Callable[[], None], wal_checkpoint: Callable[[], None],
                 disk_check: Callable[[], None], watchdog: Callable[[], None] | None = None,
                 watchdog_every_s: float | None = None) -> None:
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.schedulers.background import BackgroundScheduler

        self.scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(2)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 60},
            timezone="UTC",
        )
        j = plan.jobs
        self._add("analysis", analysis, j.analysis_every_s)
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
