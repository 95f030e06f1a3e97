"""Connecting the daemon to telemetry: the backend (simulated fleet on the run's time
line), and the pipeline of :mod:`exporters.pipeline` (sampler into the store, and /metrics
with device metrics plus run-level metrics)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from soak.clock import ScaledClock
from soak.config import Plan
from soak.runfolder import PLOG, SIM
from soak.telemetry.records import Snapshot


def make_backend(plan: Plan, run_dir: Path, clock: ScaledClock,
                 pid_provider: Callable[[], Iterable[int]]) -> Any:
    """The plan's backend; the host reader follows the workloads' process trees."""
    from soak.telemetry.backends import make_backend as make
    from soak.telemetry.host import HostReader

    host_reader = HostReader(pid_provider=pid_provider, run_dir=run_dir)
    dev = plan.devices
    if dev.backend == "sim":
        from soak.telemetry.sim.config import SimConfig

        s = plan.sim
        # the fleet plays on the run's time line: same origin and scale as the clock
        config = SimConfig.build(
            scenario=s.scenario or "healthy", fault=[s.fault] if s.fault else (), family=s.family,
            chips=s.chips, seed=s.seed, time_scale=clock.scale, origin=clock.origin, version=s.driver_version,
            plog_dir=str(run_dir / PLOG),
        )
        return make("sim", sim_config=config, clock=clock, host_reader=host_reader,
                    plog_dir=str(run_dir / PLOG), sim_dir=run_dir / SIM,
                    detail_interval_s=plan.sampling.detail_wall_s(clock.scale), details_in_background=True)
    return make(dev.backend, npu_smi=dev.npu_smi or "npu-smi", plog_dir=dev.plog_dir, clock=clock,
                host_reader=host_reader, detail_interval_s=plan.sampling.detail_wall_s(clock.scale),
                details_in_background=True)


def start_pipeline(plan: Plan, backend: Any, sinks: list[Callable[[Snapshot], object]],
                   clock: ScaledClock, run_collector: Any, labels: dict[str, str] | None = None) -> Any:
    """Sample every ``sampling.interval`` into ``sinks``; serve /metrics on ``exporter.listen``.

    Returns the started pipeline (``.stop()``)."""
    from exporters.pipeline import start_pipeline as start
    from exporters.webconfig import load_web_config

    web = plan.exporter.web_config
    return start(backend, listen=plan.exporter.listen, interval_s=plan.sampling.interval_s, sinks=sinks,
                 clock=clock, extra_collectors=[run_collector], labels=labels,
                 web_config=None if not web else load_web_config(web, "exporter.web_config"))
