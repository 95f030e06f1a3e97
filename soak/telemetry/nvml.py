"""NVIDIA GPUs through NVML (the ``pynvml`` module of the nvidia-ml-py package).

The library is imported lazily and never required: without it, or without a driver,
:func:`open_nvml` raises :class:`soak.errors.DeviceUnavailable` with the reason. Every NVML
call goes through one choke point (:meth:`NvmlReader._q`) that catches only ``NVMLError``:
"not supported" (and "no permission") become None; any other error marks that GPU as a gap
for this tick (``up=False``) and never stops the sweep over the others.

Command line equivalent: ``nvidia-smi --query-gpu=utilization.gpu,memory.used,memory.total,
temperature.gpu,power.draw,clocks_event_reasons.active,ecc.errors.corrected.aggregate.total,
ecc.errors.uncorrected.aggregate.total --format=csv``.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from soak.errors import DeviceUnavailable
from soak.telemetry.records import DeviceSample


class _NotSupported(Exception):
    pass


def load_pynvml(module: ModuleType | None = None) -> ModuleType:
    """The pynvml module (or ``module``), or DeviceUnavailable saying what is missing."""
    if module is not None:
        return module
    try:
        return importlib.import_module("pynvml")
    except ImportError as exc:
        raise DeviceUnavailable(
            f"cuda backend: the NVML Python binding is not installed ({exc}); "
            "install it with: pip install 'soak[cuda]' (nvidia-ml-py)"
        ) from None


class NvmlReader:
    """Reads every GPU NVML sees. Create with :func:`open_nvml`."""

    def __init__(self, nvml: ModuleType) -> None:
        self.nv = nvml
        self.count = int(nvml.nvmlDeviceGetCount())
        self._xid_set: Any = None
        self._xids: dict[int, int] = {}  # gpu index -> Xid critical events seen
        self._xid_last: dict[int, int] = {}  # gpu index -> the latest event's Xid number
        self._index_by_handle: dict[int, int] = {}
        self._setup_xid_events()

    # -- the choke point ------------------------------------------------------------------
    def _not_supported_codes(self) -> set[int]:
        names = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_NO_PERMISSION", "NVML_ERROR_FUNCTION_NOT_FOUND")
        return {getattr(self.nv, n) for n in names if hasattr(self.nv, n)}

    def _q(self, fn_name: str, *args: Any) -> Any:
        """Call ``pynvml.<fn_name>(*args)``; "not supported" -> None, other NVMLError raises."""
        fn = getattr(self.nv, fn_name, None)
        if fn is None:  # an older binding without this call
            return None
        try:
            return fn(*args)
        except self.nv.NVMLError as exc:
            if getattr(exc, "value", None) in self._not_supported_codes():
                return None
            raise

    # -- Xid events -------------------------------------------------------------------------
    def _setup_xid_events(self) -> None:
        nv = self.nv
        try:
            self._xid_set = self._q("nvmlEventSetCreate")
            if self._xid_set is None:
                return
            for i in range(self.count):
                handle = nv.nvmlDeviceGetHandleByIndex(i)
                self._index_by_handle[id(handle)] = i
                self._q("nvmlDeviceRegisterEvents", handle, nv.nvmlEventTypeXidCriticalError, self._xid_set)
                self._xids[i] = 0
        except nv.NVMLError:
            self._xid_set = None  # events unavailable (container, permissions): not fatal

    def poll_xids(self) -> dict[int, int]:
        """Drain pending Xid events without blocking (timeout 0 ms); cumulative per GPU."""
        nv = self.nv
        if self._xid_set is None:
            return dict(self._xids)
        wait = getattr(nv, "nvmlEventSetWait_v2", None) or getattr(nv, "nvmlEventSetWait", None)
        for _ in range(1000):  # bounded: a storm of events cannot pin the sampler
            try:
                data = wait(self._xid_set, 0)
            except nv.NVMLError:
                break  # NVML_ERROR_TIMEOUT: nothing pending
            index = getattr(data, "device_index", None)
            if index is None:
                try:
                    index = int(nv.nvmlDeviceGetIndex(data.device))
                except (nv.NVMLError, AttributeError):
                    index = -1
            self._xids[index] = self._xids.get(index, 0) + 1
            xid = getattr(data, "eventData", None)  # the Xid number of an XidCriticalError event
            if isinstance(xid, int):
                self._xid_last[index] = xid
        return dict(self._xids)

    # -- a sweep ---------------------------------------------------------------------------
    def read(self) -> list[DeviceSample]:
        xids = self.poll_xids()
        return [self._read_one(i, xids.get(i), self._xid_last.get(i)) for i in range(self.count)]

    def _read_one(self, i: int, xid: int | None, xid_last: int | None = None) -> DeviceSample:
        nv = self.nv
        key = f"cuda{i}"
        try:
            h = nv.nvmlDeviceGetHandleByIndex(i)
            name = self._q("nvmlDeviceGetName", h)
            if isinstance(name, bytes):
                name = name.decode(errors="replace")
            pci = self._q("nvmlDeviceGetPciInfo", h)
            bus = getattr(pci, "busId", None) if pci is not None else None
            if isinstance(bus, bytes):
                bus = bus.decode(errors="replace")
            serial = self._q("nvmlDeviceGetSerial", h)
            if isinstance(serial, bytes):
                serial = serial.decode(errors="replace")
            util = self._q("nvmlDeviceGetUtilizationRates", h)
            mem = self._q("nvmlDeviceGetMemoryInfo", h)
            temp = self._q("nvmlDeviceGetTemperature", h, nv.NVML_TEMPERATURE_GPU)
            power_mw = self._q("nvmlDeviceGetPowerUsage", h)
            reasons = self._q("nvmlDeviceGetCurrentClocksEventReasons", h)
            if reasons is None:
                reasons = self._q("nvmlDeviceGetCurrentClocksThrottleReasons", h)
            corrected = uncorrected = None
            agg = getattr(nv, "NVML_AGGREGATE_ECC", 1)
            corrected = self._q("nvmlDeviceGetTotalEccErrors", h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, agg)
            uncorrected = self._q("nvmlDeviceGetTotalEccErrors", h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, agg)
            # (corrected rows, uncorrected rows, pending, failure): A100 and later; older GPUs
            # retire pages instead, and say whether a retirement waits for a reset
            remap = self._q("nvmlDeviceGetRemappedRows", h)
            retired_pending = self._q("nvmlDeviceGetRetiredPagesPendingStatus", h)
        except nv.NVMLError as exc:
            return DeviceSample(device=key, backend="cuda", up=False, error=f"NVML: {exc}")
        return DeviceSample(
            device=key,
            backend="cuda",
            up=True,
            model=name,
            bus_id=bus,
            serial=serial,
            util_pct=None if util is None else float(util.gpu),
            temp_c=None if temp is None else float(temp),
            power_w=None if power_mw is None else power_mw / 1000.0,
            hbm_used_bytes=None if mem is None else int(mem.used),
            hbm_total_bytes=None if mem is None else int(mem.total),
            ecc_single_bit_errors=None if corrected is None else int(corrected),
            ecc_double_bit_errors=None if uncorrected is None else int(uncorrected),
            throttle_reasons=None if reasons is None else int(reasons),
            xid_errors=xid,
            xid_last=xid_last,
            row_remap_pending=None if not _tuple4(remap) else bool(remap[2]),
            row_remap_failed=None if not _tuple4(remap) else bool(remap[3]),
            retired_pages_pending=None if retired_pending is None else bool(retired_pending),
        )

    def close(self) -> None:
        try:
            if self._xid_set is not None:
                self._q("nvmlEventSetFree", self._xid_set)
            self.nv.nvmlShutdown()
        except self.nv.NVMLError:
            pass


def _tuple4(value: Any) -> bool:
    return isinstance(value, tuple | list) and len(value) == 4


def open_nvml(module: ModuleType | None = None) -> NvmlReader:
    """Initialise NVML and return a reader, or raise DeviceUnavailable with the reason."""
    nv = load_pynvml(module)
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        raise DeviceUnavailable(
            f"cuda backend: NVML did not initialise ({exc}); is the NVIDIA driver installed and loaded?"
        ) from None
    try:
        reader = NvmlReader(nv)
    except nv.NVMLError as exc:
        raise DeviceUnavailable(f"cuda backend: NVML could not list GPUs ({exc})") from None
    if reader.count == 0:
        reader.close()
        raise DeviceUnavailable("cuda backend: NVML sees no GPU on this host")
    return reader
