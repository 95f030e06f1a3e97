"""What a started run has: one frozen record made when the run starts or resumes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soak.clock import ScaledClock
from soak.config import Plan
from soak.store import Store


@dataclass(frozen=True)
class StartedRun:
    """What a started run has, made once when the run starts (or resumes)."""

    run_id: str
    run_dir: Path
    plan: Plan
    profile: Any  # soak.analysis.Profile
    store: Store
    clock: ScaledClock
    started_ts: float  # run time line
    planned_end_ts: float  # moved to after the preflight once it ran
    restarts0: int  # restarts of earlier daemons of this run
    resumed: bool
