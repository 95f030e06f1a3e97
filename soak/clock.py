"""Clocks. Everything that timestamps data takes a clock, so tests and accelerated soaks can
replay hours in minutes.

``ScaledClock(scale=720)`` maps each wall second after ``origin`` to 720 recorded seconds: a 72 h
scenario plays in 6 minutes, and every timestamp (samples, heartbeats, events) lives on the
same simulated time line, so the analysis sees hours, not minutes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ScaledClock:
    scale: float = 1.0
    origin: float = field(default_factory=time.time)

    @classmethod
    def of_run(cls, run: Any) -> ScaledClock:
        """The time line of a stored run (its record's ``time_scale`` and ``started_ts``), which
        its samples, steps and events are stamped on."""
        return cls(scale=float(run.time_scale or 1.0), origin=float(run.started_ts))

    def now(self) -> float:
        """Unix seconds on the (possibly accelerated) time line."""
        wall = time.time()
        return self.origin + (wall - self.origin) * self.scale

    def to_scaled(self, wall_ts: float) -> float:
        """Map a wall-clock unix time (e.g. a heartbeat's ``ts``) onto this time line."""
        return self.origin + (wall_ts - self.origin) * self.scale

    def to_wall(self, scaled_ts: float) -> float:
        """The wall-clock unix time of a time on this time line (``to_scaled``'s inverse)."""
        return self.origin + (scaled_ts - self.origin) / self.scale

    def wall_seconds(self, scaled_seconds: float) -> float:
        """How many wall seconds a span of scaled seconds takes."""
        return scaled_seconds / self.scale


SYSTEM_CLOCK = ScaledClock(scale=1.0, origin=0.0)
