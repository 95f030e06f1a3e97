"""`soak exporter --backend sim --sim-chips 0` names its own flag, in one line, exit 2."""

from __future__ import annotations

import pytest

from soak.cli import main


@pytest.mark.parametrize("chips", ["0", "65"])
def test_sim_chips_out_of_range_names_the_flag(chips, capsys) -> None:
    rc = main(["exporter", "--backend", "sim", "--sim-chips", chips, "--listen", "127.0.0.1:0"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == f"soak: error: --sim-chips {chips}: must be between 1 and 64"
