"""``soak demo``: its plan is valid for the daemon and the simulator, and its report step
(keys on first use, signed PDF, verification, printed commands) works on a recorded run. One
real demo (a minute of wall for its 8 simulated hours) is read by two tests: the demo's story
as the user sees it (verdict, PDF, app), and the daemon's loop under it (the crash, the restart
from the checkpoint, the run's time line, the creep measured)."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from soak.analysis import sampling
from soak.cli import main
from soak.commands.demo import CRASH_STEP, DEMO_READING_S, LEAK_CHIP, SIM_HOURS, demo_plan, report
from soak.config import plan_from_dict
from soak.store import Store
from soak.telemetry.sim.config import SimConfig
from soak.workloads.lm import CKPT_EVERY
from tests import procs
from tests.report.figures import pdf_text
from tests.report.synth import write_run


def test_demo_plan_is_valid_and_fits_the_minutes(tmp_path):
    args = argparse.Namespace(minutes=2.0, data_dir=str(tmp_path), chips=8)
    plan = plan_from_dict(demo_plan(args, "demo-x"))
    assert plan.run.time_scale == SIM_HOURS * 3600 / 120
    assert plan.run.duration_s == SIM_HOURS * 3600
    assert plan.devices.backend == "sim" and plan.faults.inject == (f"crash:{CRASH_STEP}",)
    assert plan.exporter.listen is None  # no port to collide with
    sim = SimConfig.build(scenario=plan.sim.scenario, chips=plan.sim.chips)
    creep = next(s for s in sim.scenarios if s.name == "hbm_creep")
    assert str(creep.params["chips"]) == str(LEAK_CHIP)


@pytest.mark.parametrize("minutes", [0.5, 2.0, 120.0])
def test_a_demo_of_any_length_reads_often_enough_for_every_detector(tmp_path, minutes):
    plan = plan_from_dict(demo_plan(argparse.Namespace(minutes=minutes, data_dir=str(tmp_path), chips=8), "d"))
    reading_s = sampling.run_interval_s(plan.sampling.interval_s, plan.run.time_scale)
    assert reading_s <= 240.0 + 1e-9 and sampling.blind(reading_s) == ()
    assert plan.sampling.interval_s == (0.25 if minutes == 0.5 else 1.0)


def test_demo_rejects_bad_minutes(capsys):
    assert main(["demo", "--minutes", "0"]) == 2
    assert "--minutes 0" in capsys.readouterr().err


def test_demo_report_step_creates_keys_signs_and_verifies(tmp_path, capsys):
    run_dir = tmp_path / "demo-r"
    run_dir.mkdir()
    with Store.open(run_dir / "soak.db") as store:
        write_run(store, "demo-r", chips=4, hours=4.0)
    assert report("demo-r", tmp_path, "en", 8501) == 0
    out = capsys.readouterr().out
    key = tmp_path / "keys" / "demo" / "signing-key.pem"  # the demo's own: never the default key
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    pdf = run_dir / "report" / "soak-report-demo-r-en.pdf"
    assert pdf.is_file()
    assert "verdict FAIL" in out and "memory_creep on npu1-1" in out
    assert f"soak verify {pdf} --cert {tmp_path / 'keys' / 'demo' / 'signing-cert.pem'}   (OK)" in out
    assert f"soak report serve --data-dir {tmp_path}" in out


def test_demo_refuses_a_loose_key_before_the_soak(tmp_path, capsys):
    from soak.report.signing import create_keys

    kp = create_keys(tmp_path / "keys" / "demo", demo=True)
    kp.key_path.chmod(0o644)
    assert main(["demo", "--data-dir", str(tmp_path), "--minutes", "1"]) == 2
    assert "chmod 600" in capsys.readouterr().err
    assert not any(p.name.startswith("demo-") for p in tmp_path.iterdir())  # no run was started


# `soak demo` with an unusable --data-dir or --port: one line, exit 2, before the soak starts.


def test_data_dir_that_cannot_be_created(tmp_path, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    rc = main(["demo", "--data-dir", str(blocker / "runs")])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith(f"soak: error: --data-dir {blocker / 'runs'}: cannot create it (")
    assert "\n" not in err


def test_port_zero(tmp_path, capsys) -> None:
    rc = main(["demo", "--port", "0", "--data-dir", str(tmp_path)])
    assert rc == 2
    assert capsys.readouterr().err.strip() == "soak: error: --port 0: must be 1-65535"
    assert list(tmp_path.iterdir()) == []


@dataclass(frozen=True)
class DemoRun:
    data_dir: Path
    run_dir: Path
    out: str  # what `soak demo` printed: its findings, the PDF, its verification
    err: str  # what its soak said while it ran


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """``soak demo --minutes 1`` as a user runs it: the 8 simulated hours in a minute of wall."""
    data_dir = tmp_path_factory.mktemp("demo")
    r = procs.run([sys.executable, "-m", "soak", "demo", "--minutes", "1", "--data-dir", str(data_dir)], data_dir,
                  "soak-demo", timeout_s=400, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    run_dir = next(p for p in data_dir.iterdir() if p.name.startswith("demo-"))
    return DemoRun(data_dir, run_dir, r.stdout, r.stderr)


# alone (with the next test, which reads the same run): the throughput detector judges real
# step times, and the evidence criterion every tick; other tests sharing the CPU slow both
# down and it rightly reports that.
@pytest.mark.slow
@pytest.mark.alone
def test_whole_demo_fails_on_its_planted_leak_and_its_pdf_shows_the_evidence(demo: DemoRun) -> None:
    """The real thing: 8 simulated hours, a leak on npu3-0 and an injected crash. The verdict
    fails on the leak (not on the canary crash), and the signed PDF shows coverage,
    availability and the crash as injected."""
    import json
    import math
    import shutil

    assert "verdict FAIL" in demo.out and "memory_creep on npu3-0" in demo.out, demo.out
    data_dir, run_dir = demo.data_dir, demo.run_dir
    analysis = json.loads((run_dir / "report" / "analysis.json").read_text(encoding="utf-8"))
    crit = {c["name"]: c for c in analysis["criteria"]}
    assert crit["crashes and hangs"]["met"] is True and crit["crashes and hangs"]["injected"] == 1
    assert crit["evidence coverage"]["met"] is True and crit["availability"]["met"] is True
    assert crit["no memory_creep (fail)"]["met"] is False
    fails = [r for r in analysis["reasons"] if not r.startswith("WARN")]
    assert fails and all("memory_creep" in r for r in fails), analysis["reasons"]
    # the reliability: the injected crash kept apart, no failure of the machine, and the MTTF's
    # 90 % lower bound over the run's node-hours T is T / ln(10) = T / 2.303
    rel = analysis["reliability"]
    assert rel["failures"] == {"crash": 0, "hang": 0, "node_lost": 0, "link": 0, "device_fault": 0, "sdc": 0} and rel["injected_s"] > 0
    assert rel["productive_s"] + rel["injected_s"] + sum(rel["lost_s"].values()) == pytest.approx(rel["planned_s"])
    assert rel["node_mttf_h_lower90"] == pytest.approx(rel["node_hours"] / math.log(10))
    assert rel["ettr"] == pytest.approx(rel["productive_s"] / (rel["planned_s"] - rel["injected_s"]))
    if shutil.which("pdftotext") is None:
        pytest.skip("poppler-utils not installed")
    pdf = next((run_dir / "report").glob("soak-report-*-en.pdf"))
    text = pdf_text(pdf)
    for words in ("Evidence coverage", "Availability", "injected"):
        assert words in text, words
    # the reliability is said with the time accounting (page 1 keeps the one judged share)
    reli = next(p for p in text.split("\f") if "(ETTR)" in p)
    ettr = math.floor(rel["ettr"] * 1000) / 10
    assert f"(ETTR) {ettr:.1f} %" in reli and "injected canaries" in reli, reli
    assert f"(2T / χ²(0.90; 2) = {2 * rel['node_hours']:.3g} / 4.605, T = {rel['node_hours']:.3g} node-hours)" in " ".join(reli.split()), reli
    assert f">= {rel['node_mttf_h_lower90']:.3g} h with 90% confidence" in " ".join(reli.split())
    # the Chinese PDF of the same run says every sentence of the judgement in Chinese
    from soak.cli import main
    from tests.report.pagecheck import english_left

    zh = run_dir / "demo-zh.pdf"
    assert main(["report", "pdf", run_dir.name, "--data-dir", str(data_dir), "-o", str(zh), "--lang", "zh",
                 "--unsigned"]) == 0
    text = pdf_text(zh)
    assert "内存持续增长" in text and "HBM 占用自" in text and "注入的 1 次" in text
    assert not english_left(text), english_left(text)
    # each figure label has one value across the pages and the app, in each language
    from streamlit.testing.v1 import AppTest

    from tests.report.figures import app_text, conflicts, figures, pdf_text_pages

    os.environ.update(SOAK_REPORT_DB="", SOAK_REPORT_DATA_DIR=str(data_dir))
    try:
        app = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "soak" / "report" / "app.py"),
                                default_timeout=120).run()
        assert not app.exception, app.exception
        for lang, doc in (("en", pdf), ("zh", zh)):
            if lang == "zh":
                app.sidebar.radio(key="lang").set_value("zh").run()
            found = figures([*pdf_text_pages(doc), app_text(app)])
            labels = set().union(*found)
            assert {"planned", "ran", "training", "judged availability", "longest uninterrupted", "chips",
                    "injected", "ETTR", "time to exhaustion", "crash downtime", "leak rate", "leak growth"} <= labels, (lang, labels)
            assert not conflicts(found), (lang, conflicts(found))
    finally:
        for k in ("SOAK_REPORT_DB", "SOAK_REPORT_DATA_DIR"):
            os.environ.pop(k, None)


# alone: it reads the demo's run (its test above says why that runs alone)
@pytest.mark.slow
@pytest.mark.alone
def test_the_demo_run_resumes_from_its_checkpoint_and_measures_the_creep_on_its_time_line(demo: DemoRun) -> None:
    """The daemon's loop under the demo: the injected crash, the restart, the resume from the
    last checkpoint before it; the run's time line (hours, readings spaced as planned); the
    creep measured at the simulated rate on the leaking chip; the report's analysis the
    daemon's final one."""
    import json

    assert "crashed (exit 1)" in demo.err
    run_id = demo.run_dir.name
    with Store.open(demo.run_dir / "soak.db", create=False) as s:
        run = s.get_run(run_id)
        assert (run.status, run.verdict, run.restarts, run.time_scale) == ("finished", "fail", 1, SIM_HOURS * 60)
        assert run.ended_ts - run.started_ts >= 0.95 * SIM_HOURS * 3600  # hours on the run's time line
        kinds = [e.kind for e in s.load_events(run_id)]
        for k in ("start", "inject", "crash", "restart", "resume", "checkpoint"):
            assert k in kinds, k
        assert kinds.index("crash") < kinds.index("restart") < kinds.index("resume")
        # the last checkpoint before the crash
        every = CKPT_EVERY["tiny"]
        assert s.load_events(run_id, kind="resume")[0].detail["step"] == CRASH_STEP // every * every
        npu = sorted(d for _, d in s.devices(run_id) if d.startswith("npu"))
        assert len(npu) == 8
        ts = [r["ts"] for r in s.load_samples(run_id, device=npu[0])]
        spacing = sorted(b - a for a, b in zip(ts, ts[1:], strict=False))[len(ts) // 2]
        assert 0.8 * DEMO_READING_S < spacing < 1.25 * DEMO_READING_S, spacing  # seconds of the run's time line
        creep = [f for f in s.load_findings(run_id) if f.kind == "memory_creep" and f.metric == "hbm_used_bytes"]
        assert [(f.device, f.severity) for f in creep] == [(f"npu{LEAK_CHIP}-0", "fail")]
        slope = creep[0].detail["slope_per_hour"]
        assert 0.6e9 < slope < 1.0e9  # 800 MB/h as simulated
        # the leak planted one hour in: its onset is the change point, within 15 minutes of it
        details = creep[0].detail.get("details") or creep[0].detail
        assert details["onset_method"] == "change point", details
        planted = run.started_ts + 3600.0
        assert abs(creep[0].detail["onset"] - planted) <= 15 * 60, (creep[0].detail["onset"] - planted) / 60
        lo, hi = details["onset_ci90"]
        assert lo <= creep[0].detail["onset"] <= hi
        # the report's analysis is the daemon's final one: same verdict, same findings
        saved = json.loads((demo.run_dir / "report" / "analysis.json").read_text(encoding="utf-8"))
        assert saved["verdict"] == run.verdict == "fail"
        assert sorted(f["kind"] for f in saved["findings"]) == sorted(f.kind for f in s.load_findings(run_id))
