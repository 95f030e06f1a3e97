"""What a run folder may be: its owner's alone (0700, plan.toml 0600, whatever the umask),
never the signing keys' folder or another folder of the data dir, and named by an id that fits
the store's ``runs.id``."""

from __future__ import annotations

import os
import stat

import pytest

from soak.cli import main
from soak.config import plan_from_dict
from soak.daemon.runfolder import make_run_dir, write_plan
from soak.errors import StoreError
from soak.runfolder import RUN_ID_MAX_CHARS, new_run_id


@pytest.fixture
def open_umask():
    old = os.umask(0o022)  # the common default: folders 0755, files 0644
    try:
        yield
    finally:
        os.umask(old)


def _mode(p) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_a_run_folder_is_0700_and_its_plan_0600_under_umask_022(tmp_path, open_umask) -> None:
    run_dir = make_run_dir(tmp_path / "runs", "r1", exist_ok=False)
    path = write_plan(run_dir, plan_from_dict({"run": {"db": "postgresql+psycopg://soak:S3cret@db/soak"}}))
    assert (_mode(run_dir), _mode(path)) == (0o700, 0o600)
    assert 'db = "postgresql+psycopg://soak:***@db/soak"' in path.read_text()


def test_a_resumed_run_folder_made_open_is_closed_again(tmp_path, open_umask) -> None:
    run_dir = make_run_dir(tmp_path / "runs", "r1", exist_ok=False)
    run_dir.chmod(0o755)  # a run folder from before soak set its mode
    make_run_dir(tmp_path / "runs", "r1", exist_ok=True)
    assert _mode(run_dir) == 0o700


def test_run_id_keys_is_refused_before_anything_is_written(tmp_path, capsys) -> None:
    data_dir = tmp_path / "runs"
    rc = main(["run", "--duration", "5m", "--run-id", "keys", "--data-dir", str(data_dir)])
    err = capsys.readouterr().err
    assert rc == 2 and err == "soak: error: --run-id: run.id 'keys' names the signing keys' folder in the data dir: " \
                              "give another run id\n"
    assert not data_dir.exists()


def test_a_folder_of_the_data_dir_that_holds_no_run_is_not_taken(tmp_path) -> None:
    mine = tmp_path / "runs" / "notes"
    mine.mkdir(parents=True)
    (mine / "todo.txt").write_text("mine\n")
    with pytest.raises(StoreError, match=r"^run id notes: .*notes exists and holds no run; give another --run-id$"):
        make_run_dir(tmp_path / "runs", "notes", exist_ok=False)
    assert sorted(p.name for p in mine.iterdir()) == ["todo.txt"]


def test_the_folder_of_a_refused_start_is_taken_again(tmp_path) -> None:
    first = make_run_dir(tmp_path / "runs", "r1", exist_ok=False)  # no plan.toml: the start was refused
    assert make_run_dir(tmp_path / "runs", "r1", exist_ok=False) == first


def test_a_run_id_longer_than_the_store_column_is_refused(tmp_path, capsys) -> None:
    long_id = "a" * (RUN_ID_MAX_CHARS + 1)
    assert main(["run", "--duration", "5m", "--run-id", long_id, "--data-dir", str(tmp_path / "runs")]) == 2
    assert f"at most {RUN_ID_MAX_CHARS}), got '{long_id}'" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_the_default_run_id_of_a_host_with_a_63_character_name_fits() -> None:
    run_id = new_run_id(1_764_000_000.0, host="h" * 63 + ".example.com")
    assert len(run_id) == RUN_ID_MAX_CHARS and run_id.startswith("20251124-160000-hhh")
    plan_from_dict({"run": {"id": run_id}})  # a valid id


def test_a_resume_id_that_is_a_path_is_refused(tmp_path, capsys) -> None:
    # a run folder outside the data dir, plan and all: --resume must not reach it
    outside = tmp_path / "outside"
    make_run_dir(tmp_path, "outside", exist_ok=False)
    write_plan(outside, plan_from_dict({"run": {"id": "outside"}}))
    (tmp_path / "runs").mkdir()
    assert main(["run", "--resume", "../outside", "--data-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("soak: error: --resume must be letters, digits, '.', '_' or '-'") and "'../outside'" in err


def test_a_plan_written_before_the_masking_is_sealed_when_its_run_resumes(tmp_path, capsys, open_umask) -> None:
    run_dir = make_run_dir(tmp_path / "runs", "r1", exist_ok=False)
    plan = run_dir / "plan.toml"
    plan.write_text('[run]\nid = "r1"\ndb = "postgresql+psycopg://soak:S3cretPW@db/soak"\n')  # 0644
    db = tmp_path / "other.db"
    assert main(["run", "--resume", "r1", "--data-dir", str(tmp_path / "runs"), "--db", f"sqlite:///{db}",
                 "--listen", ""]) == 2
    assert "run r1: not in the store" in capsys.readouterr().err
    assert plan.read_text() == '[run]\nid = "r1"\ndb = "postgresql+psycopg://soak:***@db/soak"\n'
    assert _mode(plan) == 0o600
