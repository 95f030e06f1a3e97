"""Real machine noise (NAB): no finding outside the labelled anomaly windows."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak.analysis.evaluate import run_nab

NAB = Path(__file__).resolve().parents[1] / "fixtures" / "nab"


@pytest.mark.slow
def test_nab_machine_metrics_raise_no_false_findings():
    res = run_nab(NAB)
    assert res["files"] == 22
    assert res["false_findings"] == 0, [f for f in res["per_file"] if f["false"]]
    # The detectors are not blind on real data: the machine-temperature failure is found.
    temp = next(f for f in res["per_file"] if f["file"].endswith("machine_temperature_system_failure.csv"))
    assert temp["in_window"] >= 1
