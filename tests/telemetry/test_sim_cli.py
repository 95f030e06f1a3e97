"""`soak sim install|fault|list` as a user runs them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from soak.cli import main
from soak.telemetry.sim import CONFIG_NAME, SimConfig


def test_install_writes_an_executable_npu_smi_and_json_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["sim", "install", str(tmp_path / "bin"), "--family", "310p", "--chips", "2",
               "--scenario", "healthy,hbm_creep:rate_mb_h=50", "--seed", "4", "--time-scale", "720",
               "--origin", "1800000000", "--format", "json"])
    assert rc == 0
    info = json.loads(capsys.readouterr().out)
    assert info["family"] == "310p" and info["scenarios"] == ["healthy", "hbm_creep"]
    assert info["origin"] == 1_800_000_000.0 and info["time_scale"] == 720.0
    config = SimConfig.load(tmp_path / "bin" / CONFIG_NAME)
    assert config.scenarios[1].params["rate_mb_h"] == 50.0
    out = subprocess.run([info["npu_smi"], "info", "-l"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert out.stdout.splitlines()[0] == "\tTotal Count                    : 2"


def test_fault_switches_faults_of_an_installed_fleet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "install", str(tmp_path), "--chips", "2"]) == 0
    assert main(["sim", "fault", str(tmp_path), "--fault", "dcmi"]) == 0
    out = subprocess.run([str(tmp_path / "npu-smi"), "info"], capture_output=True, text=True, timeout=60)
    assert out.stdout == "dcmi module initialize failed. ret is -8005\n"
    assert main(["sim", "fault", str(tmp_path)]) == 0  # none: cleared
    assert SimConfig.load(tmp_path / CONFIG_NAME).faults == ()


def test_user_mistakes_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "install", str(tmp_path), "--scenario", "hbm_creep:speed=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "soak: error: scenario hbm_creep: unknown parameter 'speed' (known: rate_mb_h, onset_h, chips)"
    assert main(["sim", "install", str(tmp_path), "--family", "910_93", "--chips", "3"]) == 2
    assert "give an even count" in capsys.readouterr().err
    assert main(["sim", "fault", str(tmp_path / "nothing-here")]) == 2
    assert "no simulated fleet here" in capsys.readouterr().err


def test_list_names_every_scenario_and_fault(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "list", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"healthy", "hbm_creep", "util_drops", "hang", "thermal", "health_alarm", "comm_timeouts"} <= set(data["scenarios"])
    assert set(data["faults"]) == {"slow", "hang", "garbage", "dcmi", "vanish"}


# `soak sim install DIR` where DIR cannot be created: one line naming it, exit 2.


def test_install_under_a_file(tmp_path, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    rc = main(["sim", "install", str(blocker / "fleet")])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith(f"soak: error: {blocker / 'fleet'}: cannot create the folder (")
    assert "\n" not in err


# `soak sim fault DIR --fault none` clears the faults, as its help says.


def test_fault_none_clears_faults(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "install", str(tmp_path), "--chips", "2"]) == 0
    assert main(["sim", "fault", str(tmp_path), "--fault", "dcmi"]) == 0
    assert SimConfig.load(tmp_path / CONFIG_NAME).faults != ()
    capsys.readouterr()
    assert main(["sim", "fault", str(tmp_path), "--fault", "none"]) == 0
    assert capsys.readouterr().out.strip() == "faults now: none"
    assert SimConfig.load(tmp_path / CONFIG_NAME).faults == ()
    out = subprocess.run([str(tmp_path / "npu-smi"), "info"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "910B" in out.stdout
