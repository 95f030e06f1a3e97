"""``soak runs list|show`` over run folders and over an explicit store URL."""

from __future__ import annotations

import json
import os

import pytest

from soak.cli import main
from soak.store import Store

T0 = 1_764_000_000.0


def _make(tmp_path, run_id: str, started: float) -> None:
    d = tmp_path / run_id
    d.mkdir()
    with Store.open(d / "soak.db") as s:
        s.create_run(run_id, host="node1", plan={"run": {}}, started_ts=started, planned_end_ts=started + 7200,
                     workload="lm", backend="sim")
        s.add_event(run_id, "crash", ts=started + 60, workload="lm", message="lm: crashed (exit 1)")
        s.replace_findings(run_id, [{"kind": "thermal", "device": "npu0-0", "metric": "temp_c", "start": started,
                                     "end": started + 10, "severity": "warn", "summary": "hot"}])
        s.finish_run(run_id, status="finished", ended_ts=started + 7200, verdict="pass")


def test_list_and_show_read_every_run_folder(tmp_path, capsys) -> None:
    _make(tmp_path, "old", T0)
    _make(tmp_path, "new", T0 + 100)
    assert main(["runs", "list", "--data-dir", str(tmp_path), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == ["new", "old"]
    assert rows[0]["status"] == "finished" and rows[0]["verdict"] == "pass"
    assert main(["runs", "show", "old", "--data-dir", str(tmp_path), "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["findings"][0]["summary"] == "hot" and shown["events"][0]["kind"] == "crash"
    assert main(["runs", "show", "old", "--data-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "status    finished, verdict pass" in text and "(2 h 00 min of 2 h 00 min)" in text
    assert "[warn] thermal npu0-0/temp_c: hot" in text


def test_show_unknown_run_is_one_line_exit_2(tmp_path, capsys) -> None:
    assert main(["runs", "show", "nope", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("soak: error: run nope: no ") and err.count("\n") == 1


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_list_of_an_empty_data_dir(tmp_path, capsys, fmt) -> None:
    assert main(["runs", "list", "--data-dir", str(tmp_path), "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert out.strip() == ("[]" if fmt == "json" else f"no runs ({tmp_path})")


def test_resume_refuses_flags_that_would_change_the_plan(tmp_path, capsys) -> None:
    assert main(["run", "--resume", "r1", "--duration", "5m", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--duration cannot change it" in err and err.count("\n") == 1


def test_resume_of_an_unknown_run_is_one_line(tmp_path, capsys) -> None:
    assert main(["run", "--resume", "nope", "--data-dir", str(tmp_path), "--listen", ":19999"]) == 2
    err = capsys.readouterr().err
    assert "run nope: no run folder with plan.toml" in err and err.count("\n") == 1


def test_run_without_plan_or_duration_is_one_line(capsys) -> None:
    assert main(["run"]) == 2
    assert "needs PLAN.toml, or at least --duration" in capsys.readouterr().err


# `soak runs list` over a data dir where one run folder's store cannot be read (another
# schema version, a damaged file): the others are listed, the bad one named on stderr.


def test_one_unreadable_store_does_not_hide_the_others(tmp_path, capsys) -> None:
    good = tmp_path / "r-good"
    good.mkdir()
    with Store.open(good / "soak.db") as store:
        store.create_run("r-good", host="h1", plan={}, started_ts=1_790_000_000.0)
    bad = tmp_path / "r-bad"
    bad.mkdir()
    (bad / "soak.db").write_bytes(b"this is not an SQLite database" * 100)
    rc = main(["runs", "list", "--data-dir", str(tmp_path)])
    cap = capsys.readouterr()
    assert rc == 0
    assert "r-good" in cap.out
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("soak runs: skipped ") and "r-bad" in lines[0]


def test_with_one_named_store_the_error_stays_an_error(tmp_path, capsys) -> None:
    bad = tmp_path / "soak.db"
    bad.write_bytes(b"this is not an SQLite database" * 100)
    rc = main(["runs", "list", "--db", str(bad)])
    assert rc == 2
    assert capsys.readouterr().err.startswith("soak: error: ")


# `soak runs list --data-dir` naming a folder that is not there: one line, exit 2 (it used to
# print "no runs" and exit 0, which reads as an answer). An empty data dir still has no runs.


def test_missing_data_dir_is_named_and_exits_2(tmp_path, capsys) -> None:
    missing = tmp_path / "soak-runs"
    rc = main(["runs", "list", "--data-dir", str(missing)])
    cap = capsys.readouterr()
    assert rc == 2 and cap.out == ""
    assert cap.err == f"soak: error: --data-dir {missing}: no such folder, expected the folder of run folders\n"


def test_a_file_as_data_dir_is_named_as_such(tmp_path, capsys) -> None:
    f = tmp_path / "runs.txt"
    f.write_text("not a folder\n")
    assert main(["runs", "list", "--data-dir", str(f), "--format", "json"]) == 2
    assert f"--data-dir {f}: not a folder" in capsys.readouterr().err


def test_an_empty_data_dir_has_no_runs(tmp_path, capsys) -> None:
    assert main(["runs", "list", "--data-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"no runs ({tmp_path})\n"


def test_show_of_a_run_recorded_with_an_infinite_duration(tmp_path, capsys) -> None:
    """Before plans refused ``run.duration = 1e309`` such a run was recorded, planned to end
    at infinity; showing it printed an OverflowError."""
    d = tmp_path / "inf"
    d.mkdir()
    with Store.open(d / "soak.db") as s:
        s.create_run("inf", host="node1", plan={"run": {"duration": float("inf")}}, started_ts=T0,
                     planned_end_ts=float("inf"), workload="lm", backend="cpu")
    assert main(["runs", "show", "inf", "--data-dir", str(tmp_path)]) == 0
    assert "(N/A of N/A)" in capsys.readouterr().out
    assert main(["runs", "show", "inf", "--data-dir", str(tmp_path), "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)  # standard JSON: no Infinity
    assert shown["planned_end_ts"] is None and shown["plan"]["run"]["duration"] is None


def test_resume_takes_the_store_password_file(tmp_path, capsys, monkeypatch) -> None:
    from soak.store.engine import DB_PASSWORD_FILE_ENV

    monkeypatch.setenv(DB_PASSWORD_FILE_ENV, "")  # so that the test's end takes soak's setting away
    secret = tmp_path / "db-password"
    secret.write_text("S3cret\n")
    assert main(["run", "--resume", "nope", "--db-password-file", str(secret), "--data-dir", str(tmp_path)]) == 2
    assert "run nope: no run folder with plan.toml" in capsys.readouterr().err
    assert os.environ[DB_PASSWORD_FILE_ENV] == str(secret)  # the path, never the password
