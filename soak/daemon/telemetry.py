"""Connecting the daemon to telemetry: the backend (simulated fleet on the run's time
line), the sampler, and the in-process exporter (device metrics plus run-level metrics)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from soak.clock import ScaledClock
from soak.config import Plan
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
            chips=s.chips, seed=s.seed, time_scale=clock.scale, origin=clock.origin,
            plog_dir=str(run_dir / "plog"),
        )
        return make("sim", sim_config=config, clock=clock, host_reader=host_reader,
                    plog_dir=str(run_dir / "plog"))
    return make(dev.backend, npu_smi=dev.npu_smi or "npu-smi", plog_dir=dev.plog_dir, clock=clock,
                host_reader=host_reader)


def make_sampler(backend: Any, interval_s: float, sinks: list[Callable[[Snapshot], object]],
                 clock: ScaledClock) -> Any:
    from soak.telemetry.sampler import Sampler

    return Sampler(backend, interval_s=interval_s, sinks=sinks, clock=clock)


def start_exporter(listen: str, sampler: Any, run_collector: Any) -> Any:
    """Serve /metrics (device + run metrics) on ``listen``; returns the server (``.stop()``)."""
    from exporters.collector import SoakCollector, make_registry
    from exporters.server import serve

    collector = SoakCollector.for_sampler(sampler, extra_collectors=[run_collector])
    return serve(make_registry(collector), listen)
