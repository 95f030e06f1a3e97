"""Whether a run's figures are an acceptance of hardware at wall-clock speed.

A run on the simulated fleet or on a scaled clock is a rehearsal: the judge, the PDF and the app
must all say so, and they decide it here, in one place.
"""

from __future__ import annotations


def simulated_fleet(backend: str | None) -> bool:
    """The readings came from the simulated fleet (``backend = "sim"``), not from hardware."""
    return backend == "sim"


def time_scaled(time_scale: float | None) -> bool:
    """The run's clock ran at another speed than the wall (``soak.clock.ScaledClock``): its
    timestamps are on a scaled time line and its hours are not hours of load."""
    return time_scale is not None and time_scale != 1


def simulated_run(backend: str | None, time_scale: float | None) -> bool:
    """Not an acceptance of hardware: a simulated fleet or a scaled time line (or both)."""
    return simulated_fleet(backend) or time_scaled(time_scale)
