"""`soak exporter` bad input named in one line, exit 2: --sim-chips out of range (its own flag,
not the simulator's --chips) and an --npu-smi path that is not there."""

from __future__ import annotations

import pytest

from soak.cli import main


@pytest.mark.parametrize("chips", ["0", "65"])
def test_sim_chips_out_of_range_names_the_flag(chips, capsys) -> None:
    rc = main(["exporter", "--backend", "sim", "--sim-chips", chips, "--listen", "127.0.0.1:0"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == f"soak: error: --sim-chips {chips}: must be between 1 and 64"


def test_npu_smi_path_that_is_not_there(tmp_path, capsys) -> None:
    missing = tmp_path / "npu-smi"
    rc = main(["exporter", "--backend", "npu", "--npu-smi", str(missing), "--listen", "127.0.0.1:0"])
    assert rc == 2
    assert capsys.readouterr().err.strip() == f"soak: error: --npu-smi {missing}: no such executable"
