"""The terminal: a typo in a subcommand's flag shows that subcommand's usage; `runs show` gives
the duration the user asked for, the preflight apart."""

from __future__ import annotations

import pytest

from soak.cli import main
from soak.config import plan_from_dict
from soak.store import Store


def test_flag_typo_shows_the_subcommands_usage(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["runs", "show", "r1", "--formt", "json"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: soak runs show "), err
    assert err.rstrip().endswith("error: unrecognized arguments: --formt json")


def test_runs_show_gives_the_asked_duration_and_the_preflight_apart(tmp_path, capsys) -> None:
    db = tmp_path / "soak.db"
    t0 = 1_790_000_000.0
    plan = plan_from_dict({"run": {"duration": "183s"}}).to_dict()
    with Store.open(db) as store:
        # the preflight took 1.4 s; the soak's 183 s count from its end
        store.create_run("r1", host="h", plan=plan, started_ts=t0, planned_end_ts=t0 + 1.4 + 183)
        # a CPU run: one chip, and the host's own readings (which the report counts as no chip)
        store.add_sample_rows([{"run_id": "r1", "ts": t0 + 10, "device": dev, "up": True, "util_pct": 50.0}
                               for dev in ("cpu0", "host")])
        store.finish_run("r1", status="finished", ended_ts=t0 + 1.4 + 183.2, verdict="pass")
    assert main(["runs", "show", "r1", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "(3 min of 3 min, preflight 1 s before)" in out, out
    assert "1 samples of 1 chip(s) and the host" in out or "2 samples of 1 chip(s) and the host" in out, out


def test_a_two_minute_run_is_planned_for_two_minutes_on_the_cover_and_in_runs_show(tmp_path, capsys) -> None:
    """A 2-minute CPU run read "planned 0h 02m 03s" on the cover (the preflight's 3 s in it) and
    "2m 0s" in the criteria: the planned time is the soak's window, after the preflight."""
    from soak.report.loader import load_report_data

    db, t0 = tmp_path / "soak.db", 1_790_000_000.0
    plan = plan_from_dict({"run": {"duration": "2m"}}).to_dict()
    with Store.open(db) as store:
        store.create_run("r2", host="h", plan=plan, started_ts=t0, planned_end_ts=t0 + 3.2 + 120)
        store.finish_run("r2", status="finished", ended_ts=t0 + 3.2 + 120.5, verdict="pass")
        assert load_report_data(store, "r2").run.planned_duration_s == 120
    assert main(["runs", "show", "r2", "--db", str(db)]) == 0
    assert "(2 min of 2 min, preflight 3 s before)" in capsys.readouterr().out
