"""benchmarks/device_check.sh: valid bash, and one clear line where no NVIDIA driver is."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "device_check.sh"
BARE_PATH = "/usr/bin:/bin"


def test_device_check_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.mark.skipif(shutil.which("nvidia-smi", path=BARE_PATH) is not None, reason="an NVIDIA driver is installed")
def test_device_check_without_nvidia_smi_fails_fast_with_one_line(tmp_path):
    out = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "out")], env={"PATH": BARE_PATH},
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.splitlines() == [
        "device_check: nvidia-smi not found: this check needs an NVIDIA GPU machine with the driver installed"
    ]
    assert not (tmp_path / "out").exists()  # nothing started, nothing written
