"""The sampling needs of the thermal, throughput, comm-timeout and peer detectors
(``soak.analysis.sampling``), each on a synthetic trace: the fault found at an interval inside
the need, and beyond it the criterion not judged and a healthy trace never a pass."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from soak import criteria as cr
from soak.analysis import Profile, Trace, analyze
from soak.analysis import sampling as sm
from soak.analysis.synth import T0, Fault, Scenario, generate
from soak.judge import judge_trace


def _trace(dt_s: float, faults: tuple[Fault, ...] = (), hours: float = 24.0, chips: int = 2) -> Trace:
    # the chips of a node share its daily ambient cycle: 8 degrees hotter stands out of it
    trace, _ = generate(Scenario("sampled", hours=hours, dt_s=dt_s, n_devices=chips, gaps=0, dips_per_day=0.0,
                                 checkpoint_every_s=None, faults=faults, shared_ambient=True))
    return trace


def _with_counter(trace: Trace, dt_s: float, hours: float = 24.0, onset_h: float = 16.0, seed: int = 0) -> Trace:
    """``trace`` with a cumulative ``comm_timeouts_total`` on npu0-0 read every ``dt_s``:
    timeouts at 0.2/h (retried, healthy), 20/h from ``onset_h``, counted as they happen (every
    10 s) and read as the counter stands at each reading."""
    rng = np.random.default_rng(seed)
    fine = np.arange(0.0, hours * 3600.0, 10.0)
    rate_per_h = np.where(fine >= onset_h * 3600.0, 20.0, 0.2)
    counter = np.cumsum(rng.poisson(rate_per_h * 10.0 / 3600.0))
    read = fine[:: int(dt_s / 10.0)]
    arrays = {(s.device, s.metric): (s.t, s.v) for s in trace.series()}
    arrays[("npu0-0", "comm_timeouts_total")] = (T0 + read, counter[:: int(dt_s / 10.0)].astype(float))
    return Trace.from_arrays(arrays)


def _found(trace: Trace, kind: str, code: str = "") -> list[tuple[str, str | None, float]]:
    """(code, device, start from the trace's start) of the findings of ``kind``."""
    return [(f.code, f.device, f.start - T0) for f in analyze(trace).findings
            if f.kind == kind and f.code.startswith(code)]


def _criterion(judged, kind: str) -> dict:
    return next(c for c in judged.criteria if c["code"] == f"criterion.kind.{kind}")


def _blind_alone(kinds: set[str], interval_s: float) -> Profile:
    """The default profile with the other detectors' needs widened, so that at one reading
    (and step row) per ``interval_s`` only ``kinds`` are blind: a verdict there rests on them."""
    p = Profile.default()
    r = dataclasses.replace
    p = r(p, memory=r(p.memory, envelope_window_s=max(p.memory.envelope_window_s, 4 * interval_s)),
          hang=r(p.hang, threshold_s=max(p.hang.threshold_s, 2 * interval_s)))
    if not kinds & {"outlier", "straggler"}:
        p = r(p, peers=r(p.peers, bucket_s=max(p.peers.bucket_s, 4 * interval_s)))
    if "throughput_degradation" not in kinds:
        p = r(p, throughput=r(p.throughput, baseline_len_h=max(p.throughput.baseline_len_h, 20 * interval_s / 3600)))
    assert {b.kind for b in sm.blind(interval_s, p, interval_s)} == kinds
    return p


def _not_a_pass(trace: Trace, kinds: set[str], interval_s: float) -> None:
    """A healthy trace read every ``interval_s``, where only ``kinds`` are blind, is not
    judged (no pass), with a blind reason for each of them."""
    judged = judge_trace(trace, _blind_alone(kinds, interval_s))
    assert judged.verdict is None and judged.clean_statement is None
    blind = [r for r in judged.to_dict()["reasons_typed"] if r["code"] == "reason.blind"]
    assert {r["values"]["kind"] for r in blind} == kinds
    for kind in kinds:
        assert _criterion(judged, kind)["met"] is None


# --------------------------------------------------------------------------- thermal
def test_a_thermal_excursion_is_seen_when_it_lasts_the_readings_its_minute_needs() -> None:
    # one reading per 45 s: a 60-s excursion that starts 20 s after a reading holds one
    # reading, measured as 45 s, short of the minute; 90 s hold two whatever their phase
    onset_h = 3.0 + 20.0 / 3600

    def excursion(duration_s: float) -> tuple[Fault, ...]:
        return (Fault("thermal", "npu0-0", onset_h, 3.0, params={"duration_s": duration_s}),)

    assert _found(_trace(45.0, excursion(60.0), hours=8.0), "thermal") == []
    assert _found(_trace(45.0, excursion(90.0), hours=8.0), "thermal") == [
        ("thermal.excursions", "npu0-0", 3 * 3600.0 + 45.0)]
    assert sm.shortest_event_s("thermal", 45.0) == 90.0
    assert sm.limited_s("thermal", 5.0) is None  # 12 readings of 5 s: the minute itself
    judged = judge_trace(_trace(45.0, excursion(60.0), hours=8.0))
    thermal = _criterion(judged, "thermal")
    assert thermal["met"] is True and thermal["values"]["shortest_s"] == 90.0


def test_at_one_reading_per_10_min_a_10_min_excursion_is_seen_and_the_criterion_says_so() -> None:
    hot = (Fault("thermal", "npu0-0", 3.0 + 250.0 / 3600, 3.0, params={"duration_s": 600.0}),)
    assert [c for c, _, _ in _found(_trace(600.0, hot, hours=8.0), "thermal")] == ["thermal.excursions"]
    crits = {c["values"]["kind"]: c for c in cr.kind_criteria([], judged=True, blind=sm.blind(600.0),
                                                               interval_s=600.0)}
    assert crits["thermal"]["met"] is True
    assert crits["thermal"]["required"] == "0 fail (seen from 10 min long at this sampling)"


def test_thermal_drift_needs_a_reading_every_hour_above_it_thermal_is_not_judged() -> None:
    drift = (Fault("thermal", "npu0-0", 0.0, 0.4, style="drift"),)
    assert [c for c, _, _ in _found(_trace(1800.0, drift), "thermal")] == ["thermal.drift"]
    # every two hours: 12 hourly medians in a day, under the 20 the fit needs: unseen
    assert _found(_trace(7200.0, drift), "thermal") == []
    assert "thermal" in {b.kind for b in sm.blind(7200.0)}
    assert "thermal" not in {b.kind for b in sm.blind(3600.0)}
    judged = judge_trace(_trace(7200.0, drift))
    thermal = _criterion(judged, "thermal")
    assert thermal["met"] is None and thermal["values"]["max_interval_s"] == 3600.0
    _not_a_pass(_trace(7200.0), {"thermal"}, 7200.0)


# --------------------------------------------------------------------------- comm timeouts
def test_comm_timeout_counters_are_seen_at_any_sampling_they_are_never_blind() -> None:
    fatal = (Fault("comm_timeouts", "npu0-0", 10.0, 1.0, style="fatal"),)
    # one reading an hour, or every 4 h: every rise between two readings is still counted in
    # the later one, and the rate rule compares thirds of the run
    for dt_s in (3600.0, 14400.0):
        rising = _with_counter(_trace(dt_s), dt_s)
        assert [c for c, _, _ in _found(rising, "comm_timeouts")] == ["comm_timeouts.rising"], dt_s
    assert _found(_trace(3600.0, fatal), "comm_timeouts", "comm_timeouts.fatal") == [
        ("comm_timeouts.fatal", "npu0-0", 10 * 3600.0)]
    need = sm.needs()["comm_timeouts"]
    assert (need.max_interval_s, need.shortest_event_s) == (None, None)
    assert "comm_timeouts" not in {b.kind for b in sm.blind(1e6, None, 1e6)}
    judged = judge_trace(_trace(3600.0, fatal))
    comm = _criterion(judged, "comm_timeouts")
    assert comm["met"] is False and "shortest_s" not in comm["values"]


# --------------------------------------------------------------------------- throughput
def test_throughput_reads_the_step_rows_not_the_tick() -> None:
    # a real run at --interval 10m: the ranks still write a step row every 10 s
    assert sm.run_step_interval_s(600.0, 1.0) == 10.0
    kinds = {b.kind for b in sm.blind(600.0, None, sm.run_step_interval_s(600.0, 1.0))}
    assert not kinds & {"throughput_degradation", "straggler"}
    # x240 at the 5 s tick: the step window is no wider than the tick, a row per 20 min
    assert sm.run_step_interval_s(5.0, 240.0) == 1200.0
    steps = [b for b in sm.blind(1200.0, None, 1200.0) if b.reads == sm.STEPS]
    assert [(b.kind, b.max_interval_s) for b in steps] == [("throughput_degradation", 720.0), ("straggler", 300.0)]
    assert sm.run_fix(steps[0], 5.0, 240.0) == {"interval_s": 3.0, "time_scale": 144.0}
    assert sm.run_fix(steps[0], 60.0, 240.0)["time_scale"] == 72.0  # rows every 10 s of wall, not 60


def test_a_slowdown_is_found_with_a_step_row_per_10_min_and_not_judged_at_one_per_15() -> None:
    slow = (Fault("throughput_degradation", "npu0-0", 12.0, 20.0),)
    assert [c for c, d, _ in _found(_trace(600.0, slow), "throughput_degradation")] == ["throughput_degradation.abrupt"]
    # a row per 15 min: the 2-h baseline holds 8 one-minute medians, under its 10: unseen
    assert _found(_trace(900.0, slow), "throughput_degradation") == []
    judged = judge_trace(_trace(900.0, slow))
    crit = _criterion(judged, "throughput_degradation")
    assert crit["met"] is None and crit["values"]["interval_s"] == 900.0
    _not_a_pass(_trace(900.0), {"throughput_degradation"}, 900.0)


# --------------------------------------------------------------------------- peers
@pytest.mark.parametrize(("fault", "kind"), [
    (Fault("outlier", "npu0-1", 4.0, 8.0), "outlier"),  # 8 C hotter at the same power
    (Fault("straggler", "npu0-1", 4.0, 20.0), "straggler"),  # 20 % slower steps
])
def test_peers_need_two_readings_per_bucket(fault: Fault, kind: str) -> None:
    assert [d for _, d, _ in _found(_trace(300.0, (fault,), chips=8), kind)] == ["npu0-1"]
    # one reading per bucket: every bucket is left out of the comparison
    assert _found(_trace(600.0, (fault,), chips=8), kind) == []
    judged = judge_trace(_trace(600.0, (fault,), chips=8))
    crit = _criterion(judged, kind)
    assert crit["met"] is None and crit["values"]["max_interval_s"] == 300.0
    _not_a_pass(_trace(600.0, chips=8), {"outlier", "straggler"}, 600.0)


def test_a_detector_blind_on_its_step_rows_says_step_rows_in_each_language() -> None:
    from soak.report.model import EventView
    from soak.report.sentences import event_text, message

    b = next(b for b in sm.blind(300.0, None, 1200.0) if b.kind == "throughput_degradation")
    crit = next(c for c in cr.kind_criteria([], judged=True, blind=[b], interval_s=300.0)
                if c["values"]["kind"] == "throughput_degradation")
    assert crit["measured"] == "not judged: one step row per 20 min, needs one per 12 min or less"
    reason = cr.blind_reasons([crit])[0]
    assert message(reason.code, reason.values, "en") == (
        "throughput degradation cannot be judged at one step row per 20 min: needs one per 12 min or less")
    assert message(reason.code, reason.values, "zh") == "吞吐下降无法判定：每 20 min 一条步骤记录，需要至少每 12 min 一次"
    line, detail = sm.run_note(b, 5.0, 240.0)
    assert line == ("throughput degradation cannot be judged at one step row per 20 min: needs one per 12 min "
                    "or less; use --interval 3s or less or --time-scale 144 or less")
    assert detail["steps"] is True
    # the run's note event, in the report's Chinese
    note = EventView(ts=T0, kind="note", device=None, message=line, detail=detail, workload=None, node=None)
    assert event_text(note, "zh") == ("吞吐下降无法判定：每 20 min 一条步骤记录，需要至少每 12 min 一次；"
                                      "请使用 --interval 3s 或更短，或 --time-scale 144 或更低")
    # the chips' readings keep their word
    creep = sm.blind(600.0)[0]
    assert sm.run_note(creep, 600.0, 1.0)[0].startswith("memory creep cannot be judged at one reading per 10 min")


@pytest.mark.parametrize(("sampling", "time_scale", "blind"), [
    # a real run at --interval 10m: the ranks still write a step row every 10 s
    ({"interval": "10m"}, 1.0, {"memory_creep", "utilization_dropouts", "outlier"}),
    # x240 at the 5 s tick: the step window is no wider than the tick, a row per 20 min
    ({"interval": "5s"}, 240.0, {"memory_creep", "utilization_dropouts", "outlier", "throughput_degradation",
                                 "straggler"}),
])
def test_a_recorded_run_is_judged_on_its_step_rows_spacing_from_its_plan(sampling, time_scale, blind) -> None:
    from soak.config import plan_from_dict
    from soak.judge import judge_run
    from soak.store import Store

    with Store.open("sqlite://") as store:
        plan = plan_from_dict({"sampling": sampling, "run": {"time_scale": time_scale}, "devices": {"backend": "sim"}})
        store.create_run("r1", host="node-a", plan=plan.to_dict(), started_ts=T0, time_scale=time_scale)
        store.add_sample_rows([{"run_id": "r1", "ts": T0 + i, "device": "npu0-0", "up": True, "util_pct": 95.0,
                                "hbm_used_bytes": 30e9, "hbm_total_bytes": 68_719_476_736, "temp_c": 60.0}
                               for i in range(0, 12 * 3600, 600)])
        judged = judge_run(store, "r1")
    crits = {c["values"]["kind"]: c for c in judged.criteria if c["code"].startswith("criterion.kind.")}
    assert {k for k, c in crits.items() if c["values"].get("blind")} == blind
    # the readings' 10 min or 20 min; the step rows' 10 s or 20 min
    assert crits["outlier"]["values"]["interval_s"] == 600.0 * (2 if time_scale > 1 else 1)
    assert {k for k, c in crits.items() if c["values"].get("steps")} == blind & {"throughput_degradation", "straggler"}
