"""The Streamlit app driven page by page with AppTest on a recorded run (and a live one)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from soak.report.signing import SIGN_TOKEN_ENV
from soak.store import Store
from tests.report.synth import write_run

APP = str(Path(__file__).resolve().parents[2] / "soak" / "report" / "app.py")


def _charts(at: AppTest) -> int:
    return len(at.get("vega_lite_chart")) + len(at.get("arrow_vega_lite_chart"))


@pytest.fixture
def app(recorded, monkeypatch):
    monkeypatch.setenv("SOAK_REPORT_DB", "")
    monkeypatch.setenv("SOAK_REPORT_DATA_DIR", str(recorded["data_dir"]))
    monkeypatch.delenv("SOAK_REPORT_LANG", raising=False)
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def test_overview_shows_verdict_reasons_criteria_and_chips(app, recorded):
    md = [m.value for m in app.markdown]
    assert any("Verdict" in m and "FAIL" in m for m in md), md
    assert any("memory creep on npu1-1" in m and "MB/h" in m for m in md), md
    criteria = app.table[0].value
    chips = next(tb.value for tb in app.table if "Serial" in tb.value.columns)  # every chip, every row shown
    assert criteria.index.name == "Criterion"
    # coloured as the PDF colours them; a "Required" of ">= ..." is itself, not a Markdown quote
    assert set(criteria["Met"]) <= {":green[Met]", ":red[Missed]", ":gray[Not judged]"}
    assert (criteria["Met"] == ":red[Missed]").any()
    assert all(not r.startswith(">") for r in criteria["Required"]) and any(r.startswith("\\>=") for r in criteria["Required"])
    assert list(chips.index) == list(recorded["shape"].devices)
    leak = chips.loc["npu1-1"]
    # the run judged as the PDF judges it: the leak, and the restart's idle time as info
    assert leak["Findings"] == 2 and leak["Serial"] == "032100000001"
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Chips"] == "16" and metrics["Restarts"] == "1"


def test_every_page_renders(app):
    expected = {
        "runs": lambda a: len(a.dataframe) == 1 and a.dataframe[0].value.shape[0] == 1,
        "timelines": lambda a: _charts(a) == 5,
        "findings": lambda a: len(a.expander) >= 1 and "memory creep" in a.expander[0].label,
        "events": lambda a: any("injected crash" in " ".join(map(str, d.value.values.ravel())) for d in a.table),
        "manifest": lambda a: any("24.1.rc2" in " ".join(map(str, d.value.values.ravel())) for d in a.table),
        "pdf": lambda a: len(a.button) == 1 and any("No PDF in the run folder" in i.value for i in a.info),
    }
    for page, check in expected.items():
        app.sidebar.radio(key="page").set_value(page).run()
        assert not app.exception, (page, app.exception)
        assert check(app), page


def test_timeline_chip_picker_limits_the_series(app):
    app.sidebar.radio(key="page").set_value("timelines").run()
    assert app.multiselect(key="chips").value == ["npu1-1"]  # the chip with a finding
    app.multiselect(key="chips").set_value(["npu0-0", "npu0-1"]).run()
    assert not app.exception
    assert _charts(app) == 5


@pytest.mark.slow
def test_pdf_page_builds_and_offers_the_download(recorded, keys, monkeypatch):
    monkeypatch.setenv("SOAK_REPORT_DB", "")
    monkeypatch.setenv("SOAK_REPORT_DATA_DIR", str(recorded["data_dir"]))
    monkeypatch.setenv("SOAK_REPORT_SIGNING", "local")  # as `soak report serve` on loopback
    monkeypatch.setenv(SIGN_TOKEN_ENV, "t0ken")
    app = AppTest.from_file(APP, default_timeout=60)
    app.query_params["token"] = "t0ken"  # the address the server printed
    app.run()
    app.sidebar.radio(key="page").set_value("pdf").run()
    assert any("soak keys init" in w.value for w in app.warning)  # no key in this data dir yet
    app.button(key="build_pdf").click().run()
    assert not app.exception, app.exception
    dl = app.get("download_button")
    assert len(dl) == 1


def test_language_toggle_to_chinese(app):
    app.sidebar.radio(key="lang").set_value("zh").run()
    assert not app.exception
    assert app.title[0].value == "soak：验收报告"
    md = [m.value for m in app.markdown]
    assert any("结论" in m and "未通过" in m for m in md), md
    app.sidebar.radio(key="page").set_value("events").run()
    assert "事件" in app.table[0].value.columns


def test_live_run_refreshes_in_a_fragment(tmp_path, monkeypatch):
    db = tmp_path / "live.db"
    with Store.open(db) as store:
        write_run(store, "r-live", chips=4, hours=1.0, finished=False, findings=False, crash=False)
    monkeypatch.setenv("SOAK_REPORT_DB", str(db))
    monkeypatch.setenv("SOAK_REPORT_REFRESH_S", "1")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, at.exception
    assert any("RUNNING" in m.value for m in at.markdown)
    assert any("Live" in c.value for c in at.caption)
    # More data arrives: the next run of the page shows the longer run.
    with Store.open(db) as store:
        last = store.last_sample_ts("r-live")
        store.add_sample_rows(
            [{"run_id": "r-live", "ts": last + 3600, "device": "npu0-0", "up": True, "util_pct": 97.0}]
        )
    at.run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Duration"] == "1 h 59 min", metrics  # first sample to the newest one
    # The run ends: the page drops the live mode and shows the stored verdict.
    with Store.open(db) as store:
        store.finish_run("r-live", status="finished", ended_ts=last + 3600, verdict="pass")
    at.run()
    assert not at.exception, at.exception
    assert any("Verdict" in m.value and "PASS" in m.value for m in at.markdown), [m.value for m in at.markdown]
    assert not any("Live" in c.value for c in at.caption)
    # 4 chips read for an hour each (npu0-0 one tick more for its late reading); the hour it
    # had no reading is a gap, not chip time.
    assert any(x.value.startswith("0 failures in 4.01 chip-hours") for x in at.success), [x.value for x in at.success]


def test_empty_data_dir_says_no_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("SOAK_REPORT_DB", "")
    monkeypatch.setenv("SOAK_REPORT_DATA_DIR", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    assert any("No runs" in i.value for i in at.info)


def test_simulated_run_says_so_in_the_header_on_every_page(app):
    label = "simulated fleet — not an acceptance of hardware"  # the recorded run's backend is sim
    for page in ("overview", "timelines", "findings", "events", "manifest", "pdf"):
        app.sidebar.radio(key="page").set_value(page).run()
        assert any(w.value == label for w in app.warning), page
    app.sidebar.radio(key="lang").set_value("zh").run()
    assert any(w.value == "模拟设备集群 — 不构成硬件验收" for w in app.warning)


def test_run_on_hardware_in_real_time_has_no_simulation_header(tmp_path, monkeypatch):
    db = tmp_path / "hw.db"
    with Store.open(db) as store:
        write_run(store, "r-hw", chips=2, hours=0.5, findings=False)
        store.update_run("r-hw", backend="npu", time_scale=1.0)
    monkeypatch.setenv("SOAK_REPORT_DB", str(db))
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, at.exception
    assert not any("not an acceptance" in w.value for w in at.warning)


def test_findings_evidence_reads_without_json(app):
    app.sidebar.radio(key="page").set_value("findings").run()
    assert not app.get("json")  # today: st.json of the detector's raw keys
    leak = next(e for e in app.expander if "memory creep" in e.label)
    assert leak.proto.icon == ":material/error:"  # an emoji icon is an empty box without an emoji font
    evidence = app.table[0].value
    rows = dict(zip(evidence.index, evidence["Value"], strict=True))
    assert rows["Rate"].endswith("MB/h") or "MB/h (90% CI" in rows["Rate"], rows
    assert rows["Onset"].startswith("2026-09-21 "), rows  # a date, not 1.79e+09


def _pdf_app(recorded, monkeypatch, signing: str | None, token: str | None = "t0ken") -> AppTest:
    monkeypatch.setenv("SOAK_REPORT_DB", "")
    monkeypatch.setenv("SOAK_REPORT_DATA_DIR", str(recorded["data_dir"]))
    monkeypatch.setenv(SIGN_TOKEN_ENV, "t0ken")  # as `soak report serve` starts the app
    if signing:
        monkeypatch.setenv("SOAK_REPORT_SIGNING", signing)
    at = AppTest.from_file(APP, default_timeout=60)
    if token is not None:
        at.query_params["token"] = token
    at.run()
    at.sidebar.radio(key="page").set_value("pdf").run()
    assert not at.exception, at.exception
    return at


def test_pdf_page_offers_the_pdf_the_run_already_has(recorded, monkeypatch):
    report = Path(recorded["data_dir"]) / recorded["run_id"] / "report"
    report.mkdir(exist_ok=True)
    held = report / f"soak-report-{recorded['run_id']}-en.pdf"
    held.write_bytes(b"%PDF-1.7 signed by the demo")
    try:
        at = _pdf_app(recorded, monkeypatch, "local")
        offered = [d for d in at.get("download_button") if held.name in d.proto.label]
        assert len(offered) == 1
    finally:
        held.unlink()


@pytest.mark.slow
def test_app_beyond_loopback_does_not_sign_with_the_data_dirs_key(recorded, monkeypatch):
    from soak.report.signing import create_keys

    keys_dir = Path(recorded["data_dir"]) / "keys"
    create_keys(keys_dir, common_name="the key holder")
    try:
        at = _pdf_app(recorded, monkeypatch, "cli")
        assert any("soak report pdf" in w.value for w in at.warning)
        assert at.button(key="build_pdf").label == "Build an unsigned draft"
        at.button(key="build_pdf").click().run()
        assert not at.exception, at.exception
        dl = at.get("download_button")[-1]
        assert "unsigned" in dl.proto.label
        # on loopback the same button signs
        at = _pdf_app(recorded, monkeypatch, "local")
        assert at.button(key="build_pdf").label == "Build the PDF"
    finally:
        for f in keys_dir.iterdir():
            f.unlink()
        keys_dir.rmdir()


@pytest.mark.slow
def test_a_loopback_session_without_the_servers_token_does_not_sign(recorded, monkeypatch):
    # user nobody reaches a loopback port as well as the key holder: loopback alone signed for them
    from soak.report.signing import create_keys

    keys_dir = Path(recorded["data_dir"]) / "keys"
    create_keys(keys_dir, common_name="the key holder")
    try:
        for token in (None, "guessed"):
            # without the token the session is shown nothing: no page, no draft of the run to take
            monkeypatch.setenv("SOAK_REPORT_DB", "")
            monkeypatch.setenv("SOAK_REPORT_DATA_DIR", str(recorded["data_dir"]))
            monkeypatch.setenv(SIGN_TOKEN_ENV, "t0ken")
            monkeypatch.setenv("SOAK_REPORT_SIGNING", "local")
            at = AppTest.from_file(APP, default_timeout=60)
            if token is not None:
                at.query_params["token"] = token
            at.run()
            assert not at.exception, at.exception
            assert any("soak report serve" in e.value for e in at.error)
            assert not at.get("button") and not at.get("download_button")
        at = _pdf_app(recorded, monkeypatch, "local", "t0ken")
        assert at.button(key="build_pdf").label == "Build the PDF"
    finally:
        for f in keys_dir.iterdir():
            f.unlink()
        keys_dir.rmdir()


def test_serve_beyond_loopback_tells_the_app_not_to_sign(capsys):
    from soak.cli import main

    assert main(["report", "serve", "--dry-run", "--address", "0.0.0.0"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("--signing cli")
    assert main(["report", "serve", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("--signing local")
    # the WebSocket accepts loopback's names only (was: any Host, so a DNS rebinding drove it)
    args = out.split()
    hosts = [args[i + 1] for i, a in enumerate(args) if a == "--server.allowedHosts"]
    assert hosts == ["127.0.0.1", "localhost", "::1"]
    assert main(["report", "serve", "--dry-run", "--address", "10.1.2.3", "--allowed-host", "soak.example"]) == 0
    args = capsys.readouterr().out.split()
    assert [args[i + 1] for i, a in enumerate(args) if a == "--server.allowedHosts"] == ["10.1.2.3", "soak.example"]


def test_a_run_with_a_plan_shows_its_reliability_as_the_pdf_does(tmp_path, monkeypatch):
    from soak.config import plan_from_dict

    db = tmp_path / "plan.db"
    with Store.open(db) as store:
        write_run(store, "r-rel", chips=2, hours=1.0, findings=False)
        run = store.get_run("r-rel")
        plan = plan_from_dict({"run": {"duration": "1h", "preflight": False}, "devices": {"backend": "sim"},
                               "reliability": {"project_nodes": [64]}})
        store.update_run("r-rel", plan=plan.to_dict(), planned_end_ts=run.started_ts + 3600)
        store.add_event("r-rel", "start", ts=run.started_ts + 60, workload="lm", rank=0)
    monkeypatch.setenv("SOAK_REPORT_DB", str(db))
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, at.exception
    md = " ".join(m.value for m in at.markdown)
    assert "Reliability: effective training time and time to failure" in [h.value for h in at.subheader]
    # one node-hour with its crash (no inject event before it: not the plan's canary): the bound
    # is 2T / χ²(0.90; 4), and a 64-node job's is 1/64 of it
    assert ("1 unexpected failure(s) of the machine in 1 node-hours (1 crash, 0 hang, 0 node lost, 0 link failure, "
            "0 device fault, 0 chip(s) computing wrong)") in md
    assert "mean time to failure per node >= 0.257 h with 90% confidence (2T / χ²(0.90; 4) = 2 / 7.779, T = 1 node-hours)" in md
    assert "a job over 64 node(s): mean time to failure >= 0.00402 h" in md
    assert "injected canary" not in md  # none was injected: nothing to keep apart


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_figure_has_one_value_in_the_app(app, lang):
    from tests.report.figures import app_text, conflicts, figures

    if lang == "zh":
        app.sidebar.radio(key="lang").set_value("zh").run()
    (found,) = figures([app_text(app)])
    assert {"ran", "chips"} <= set(found), found  # a recorded run without a plan: few figures
    assert not conflicts([found])
