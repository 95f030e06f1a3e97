"""Frozen telemetry records shared by every reader and every sink.

Units are in the field names. A value the tool did not give (``NA``, ``-``, not supported,
the reading failed) is ``None``: never 0. Canonical metric names used by the store, CSV
traces and the analysis are the ``METRICS`` tuple below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType

# Canonical per-device metric names (contract): store columns, CSV trace `metric` values,
# analysis inputs. More may be added at the end.
METRICS: tuple[str, ...] = (
    "util_pct",
    "hbm_used_bytes",
    "hbm_total_bytes",
    "temp_c",
    "power_w",
    "host_rss_bytes",
    "step_time_s",
    "comm_timeouts_total",
)

_EMPTY: Mapping[str, int] = MappingProxyType({})


HEALTH_WORDS: tuple[str, ...] = ("OK", "Warning", "Alarm", "Critical")
"""The Ascend health words from the least to the most severe (``npu-smi info -t health``); any
other word (NA, UNKNOWN) says nothing of the chip's health."""


@dataclass(frozen=True, slots=True)
class DeviceSample:
    """One device's state at one tick.

    ``device`` is the stable key used everywhere (store, labels, traces): ``npu{npu_id}-{chip_id}``
    for Ascend, ``cuda{index}`` for NVIDIA, ``cpu`` for the host.
    ``up`` is False when this device's reading failed this tick (a marked gap); then the
    measured fields are None and ``error`` says why.
    """

    device: str
    backend: str  # "npu" | "cuda" | "cpu" | "sim"
    up: bool = True
    model: str | None = None
    npu_id: int | None = None
    chip_id: int | None = None
    bus_id: str | None = None
    serial: str | None = None
    health: str | None = None  # tool's word: OK, Warning, Alarm, Critical, ...
    healthy: bool | None = None
    util_pct: float | None = None  # AI core / SM utilization, 0-100
    temp_c: float | None = None
    power_w: float | None = None
    hbm_used_bytes: int | None = None
    hbm_total_bytes: int | None = None
    ddr_used_bytes: int | None = None
    ddr_total_bytes: int | None = None
    # ECC: the tool's current counts, HBM and DDR summed (NVML: aggregate corrected and
    # uncorrected); isolated (retired) pages likewise
    ecc_single_bit_errors: int | None = None
    ecc_double_bit_errors: int | None = None
    ecc_single_bit_isolated_pages: int | None = None
    ecc_double_bit_isolated_pages: int | None = None
    aicpu_util_pct: float | None = None
    mem_bw_util_pct: float | None = None
    link_up: bool | None = None
    throttle_reasons: int | None = None  # NVML clock-event bitmask
    process_memory_bytes: int | None = None  # device memory held by processes on this chip
    error: str | None = None
    xid_errors: int | None = None  # NVML Xid critical events seen since the reader started
    xid_last: int | None = None  # the Xid number of the latest of them
    # The chip's own fault report: the codes of ``npu-smi info -t health`` (hex as printed)
    # and their texts; () when the view answered with none, None when it was not read.
    fault_codes: tuple[str, ...] | None = None
    fault_texts: tuple[str, ...] | None = None
    link_up_count: int | None = None  # hccn_tool -link_stat: times the port came up (a flap adds one)
    row_remap_pending: bool | None = None  # NVML: a row remap waits for a reset
    row_remap_failed: bool | None = None  # NVML: a row could not be remapped
    retired_pages_pending: bool | None = None  # NVML: a retired page waits for a reset
    # When this sample's slow views (the health view, ECC, the port) were read, on the run's
    # time line, where that is not the tick's own time: they are read on a cadence of their
    # own and taken into the next tick, so a count stored at the tick would look up to a tick
    # newer than it is. None where the sample holds none of them, or they were read at the tick.
    detail_ts: float | None = None

    def metric(self, name: str) -> float | None:
        """The value of a canonical metric name, or None."""
        value = getattr(self, name, None)
        return None if value is None else float(value)

    def as_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class HostSample:
    """The host and the workload's process tree (psutil)."""

    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    cpu_pct: float | None = None
    workload_rss_bytes: int | None = None  # summed RSS of the workload's process tree
    workload_cpu_pct: float | None = None
    disk_free_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class ReaderStatus:
    """Self-metrics of one reader for one tick."""

    reader: str
    ok: bool
    duration_s: float
    error: str | None = None


@dataclass(frozen=True)
class Snapshot:
    """Everything read at one tick. Every sink (store, exporter, online detectors) sees the same one."""

    ts: float  # unix seconds at the start of the tick
    host: str
    devices: tuple[DeviceSample, ...] = ()
    host_sample: HostSample | None = None
    # cumulative counters by source, e.g. {"hccl_plog:notify_timeout": 3, "hccn:link_down": 1}
    comm_timeouts: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    readers: tuple[ReaderStatus, ...] = ()

    def device(self, key: str) -> DeviceSample | None:
        for d in self.devices:
            if d.device == key:
                return d
        return None
