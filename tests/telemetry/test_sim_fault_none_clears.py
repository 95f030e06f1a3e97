"""`soak sim fault DIR --fault none` clears the faults, as its help says."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from soak.cli import main
from soak.telemetry.sim import CONFIG_NAME, SimConfig


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
