"""Scenarios evolve on the scaled time line as configured; tool faults reach the real runner."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from soak.clock import ScaledClock
from soak.errors import InputError, ToolError
from soak.telemetry.npu_smi import NpuSmiReader
from soak.telemetry.npu_table import parse_info_table
from soak.telemetry.plog import PlogFollower
from soak.telemetry.runner import Runner
from soak.telemetry.sim import CONFIG_NAME, SimConfig, SimFleet, install
from soak.telemetry.sim.model import SAW_PERIOD_S, FleetModel

H = 3600.0


def _hbm_mb(fleet: SimFleet, t: float, device: str) -> int:
    table = parse_info_table(fleet.render(["info"], elapsed_s=t)[0])
    chip = next(c for c in table.chips if f"npu{c.npu_id}-{c.chip_id}" == device)
    return chip.hbm_used_mb


def test_hbm_creep_grows_at_the_set_rate_after_onset_only_on_chosen_chips() -> None:
    fleet = SimFleet(SimConfig.build(chips=4, scenario="healthy,hbm_creep:rate_mb_h=200,chips=0-1,onset_h=2"))
    # Compare at the same sawtooth phase so only the creep differs.
    t0 = 3 * H
    t1 = t0 + 10 * SAW_PERIOD_S  # 6000 s = 1.667 h later
    grown = _hbm_mb(fleet, t1, "npu0-0") - _hbm_mb(fleet, t0, "npu0-0")
    assert grown == pytest.approx(200 * (t1 - t0) / H, abs=1.0)
    assert _hbm_mb(fleet, t1, "npu2-0") == _hbm_mb(fleet, t0, "npu2-0")  # not selected
    before = _hbm_mb(fleet, 0.1 * H + 10 * SAW_PERIOD_S, "npu1-0") - _hbm_mb(fleet, 0.1 * H, "npu1-0")
    assert before == 0  # before onset_h nothing creeps


def test_util_drops_recur_with_the_configured_period_and_duration() -> None:
    model = FleetModel(SimConfig.build(chips=2, scenario="healthy,util_drops:period_s=900,duration_s=120,chips=1"))
    low = [t for t in range(0, 3 * 3600, 30) if model.chip(1, float(t)).util_pct == 0]
    starts = [t for t in low if t - 30 not in low]
    assert starts == list(range(0, 3 * 3600, 900))
    assert all(sum(1 for t in low if s <= t < s + 900) == 4 for s in starts)  # 120 s at 30 s steps
    assert all(model.chip(0, float(t)).util_pct >= 90 for t in range(0, 3600, 30))  # chip 0 untouched


def test_hang_zeroes_util_and_freezes_hbm_on_one_chip() -> None:
    model = FleetModel(SimConfig.build(chips=2, scenario="healthy,hang:at_h=1,chips=1"))
    before = model.chip(1, H - 1)
    after = [model.chip(1, H + k * 123.0) for k in range(1, 20)]
    assert before.util_pct > 80
    assert {c.util_pct for c in after} == {0}
    assert {c.mem_used_mb for c in after} == {model.chip(1, H).mem_used_mb}
    assert all(c.busy for c in after)  # the process still holds its memory
    assert model.chip(0, H + 500).util_pct > 80


def test_thermal_excursion_peaks_in_its_window_and_returns() -> None:
    model = FleetModel(SimConfig.build(chips=1, scenario="healthy,thermal:start_h=1,duration_h=1,peak_c=97"))
    assert model.chip(0, 1.5 * H).temp_c == 97
    assert model.chip(0, 0.5 * H).temp_c < 60
    assert model.chip(0, 2.5 * H).temp_c < 60


def test_scenario_spec_errors_name_the_input() -> None:
    with pytest.raises(InputError, match="hbm_creep: unknown parameter 'rate'"):
        SimConfig.build(scenario="hbm_creep:rate=5")
    with pytest.raises(InputError, match="hang.chips: '12' is outside chips 0-7"):
        SimConfig.build(scenario="hang:chips=12")
    with pytest.raises(InputError, match="comm_timeouts needs --plog-dir"):
        SimConfig.build(scenario="comm_timeouts")
    # a bare token continues the previous value: chips=0,2
    cfg = SimConfig.build(scenario="healthy,hang:chips=0,2,at_h=3")
    assert cfg.scenarios[1].params["chips"] == "0,2"
    assert cfg.scenarios[1].params["at_h"] == 3.0


def test_comm_timeouts_write_real_format_plog_lines_counted_by_the_follower(tmp_path: Path) -> None:
    plog = tmp_path / "plog"
    config = SimConfig.build(chips=2, scenario="healthy,comm_timeouts:rate_per_h=60,rotate_every=4",
                             plog_dir=str(plog), origin=1_700_000_000.0)
    fleet = SimFleet(config)
    follower = PlogFollower(plog)  # made before any file exists: reads every new file whole
    fleet.render(["info"], elapsed_s=5 * 60 + 1)  # 5 events due
    first = dict(follower.poll())
    fleet.render(["info"], elapsed_s=10 * 60 + 1)  # 10 due: 5 more, across a rotation
    second = dict(follower.poll())
    files = sorted(p.name for p in plog.glob("plog-*.log"))
    assert len(files) == 3  # 4 events per file: 4 + 4 + 2
    assert all(name.startswith("plog-40000_2023111") for name in files)
    counted = ("socket_timeout", "p2p_timeout", "heartbeat_cqe_error")
    assert sum(first[k] for k in counted) == 5
    assert sum(second[k] for k in counted) == 10
    assert second["socket_timeout"] == 4 and second["p2p_timeout"] == 3 and second["heartbeat_cqe_error"] == 3
    # calling again at the same time writes nothing new
    fleet.render(["info"], elapsed_s=10 * 60 + 1)
    assert dict(follower.poll()) == second


def _installed(tmp_path: Path, **kw: object) -> Path:
    return install(tmp_path / "bin", SimConfig.build(**kw))  # type: ignore[arg-type]


def test_installed_script_on_path_answers_like_the_in_process_fleet(tmp_path: Path) -> None:
    config = SimConfig.build(chips=4, family="910_93", fixed_elapsed_s=7200.0, seed=3)
    script = install(tmp_path / "bin", config)
    env = dict(os.environ, PATH=f"{script.parent}:{os.environ['PATH']}")
    out = subprocess.run(["npu-smi", "info"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert out.stdout == SimFleet(config).render(["info"], elapsed_s=7200.0)[0]
    link = subprocess.run(["hccn_tool", "-i", "1", "-link", "-g"], env=env, capture_output=True, text=True, timeout=60)
    assert link.stdout == "link status: UP\n"


def test_sim_and_a_scaled_clock_with_the_same_origin_agree() -> None:
    origin = time.time() - 100.0
    config = SimConfig.build(time_scale=720.0, origin=origin)
    clock = ScaledClock(scale=720.0, origin=origin)
    assert config.elapsed_s() == pytest.approx(clock.now() - origin, abs=720 * 0.05)


def test_dcmi_failure_is_rejected_by_the_real_runner_even_with_exit_0(tmp_path: Path) -> None:
    script = _installed(tmp_path, chips=2, fault="dcmi")
    out = subprocess.run([str(script), "info"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "dcmi module initialize failed. ret is -8005\n"
    with pytest.raises(ToolError) as err:
        NpuSmiReader(npu_smi=str(script), runner=Runner(timeout_s=30)).info()
    assert err.value.kind == "error_text"


def test_garbage_output_becomes_a_garbage_tool_error(tmp_path: Path) -> None:
    script = _installed(tmp_path, chips=2, fault="garbage")
    with pytest.raises(ToolError) as err:
        NpuSmiReader(npu_smi=str(script), runner=Runner(timeout_s=30)).info()
    assert err.value.kind == "garbage"


def test_hang_fault_is_killed_by_the_runner_timeout(tmp_path: Path) -> None:
    script = _installed(tmp_path, chips=2, fault="hang:seconds=60,on=info")
    started = time.monotonic()
    with pytest.raises(ToolError) as err:
        NpuSmiReader(npu_smi=str(script), runner=Runner(timeout_s=0.5)).info()
    assert err.value.kind == "timeout"
    assert time.monotonic() - started < 30  # killed, not waited out (60 s)


def test_faults_can_be_switched_on_a_running_fleet_and_windows_apply(tmp_path: Path) -> None:
    script = _installed(tmp_path, chips=4, fixed_elapsed_s=2 * H)
    path = script.parent / CONFIG_NAME
    reader = NpuSmiReader(npu_smi=str(script), runner=Runner(timeout_s=30))
    assert len(reader.info().chips) == 4
    SimConfig.load(path).with_faults("vanish:chips=2,from_h=1").save(path)
    assert [(c.npu_id, c.chip_id) for c in reader.info().chips] == [(0, 0), (1, 0), (3, 0)]
    SimConfig.load(path).with_faults("vanish:chips=2,from_h=3").save(path)  # not yet active
    assert len(reader.info().chips) == 4
    # a vanished card's id gets the tool's own error on a detail query
    fleet = SimFleet(SimConfig.build(chips=4, fault="vanish:chips=2"))
    out, rc = fleet.render(["info", "-t", "usages", "-i", "2"], elapsed_s=10)
    assert rc != 0 and out.startswith("Invalid card id.\nError parameter of -i\n")


def test_slow_fault_on_detail_calls_only_spares_the_table(tmp_path: Path) -> None:
    script = _installed(tmp_path, chips=2, fault="slow:seconds=30,on=detail")
    reader = NpuSmiReader(npu_smi=str(script), runner=Runner(timeout_s=20))
    assert len(reader.info().chips) == 2  # the plain table is not slowed
    with pytest.raises(ToolError) as err:
        Runner(timeout_s=0.5)([str(script), "info", "-t", "usages", "-i", "0"])
    assert err.value.kind == "timeout"
