"""Device backends: one ``read()`` per tick, returning a frozen :class:`Snapshot`.

``make_backend("auto"|"npu"|"cuda"|"cpu"|"sim", ...)`` builds one. Every reader inside is
called with its own timeout, and a failing reader or chip becomes a marked gap
(``DeviceSample(up=False, error=...)``) plus a failed :class:`ReaderStatus` in
``Snapshot.readers``: ``read()`` never raises.

The npu backend runs ``npu-smi info`` once per tick; the slower key/value queries
(``-t usages/health/ecc``) and ``hccn_tool`` run on a slower cadence (``detail_interval_s``),
and what they read is in the samples of the next tick only, with the time it was read
(``DeviceSample.detail_ts``): a value is stored once, never copied into the ticks between two
reads (a copy would count as a reading of a view that was not read, and a counter stored as
flat until the next read).
Only the card's serial, which does not change, is in every sample. A chip that was seen before and is
missing from this tick's table is reported ``up=False`` ("vanished"), not silently dropped.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from soak.clock import SYSTEM_CLOCK, ScaledClock
from soak.errors import DeviceUnavailable, SoakError, ToolError
from soak.telemetry import BACKENDS
from soak.telemetry.hccn import read_link_fields
from soak.telemetry.host import HostReader, cpu_device_sample
from soak.telemetry.npu_query import read_chip_details
from soak.telemetry.plog import PlogFollower
from soak.telemetry.records import DeviceSample, HostSample, ReaderStatus, Snapshot

log = logging.getLogger("soak.telemetry")

DEFAULT_TOOL_TIMEOUT_S = 10.0
DEFAULT_DETAIL_INTERVAL_S = 60.0
STICKY_DETAIL_FIELDS = ("serial",)
"""Detail fields in every sample once read: they name the chip, they do not measure it."""


class Backend(Protocol):
    name: str

    def read(self) -> Snapshot: ...

    def close(self) -> None: ...


class _Tick:
    """Collects reader statuses for one tick; ``call`` times a reader and never raises."""

    def __init__(self) -> None:
        self.statuses: list[ReaderStatus] = []

    def call(self, reader: str, fn: Callable[[], Any]) -> tuple[bool, Any]:
        started = time.monotonic()
        try:
            value = fn()
        except (SoakError, OSError, ValueError) as exc:
            self.statuses.append(ReaderStatus(reader, False, time.monotonic() - started, _reason(exc)))
            return False, exc
        except Exception as exc:  # a reader bug must not end a 72 h soak; it is logged and counted
            log.exception("reader %s failed unexpectedly", reader)
            self.statuses.append(ReaderStatus(reader, False, time.monotonic() - started, f"bug: {exc!r}"))
            return False, exc
        self.statuses.append(ReaderStatus(reader, True, time.monotonic() - started))
        return True, value


def _reason(exc: BaseException) -> str:
    kind = getattr(exc, "kind", None)
    return f"{kind}: {exc}" if kind else str(exc)


class _HostPart:
    def __init__(self, host_reader: HostReader | None) -> None:
        self.host_reader = host_reader or HostReader()
        self.hostname = socket.gethostname()

    def read_host(self, tick: _Tick) -> HostSample | None:
        ok, value = tick.call("psutil", self.host_reader.read)
        return value if ok else None


# ------------------------------------------------------------------------------- cpu


class CpuBackend(_HostPart):
    """The host CPU as the only device (``cpu``). For CPU-only soaks and development."""

    name = "cpu"

    def __init__(self, *, clock: ScaledClock | None = None, host_reader: HostReader | None = None) -> None:
        super().__init__(host_reader)
        self.clock = clock or SYSTEM_CLOCK

    def read(self) -> Snapshot:
        ts = self.clock.now()
        tick = _Tick()
        host = self.read_host(tick)
        devices: tuple[DeviceSample, ...]
        if host is None:
            devices = (DeviceSample(device="cpu", backend="cpu", up=False, error="psutil reading failed"),)
        else:
            devices = (cpu_device_sample(host, self.host_reader.cpu_model),)
        return Snapshot(ts=ts, host=self.hostname, devices=devices, host_sample=host, readers=tuple(tick.statuses))

    def close(self) -> None:
        pass


# ------------------------------------------------------------------------------- cuda


class CudaBackend(_HostPart):
    """NVIDIA GPUs through NVML (see :mod:`soak.telemetry.nvml`)."""

    name = "cuda"

    def __init__(self, *, clock: ScaledClock | None = None, host_reader: HostReader | None = None,
                 nvml_module: Any = None) -> None:
        from soak.telemetry.nvml import open_nvml

        super().__init__(host_reader)
        self.clock = clock or SYSTEM_CLOCK
        self.reader = open_nvml(nvml_module)  # DeviceUnavailable with the reason
        self._known: dict[str, DeviceSample] = {}

    def read(self) -> Snapshot:
        ts = self.clock.now()
        tick = _Tick()
        ok, value = tick.call("nvml", self.reader.read)
        if ok:
            devices = tuple(value)
            self._known.update({d.device: d for d in devices if d.up})
        else:
            devices = tuple(_gap(d, _reason(value)) for d in self._known.values())
        host = self.read_host(tick)
        return Snapshot(ts=ts, host=self.hostname, devices=devices, host_sample=host, readers=tuple(tick.statuses))

    def close(self) -> None:
        self.reader.close()


# ------------------------------------------------------------------------------- npu


def _gap(known: DeviceSample, error: str) -> DeviceSample:
    """A marked gap that keeps the chip's identity (labels) and drops every measured value."""
    return DeviceSample(
        device=known.device, backend=known.backend, up=False, model=known.model,
        npu_id=known.npu_id, chip_id=known.chip_id, bus_id=known.bus_id, serial=known.serial,
        error=error,
    )


class NpuBackend(_HostPart):
    """Ascend NPUs through ``npu-smi`` (+ key/value queries, ``hccn_tool``, HCCL plog)."""

    name = "npu"

    def __init__(
        self,
        *,
        npu_smi: str = "npu-smi",
        hccn_tool: str = "hccn_tool",
        plog_dir: str | os.PathLike[str] | None = None,
        runner: Callable[..., Any] | None = None,
        clock: ScaledClock | None = None,
        host_reader: HostReader | None = None,
        timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
        detail_interval_s: float | None = DEFAULT_DETAIL_INTERVAL_S,
        backend_label: str = "npu",
        details_in_background: bool = False,
    ) -> None:
        from soak.telemetry.npu_smi import NpuSmiReader
        from soak.telemetry.runner import Runner

        super().__init__(host_reader)
        self.clock = clock or SYSTEM_CLOCK
        self.runner = runner if runner is not None else Runner(timeout_s=timeout_s)
        self.npu_smi = npu_smi
        self.hccn_tool = hccn_tool
        self.reader = NpuSmiReader(npu_smi=npu_smi, runner=self.runner)
        self.detail_interval_s = detail_interval_s
        self.backend_label = backend_label
        self._known: dict[str, DeviceSample] = {}
        self._details: dict[tuple[int, int], dict[str, object]] = {}
        self._fresh: dict[tuple[int, int], dict[str, object]] = {}  # read since the last tick
        self._detail_due: dict[tuple[int, int], float] = {}  # monotonic time of each chip's next turn
        self._detail_started = False
        # In the background (the daemon, the exporter) the slow views are read by a thread of
        # their own: a chip's turn is several tool calls (1-3 s with a simulated fleet on a
        # busy host, seconds for hccn_tool on a real one), and a tick that waited for them
        # missed its readings of every chip (a 0.5 s tick lost a third of them).
        self.details_in_background = details_in_background
        self._detail_lock = threading.Lock()  # one pass at a time: the thread's, or a tick's
        self._state_lock = threading.Lock()  # _details, _detail_chips, _detail_statuses
        self._detail_chips: list[tuple[int, int]] = []
        self._detail_statuses: list[ReaderStatus] = []  # the thread's calls, for the next tick
        self._detail_thread: threading.Thread | None = None
        self._detail_stop = threading.Event()
        self._last_comm: Mapping[str, int] = {}
        # No hccn_tool (310P hosts, containers): skip link reads instead of counting an error
        # every pass.
        self._hccn_present = shutil.which(hccn_tool) is not None
        if not self._hccn_present:
            log.info("npu backend: %s not found; link state is not read", hccn_tool)
        self._plog = None if plog_dir is None else PlogFollower(plog_dir)

    # One npu-smi info per tick; the rest on the slow cadence.
    def read(self) -> Snapshot:
        from soak.telemetry.npu_smi import to_device_samples

        ts = self.clock.now()
        tick = _Tick()
        ok, table = tick.call("npu-smi", self.reader.info)
        devices: list[DeviceSample] = []
        if ok:
            if self.detail_interval_s is not None:
                # a chip whose table says it is unwell is read in detail at once when its serial
                # is not known yet: the fault event this tick raises names the chip by its serial
                with self._state_lock:
                    unwell = {(c.npu_id, c.chip_id) for c in table.chips
                              if c.health is not None and c.health.upper() != "OK"
                              and "serial" not in self._details.get((c.npu_id, c.chip_id), {})}
                chips = [(c.npu_id, c.chip_id) for c in table.chips]
                if self.details_in_background:
                    with self._state_lock:
                        self._detail_chips = chips
                    if unwell:
                        with self._detail_lock:
                            self._detail_pass(tick, chips, unwell, only=unwell)
                    self._start_detail_thread()
                    with self._state_lock:
                        tick.statuses.extend(self._detail_statuses)
                        self._detail_statuses = []
                else:
                    with self._detail_lock:
                        self._detail_pass(tick, chips, unwell)
            # The table's Health is read every tick; the -t health view only fills in where
            # the table printed no health word. A detail value is taken once: by the first
            # tick after its read.
            with self._state_lock:
                fresh, self._fresh = self._fresh, {}
                details = {}
                for c in table.chips:
                    key = (c.npu_id, c.chip_id)
                    known = self._details.get(key, {})
                    fields = {k: known[k] for k in STICKY_DETAIL_FIELDS if k in known}
                    fields.update(fresh.get(key, {}))
                    details[key] = {k: v for k, v in fields.items()
                                    if c.health is None or k not in ("health", "healthy")}
            current = to_device_samples(table, details)
            if self.backend_label != "npu":
                current = [replace(d, backend=self.backend_label) for d in current]
            seen = {d.device for d in current}
            devices.extend(current)
            for key, known in self._known.items():
                if key not in seen:
                    devices.append(_gap(known, "vanished: missing from npu-smi info"))
            self._known.update({d.device: d for d in current})
        else:
            devices.extend(_gap(d, _reason(table)) for d in self._known.values())
        comm: Mapping[str, int] = {}
        if self._plog is not None:
            okp, counts = tick.call("hccl_plog", self._plog.poll)
            if okp:
                comm = {(k if ":" in k else f"hccl_plog:{k}"): int(v) for k, v in dict(counts).items()}
            else:
                comm = self._last_comm
            self._last_comm = comm
        host = self.read_host(tick)
        return Snapshot(ts=ts, host=self.hostname, devices=tuple(devices), host_sample=host,
                        comm_timeouts=dict(comm), readers=tuple(tick.statuses))

    def _detail_pass(self, tick: _Tick, chips: list[tuple[int, int]],
                     now_due: Collection[tuple[int, int]] = (),
                     only: Collection[tuple[int, int]] | None = None) -> None:
        """Key/value queries and hccn_tool for the chips whose turn has come (of ``only``,
        when given). The caller holds ``_detail_lock``.

        Each chip is due once per ``detail_interval_s``, and the first turns are staggered
        over the interval, so a 16-chip node spreads its ~50 slow calls over the minute
        instead of stalling one tick. The pass stops at the first timeout, so a wedged
        driver costs one timeout per pass, not one per chip and query.
        """
        link = read_link_fields if self._hccn_present else None
        now = time.monotonic()
        interval = self.detail_interval_s or 0.0
        for k, chip in enumerate(chips):
            if chip not in self._detail_due:
                self._detail_due[chip] = now + (k * interval / len(chips) if not self._detail_started else 0.0)
        self._detail_started = True
        for chip in now_due:  # its turn is now, and every interval from now
            self._detail_due[chip] = min(self._detail_due[chip], now)
        for logic_id, (npu_id, chip_id) in enumerate(chips):
            if self._detail_due[(npu_id, chip_id)] > now or (only is not None and (npu_id, chip_id) not in only):
                continue
            self._detail_due[(npu_id, chip_id)] = now + interval
            with self._state_lock:
                want_serial = "serial" not in self._details.get((npu_id, chip_id), {})
            read: dict[str, object] = {}
            ok, value = tick.call("npu-smi-detail",
                                  lambda n=npu_id, c=chip_id, w=want_serial: read_chip_details(self.reader, n, c,
                                                                                               serial=w))
            if ok:
                read.update(value)
            elif isinstance(value, ToolError) and value.kind in ("timeout", "missing"):
                return
            if link is not None:
                ok, value = tick.call("hccn_tool", lambda i=logic_id, f=link: f(self.hccn_tool, self.runner, i))
                if ok:
                    read.update(value)
                elif isinstance(value, ToolError) and value.kind in ("timeout", "missing"):
                    link = None
            if not read:
                continue
            # stamped when the chip's turn ended: no value in it is newer than that
            read["detail_ts"] = self.clock.now()
            with self._state_lock:
                self._details.setdefault((npu_id, chip_id), {}).update(read)
                self._fresh.setdefault((npu_id, chip_id), {}).update(read)

    def _start_detail_thread(self) -> None:
        if self._detail_thread is None and not self._detail_stop.is_set():
            self._detail_thread = threading.Thread(target=self._detail_loop, name="soak-details", daemon=True)
            self._detail_thread.start()

    def _detail_loop(self) -> None:
        """The background passes: each chip on its turn, the calls' statuses kept for the
        next tick's snapshot (at most the last 1000: a tick always drains them)."""
        while not self._detail_stop.is_set():
            tick = _Tick()
            with self._state_lock:
                chips = list(self._detail_chips)
            with self._detail_lock:
                self._detail_pass(tick, chips)
                next_due = min((self._detail_due[c] for c in chips if c in self._detail_due), default=None)
            with self._state_lock:
                self._detail_statuses = (self._detail_statuses + tick.statuses)[-1000:]
            wait_s = 1.0 if next_due is None else next_due - time.monotonic()
            self._detail_stop.wait(min(1.0, max(0.05, wait_s)))

    def close(self) -> None:
        """Stop the background passes (a call in flight ends by its timeout at the latest)."""
        self._detail_stop.set()
        if self._detail_thread is not None:
            self._detail_thread.join(self.runner.timeout_s + 5 if hasattr(self.runner, "timeout_s") else 30)
            self._detail_thread = None


# ------------------------------------------------------------------------------- sim


class SimBackend(NpuBackend):
    """The npu backend against a simulated fleet installed in ``sim_dir`` (a temporary folder
    when None), which ``close`` removes.

    The daemon installs the fleet in its run folder: a daemon killed with SIGKILL never
    closes its backend, and a temporary folder would be left behind for every kill.

    The backend serves its fleet (``sim.serve.SimServer``, on Linux): the tools it installs
    start a small client that this process answers, instead of the simulator's full start at
    every call. They stay executables run through the runner, with its timeouts, and they run
    the simulator themselves once this process is gone."""

    name = "sim"

    def __init__(self, *, sim_config: Any = None, scenario: str | Iterable[str] = "healthy",
                 fault: str | Iterable[str] = (), family: str = "910b", chips: int = 8, seed: int = 0,
                 time_scale: float = 1.0, clock: ScaledClock | None = None,
                 sim_dir: str | os.PathLike[str] | None = None, **kwargs: Any) -> None:
        from soak.telemetry.sim import SimConfig, install
        from soak.telemetry.sim.install import config_path
        from soak.telemetry.sim.serve import SimServer

        self._tmp = os.fspath(sim_dir) if sim_dir is not None else tempfile.mkdtemp(prefix="soak-sim-")
        plog_dir = kwargs.pop("plog_dir", None) or os.path.join(self._tmp, "plog")
        if sim_config is None:
            origin = clock.origin if clock is not None else time.time()
            scale = clock.scale if clock is not None else time_scale
            sim_config = SimConfig.build(scenario=scenario, fault=fault, family=family, chips=chips,
                                         seed=seed, time_scale=scale, origin=origin,
                                         plog_dir=os.fspath(plog_dir))
        self.sim_config = sim_config
        self.sim_dir = Path(self._tmp)
        self._server = SimServer(config_path(self._tmp)) if SimServer.available() else None
        try:
            script = install(self._tmp, sim_config, server=self._server.name if self._server else None)
        except BaseException:
            if self._server is not None:
                self._server.close()
            raise
        super().__init__(npu_smi=str(script), hccn_tool=str(script.parent / "hccn_tool"),
                         plog_dir=sim_config.plog_dir or plog_dir, clock=clock, backend_label="sim", **kwargs)

    def close(self) -> None:
        super().close()  # the background passes call the fleet's tools
        if self._server is not None:
            self._server.close()
        shutil.rmtree(self._tmp, ignore_errors=True)


# ------------------------------------------------------------------------------- factory


def _npu_smi_present(npu_smi: str) -> bool:
    return shutil.which(npu_smi) is not None


def make_backend(
    name: str = "auto",
    *,
    npu_smi: str = "npu-smi",
    hccn_tool: str = "hccn_tool",
    plog_dir: str | os.PathLike[str] | None = None,
    runner: Callable[..., Any] | None = None,
    clock: ScaledClock | None = None,
    host_reader: HostReader | None = None,
    timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
    detail_interval_s: float | None = DEFAULT_DETAIL_INTERVAL_S,
    details_in_background: bool = False,
    sim_config: Any = None,
    sim_scenario: str | Iterable[str] = "healthy",
    sim_fault: str | Iterable[str] = (),
    sim_family: str = "910b",
    sim_chips: int = 8,
    sim_seed: int = 0,
    sim_dir: str | os.PathLike[str] | None = None,
    nvml_module: Any = None,
) -> Backend:
    """Build a backend. ``auto``: npu if ``npu_smi`` is on PATH, else cuda if NVML
    initialises, else cpu. Raises DeviceUnavailable for an explicit cuda without NVML."""
    if name not in BACKENDS:
        raise DeviceUnavailable(f"--backend {name!r} is unknown (known: {', '.join(BACKENDS)})")
    npu_kw = dict(npu_smi=npu_smi, hccn_tool=hccn_tool, plog_dir=plog_dir, runner=runner, clock=clock,
                  host_reader=host_reader, timeout_s=timeout_s, detail_interval_s=detail_interval_s,
                  details_in_background=details_in_background)
    if name == "auto":
        if _npu_smi_present(npu_smi):
            return NpuBackend(**npu_kw)  # type: ignore[arg-type]
        try:
            return CudaBackend(clock=clock, host_reader=host_reader, nvml_module=nvml_module)
        except DeviceUnavailable as exc:
            log.info("auto backend: no npu-smi on PATH; %s; using cpu", exc)
        return CpuBackend(clock=clock, host_reader=host_reader)
    if name == "npu":
        if not _npu_smi_present(npu_smi):
            log.warning("npu backend: %s not found; every tick will be a marked gap until it appears", npu_smi)
        return NpuBackend(**npu_kw)  # type: ignore[arg-type]
    if name == "cuda":
        return CudaBackend(clock=clock, host_reader=host_reader, nvml_module=nvml_module)
    if name == "cpu":
        return CpuBackend(clock=clock, host_reader=host_reader)
    npu_kw.pop("npu_smi")
    npu_kw.pop("hccn_tool")
    return SimBackend(sim_config=sim_config, scenario=sim_scenario, fault=sim_fault, family=sim_family,
                      chips=sim_chips, seed=sim_seed, sim_dir=sim_dir, **npu_kw)  # type: ignore[arg-type]
