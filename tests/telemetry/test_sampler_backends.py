"""Backends turn every failure into a marked gap; the sampler keeps going whatever happens."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from soak.telemetry.backends import CpuBackend, NpuBackend, SimBackend, make_backend
from soak.telemetry.host import HostReader
from soak.telemetry.records import DeviceSample, ReaderStatus, Snapshot
from soak.telemetry.sampler import Sampler
from soak.telemetry.sim import CONFIG_NAME, SimConfig, install


class _ScriptedBackend:
    name = "fake"

    def __init__(self) -> None:
        self.n = 0

    def read(self) -> Snapshot:
        self.n += 1
        if self.n == 2:
            raise RuntimeError("backend bug")
        ok = self.n % 3 != 0
        return Snapshot(ts=float(self.n), host="h",
                        devices=(DeviceSample(device="d0", backend="cpu", util_pct=float(self.n)),),
                        readers=(ReaderStatus("tool", ok, 0.01, None if ok else "timeout: no answer"),))


def test_sampler_counts_reader_errors_and_survives_a_raising_sink_and_backend() -> None:
    seen: list[float] = []

    def bad_sink(_snap: Snapshot) -> None:
        raise ValueError("sink broke")

    sampler = Sampler(_ScriptedBackend(), interval_s=1.0, sinks=(bad_sink, lambda s: seen.append(s.ts)))
    for _ in range(4):
        sampler.tick()
    assert seen[0] == 1.0 and seen[2:] == [3.0, 4.0]  # every snapshot reached the good sink
    assert sampler.sink_errors == 4
    assert sampler.backend_errors == 1
    totals = sampler.reader_totals()
    assert totals["tool"].calls == 3 and totals["tool"].errors == 1
    assert totals["tool"].last_success_ts == 4.0
    assert totals["backend"].errors == 1
    assert sampler.latest().ts == 4.0


def test_sampler_thread_starts_ticks_and_stops_promptly() -> None:
    ticked = threading.Event()
    sampler = Sampler(CpuBackend(), interval_s=0.05, sinks=(lambda s: ticked.set(),))
    sampler.start()
    assert ticked.wait(10)
    sampler.stop(timeout_s=10)
    n = sampler.ticks
    time.sleep(0.2)
    assert sampler.ticks == n  # stopped
    assert sampler.latest() is not None and sampler.age_s() is not None


def test_cpu_backend_reports_the_host_as_device_cpu(tmp_path: Path) -> None:
    backend = CpuBackend(host_reader=HostReader(pid_provider=os.getpid, run_dir=tmp_path))
    backend.read()
    snap = backend.read()
    (cpu,) = snap.devices
    assert cpu.device == "cpu" and cpu.backend == "cpu" and cpu.up
    assert cpu.util_pct is not None and 0.0 <= cpu.util_pct <= 100.0
    assert cpu.ddr_total_bytes == snap.host_sample.mem_total_bytes > 0
    assert snap.host_sample.workload_rss_bytes > 10 * 1024 * 1024  # this test process
    assert snap.host_sample.workload_cpu_pct is not None  # second look: measured
    assert snap.host_sample.disk_free_bytes > 0


def test_host_reader_without_workload_reports_none_not_zero() -> None:
    sample = HostReader(pid_provider=lambda: None).read()
    assert sample.workload_rss_bytes is None and sample.workload_cpu_pct is None
    assert sample.cpu_pct is None  # the first non-blocking CPU reading has no interval


def test_npu_smi_missing_gives_reader_errors_not_exceptions() -> None:
    backend = make_backend("npu", npu_smi="/nonexistent/npu-smi", detail_interval_s=None)
    snap = backend.read()
    assert snap.devices == ()
    status = next(r for r in snap.readers if r.reader == "npu-smi")
    assert not status.ok and status.error.startswith("missing:")


def _sim_backend(tmp_path: Path, **kw: object) -> NpuBackend:
    script = install(tmp_path / "fleet", SimConfig.build(chips=4, **kw))  # type: ignore[arg-type]
    return NpuBackend(npu_smi=str(script), hccn_tool=str(script.parent / "hccn_tool"),
                      timeout_s=20.0, detail_interval_s=None)


def test_a_chip_vanishing_between_ticks_is_marked_down_with_its_labels(tmp_path: Path) -> None:
    backend = _sim_backend(tmp_path)
    first = backend.read()
    assert [d.up for d in first.devices] == [True] * 4
    cfg = tmp_path / "fleet" / CONFIG_NAME
    SimConfig.load(cfg).with_faults("vanish:chips=2").save(cfg)
    second = backend.read()
    gone = second.device("npu2-0")
    assert gone is not None and not gone.up
    assert gone.error.startswith("vanished")
    assert gone.bus_id == first.device("npu2-0").bus_id and gone.util_pct is None
    assert all(d.up for d in second.devices if d.device != "npu2-0")


@pytest.mark.parametrize("fault, kind", [("dcmi", "error_text"), ("garbage", "garbage")])
def test_tool_failures_after_a_good_tick_mark_every_known_chip_down(tmp_path: Path, fault: str, kind: str) -> None:
    backend = _sim_backend(tmp_path)
    backend.read()
    cfg = tmp_path / "fleet" / CONFIG_NAME
    SimConfig.load(cfg).with_faults(fault).save(cfg)
    snap = backend.read()
    assert len(snap.devices) == 4 and not any(d.up for d in snap.devices)
    assert all(d.error.startswith(f"{kind}:") for d in snap.devices)
    assert not next(r for r in snap.readers if r.reader == "npu-smi").ok


def test_hanging_npu_smi_costs_one_timeout_and_marks_chips_down(tmp_path: Path) -> None:
    backend = _sim_backend(tmp_path)
    backend.read()
    cfg = tmp_path / "fleet" / CONFIG_NAME
    SimConfig.load(cfg).with_faults("hang:seconds=120").save(cfg)
    backend.runner = type(backend.runner)(timeout_s=0.5)
    backend.reader.runner = backend.runner
    started = time.monotonic()
    snap = backend.read()
    assert time.monotonic() - started < 30
    assert not any(d.up for d in snap.devices)
    assert all(d.error.startswith("timeout:") for d in snap.devices)


@pytest.mark.slow
def test_sim_backend_reads_details_links_and_plog_counts() -> None:
    backend = make_backend(
        "sim", sim_chips=2, detail_interval_s=0.0,
        sim_scenario="healthy,ecc_errors:single_per_h=4,chips=1,link_down:at_h=0,chips=0,"
                     "comm_timeouts:rate_per_h=360000",
    )
    try:
        assert isinstance(backend, SimBackend)
        backend.read()
        time.sleep(0.2)
        snap = backend.read()
        d0, d1 = snap.device("npu0-0"), snap.device("npu1-0")
        assert d0.backend == "sim" and d0.up
        assert d0.link_up is False and d1.link_up is True
        assert d1.ecc_single_bit_errors == 0 and d1.ecc_double_bit_errors == 0  # read, not None
        assert d0.aicpu_util_pct is not None
        assert sum(snap.comm_timeouts.values()) > 0
        assert all(k.startswith("hccl_plog:") for k in snap.comm_timeouts)
    finally:
        backend.close()
    assert not backend.sim_dir.exists()


def test_auto_picks_npu_when_npu_smi_is_on_path_else_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class NoNvml:
        class NVMLError(Exception):
            pass

        def nvmlInit(self) -> None:
            raise self.NVMLError("Driver Not Loaded")

    fake = NoNvml()
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert make_backend("auto", nvml_module=fake).name == "cpu"
    script = install(tmp_path / "fleet", SimConfig.build(chips=2))
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")
    assert make_backend("auto", nvml_module=fake).name == "npu"


def test_fresh_table_health_wins_over_an_older_detail_reading(tmp_path: Path) -> None:
    script = install(tmp_path / "fleet", SimConfig.build(chips=2))
    backend = NpuBackend(npu_smi=str(script), hccn_tool=str(script.parent / "hccn_tool"),
                         timeout_s=20.0, detail_interval_s=3600.0)
    first = backend.read()  # chip 0's detail view (health OK) is read now, then not for an hour
    assert first.device("npu0-0").healthy is True
    cfg = tmp_path / "fleet" / CONFIG_NAME
    SimConfig.build(chips=2, scenario="healthy,health_alarm:at_h=0,chips=0",
                    origin=SimConfig.load(cfg).origin).save(cfg)
    second = backend.read()
    assert second.device("npu0-0").health == "Alarm" and second.device("npu0-0").healthy is False


@pytest.mark.parametrize("background", [False, True])
def test_a_chip_unwell_before_its_detail_turn_is_read_at_once_so_its_fault_names_its_serial(
        tmp_path: Path, background: bool) -> None:
    # 4 chips, first detail turns staggered over an hour: chip 3's would come 45 min in; its table
    # health says Alarm from the first tick, so its serial is read in that tick
    script = install(tmp_path / "fleet", SimConfig.build(chips=4, scenario="healthy,health_alarm:at_h=0,chips=3"))
    backend = NpuBackend(npu_smi=str(script), hccn_tool=str(script.parent / "hccn_tool"),
                         timeout_s=20.0, detail_interval_s=3600.0, details_in_background=background)
    try:
        first = backend.read()
    finally:
        backend.close()
    unwell = [d for d in first.devices if d.health == "Alarm"]
    assert len(unwell) == 1 and unwell[0].serial, unwell
    well = [d for d in first.devices if d.health == "OK"]
    # the others wait for their turn: chip 0's is now (in the background, maybe not done yet)
    assert len(well) == 3 and sum(1 for d in well if d.serial) in ((0, 1) if background else (1,))


def test_in_the_background_a_tick_does_not_wait_for_the_slow_views(tmp_path: Path) -> None:
    # every detail call (npu-smi -t ..., hccn_tool) blocks until the test lets it go: the
    # tick must come back with the table's readings all the same
    from soak.telemetry.runner import Runner

    script = install(tmp_path / "fleet", SimConfig.build(chips=2))
    real, go, waiting = Runner(timeout_s=20.0), threading.Event(), threading.Event()

    def runner(argv, *, timeout_s=None):  # noqa: ANN001, ANN202
        if "-t" in argv or str(argv[0]).endswith("hccn_tool"):
            waiting.set()
            assert go.wait(30), "the test never let the detail call go"
        return real(argv, timeout_s=timeout_s)

    backend = NpuBackend(npu_smi=str(script), hccn_tool=str(script.parent / "hccn_tool"), runner=runner,
                         detail_interval_s=3600.0, details_in_background=True)
    try:
        first = backend.read()
        assert [d.up for d in first.devices] == [True, True] and first.device("npu0-0").util_pct is not None
        assert waiting.wait(30)  # chip 0's turn came, in the thread, and is held there
        assert {r.reader for r in first.readers} >= {"npu-smi"} and "npu-smi-detail" not in {r.reader for r in first.readers}
        assert backend.read().device("npu0-0").serial is None  # ticks go on while it is held
        go.set()
        deadline, seen = time.monotonic() + 30, []
        # the thread's calls are counted in a tick's snapshot, as a tick's own were
        while True:
            snap = backend.read()
            seen += [r for r in snap.readers if r.reader == "npu-smi-detail"]
            if snap.device("npu0-0").serial is not None and seen:
                break
            assert time.monotonic() < deadline, ("chip 0's details never arrived", seen)
            time.sleep(0.05)
        assert all(r.ok for r in seen)
        assert snap.device("npu1-0").serial is None  # chip 1's turn is half an hour away
    finally:
        go.set()
        backend.close()
    assert backend._detail_thread is None


@pytest.mark.parametrize("background", [False, True])
def test_a_detail_value_is_in_the_tick_after_its_read_only_and_the_serial_in_every_one(
        tmp_path: Path, background: bool) -> None:
    # one chip, its slow views read once an hour: the first tick after the read holds its ECC
    # counts and port state, the ticks after it none (a copy would count as a read of a view
    # that was not read); the serial, which names the chip, stays
    script = install(tmp_path / "fleet", SimConfig.build(chips=1, scenario="healthy,ecc_errors:double_per_h=6"))
    backend = NpuBackend(npu_smi=str(script), hccn_tool=str(script.parent / "hccn_tool"),
                         timeout_s=20.0, detail_interval_s=3600.0, details_in_background=background)
    try:
        ticks = [backend.read()]
        deadline = time.monotonic() + 60
        while ticks[-1].device("npu0-0").ecc_double_bit_errors is None:  # in the background: the thread's read
            assert time.monotonic() < deadline, "the chip's slow views were never read"
            time.sleep(0.1)
            ticks.append(backend.read())
        ticks += [backend.read(), backend.read()]
    finally:
        backend.close()
    read = [t.device("npu0-0") for t in ticks if t.device("npu0-0").ecc_double_bit_errors is not None]
    assert len(read) == 1 and read[0].ecc_single_bit_errors is not None
    # with the time it was read: after the tick before the one that holds it (during that one,
    # in the foreground; in the background, between the two or while it ran), before the next
    at = next(k for k, t in enumerate(ticks) if t.device("npu0-0").ecc_double_bit_errors is not None)
    assert read[0].detail_ts is not None and read[0].detail_ts < ticks[at + 1].ts
    assert read[0].detail_ts > (ticks[at].ts if not background else ticks[at - 1].ts if at else 0.0)
    after = [t.device("npu0-0") for t in ticks[-2:]]
    assert all(d.ecc_double_bit_errors is None and d.ecc_single_bit_errors is None for d in after)
    assert all(d.detail_ts is None for d in after)
    assert all(d.serial == read[0].serial and d.serial for d in after)
    assert all(d.temp_c is not None for d in after)  # the table's readings are every tick's
