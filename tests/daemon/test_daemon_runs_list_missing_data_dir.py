"""`soak runs list --data-dir` naming a folder that is not there: one line, exit 2 (it used to
print "no runs" and exit 0, which reads as an answer). An empty data dir still has no runs."""

from __future__ import annotations

from soak.cli import main


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
