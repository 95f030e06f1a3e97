"""Fault injection with real ranks: leak rate, stall period, crash once, hang, comm timeout, SDC."""

from __future__ import annotations

import time

import pytest
from wl_helpers import Launcher, read_heartbeats, run_module

from soak.workloads.inject import parse_inject, parse_rate


def test_inject_specs_parse_with_units():
    assert parse_rate("x", "50MB/min") == pytest.approx(50e6 / 60)
    assert parse_rate("x", "1GiB/h") == pytest.approx(2**30 / 3600)
    s = parse_inject("stall:30s,500ms")
    assert (s.every_s, s.for_s) == (30.0, 0.5)
    s = parse_inject("crash:8,1,always")
    assert (s.at_step, s.rank, s.always) == (8, 1, True)
    s = parse_inject("slow-rank:1,2.5")
    assert (s.rank, s.factor, s.at_step) == (1, 2.5, None)
    s = parse_inject("slow-rank:1,2.5,40")
    assert (s.rank, s.factor, s.at_step) == (1, 2.5, 40)
    assert parse_inject("comm-delay:0,2min").delay_s == 120.0


@pytest.mark.parametrize("spec, words", [
    ("leak:50MBmin", "is not a rate"),
    ("stall:30s", "expected stall:EVERY,FOR[,RANK]"),
    ("crash:0", "AT (a step) must be an integer >= 1"),
    ("slow-rank:1,0.5", "FACTOR must be a number >= 1"),
    ("slow-rank:1,3,4s,12s", "need 0 < FOR < EVERY"),
    ("slow-rank:1,3,12s", "AT (a step) must be an integer"),
    ("slow-rank:1,3,60s,10s,2", "expected slow-rank:R,FACTOR[,AT] or slow-rank:R,FACTOR,EVERY,FOR"),
    ("explode:3", "KIND one of"),
])
def test_invalid_inject_spec_is_one_line_exit_2(tmp_path, spec, words):
    res = run_module(["-m", "soak.workloads.lm", "--run-dir", str(tmp_path), "--inject", spec])
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and spec in lines[0] and words in lines[0]


@pytest.fixture(scope="module")
def leak_stall_run(tmp_path_factory):

    lau = Launcher(tmp_path_factory.mktemp("leak") / "run")
    lau.run_dir.mkdir()
    try:
        rc = lau.run("gemm", duration_s=6.0,
                     inject=("leak:600MB/min", "stall:1.5s,0.5s,0"),
                     extra=("--ckpt-every", "0", "--profile-steps", "0"))  # a capture would add a gap
        assert rc == 0, lau.log()
        yield read_heartbeats(lau.run_dir, "gemm")
    finally:
        lau.close()


@pytest.mark.slow
def test_leak_grows_rss_at_the_configured_rate(leak_stall_run):
    pts = [(r["ts"], r["host_rss_bytes"]) for r in leak_stall_run if r["event"] == "step"]
    t0 = pts[0][0]
    pts = [(t - t0, m) for t, m in pts if t - t0 > 1.0]  # past start-up allocations
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    mm = sum(m for _, m in pts) / n
    slope = sum((t - mt) * (m - mm) for t, m in pts) / sum((t - mt) ** 2 for t, _ in pts)
    assert slope == pytest.approx(10e6, rel=0.3)  # 600 MB/min = 10 MB/s


@pytest.mark.slow
def test_stall_makes_periodic_step_gaps(leak_stall_run):
    steps = [r for r in leak_stall_run if r["event"] == "step"]
    ts = [r["ts"] for r in steps]
    assert all(r["phase"] is None for r in steps)
    gaps = [(a, b - a) for a, b in zip(ts, ts[1:], strict=False) if b - a > 0.4]
    assert 3 <= len(gaps) <= 4  # 6 s at one stall every 1.5 s
    assert all(g == pytest.approx(0.5, abs=0.25) for _, g in gaps)
    periods = [b[0] - a[0] for a, b in zip(gaps, gaps[1:], strict=False)]
    assert all(p == pytest.approx(1.5, rel=0.35) for p in periods)
    # each stall is said, as the plan's own, with how long it kept the rank from stepping
    stalls = [r for r in leak_stall_run if r["event"] == "data_stall"]
    assert len(stalls) == len(gaps) and all(r["injected"] is True and r["seconds"] == 0.5 for r in stalls)
    assert all(a < r["ts"] < a + g for (a, g), r in zip(gaps, stalls, strict=True))


@pytest.mark.slow
def test_a_slow_loader_s_long_waits_are_data_stalls_with_their_length(launcher):
    # every 4th batch 1.2 s late: at least the 1 s that makes a wait a stall
    assert launcher.run("gemm", steps=12, inject=("slow-data:every=4,delay=1.2s",),
                        extra=("--ckpt-every", "6", "--profile-steps", "0")) == 0, launcher.log()
    lines = read_heartbeats(launcher.run_dir, "gemm")
    stalls = [r for r in lines if r["event"] == "data_stall"]
    assert [r["step"] for r in stalls] == [4, 8, 12]
    assert all(1.2 <= r["seconds"] < 2.0 and r["injected"] is True for r in stalls)
    # a checkpoint says how long it took too
    ckpts = [r for r in lines if r["event"] == "checkpoint"]
    assert [r["step"] for r in ckpts] == [6, 12] and all(0 < r["seconds"] < 30 for r in ckpts)


@pytest.mark.slow
def test_crash_happens_once_then_resumed_run_passes_it(launcher):
    args = {"steps": 12, "inject": ("crash:8",), "extra": ("--ckpt-every", "5")}
    assert launcher.run("lm", **args) != 0
    first = read_heartbeats(launcher.run_dir, "lm")
    assert [r["step"] for r in first if r["event"] == "inject" and "exiting" in r["message"]] == [8]
    assert launcher.run("lm", **args) == 0, launcher.log()
    lines = read_heartbeats(launcher.run_dir, "lm")[len(first):]
    assert [r["step"] for r in lines if r["event"] == "resume"] == [5]
    assert not any(r["event"] == "inject" and "exiting" in (r["message"] or "") for r in lines)
    assert lines[-1]["event"] == "exit" and lines[-1]["step"] == 12


@pytest.mark.slow
def test_hang_stops_stepping_but_stays_alive(launcher):
    proc = launcher.start("lm", steps=1000, inject=("hang:6",))

    def hung() -> bool:
        return any(r["event"] == "inject" and "stops stepping" in (r["message"] or "")
                   for r in read_heartbeats(launcher.run_dir, "lm"))

    launcher.wait_for(hung)
    time.sleep(1.0)
    assert proc.poll() is None
    steps = [r["step"] for r in read_heartbeats(launcher.run_dir, "lm") if r["event"] == "step"]
    assert max(steps) <= 5  # step lines are rate-limited, so 5 itself may not be written
    lines = read_heartbeats(launcher.run_dir, "lm")
    assert [r["step"] for r in lines if r["event"] == "inject" and "stops" in r["message"]] == [6]


@pytest.mark.slow
def test_comm_delay_on_one_rank_is_caught_as_timeout(launcher):
    # The timeout also bounds the first broadcast, which ranks reach as far apart as their
    # model builds finish: on a loaded machine that is seconds, so the bound leaves room for it.
    rc = launcher.run("collective", steps=5, inject=("comm-delay:1,12",),
                      extra=("--comm-timeout-s", "5"))
    assert rc != 0
    lines = read_heartbeats(launcher.run_dir, "collective", 0)
    timeouts = [r for r in lines if r["event"] == "timeout"]
    assert len(timeouts) == 1 and timeouts[0]["comm_timeouts"] == 1
    assert "all_reduce at step 1" in timeouts[0]["message"]
    assert "timed out" in timeouts[0]["message"].lower()
    assert lines[-1]["event"] == "exit" and lines[-1]["message"].startswith("exit 3")
    assert "exitcode  : 3" in launcher.log()


@pytest.mark.slow
def test_sdc_check_reports_a_corrupted_result(launcher):
    rc = launcher.run("gemm", steps=12, inject=("corrupt:7",), extra=("--sdc-every", "5"))
    assert rc == 0, launcher.log()
    for rank in (0, 1):
        lines = read_heartbeats(launcher.run_dir, "gemm", rank)
        bad = [r for r in lines if r["event"] == "sdc_mismatch"]
        # the faulty chip stays faulty: found where it starts and at every check after
        assert [r["step"] for r in bad] == [7, 10]
        assert "vs CPU reference" in bad[0]["message"] and "[0, 0]" in bad[0]["message"]
        assert "vs first device result" in bad[0]["message"]
        assert bad[0]["check"] == "gemm_cpu" and bad[0]["error"] > bad[0]["tolerance"]
        assert bad[0]["suspect_rank"] == rank and bad[0]["classification"] == "chip"  # wrong again on its rerun
        assert lines[-1]["sdc_mismatches"] == 2
        assert lines[-1]["numeric_checks"] == 5  # steps 5, 7 and 10, and the reruns at 7 and 10
