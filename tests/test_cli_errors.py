"""A mistake on the command line is one line that names the input and what is wrong (exit 2):
a bad flag value, a plan file's key, a run id the store does not hold. argparse's usage is for
``--help`` and a missing argument only."""

from __future__ import annotations

import pytest

from soak.cli import main
from soak.store import Store


def _one_line_error(capsys, argv: list[str]) -> str:
    """The stderr of ``soak ARGV``, asserted to be exit 2 and one ``soak: error:`` line."""
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith("soak: error: "), err
    return err.strip()


@pytest.mark.parametrize("argv,expected", [
    (["run", "--workload", "lmm"],
     "soak: error: soak run: argument --workload: invalid choice: 'lmm' (choose from 'lm', 'gemm', 'collective')"),
    (["run", "--duration", "5m", "--nproc", "two"], "soak: error: soak run: argument --nproc: invalid int value: 'two'"),
    (["runs", "list", "--format", "yaml"],
     "soak: error: soak runs list: argument --format: invalid choice: 'yaml' (choose from 'table', 'json')"),
])
def test_a_bad_flag_value_is_one_line(capsys, argv: list[str], expected: str) -> None:
    assert _one_line_error(capsys, argv) == expected


def test_a_missing_argument_shows_the_usage(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["parse", "npu-smi"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.startswith("usage: soak parse npu-smi ") and "the following arguments are required: FILE" in err


def test_a_bad_key_of_the_plan_file_names_the_file(tmp_path, capsys) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text('[run]\nduration = "5m"\ndurashun = "6m"\n', encoding="utf-8")
    err = _one_line_error(capsys, ["run", str(plan), "--data-dir", str(tmp_path / "runs")])
    assert err.startswith(f"soak: error: plan {plan}: run.durashun is not a known key (known: "), err
    assert not (tmp_path / "runs").exists()


def test_a_bad_value_of_the_plan_file_names_the_file(tmp_path, capsys) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text('[run]\nduration = "5 minutes"\n', encoding="utf-8")
    err = _one_line_error(capsys, ["run", str(plan)])
    assert err == f"soak: error: plan {plan}: run.duration must be like 72h, 30m or 90s, got '5 minutes'"


def test_a_bad_flag_over_a_good_plan_names_the_flag_not_the_file(tmp_path, capsys) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text('[run]\nduration = "5m"\n', encoding="utf-8")
    err = _one_line_error(capsys, ["run", str(plan), "--duration", "5 minutes"])
    assert err == "soak: error: --duration: run.duration must be like 72h, 30m or 90s, got '5 minutes'"


def test_a_flag_mends_what_the_plan_file_got_wrong(tmp_path) -> None:
    # the flags lay over the plan: a value the flag replaces is never judged
    from soak.cli import build_parser
    from soak.commands.run import checked_plan

    plan = tmp_path / "plan.toml"
    plan.write_text('[run]\nduration = "5 minutes"\n', encoding="utf-8")
    args = build_parser().parse_args(["run", str(plan), "--duration", "5m"])
    assert checked_plan(args).run.duration_s == 300


def _store_with_a_run(tmp_path) -> str:
    db = tmp_path / "runs" / "r1" / "soak.db"
    db.parent.mkdir(parents=True)
    with Store.open(db) as s:
        s.create_run("r1", host="h", plan={}, started_ts=1_790_000_000.0)
    return str(db)


@pytest.mark.parametrize("argv", [["runs", "show", "nope"], ["profile", "nope"], ["report", "pdf", "nope", "-o", "r.pdf"]],
                         ids=["runs-show", "profile", "report-pdf"])
def test_an_unknown_run_in_the_data_dir_points_at_runs_list(tmp_path, capsys, argv: list[str]) -> None:
    _store_with_a_run(tmp_path)
    runs = tmp_path / "runs"
    err = _one_line_error(capsys, [*argv, "--data-dir", str(runs)])
    assert err.startswith("soak: error: run nope: ") and f"(soak runs list --data-dir {runs} lists the runs there" in err


@pytest.mark.parametrize("argv", [["runs", "show", "nope"], ["profile", "nope"], ["report", "pdf", "nope", "-o", "r.pdf"],
                                  ["analyze", "nope"]],
                         ids=["runs-show", "profile", "report-pdf", "analyze"])
def test_an_unknown_run_in_a_store_points_at_runs_list(tmp_path, capsys, argv: list[str]) -> None:
    db = _store_with_a_run(tmp_path)
    err = _one_line_error(capsys, [*argv, "--db", db])
    assert "nope" in err and err.endswith(f"(soak runs list --db sqlite:///{db} lists the runs there)"), err


def test_resuming_an_unknown_run_points_at_runs_list(tmp_path, capsys) -> None:
    err = _one_line_error(capsys, ["run", "--resume", "nope", "--data-dir", str(tmp_path)])
    assert err == (f"soak: error: run nope: no run folder with plan.toml under {tmp_path} "
                   f"(soak runs list --data-dir {tmp_path} lists the runs there)")


@pytest.fixture
def no_cjk_font(tmp_path, monkeypatch):
    """A machine with no CJK font: only an empty folder searched, none named."""
    from soak.report import fonts

    empty = tmp_path / "no-fonts"
    empty.mkdir()
    monkeypatch.setenv(fonts.FONT_DIRS_ENV, str(empty))
    monkeypatch.delenv("SOAK_REPORT_FONT", raising=False)
    fonts.register_cjk_font.cache_clear()
    yield
    fonts.register_cjk_font.cache_clear()


def test_the_chinese_demo_without_a_cjk_font_fails_before_it_runs(tmp_path, capsys, no_cjk_font) -> None:
    data = tmp_path / "runs"
    err = _one_line_error(capsys, ["demo", "--lang", "zh", "--data-dir", str(data)])
    assert err.startswith("soak: error: no CJK font found for the Chinese report: install fonts-wqy-microhei"), err
    assert not data.exists()  # no run folder, no key: nothing ran


def test_a_chinese_pdf_without_a_cjk_font_fails_before_the_store_is_read(tmp_path, capsys, no_cjk_font) -> None:
    db = _store_with_a_run(tmp_path)
    err = _one_line_error(capsys, ["report", "pdf", "no-such-run", "--db", db, "--lang", "zh",
                                   "-o", str(tmp_path / "r.pdf"), "--unsigned"])
    # the font, not the unknown run: the one thing that would fail after the store is read
    assert "no CJK font found for the Chinese report" in err and "fonts-wqy-microhei" in err, err
    assert not (tmp_path / "r.pdf").exists()
