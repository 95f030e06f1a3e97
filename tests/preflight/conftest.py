"""Fixtures for preflight and manifest tests: a simulated npu-smi fleet, a fake torch_npu."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak.telemetry.sim.config import SimConfig
from soak.telemetry.sim.install import install

ASCEND = Path(__file__).resolve().parents[1] / "fixtures" / "preflight" / "ascend"


@pytest.fixture
def ascend_roots() -> dict[str, Path]:
    return {"cann_root": ASCEND / "ascend-toolkit" / "latest", "driver_root": ASCEND / "driver",
            "firmware_root": ASCEND / "firmware"}


@pytest.fixture
def sim_npu_smi(tmp_path: Path):
    """``sim_npu_smi(chips=2, scenario="healthy")`` -> path of an installed simulated npu-smi."""

    def make(chips: int = 2, scenario: str = "healthy") -> str:
        folder = tmp_path / f"sim-{chips}-{scenario.replace(':', '_').replace(',', '_')}"
        config = SimConfig.build(chips=chips, family="910b", scenario=scenario,
                                 fixed_elapsed_s=60.0, seed=7)
        return str(install(folder, config))

    return make


@pytest.fixture
def fake_torch_npu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``torch_npu`` that fails on import the way a wheel without CANN does."""
    pkg = tmp_path / "fake" / "torch_npu"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        'raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")\n'
    )
    monkeypatch.syspath_prepend(str(pkg.parent))
    monkeypatch.setenv("PYTHONPATH", str(pkg.parent))
    monkeypatch.delenv("TORCH_DEVICE_BACKEND_AUTOLOAD", raising=False)
    return pkg.parent
