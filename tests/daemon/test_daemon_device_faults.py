"""The chips' own fault reports decide the verdict, on real runs of the simulated fleet: an
uncorrectable ECC error, a chip in Alarm with a fault code and a port that stays down each fail
the run naming the chip and the signal, seen on the run's status (so /metrics) while it runs;
a clean fleet passes the criterion with its evidence stated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soak.errors import StoreError
from soak.store import Store
from tests.daemon.conftest import fake_plan

pytestmark = pytest.mark.slow

# one chip each: ECC (1), health and code (2), the port (0); chip 3 stays clean
FAULTY = ("ecc_errors:double_per_h=6,onset_h=0.3,chips=1,"
          "health_alarm:at_h=0.3,status=Alarm,codes=A4025021,chips=2,"
          "link_down:at_h=0.3,chips=0")
# what the chips report of them: the ECC counts and isolated pages, the health word and its code,
# the port
SIGNALS = {("npu1-0", "ecc_uncorrectable"), ("npu1-0", "ecc_isolated_double"), ("npu2-0", "health"),
           ("npu2-0", "fault_code"), ("npu0-0", "link_down")}


def _plan(tmp_path: Path, scenario: str, run_id: str):
    # 6 h of the fleet's time in a minute, a bound: each test stops its run once it has what it
    # asserts. The faults begin 3 s in; each chip's slow views (five calls of the simulated
    # tools) every 3 s
    return fake_plan(tmp_path, run={"duration": "6h", "time_scale": 360, "id": run_id},
                     devices={"backend": "sim"}, sim={"chips": 4, "scenario": scenario},
                     sampling={"interval": "0.5s", "detail_interval": "3s"})


def test_ecc_alarm_and_port_down_fail_the_run_naming_chip_and_signal(tmp_path, run_daemon) -> None:
    # 6 h (a minute of wall) at most: stopped once every fault is open on the run's status, every
    # signal of them is stored and every chip's fault views have answered twice (an idle host once
    # got there before the fault code's event). A 20 s run once ended on a loaded machine
    # before the sampler had come round to the ECC view of the faulty chip.
    tr = run_daemon(_plan(tmp_path, FAULTY, "faulty"))
    d = tr.daemon
    # online: each fault is open on the run's status (what /metrics serves) while the run goes on
    # (wait_for fails at once if the run ends first)
    tr.wait_for(lambda: d.status is not None and {(f.device, f.metric) for f in d.status.open_findings
                                                  if f.kind == "device_fault"}
                >= {("npu1-0", "ecc_uncorrectable"), ("npu2-0", "health"), ("npu0-0", "link")}, timeout_s=90)
    tr.wait_for(lambda: _ecc_read_twice(tmp_path, "faulty") and _fault_signals(tmp_path, "faulty") >= SIGNALS, 90)
    d.request_stop("every fault seen and stored, every chip's fault views read")
    assert tr.join(60) == 1
    with Store.open(_run_dir(tmp_path, "faulty") / "soak.db", create=False) as s:
        run = s.get_run("faulty")
        events = s.load_events("faulty", kind="device_fault")
        findings = [f for f in s.load_findings("faulty") if f.kind == "device_fault"]
    assert run.verdict == "fail"
    assert SIGNALS <= {(e.detail["device"], e.detail["signal"]) for e in events}
    assert all(e.detail["serial"] for e in events)  # the chip is named by its serial too
    code = next(e for e in events if e.detail["signal"] == "fault_code")
    # NotHandle in the device plugin's table: recorded, and judged by the health word beside it
    assert code.detail["code"] == "A4025021" and code.detail["level"].startswith("NotHandle")
    assert code.detail["severity"] == "info"
    by = {(f.device, f.metric): f for f in findings}
    assert by[("npu1-0", "ecc_uncorrectable")].severity == "fail"
    assert by[("npu2-0", "health")].severity == "fail"
    assert by[("npu0-0", "link")].severity == "fail"  # down from 0.3 h to the stop: past 60 s
    assert "npu3-0" not in {f.device for f in findings}
    saved = json.loads((_run_dir(tmp_path, "faulty") / "report" / "analysis.json").read_text(encoding="utf-8"))
    crit = next(c for c in saved["criteria"] if c["code"] == "criterion.device_faults")
    assert crit["met"] is False and crit["values"]["fails"] >= 3 and crit["values"]["read"] == 4
    # the store holds each ECC read once, with the time it was read: the chip's counter then (6
    # an hour from 0.3 h), never ahead of it and at most one detail interval (3 s x 360 = 0.3 h)
    # behind; never a copy
    reads = _ecc_reads(tmp_path, "faulty", "npu1-0", run.started_ts)
    assert len(reads) >= 2
    for t_h, count in reads:
        assert int(6 * max(0.0, t_h - 0.3 - 0.3)) <= count <= int(6 * max(0.0, t_h - 0.3)), (t_h, count)
    ticks = _ticks(tmp_path, "faulty", "npu1-0")
    assert len(ticks) > 2 * len(reads)  # a 0.5 s tick, a read every 3 s: most rows hold none
    reasons = " | ".join(saved["reasons"])
    for chip, words in (("npu1-0", "uncorrectable (double-bit) ECC errors"), ("npu2-0", "health Alarm"),
                        ("npu0-0", "network port down")):
        assert chip in reasons and words in reasons, (chip, reasons)


def _run_dir(tmp_path: Path, run_id: str) -> Path:
    return tmp_path / "runs" / run_id  # fake_plan's data folder


def _fault_signals(tmp_path: Path, run_id: str) -> set[tuple[str, str]]:
    """(chip, signal) of every device_fault event the run's store holds."""
    try:
        with Store.open(_run_dir(tmp_path, run_id) / "soak.db", create=False) as s:
            events = s.load_events(run_id, kind="device_fault")
    except StoreError:  # the daemon has not made the tables yet
        return set()
    return {(e.detail["device"], e.detail["signal"]) for e in events}


def _ecc_reads(tmp_path: Path, run_id: str, device: str, origin: float) -> list[tuple[float, float]]:
    """(hours since ``origin``, double-bit count) of every stored ECC read of ``device``, at
    the time it was read."""
    import sqlite3

    with sqlite3.connect(_run_dir(tmp_path, run_id) / "soak.db") as db:
        rows = db.execute("SELECT coalesce(s.detail_ts, s.ts), s.ecc_double_bit_errors FROM samples s "
                          "JOIN sample_series ss "
                          "ON s.series_id = ss.id WHERE ss.device = ? AND s.ecc_double_bit_errors IS NOT NULL "
                          "ORDER BY s.ts", (device,)).fetchall()
    return [((ts - origin) / 3600.0, float(v)) for ts, v in rows]


def _ticks(tmp_path: Path, run_id: str, device: str) -> list[float]:
    import sqlite3

    with sqlite3.connect(_run_dir(tmp_path, run_id) / "soak.db") as db:
        return [r[0] for r in db.execute("SELECT s.ts FROM samples s JOIN sample_series ss ON s.series_id = ss.id "
                                         "WHERE ss.device = ?", (device,))]


def _ecc_read_twice(tmp_path: Path, run_id: str) -> bool:
    """The run's store holds two readings of every chip's ECC view (the criterion's evidence)."""
    try:
        with Store.open(_run_dir(tmp_path, run_id) / "soak.db", create=False) as s:
            chips = s.fault_evidence(run_id)
    except StoreError:  # the daemon has not made the tables yet
        return False
    return len(chips) == 4 and all(ecc >= 2 for _, ecc, _ in chips.values())


def test_a_clean_fleet_meets_the_device_faults_criterion_with_its_evidence(tmp_path, run_daemon) -> None:
    # 6 h (a minute of wall) at most: stopped once every chip's ECC view has answered twice. On
    # a loaded machine the sampler, calling the simulated tools, may take many seconds to get
    # round every chip (a 20 s run once read one chip of four).
    tr = run_daemon(_plan(tmp_path, "healthy", "clean"))
    tr.wait_for(lambda: _ecc_read_twice(tmp_path, "clean"), 90)
    tr.daemon.request_stop("every chip's fault views read")
    tr.join(60)
    saved = json.loads((_run_dir(tmp_path, "clean") / "report" / "analysis.json").read_text(encoding="utf-8"))
    crit = next(c for c in saved["criteria"] if c["code"] == "criterion.device_faults")
    v = crit["values"]
    assert crit["met"] is True and (v["read"], v["chips"], v["fails"], v["warns"]) == (4, 4, 0, 0)
    assert v["readings"] >= 4 * 2  # every chip's ECC view answered, more than once
    assert crit["measured"].startswith("fault reports of 4 of 4 chips read (")
    assert not [f for f in saved["findings"] if f["kind"] == "device_fault"]
