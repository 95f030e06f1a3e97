"""The one telemetry wiring: a backend's sampler, its collector and the ``/metrics`` server.

``soak exporter`` and ``soak run`` both start their telemetry here, so they sample on the same
default interval, call a snapshot stale by the same rule (:func:`exporters.collector.stale_after_s`)
and serve under the same limits.

``/metrics`` is served before the first reading is taken: a first ``npu-smi`` call that hangs
until its timeout (or floods until it is killed) must not make the exporter look dead. Until
that reading is in, a scrape holds ``soak_exporter_snapshot_stale 1`` and no device series.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from prometheus_client.registry import Collector

from exporters.collector import SoakCollector, make_registry
from exporters.readings import ReadingTracker
from exporters.server import MetricsServer, serve
from exporters.webconfig import WebConfig
from soak.clock import ScaledClock
from soak.telemetry.backends import DEFAULT_TOOL_TIMEOUT_S, Backend
from soak.telemetry.records import Snapshot
from soak.telemetry.sampler import DEFAULT_INTERVAL_S, Sampler


@dataclass(frozen=True)
class Pipeline:
    """A started sampler and, when one was asked for, the server of its ``/metrics``."""

    sampler: Sampler
    server: MetricsServer | None

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop sampling (a tool call in flight ends or times out first), then serving.

        The backend is the caller's: it closes it.
        """
        try:
            self.sampler.stop(timeout_s=timeout_s)
        finally:
            if self.server is not None:
                self.server.stop()


def start_pipeline(
    backend: Backend,
    *,
    listen: str | None,
    interval_s: float = DEFAULT_INTERVAL_S,
    tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
    sinks: Iterable[Callable[[Snapshot], object]] = (),
    clock: ScaledClock | None = None,
    compat: Iterable[str] = (),
    extra_collectors: Iterable[Collector] = (),
    labels: dict[str, str] | None = None,
    web_config: WebConfig | None = None,
    allowed_hosts: Sequence[str] = (),
) -> Pipeline:
    """Sample ``backend`` every ``interval_s`` into ``sinks`` and serve it on ``listen``.

    ``listen`` None or empty: no server. ``tool_timeout_s`` is the backend's vendor-tool
    timeout (it sets when a snapshot is stale). A ``listen`` that cannot be bound raises the
    one-line InputError before anything is sampled. ``labels`` are added to every series
    (a cluster node's ``node`` and ``run_id``); ``web_config``: TLS and basic auth of /metrics.
    """
    tracker = ReadingTracker()  # every tick's slow reads and unchanged stretches, for /metrics
    sampler = Sampler(backend, interval_s=interval_s, sinks=[*sinks, tracker] if listen else sinks, clock=clock)
    server = None
    if listen:
        collector = SoakCollector.for_sampler(sampler, tool_timeout_s=tool_timeout_s, compat=compat,
                                              extra_collectors=extra_collectors, tracker=tracker)
        server = serve(make_registry(collector, labels), listen, web_config=web_config, allowed_hosts=allowed_hosts)
    sampler.start()
    return Pipeline(sampler, server)
