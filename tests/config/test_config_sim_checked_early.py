"""A bad simulated-fleet spec stops the plan in one line, before the run folder exists (it
used to leave a run 'running' forever in `soak runs list`)."""

from __future__ import annotations

import pytest

from soak.cli import main
from soak.config import ConfigError, plan_from_dict


@pytest.mark.parametrize(
    ("sim", "message"),
    [
        ({"scenario": "bogus"}, "sim: scenario 'bogus' is unknown"),
        ({"scenario": "hbm_creep:rate=5"}, "sim: scenario hbm_creep: unknown parameter 'rate'"),
        ({"fault": "boom"}, "sim: fault 'boom' is unknown"),
        ({"chips": 65}, "sim.chips 65: must be between 1 and 64"),
        ({"family": "910c"}, "sim.family '910c' is unknown"),
    ],
)
def test_bad_sim_section_names_it(sim, message) -> None:
    with pytest.raises(ConfigError, match=message):
        plan_from_dict({"devices": {"backend": "sim"}, "sim": sim})


def test_sim_section_is_not_judged_for_other_backends() -> None:
    assert plan_from_dict({"devices": {"backend": "cpu"}, "sim": {"scenario": "bogus"}}).sim.scenario == "bogus"


def test_comm_timeouts_scenario_gets_the_run_plog_folder() -> None:
    plan_from_dict({"devices": {"backend": "sim"}, "sim": {"scenario": "healthy,comm_timeouts"}})


def test_soak_run_leaves_no_run_folder(tmp_path, capsys) -> None:
    data_dir = tmp_path / "runs"
    rc = main(["run", "--duration", "1m", "--backend", "sim", "--sim-scenario", "bogus", "--no-preflight",
               "--listen", "", "--data-dir", str(data_dir)])
    assert rc == 2
    assert capsys.readouterr().err.startswith("soak: error: sim: scenario 'bogus' is unknown")
    assert not data_dir.exists()
