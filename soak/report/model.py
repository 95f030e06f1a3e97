"""What the report shows, as plain frozen records.

The Streamlit app and the PDF render a ``ReportData``; neither talks to the store or the
analysis directly. ``soak.report.loader.load_report_data`` fills one from a store. Keeping the
renderers on this small model means the PDF can be built, tested and benchmarked from any
source (a store, a CSV trace, a synthetic fixture) with the same code.

Missing values are ``None`` and are rendered as "N/A" (see ``fmt``), never as 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from soak.analysis.messages import hm
from soak.provenance import simulated_run, time_scaled
from soak.tomlfile import finite

# Chart order and labels of the per-chip series the report draws (canonical metric names).
SERIES_METRICS: tuple[str, ...] = ("util_pct", "temp_c", "hbm_used_bytes", "power_w", "step_time_s")


@dataclass(frozen=True)
class RunInfo:
    """The run as the store recorded it."""

    run_id: str
    status: str | None = None  # running | finished | failed | interrupted ...
    workload: str | None = None
    backend: str | None = None  # npu | cuda | cpu | sim
    host: str | None = None
    started_at: float | None = None  # unix seconds
    ended_at: float | None = None  # None while running
    planned_duration_s: float | None = None
    time_scale: float | None = None  # >1 for an accelerated (simulated) soak
    restarts: int | None = None
    plan: Mapping[str, Any] = field(default_factory=dict)
    timezone: str | None = None  # the host's IANA zone, from the manifest
    utc_offset_s: float | None = None  # the host's offset when it names no zone

    @property
    def simulated(self) -> bool:
        """Not an acceptance of hardware: a simulated fleet or a scaled time line (or both)."""
        return simulated_run(self.backend, self.time_scale)

    @property
    def wall_duration_s(self) -> float | None:
        """How long the run took on the wall clock (``duration_s`` when time is not scaled)."""
        d = self.duration_s
        if d is None or not time_scaled(self.time_scale):
            return d
        return d / self.time_scale

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None:
            return None
        end = self.ended_at
        if end is None:
            return None
        return max(0.0, end - self.started_at)


@dataclass(frozen=True)
class Customer:
    """Who the PDF is for. Given on the command line; not part of the recorded run."""

    customer: str | None = None
    site: str | None = None
    cluster: str | None = None
    node: str | None = None


@dataclass(frozen=True)
class ChipSummary:
    """One device over the whole run (statistics computed in SQL or from the series).

    ``device`` is the name the report shows (``node-1/npu0`` on a cluster: ``device_key``);
    ``node`` and ``chip`` are where it is, as the store keeps them.
    """

    device: str
    model: str | None = None
    serial: str | None = None
    bus_id: str | None = None
    samples: int | None = None
    util_mean_pct: float | None = None
    util_min_pct: float | None = None
    temp_max_c: float | None = None
    power_mean_w: float | None = None
    power_max_w: float | None = None
    hbm_peak_bytes: float | None = None
    hbm_total_bytes: float | None = None
    step_time_median_s: float | None = None
    findings: int = 0
    node: str | None = None  # the cluster node it is on; None on a single-node run
    chip: str | None = None  # its name on that node
    # its own fault report over the run (None: that view never answered)
    health: str | None = None  # the worst health word seen (OK, Warning, Alarm, Critical)
    ecc_uncorrectable: float | None = None  # double-bit errors: the rise over the run
    ecc_correctable: float | None = None  # single-bit errors: the rise over the run
    link_downs: int | None = None  # how many times its network port went down


@dataclass(frozen=True)
class DeviceFaultView:
    """One chip's fault report about one signal (and one code) over the run: the changes of
    its ``device_fault`` events (``soak.analysis.device_faults.FaultChange``) taken together."""

    device: str  # as named on its node
    signal: str  # fault_code, health, ecc_*, link (down, up and flaps), xid, row_remap_*, ...
    severity: str  # the worst of its changes: fail | warn | info
    first_ts: float
    last_ts: float
    node: str | None = None
    serial: str | None = None
    code: str | None = None  # the fault code (hex) or the Xid number
    text: str | None = None  # the chip's own text for the code, else the table's meaning
    level: str | None = None  # the code's level, the Xid's class, the worst health word
    action: str | None = None
    times: int = 0  # how often it was raised (a code set, a port down, a count that rose)
    value: float | None = None  # the last count or state
    previous: float | None = None  # the count before its first rise (None: none was read)
    cleared: bool = False  # gone again by the last change (a code cleared, the port up, health OK)


@dataclass(frozen=True)
class Series:
    """One metric of one device, already downsampled (bucket means)."""

    device: str
    metric: str
    ts: tuple[float, ...]
    values: tuple[float | None, ...]


@dataclass(frozen=True)
class FindingView:
    """One finding as the report shows it. ``evidence`` holds the detector's extra keys."""

    kind: str
    device: str | None
    metric: str | None
    start: float | None
    end: float | None
    severity: str
    summary: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    capture: int | None = None  # id of the profiler capture that explains it (CaptureView.id)
    node: str | None = None  # the cluster node it is about (its device is named as on that node)
    code: str = ""  # soak.analysis.messages: what the report renders (summary: the English as judged)
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CaptureView:
    """A profiler capture: where the time of a few steps of one rank went."""

    id: int
    label: str  # baseline | cadence | request
    workload: str | None
    rank: int | None
    first_step: int | None = None
    last_step: int | None = None
    steps_per_s: float | None = None
    shares: Mapping[str, float | None] = field(default_factory=dict)  # data, forward, ..., idle (0-1)
    dominant: str | None = None
    top_ops: tuple[tuple[str, float, int], ...] = ()  # device (the CPU on CPU): name, self ms, calls
    cpu_fallbacks: tuple[tuple[str, float, int], ...] | None = None  # None: not applicable (CPU)
    trace: str | None = None  # relative to the run folder
    error: str | None = None
    backend: str | None = None  # cpu | cuda | npu


@dataclass(frozen=True)
class EventView:
    """Something that happened at a moment: restart, crash, inject, checkpoint, phase change."""

    ts: float
    kind: str
    device: str | None = None
    message: str | None = None
    severity: str | None = None
    code: str = ""  # a finding event: the finding's code and values (rendered like the finding)
    values: Mapping[str, Any] = field(default_factory=dict)
    # as recorded: the values its message was made from (soak.report.event_text reads them)
    detail: Mapping[str, Any] = field(default_factory=dict)
    workload: str | None = None
    node: str | None = None
    # a finding event the final analysis did not keep: withdrawn at the run's end (``withdrawn_ts``)
    withdrawn: bool = False
    withdrawn_ts: float | None = None
    # a finding event the final analysis kept with other figures: an online estimate, superseded
    superseded: bool = False


@dataclass(frozen=True)
class Criterion:
    """One acceptance criterion with the measured value. ``met`` None = could not be judged."""

    name: str
    required: str
    measured: str | None
    met: bool | None
    code: str = ""  # soak.analysis.messages: the name's code; required and measured have their own
    values: Mapping[str, Any] = field(default_factory=dict)
    required_code: str = ""
    measured_code: str = ""


@dataclass(frozen=True)
class Message:
    """A sentence of the judgement (a reason of the verdict): the English as judged, and the
    code and values the report renders in its language."""

    text: str
    code: str = ""
    values: Mapping[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class DetectorInfo:
    name: str
    version: str | None = None
    thresholds: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReportData:
    run: RunInfo
    chips: tuple[ChipSummary, ...] = ()
    # the chips' own fault reports (``device_fault`` events), fail first
    device_faults: tuple[DeviceFaultView, ...] = ()
    # the workloads' numerical events (soak.report.numerics.NumericRow), fail first
    numerics: tuple[Any, ...] = ()
    series: tuple[Series, ...] = ()
    findings: tuple[FindingView, ...] = ()
    events: tuple[EventView, ...] = ()
    verdict: str | None = None  # pass | fail | running | None (not analysed)
    verdict_reasons: tuple[Message, ...] = ()
    criteria: tuple[Criterion, ...] = ()
    clean_statement: Message | None = None
    detectors: tuple[DetectorInfo, ...] = ()
    manifest: Mapping[str, Any] = field(default_factory=dict)
    generated_at: float | None = None
    captures: tuple[CaptureView, ...] = ()
    accounting: Mapping[str, Any] | None = None  # soak.analysis.evidence.Accounting.to_dict()
    coverage: Mapping[str, Any] | None = None  # soak.analysis.evidence.Coverage.to_dict()
    chip_hours: float | None = None
    chip_unit: str | None = None
    links: Mapping[str, Any] | None = None  # soak.analysis.links.LinkVerdict.to_dict(): the busbw tables
    reliability: Mapping[str, Any] | None = None  # soak.analysis.reliability.Reliability.to_dict()
    # the repeat offenders among the run's nodes (soak.fleet.NodeHistory.to_dict()); None: not looked up
    repeat_offenders: tuple[Mapping[str, Any], ...] | None = None
    # a run over several nodes: soak.report.cluster.ClusterView (None for one node)
    cluster: Any = None

    def series_for(self, device: str, metric: str) -> Series | None:
        for s in self.series:
            if s.device == device and s.metric == metric:
                return s
        return None

    def findings_for(self, device: str) -> tuple[FindingView, ...]:
        return tuple(f for f in self.findings if f.device == device)


# -- rendering helpers shared by the PDF and the app --------------------------------------------


def fmt(value: Any, unit: str = "", digits: int = 1) -> str:
    """A value for people: None (or NaN) is "N/A", never 0."""
    if value is None:
        return "N/A"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "N/A"
        return f"{value:.{digits}f}{unit}"
    return f"{value}{unit}"


def fmt_bytes(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "N/A"
    v = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.1f} {unit}" if unit != "B" else f"{int(v)} B"
        v /= 1024
    return f"{v:.1f} TiB"  # pragma: no cover


def fmt_ts(ts: float | None) -> str:
    if ts is None or not finite(ts):
        return "N/A"
    try:
        return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError, OSError):  # beyond the calendar
        return "N/A"


def soak_window(data: ReportData) -> tuple[float | None, float | None]:
    """The run's soak window, as every figure of its time states it: from its start to its end,
    or to its planned end when it ran past it (the daemon's own shutdown after the planned end
    is not run time). The run's own start and end where no accounting was judged."""
    acc = data.accounting or {}
    a, b = acc.get("window_start"), acc.get("window_end")
    if isinstance(a, int | float) and isinstance(b, int | float) and data.run.ended_at is not None:
        return float(a), float(b)
    return data.run.started_at, data.run.ended_at


def fmt_duration(seconds: float | None) -> str:
    """A duration, as every figure writes one (``soak.analysis.messages.hm``)."""
    return hm(seconds)


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """Nested manifest/plan dicts as sorted ("a.b.c", "value") rows for tables."""
    rows: list[tuple[str, str]] = []
    for key in sorted(mapping, key=str):
        value = mapping[key]
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            rows.extend(flatten(value, name + "."))
        elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
            if value and all(isinstance(v, Mapping) for v in value):
                # A list of records (e.g. the device list): one readable row per record.
                for i, item in enumerate(value):
                    rows.append((f"{name}[{i}]", ", ".join(f"{k}={fmt(v)}" for k, v in item.items())))
            else:
                rows.append((name, ", ".join(fmt(v) for v in value) or "N/A"))
        else:
            rows.append((name, fmt(value)))
    return rows
