"""Fixtures of the report tests: a recorded run written through the store API, and keys."""

from __future__ import annotations

import pytest

from soak.judge import judge_run
from soak.report.signing import create_keys
from soak.runfolder import write_analysis
from soak.store import Store
from tests.report.synth import write_run

RUN_ID = "r-20260921-node-a01"


@pytest.fixture(scope="session")
def recorded(tmp_path_factory) -> dict:
    """16 chips x 4 h of 10 s samples, an HBM leak on one chip, a crash and a restart."""
    data_dir = tmp_path_factory.mktemp("runs")
    run_dir = data_dir / RUN_ID
    run_dir.mkdir()
    db = run_dir / "soak.db"
    with Store.open(db) as store:
        shape = write_run(store, RUN_ID, chips=16, hours=4.0, interval_s=10.0, findings=True)
        store.update_run(RUN_ID, run_dir=str(run_dir))
        # judged once and saved, as the daemon leaves every run it ends: the app's first
        # page then reads the analysis instead of judging the run while a browser waits
        write_analysis(run_dir, judge_run(store, RUN_ID).to_dict())
    return {"data_dir": data_dir, "db": str(db), "run_id": RUN_ID, "shape": shape}


@pytest.fixture(scope="session")
def keys(tmp_path_factory):
    return create_keys(tmp_path_factory.mktemp("keys"), common_name="Test Delivery Engineer", organization="soak tests")


@pytest.fixture(scope="session")
def other_keys(tmp_path_factory):
    return create_keys(tmp_path_factory.mktemp("otherkeys"), common_name="Someone Else")


