"""The simulated Ascend fleet: an ``npu-smi`` that speaks the real tool's formats.

``soak sim install DIR ...`` writes ``DIR/npu-smi`` (and its JSON config); put DIR first on
PATH and every reader runs its real code path against scenarios that evolve on a scaled time
line. ``SimFleet(config).render(argv)`` gives the same answers in-process for fast tests.
"""

from __future__ import annotations

from soak.telemetry.sim.config import FAULTS, SCENARIOS, SimConfig, Spec, parse_specs
from soak.telemetry.sim.fleet import SimFleet
from soak.telemetry.sim.install import CONFIG_NAME, install

__all__ = ["CONFIG_NAME", "FAULTS", "SCENARIOS", "SimConfig", "SimFleet", "Spec", "install", "parse_specs"]
