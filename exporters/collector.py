"""Prometheus collector over the latest snapshot.

``collect()`` builds fresh metric families on every scrape from whatever ``source()``
returns, so a value that is None is simply absent (never NaN, never 0), a device that left
takes its series with it, and a scrape never waits on a tool: it reads a cached snapshot.

A snapshot older than ``stale_after_s`` is not served: every device series is dropped (not
frozen) and ``soak_exporter_snapshot_stale`` says 1, with the reader self-metrics still
there to say which reader is stuck.

Names and labels are the contract in docs/architecture.md. ``compat=("npu-exporter",)``
also emits the five main metrics under Huawei npu-exporter's names and labels, so existing
Ascend dashboards work unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from soak.telemetry.backends import DEFAULT_TOOL_TIMEOUT_S
from soak.telemetry.records import DeviceSample, Snapshot


def stale_after_s(interval_s: float, tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S) -> float:
    """Age past which a snapshot is not served.

    A tick may take a whole tool timeout, twice (``npu-smi info``, then a detail query), before
    it reports the gap; only call the snapshot stale when even that cannot explain its age.
    """
    return max(3 * interval_s, interval_s + 2 * tool_timeout_s)


DEVICE_LABELS = ("device", "npu_id", "chip_id", "model", "bus_id")
NPU_EXPORTER_LABELS = ("container_name", "id", "model_name", "namespace", "pcie_bus_info", "pod_name", "vdie_id")
COMPAT_CHOICES = ("npu-exporter",)

Source = Callable[[], "Snapshot | None"]


def _lv(value: object) -> str:
    return "" if value is None else str(value)


def device_labels(d: DeviceSample) -> list[str]:
    return [d.device, _lv(d.npu_id), _lv(d.chip_id), _lv(d.model), _lv(d.bus_id)]


class SoakCollector(Collector):
    """Serve the latest snapshot.

    ``source``: returns the latest Snapshot or None (e.g. ``Sampler.latest``).
    ``age_s``: wall seconds since that snapshot was taken; without it the age is
    ``clock() - snapshot.ts`` (give the daemon's scaled clock's ``now`` as ``clock``).
    ``reader_totals``: cumulative per-reader counts (``Sampler.reader_totals``) for the
    ``soak_reader_errors_total`` counter; without it the counter is left out.
    ``extra_collectors``: more collectors whose families are appended (run-level metrics).
    """

    def __init__(
        self,
        source: Source,
        *,
        age_s: Callable[[], float | None] | None = None,
        clock: Callable[[], float] | None = None,
        reader_totals: Callable[[], Mapping[str, Any]] | None = None,
        stale_after_s: float = 30.0,
        compat: Iterable[str] = (),
        extra_collectors: Iterable[Collector] = (),
    ) -> None:
        self.source = source
        self.age_s = age_s
        self.clock = clock or time.time
        self.reader_totals = reader_totals
        self.stale_after_s = stale_after_s
        self.compat = tuple(compat)
        unknown = set(self.compat) - set(COMPAT_CHOICES)
        if unknown:
            raise ValueError(f"unknown compat name(s): {', '.join(sorted(unknown))}")
        self.extra_collectors = list(extra_collectors)

    @classmethod
    def for_sampler(cls, sampler: Any, *, tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
                    **kwargs: Any) -> SoakCollector:
        """Wire ``source``, ``age_s`` and ``reader_totals`` to a :class:`Sampler`; stale after
        :func:`stale_after_s` of its interval and ``tool_timeout_s`` unless given."""
        kwargs.setdefault("stale_after_s", stale_after_s(sampler.interval_s, tool_timeout_s))
        return cls(sampler.latest, age_s=sampler.age_s, reader_totals=sampler.reader_totals, **kwargs)

    def add_collector(self, collector: Collector) -> None:
        self.extra_collectors.append(collector)

    # ---------------------------------------------------------------------------- collect
    def collect(self) -> Iterator[Any]:
        snap = self.source()
        age = None
        if snap is not None:
            age = self.age_s() if self.age_s is not None else self.clock() - snap.ts
        stale = snap is None or age is None or age > self.stale_after_s

        yield from self._self_metrics(snap, age, stale)
        if snap is not None and not stale:
            yield from self._device_metrics(snap)
            yield from self._host_metrics(snap)
            if "npu-exporter" in self.compat:
                yield from self._npu_exporter_metrics(snap)
        for extra in self.extra_collectors:
            yield from extra.collect()

    def _self_metrics(self, snap: Snapshot | None, age: float | None, stale: bool) -> Iterator[Any]:
        g = GaugeMetricFamily("soak_exporter_snapshot_stale",
                              "1 when no fresh snapshot is served (device series are then left out)")
        g.add_metric([], 1.0 if stale else 0.0)
        yield g
        if snap is None:
            return
        g = GaugeMetricFamily("soak_exporter_snapshot_timestamp_seconds",
                              "Time the served snapshot was taken (unix seconds, sampler time line)")
        g.add_metric([], snap.ts)
        yield g
        if age is not None:
            g = GaugeMetricFamily("soak_exporter_snapshot_age_seconds", "Wall seconds since the latest snapshot")
            g.add_metric([], max(0.0, age))
            yield g
        dur = GaugeMetricFamily("soak_reader_duration_seconds", "Duration of the reader's last call this tick",
                                labels=["reader"])
        # A reader may run several times a tick (one detail query per chip): report the sum.
        durations: dict[str, float] = {}
        for st in snap.readers:
            durations[st.reader] = durations.get(st.reader, 0.0) + st.duration_s
        for reader, seconds in sorted(durations.items()):
            dur.add_metric([reader], seconds)
        yield dur
        if self.reader_totals is not None:
            totals = self.reader_totals()
            err = CounterMetricFamily("soak_reader_errors", "Failed reader calls since the exporter started",
                                      labels=["reader"])
            last = GaugeMetricFamily("soak_reader_last_success_timestamp_seconds",
                                     "Snapshot time of the reader's last successful call", labels=["reader"])
            for reader, t in sorted(totals.items()):
                err.add_metric([reader], float(t.errors))
                if t.last_success_ts is not None:
                    last.add_metric([reader], t.last_success_ts)
            yield err
            yield last

    def _device_metrics(self, snap: Snapshot) -> Iterator[Any]:
        L = list(DEVICE_LABELS)
        up = GaugeMetricFamily("soak_device_up", "1 when this device's reading succeeded this tick", labels=L)
        util = GaugeMetricFamily("soak_device_utilization_ratio",
                                 "AI core / SM / CPU utilization, 0-1", labels=L)
        temp = GaugeMetricFamily("soak_device_temperature_celsius", "Chip temperature", labels=L)
        power = GaugeMetricFamily("soak_device_power_watts", "Power draw (NPU id / board where the tool reports it so)",
                                  labels=L)
        used = GaugeMetricFamily("soak_device_memory_used_bytes", "Device memory in use", labels=[*L, "kind"])
        total = GaugeMetricFamily("soak_device_memory_total_bytes", "Device memory size", labels=[*L, "kind"])
        healthy = GaugeMetricFamily("soak_device_healthy", "1 = health OK, 0 = Warning/Alarm/Critical", labels=L)
        ecc = CounterMetricFamily("soak_device_ecc_errors", "ECC errors reported by the device",
                                  labels=[*L, "type"])
        link = GaugeMetricFamily("soak_device_link_up", "1 when the chip's network port is up", labels=L)
        throttle = GaugeMetricFamily("soak_device_throttle_reasons", "NVML clock-event reason bitmask", labels=L)
        proc = GaugeMetricFamily("soak_device_process_memory_bytes", "Device memory held by processes",
                                 labels=L)
        xid = CounterMetricFamily("soak_device_xid_errors", "NVML Xid critical events seen", labels=L)
        info = GaugeMetricFamily("soak_device_info", "Device identity and health word (value 1)",
                                 labels=[*L, "health", "serial"])
        for d in snap.devices:
            lv = device_labels(d)
            up.add_metric(lv, 1.0 if d.up else 0.0)
            info.add_metric([*lv, _lv(d.health), _lv(d.serial)], 1.0)
            if not d.up:
                continue
            if d.util_pct is not None:
                util.add_metric(lv, d.util_pct / 100.0)
            if d.temp_c is not None:
                temp.add_metric(lv, d.temp_c)
            if d.power_w is not None:
                power.add_metric(lv, d.power_w)
            for kind, u, t in (("hbm", d.hbm_used_bytes, d.hbm_total_bytes),
                               ("ddr", d.ddr_used_bytes, d.ddr_total_bytes)):
                if u is not None:
                    used.add_metric([*lv, kind], u)
                if t is not None:
                    total.add_metric([*lv, kind], t)
            if d.healthy is not None:
                healthy.add_metric(lv, 1.0 if d.healthy else 0.0)
            if d.ecc_single_bit_errors is not None:
                ecc.add_metric([*lv, "single"], d.ecc_single_bit_errors)
            if d.ecc_double_bit_errors is not None:
                ecc.add_metric([*lv, "double"], d.ecc_double_bit_errors)
            if d.link_up is not None:
                link.add_metric(lv, 1.0 if d.link_up else 0.0)
            if d.throttle_reasons is not None:
                throttle.add_metric(lv, d.throttle_reasons)
            if d.process_memory_bytes is not None:
                proc.add_metric(lv, d.process_memory_bytes)
            if d.xid_errors is not None:
                xid.add_metric(lv, d.xid_errors)
        for fam in (up, util, temp, power, used, total, healthy, ecc, link, throttle, proc, xid, info):
            if fam.samples:
                yield fam
        comm = CounterMetricFamily("soak_comm_timeouts", "Communication timeouts seen, by source and kind",
                                   labels=["source", "kind"])
        for key, count in sorted(snap.comm_timeouts.items()):
            source, _, kind = key.partition(":")
            comm.add_metric([source, kind], count)
        if comm.samples:
            yield comm

    def _host_metrics(self, snap: Snapshot) -> Iterator[Any]:
        h = snap.host_sample
        if h is None:
            return
        for name, doc, value in (
            ("soak_host_memory_used_bytes", "Host memory in use (total - available)", h.mem_used_bytes),
            ("soak_host_memory_total_bytes", "Host memory size", h.mem_total_bytes),
            ("soak_workload_rss_bytes", "Summed RSS of the workload's process tree", h.workload_rss_bytes),
            ("soak_host_disk_free_bytes", "Free space in the run folder's file system", h.disk_free_bytes),
        ):
            if value is not None:
                g = GaugeMetricFamily(name, doc)
                g.add_metric([], value)
                yield g

    def _npu_exporter_metrics(self, snap: Snapshot) -> Iterator[Any]:
        L = list(NPU_EXPORTER_LABELS)
        fams = {
            "util": GaugeMetricFamily("npu_chip_info_utilization", "the ai core utilization", labels=L),
            "hbm": GaugeMetricFamily("npu_chip_info_hbm_used_memory", "the npu hbm used memory, unit is 'MB'",
                                     labels=L),
            "temp": GaugeMetricFamily("npu_chip_info_temperature", "the npu temperature, unit is 'C'", labels=L),
            "power": GaugeMetricFamily("npu_chip_info_power", "the npu power, unit is 'W'", labels=L),
            "health": GaugeMetricFamily("npu_chip_info_health_status",
                                        "the npu health status, 1 healthy, 0 unhealthy", labels=L),
        }
        logic_id = 0
        for d in snap.devices:
            if d.npu_id is None:
                continue
            # npu-exporter's id is the logic device id: the chip's position on this host.
            model_name = f"{d.model}-Ascend-V1" if d.model else ""
            lv = ["", str(logic_id), model_name, "", _lv(d.bus_id), "", ""]
            logic_id += 1
            if not d.up:
                continue
            if d.util_pct is not None:
                fams["util"].add_metric(lv, d.util_pct)
            if d.hbm_used_bytes is not None:
                fams["hbm"].add_metric(lv, d.hbm_used_bytes // (1024 * 1024))
            if d.temp_c is not None:
                fams["temp"].add_metric(lv, d.temp_c)
            if d.power_w is not None:
                fams["power"].add_metric(lv, d.power_w)
            if d.healthy is not None:
                fams["health"].add_metric(lv, 1.0 if d.healthy else 0.0)
        for fam in fams.values():
            if fam.samples:
                yield fam


def make_registry(collector: SoakCollector) -> CollectorRegistry:
    """A private registry holding only ``collector`` (no process/platform defaults)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
