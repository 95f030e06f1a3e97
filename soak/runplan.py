"""What a recorded run's plan says for judging it: its acceptance profile, the phases in
which idle chips are expected, its planned window and the bucket of its online analysis.

The judge (``soak.judge``), the daemon and a cluster's node agents
(``soak.cluster.analysis``) read a plan through these, so all of them judge a run by the
same profile, phases and window.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from soak.analysis import Phase, Profile
from soak.analysis.event_phases import event_phases
from soak.config import Plan, plan_from_dict
from soak.errors import ConfigError, SoakError
from soak.tomlfile import read_toml


def build_profile(plan: Plan) -> Profile:
    """The acceptance profile of this plan: its file (or the default) with the threshold
    overrides (``"thermal.threshold_c" = 90``) laid over it."""
    acc = plan.acceptance
    default = acc.profile in ("", "default")
    if default and not acc.thresholds:
        return Profile.default()
    data: dict[str, Any] = {}
    if not default:
        data = read_toml(acc.profile, "acceptance.profile", ConfigError)
        if not acc.thresholds:
            return Profile.from_dict(data, source=acc.profile)
    for dotted, value in acc.thresholds.items():
        section, _, key = dotted.partition(".")
        if key:
            table = data.setdefault(section, {})
            if not isinstance(table, dict):
                raise ConfigError(f"acceptance.thresholds.{dotted}: {section} is not a table of the profile")
            table[key] = value
        else:
            data[section] = value
    return Profile.from_dict(data, source="acceptance.thresholds")


def plan_phases(plan: Plan, checkpoint_windows: list[tuple[float, float]]) -> list[Phase]:
    """Expected phases: the plan's checkpoint cadence and the checkpoints actually seen."""
    phases = []
    if plan.phases.checkpoint_every_s:
        phases.append(Phase(name="checkpoint", every_s=plan.phases.checkpoint_every_s,
                            duration_s=plan.phases.checkpoint_duration_s))
    if checkpoint_windows:
        phases.append(Phase(name="checkpoint", windows=tuple(checkpoint_windows)))
    return phases


def run_phases(events: Sequence[Any], plan: Plan | None) -> list[Phase]:
    """Every expected phase of a recorded run: the plan's checkpoint cadence, the
    checkpoints seen, the spans the events carry and each restart's downtime."""
    if plan is None:
        return event_phases(list(events))
    # a checkpoint idles the chips for about its own duration; the events mark when
    half = plan.phases.checkpoint_duration_s / 2
    windows = [(e.ts - half, e.ts + half) for e in events if e.kind == "checkpoint" and e.rank in (None, 0)]
    return plan_phases(plan, windows[-1000:]) + event_phases(list(events))


def online_bucket_s(plan: Plan, elapsed_s: float, max_points: int = 20000) -> float | None:
    """Bucket for the online analysis: raw samples until a series would pass ``max_points``."""
    tick_s = plan.sampling.interval_s * plan.run.time_scale
    if elapsed_s / tick_s <= max_points:
        return None
    return elapsed_s / max_points


def plan_of(run: Any) -> Plan | None:
    """The plan a recorded run ran with; None for a run without one (imported, synthetic)."""
    try:
        return plan_from_dict(run.plan or {}) if run.plan else None
    except (SoakError, TypeError, ValueError):
        return None


def profile_of(run: Any, plan: Plan | None) -> Profile:
    """The run's own acceptance profile, as the daemon judged it."""
    if plan is None:
        return Profile.default()
    try:
        return build_profile(plan)
    except SoakError as exc:  # the plan's profile file moved away since the run
        raise ConfigError(f"run {run.id}: {exc} (pass --profile FILE.toml)") from None


def planned_duration_s(rec: Any, plan: Plan | None) -> float | None:
    """How long the soak was planned to run: its planned window (after the preflight), as the
    judge's accounting counts it; None without a planned end. The cover, the criteria and
    ``soak runs show`` all say this one figure."""
    start, end = planned_window(rec, plan)
    return None if end is None else end - start


def planned_window(rec: Any, plan: Plan | None) -> tuple[float, float | None]:
    """(planned start, planned end) of a recorded run: the soak's window, after the preflight;
    the start is the run's own without a plan, the end None without either."""
    duration = plan.run.duration_s if plan is not None else None
    planned_end = rec.planned_end_ts
    if planned_end is None and duration is not None:
        planned_end = rec.started_ts + duration
    if planned_end is not None and duration is not None:
        return planned_end - duration, planned_end
    return rec.started_ts, planned_end
