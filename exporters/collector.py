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
from dataclasses import replace
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from soak.telemetry.backends import DEFAULT_TOOL_TIMEOUT_S
from soak.telemetry.records import DeviceSample, Snapshot

# Every family this collector serves under soak's names: name -> (type, help). The families of
# collect() are made from here, and METRIC_NAMES (what a scrape can hold) is derived from here,
# so the dashboards and alert rules are checked against the names actually served.
FAMILIES: dict[str, tuple[str, str]] = {
    "soak_exporter_snapshot_stale": ("gauge", "1 when no fresh snapshot is served (device series are then left out)"),
    "soak_exporter_snapshot_timestamp_seconds": ("gauge", "Time the served snapshot was taken (unix seconds, sampler time line)"),
    "soak_exporter_snapshot_age_seconds": ("gauge", "Wall seconds since the latest snapshot"),
    "soak_reader_duration_seconds": ("gauge", "Duration of the reader's last call this tick"),
    "soak_reader_errors": ("counter", "Failed reader calls since the exporter started"),
    "soak_reader_last_success_timestamp_seconds": ("gauge", "Snapshot time of the reader's last successful call"),
    "soak_device_up": ("gauge", "1 when this device's reading succeeded this tick"),
    "soak_device_utilization_ratio": ("gauge", "AI core / SM / CPU utilization, 0-1"),
    "soak_device_temperature_celsius": ("gauge", "Chip temperature"),
    "soak_device_power_watts": ("gauge", "Power draw (NPU id / board where the tool reports it so)"),
    "soak_device_memory_used_bytes": ("gauge", "Device memory in use"),
    "soak_device_memory_total_bytes": ("gauge", "Device memory size"),
    "soak_device_healthy": ("gauge", "1 = health OK, 0 = Warning/Alarm/Critical"),
    "soak_device_ecc_errors": ("counter", "ECC errors reported by the device"),
    "soak_device_link_up": ("gauge", "1 when the chip's network port is up"),
    "soak_device_link_ups": ("counter", "Times the chip's network port came up (hccn_tool -link_stat; a flap adds one)"),
    "soak_device_ecc_isolated_pages": ("gauge", "Memory pages the device isolated for ECC errors"),
    "soak_device_fault_code": ("gauge", "1 for each fault code the chip reports now (npu-smi info -t health)"),
    "soak_device_reset_pending": ("gauge", "1 when a row remap or page retirement waits for a reset (NVML)"),
    "soak_device_row_remap_failed": ("gauge", "1 when a memory row could not be remapped (NVML)"),
    "soak_device_throttle_reasons": ("gauge", "NVML clock-event reason bitmask"),
    "soak_device_process_memory_bytes": ("gauge", "Device memory held by processes"),
    "soak_device_xid_errors": ("counter", "NVML Xid critical events seen"),
    "soak_device_info": ("gauge", "Device identity and health word (value 1)"),
    "soak_device_reading_unchanged_seconds": ("gauge", "Seconds (run time line) the reading has held the same value"),
    "soak_device_reading_stale": ("gauge", "1 when the reading held still far longer than its peers' (a stuck sensor or "
                                           "counter): not evidence"),
    "soak_comm_timeouts": ("counter", "Communication timeouts seen, by source and kind"),
    "soak_host_memory_used_bytes": ("gauge", "Host memory in use (total - available)"),
    "soak_host_memory_total_bytes": ("gauge", "Host memory size"),
    "soak_workload_rss_bytes": ("gauge", "Summed RSS of the workload's process tree"),
    "soak_host_disk_free_bytes": ("gauge", "Free space in the run folder's file system"),
}


def served_names(families: dict[str, tuple[str, str]]) -> frozenset[str]:
    """Sample names a scrape shows for ``families``: a counter ``x`` is served as ``x_total``."""
    return frozenset(f"{name}_total" if kind == "counter" else name for name, (kind, _doc) in families.items())


METRIC_NAMES = served_names(FAMILIES)


def family_of(families: dict[str, tuple[str, str]], name: str,
              labels: list[str] | None = None) -> GaugeMetricFamily | CounterMetricFamily:
    """A fresh, empty family for ``name`` of ``families`` (its type and help from there)."""
    kind, doc = families[name]
    cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
    return cls(name, doc, labels=labels)


def _family(name: str, labels: list[str] | None = None) -> GaugeMetricFamily | CounterMetricFamily:
    return family_of(FAMILIES, name, labels)


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
        tracker: Any = None,
    ) -> None:
        self.source = source
        # exporters.readings.ReadingTracker, fed every tick: the slow views' last reads, and
        # how long each reading has held still
        self.tracker = tracker
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
            if self.tracker is not None:
                snap = replace(snap, devices=tuple(self.tracker.fill(d) for d in snap.devices))
            yield from self._device_metrics(snap)
            if self.tracker is not None:
                yield from self._reading_metrics()
            yield from self._host_metrics(snap)
            if "npu-exporter" in self.compat:
                yield from self._npu_exporter_metrics(snap)
        for extra in self.extra_collectors:
            yield from extra.collect()

    def _self_metrics(self, snap: Snapshot | None, age: float | None, stale: bool) -> Iterator[Any]:
        g = _family("soak_exporter_snapshot_stale")
        g.add_metric([], 1.0 if stale else 0.0)
        yield g
        if snap is None:
            return
        g = _family("soak_exporter_snapshot_timestamp_seconds")
        g.add_metric([], snap.ts)
        yield g
        if age is not None:
            g = _family("soak_exporter_snapshot_age_seconds")
            g.add_metric([], max(0.0, age))
            yield g
        dur = _family("soak_reader_duration_seconds", ["reader"])
        # A reader may run several times a tick (one detail query per chip): report the sum.
        durations: dict[str, float] = {}
        for st in snap.readers:
            durations[st.reader] = durations.get(st.reader, 0.0) + st.duration_s
        for reader, seconds in sorted(durations.items()):
            dur.add_metric([reader], seconds)
        yield dur
        if self.reader_totals is not None:
            totals = self.reader_totals()
            err = _family("soak_reader_errors", ["reader"])
            last = _family("soak_reader_last_success_timestamp_seconds", ["reader"])
            for reader, t in sorted(totals.items()):
                err.add_metric([reader], float(t.errors))
                if t.last_success_ts is not None:
                    last.add_metric([reader], t.last_success_ts)
            yield err
            yield last

    def _device_metrics(self, snap: Snapshot) -> Iterator[Any]:
        L = list(DEVICE_LABELS)
        up = _family("soak_device_up", L)
        util = _family("soak_device_utilization_ratio", L)
        temp = _family("soak_device_temperature_celsius", L)
        power = _family("soak_device_power_watts", L)
        used = _family("soak_device_memory_used_bytes", [*L, "kind"])
        total = _family("soak_device_memory_total_bytes", [*L, "kind"])
        healthy = _family("soak_device_healthy", L)
        ecc = _family("soak_device_ecc_errors", [*L, "type"])
        link = _family("soak_device_link_up", L)
        throttle = _family("soak_device_throttle_reasons", L)
        proc = _family("soak_device_process_memory_bytes", L)
        xid = _family("soak_device_xid_errors", L)
        ups = _family("soak_device_link_ups", L)
        pages = _family("soak_device_ecc_isolated_pages", [*L, "type"])
        codes = _family("soak_device_fault_code", [*L, "code"])
        pending = _family("soak_device_reset_pending", L)
        remap_failed = _family("soak_device_row_remap_failed", L)
        info = _family("soak_device_info", [*L, "health", "serial"])
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
            if d.link_up_count is not None:
                ups.add_metric(lv, d.link_up_count)
            for kind, n in (("single", d.ecc_single_bit_isolated_pages), ("double", d.ecc_double_bit_isolated_pages)):
                if n is not None:
                    pages.add_metric([*lv, kind], n)
            for code in sorted(set(d.fault_codes or ())):
                codes.add_metric([*lv, code], 1.0)
            if d.row_remap_pending is not None or d.retired_pages_pending is not None:
                pending.add_metric(lv, 1.0 if (d.row_remap_pending or d.retired_pages_pending) else 0.0)
            if d.row_remap_failed is not None:
                remap_failed.add_metric(lv, 1.0 if d.row_remap_failed else 0.0)
        for fam in (up, util, temp, power, used, total, healthy, ecc, link, throttle, proc, xid, ups, pages, codes,
                    pending, remap_failed, info):
            if fam.samples:
                yield fam
        comm = _family("soak_comm_timeouts", ["source", "kind"])
        for key, count in sorted(snap.comm_timeouts.items()):
            source, _, kind = key.partition(":")
            comm.add_metric([source, kind], count)
        if comm.samples:
            yield comm

    def _reading_metrics(self) -> Iterator[Any]:
        unchanged = _family("soak_device_reading_unchanged_seconds", ["device", "metric"])
        stale = _family("soak_device_reading_stale", ["device", "metric"])
        for device, metric, seconds, is_stale in self.tracker.unchanged():
            unchanged.add_metric([device, metric], seconds)
            stale.add_metric([device, metric], 1.0 if is_stale else 0.0)
        for fam in (unchanged, stale):
            if fam.samples:
                yield fam

    def _host_metrics(self, snap: Snapshot) -> Iterator[Any]:
        h = snap.host_sample
        if h is None:
            return
        for name, value in (
            ("soak_host_memory_used_bytes", h.mem_used_bytes),
            ("soak_host_memory_total_bytes", h.mem_total_bytes),
            ("soak_workload_rss_bytes", h.workload_rss_bytes),
            ("soak_host_disk_free_bytes", h.disk_free_bytes),
        ):
            if value is not None:
                g = _family(name)
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


class Labelled:
    """Every sample of ``inner`` with ``labels`` added (a cluster node's ``node`` and
    ``run_id``): Prometheus' ``instance`` names a scrape address, not a node."""

    def __init__(self, inner: Any, labels: dict[str, str]) -> None:
        self.inner = inner
        self.labels = dict(labels)

    def collect(self) -> Iterator[Any]:
        for family in self.inner.collect():
            extra = {k: v for k, v in self.labels.items()}
            family.samples = [s._replace(labels={**extra, **s.labels}) for s in family.samples]
            yield family


def make_registry(collector: SoakCollector, labels: dict[str, str] | None = None) -> CollectorRegistry:
    """A private registry holding only ``collector`` (no process/platform defaults)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Labelled(collector, labels) if labels else collector)
    return registry
