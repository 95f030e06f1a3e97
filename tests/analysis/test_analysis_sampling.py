"""What sampling each detector needs (``soak.analysis.sampling``), and a verdict that never
passes on a detector blind at the sampling it was given."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from soak import criteria as cr
from soak.analysis import Profile, Trace
from soak.analysis import sampling as sm
from soak.analysis.synth import GIB, Fault, Scenario, generate
from soak.judge import judge_trace, not_claimed
from soak.report.i18n import CHINESE


def _kinds(interval_s: float | None, profile: Profile | None = None) -> list[str]:
    return [b.kind for b in sm.blind(interval_s, profile)]


@pytest.mark.parametrize(("interval_s", "blind"), [
    (5.0, []), (240.0, []), (300.0, []),  # the demo (240 s a reading) and x60 at the 5 s tick stay judged
    (301.0, ["memory_creep", "utilization_dropouts", "outlier"]),
    (600.0, ["memory_creep", "utilization_dropouts", "outlier"]),  # a real run at --interval 10m
    (1200.0, ["memory_creep", "utilization_dropouts", "outlier"]),  # 5 s tick at x240
    (3601.0, ["memory_creep", "utilization_dropouts", "thermal", "outlier"]),
    (None, []),
])
def test_blind_at_an_interval_with_the_default_profile(interval_s, blind) -> None:
    assert _kinds(interval_s) == blind


def test_the_hang_detector_is_never_blind_it_sees_hangs_of_three_intervals() -> None:
    assert "hang" not in _kinds(1e6)
    assert sm.shortest_event_s("hang", 5.0) == 300.0  # its own threshold
    assert sm.limited_s("hang", 5.0) is None  # not set by the sampling: nothing to state
    assert sm.limited_s("hang", 300.0) == 900.0  # x60 at the 5 s tick: hangs of 15 min and more
    assert sm.limited_s("utilization_dropouts", 240.0) == 240.0  # a drop of one reading's interval
    assert sm.limited_s("utilization_dropouts", 5.0) is None  # min_duration_s (10 s) sets it


def test_needs_follow_the_profile() -> None:
    base = Profile.default()
    wide = dataclasses.replace(base, memory=dataclasses.replace(base.memory, envelope_window_s=1800.0),
                               hang=dataclasses.replace(base.hang, threshold_s=900.0),
                               peers=dataclasses.replace(base.peers, bucket_s=1200.0))
    need = sm.needs(wide)["memory_creep"]
    assert (need.readings_per_window, need.window_s, need.max_interval_s) == (2, 1800.0, 900.0)
    need = sm.needs(wide)["outlier"]
    assert (need.readings_per_window, need.window_s, need.max_interval_s) == (2, 1200.0, 600.0)
    assert _kinds(600.0, wide) == []
    assert _kinds(901.0, wide) == ["memory_creep", "utilization_dropouts", "outlier"]


def test_run_and_trace_interval() -> None:
    assert sm.run_interval_s(5.0, 240.0) == 1200.0
    assert sm.run_interval_s(600.0, None) == 600.0
    t = 1_767_225_600.0 + np.arange(0.0, 36_000.0, 1200.0)
    trace = Trace.from_arrays({("npu0", "util_pct"): (t, np.full(t.size, 90.0)),
                               ("npu0", "hbm_used_bytes"): (t, np.full(t.size, 1e9))})
    assert sm.trace_interval_s(trace) == 1200.0
    assert sm.trace_interval_s(Trace.from_arrays({("npu0", "util_pct"): (t[:1], np.ones(1))})) is None


def test_run_fix_names_the_interval_and_the_time_scale_that_see_again() -> None:
    b = sm.blind(1200.0)[0]
    line, detail = sm.run_note(b, 5.0, 240.0)
    assert line == ("memory creep cannot be judged at one reading per 20 min: needs one per 5 min or less; "
                    "use --interval 1.25s or less or --time-scale 60 or less")
    assert (detail["fix_interval_s"], detail["fix_time_scale"], detail["kind"]) == (1.25, 60.0, "memory_creep")
    line, detail = sm.run_note(sm.blind(600.0)[0], 600.0, 1.0)  # a real run: no time scale to lower
    assert line.endswith("needs one per 5 min or less; use --interval 300s or less")
    assert detail["fix_time_scale"] is None


def test_the_step_rows_interval_decides_for_the_detectors_that_read_them() -> None:
    assert _kinds(None) == [] and [b.kind for b in sm.blind(None, None, 1200.0)] == [
        "throughput_degradation", "straggler"]
    assert [b.kind for b in sm.blind(300.0, None, 300.0)] == []
    assert [b.kind for b in sm.blind(300.0, None, 720.0)] == ["straggler"]  # throughput sees up to 720 s


def test_a_blind_kind_is_not_judged_unless_it_found_a_failure() -> None:
    crits = {c["values"]["kind"]: c for c in cr.kind_criteria([], judged=True, blind=sm.blind(1200.0),
                                                               interval_s=1200.0)}
    creep = crits["memory_creep"]
    assert creep["met"] is None and creep["values"]["blind"] is True
    assert creep["measured"] == "not judged: one reading per 20 min, needs one per 5 min or less"
    assert crits["hang"]["met"] is True
    assert crits["hang"]["required"] == "0 fail (seen from 1 h 00 min long at this sampling)"
    # an excursion is seen from the minute it needs, held by readings 20 min apart
    assert crits["thermal"]["met"] is True and crits["thermal"]["values"]["shortest_s"] == 1200.0
    assert "shortest_s" not in crits["comm_timeouts"]["values"]
    failed = {"kind": "memory_creep", "severity": "fail"}
    crits = {c["values"]["kind"]: c for c in cr.kind_criteria([failed], judged=True, blind=sm.blind(1200.0))}
    assert crits["memory_creep"]["met"] is False  # a leak seen at any sampling still fails


def test_a_pass_resting_on_a_blind_criterion_is_not_judged_a_fail_stays() -> None:
    crits = cr.kind_criteria([], judged=True, blind=sm.blind(600.0), interval_s=600.0)
    verdict, reasons = not_claimed("pass", crits, [])
    assert verdict is None
    assert [r.code for r in reasons] == ["reason.blind"] * 3
    assert [r.values["kind"] for r in reasons] == ["memory_creep", "utilization_dropouts", "outlier"]
    assert not_claimed("fail", crits, ["x"]) == ("fail", ["x"])
    assert not_claimed("pass", cr.kind_criteria([], judged=True), []) == ("pass", [])


def _healthy(dt_s: float, faults: tuple[Fault, ...] = ()) -> Trace:
    trace, _ = generate(Scenario("healthy", hours=12.0, dt_s=dt_s, n_devices=2, gaps=0, dips_per_day=0.0,
                                 checkpoint_every_s=None, faults=faults))
    return trace


def test_a_trace_read_every_20_min_does_not_pass_a_leak_it_cannot_see() -> None:
    leak = (Fault("memory_creep", "*", 1.0, 0.8 * GIB),)
    judged = judge_trace(_healthy(1200.0, leak))
    assert judged.verdict is None and judged.clean_statement is None
    creep = next(c for c in judged.criteria if c["code"] == "criterion.kind.memory_creep")
    assert creep["met"] is None and creep["values"]["interval_s"] == 1200.0
    assert "reason.blind" in {r["code"] for r in judged.to_dict()["reasons_typed"]}
    # the same fleet read every minute: judged, and the leak fails it
    assert judge_trace(_healthy(60.0, leak)).verdict == "fail"
    assert judge_trace(_healthy(60.0)).verdict == "pass"


def test_the_blind_texts_have_chinese() -> None:
    for code in ("reason.blind", "criterion.kind.measured_blind"):
        assert code in CHINESE, code
