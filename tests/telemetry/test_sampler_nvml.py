"""NVML reader against a fake pynvml module (no GPU here), and the real import failing cleanly."""

from __future__ import annotations

import types

import pytest

from soak.errors import DeviceUnavailable
from soak.telemetry.backends import CudaBackend, make_backend
from soak.telemetry.nvml import open_nvml

NOT_SUPPORTED, TIMEOUT, GPU_LOST = 3, 10, 15


def fake_pynvml(*, gpus: int = 2, lost: set[int] = frozenset(), xids: list[int] | None = None,
                init_error: str | None = None) -> types.ModuleType:
    nv = types.ModuleType("pynvml")

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            super().__init__(f"NVML error {value}")
            self.value = value

    nv.NVMLError = NVMLError
    nv.NVML_ERROR_NOT_SUPPORTED = NOT_SUPPORTED
    nv.NVML_ERROR_TIMEOUT = TIMEOUT
    nv.NVML_TEMPERATURE_GPU = 0
    nv.NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
    nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    nv.NVML_AGGREGATE_ECC = 1
    nv.nvmlEventTypeXidCriticalError = 8
    pending = list(xids or [])
    nv.shutdown_called = False

    def init() -> None:
        if init_error:
            raise NVMLError(9)

    def handle(i: int) -> int:
        if i in lost:
            raise NVMLError(GPU_LOST)
        return 100 + i

    def event_wait(_set: object, timeout_ms: int) -> object:
        assert timeout_ms == 0  # never blocks the sampler
        if not pending:
            raise NVMLError(TIMEOUT)
        return types.SimpleNamespace(device_index=pending.pop(0), eventData=79)

    def power(h: int) -> int:
        if h == 101:
            raise NVMLError(NOT_SUPPORTED)  # e.g. a part without a power sensor
        return 251_500

    def shutdown() -> None:
        nv.shutdown_called = True

    nv.nvmlInit = init
    nv.nvmlShutdown = shutdown
    nv.nvmlDeviceGetCount = lambda: gpus
    nv.nvmlDeviceGetHandleByIndex = handle
    nv.nvmlDeviceGetName = lambda h: b"NVIDIA H100 80GB HBM3"
    nv.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=f"00000000:{h - 100 + 0x1B:02X}:00.0")
    nv.nvmlDeviceGetSerial = lambda h: f"165{h}"
    nv.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=87, memory=40)
    nv.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=60 * 2**30, total=80 * 2**30, free=20 * 2**30)
    nv.nvmlDeviceGetTemperature = lambda h, sensor: 64
    nv.nvmlDeviceGetPowerUsage = power
    nv.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0x20  # SW thermal slowdown
    nv.nvmlDeviceGetTotalEccErrors = lambda h, kind, counter: 5 if kind == 0 else 0
    nv.nvmlEventSetCreate = lambda: "set"
    nv.nvmlDeviceRegisterEvents = lambda h, types_, s: None
    nv.nvmlEventSetWait_v2 = event_wait
    nv.nvmlEventSetFree = lambda s: None
    return nv


def test_fake_gpu_values_map_to_samples_in_base_units() -> None:
    reader = open_nvml(fake_pynvml(xids=[1, 1, 0]))
    g0, g1 = reader.read()
    assert g0.device == "cuda0" and g0.model == "NVIDIA H100 80GB HBM3" and g0.up
    assert g0.bus_id == "00000000:1B:00.0"
    assert g0.util_pct == 87.0 and g0.temp_c == 64.0
    assert g0.power_w == 251.5  # NVML reports milliwatts
    assert g0.hbm_used_bytes == 60 * 2**30 and g0.hbm_total_bytes == 80 * 2**30
    assert g0.throttle_reasons == 0x20
    assert (g0.ecc_single_bit_errors, g0.ecc_double_bit_errors) == (5, 0)
    assert (g0.xid_errors, g1.xid_errors) == (1, 2)
    assert g1.power_w is None  # not supported -> None, never 0


def test_an_xid_fallen_off_the_bus_and_a_failed_row_remap_fail_the_chip_through_the_nvml_path() -> None:
    from soak.analysis.device_faults import FaultWatch
    from soak.telemetry.records import Snapshot

    nv = fake_pynvml(gpus=1)
    remap = {"rows": (0, 0, False, False)}
    nv.nvmlDeviceGetRemappedRows = lambda h: remap["rows"]  # (corrected, uncorrected, pending, failure)
    nv.nvmlDeviceGetRetiredPagesPendingStatus = lambda h: 0
    reader, watch = open_nvml(nv), FaultWatch()
    (g,) = reader.read()
    assert (g.xid_errors, g.xid_last, g.row_remap_pending, g.row_remap_failed, g.retired_pages_pending) == \
        (0, None, False, False, False)
    assert watch.track(Snapshot(ts=0.0, host="h", devices=(g,))) == []
    # the driver reports Xid 79 (the event's eventData), and a row the memory could not remap
    xid = types.SimpleNamespace(device_index=0, eventData=79)
    nv.nvmlEventSetWait_v2 = lambda s, t, q=[xid]: q.pop() if q else (_ for _ in ()).throw(nv.NVMLError(TIMEOUT))
    remap["rows"] = (0, 1, True, True)
    (g,) = reader.read()
    assert (g.xid_errors, g.xid_last, g.row_remap_failed) == (1, 79, True)
    changes = {c.signal: c for c in watch.track(Snapshot(ts=5.0, host="h", devices=(g,)))}
    assert set(changes) == {"xid", "row_remap_failed", "row_remap_pending"}
    assert (changes["xid"].code, changes["xid"].severity, changes["xid"].interrupts) == ("79", "fail", True)
    assert changes["row_remap_failed"].severity == "fail" and changes["xid"].serial == "165100"


def test_a_lost_gpu_is_a_gap_and_the_sweep_goes_on() -> None:
    reader = open_nvml(fake_pynvml(gpus=3, lost={1}))
    samples = reader.read()
    assert [s.up for s in samples] == [True, False, True]
    assert samples[1].error.startswith("NVML:")


def test_cuda_backend_keeps_labels_on_gaps_and_closes_nvml() -> None:
    nv = fake_pynvml()
    backend = make_backend("cuda", nvml_module=nv)
    assert isinstance(backend, CudaBackend)
    snap = backend.read()
    assert [d.device for d in snap.devices] == ["cuda0", "cuda1"]
    backend.close()
    assert nv.shutdown_called


def test_driver_missing_is_a_clear_device_unavailable() -> None:
    with pytest.raises(DeviceUnavailable, match="NVML did not initialise"):
        make_backend("cuda", nvml_module=fake_pynvml(init_error="Driver Not Loaded"))


def test_real_pynvml_on_this_gpu_less_host_fails_cleanly() -> None:
    # nvidia-ml-py may or may not be installed; with no libnvidia-ml either way the answer
    # must be DeviceUnavailable with a reason, never an ImportError or NVMLError traceback.
    with pytest.raises(DeviceUnavailable, match="cuda backend: "):
        open_nvml()
