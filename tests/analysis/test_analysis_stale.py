"""Stale telemetry: a sensor frozen while its peers move is named, left out of the evidence
(the coverage counts it missing, the kinds that read it do not judge that chip); healthy halls
with readings rounded as the tools print them, a hall idle together, a hung chip (a real
reading holding still) and counters moving at their own pace stay quiet."""

from __future__ import annotations

import numpy as np
import pytest

from soak import criteria as cr
from soak.analysis import Profile, analyze, stale
from soak.analysis import evidence as ev
from soak.analysis.evaluate_stale import COUNTER, StaleCase, build, run_stale_case
from soak.analysis.messages import FINDINGS, say

DAY_H = 24.0


@pytest.fixture(scope="module")
def frozen_day():
    # one chip's temperature holds its value for a day, from 8 h into a 48 h hall
    case = StaleCase("stale/frozen-temp_c", 24.0, 9101, metric="temp_c", chip=(3, 5), onset_h=8.0, frozen_h=DAY_H)
    trace = build(case)
    return trace, analyze(trace)


@pytest.mark.compute
def test_a_temperature_frozen_for_a_day_is_named_with_its_value_and_since_when(frozen_day) -> None:
    trace, result = frozen_day
    found = [f for f in result.findings if f.kind == "stale_telemetry"]
    assert [(f.node, f.device, f.metric) for f in found] == [("n03", "npu0-5", "temp_c")]
    f = found[0]
    s = trace.get("n03/npu0-5", "temp_c")
    onset = s.t[0] + 8 * 3600.0
    # since when: the frozen value's first reading (it may have read the same just before)
    assert onset - 3600.0 <= f.start <= onset and f.values["unchanged_h"] >= DAY_H - 0.1
    assert f.values["value"] == float(s.v[np.searchsorted(s.t, onset)])
    assert "unchanged for 24" in f.summary and f.severity == "warn"
    assert f.code in FINDINGS and f.summary == say(f.code, f.values)


@pytest.mark.compute
def test_the_thermal_criterion_does_not_judge_the_frozen_chip_and_the_coverage_says_so(frozen_day) -> None:
    trace, result = frozen_day
    crits = {c["values"]["kind"]: c for c in cr.kind_criteria(result.findings, judged=True)}
    assert crits["thermal"]["values"]["not_judged"] == ["n03/npu0-5"]
    assert "not judged on n03/npu0-5 (stale readings)" in crits["thermal"]["measured"]
    assert "not_judged" not in crits["memory_creep"]["values"]  # its HBM readings are evidence
    kept = stale.without_stale(trace, result.findings)
    cov = ev.coverage({(s.device, s.metric): s.t for s in kept.series()}, 60.0, float(trace.start),
                      float(trace.end))
    assert cov.ratios["n03/npu0-5"]["temp_c"] < 0.55  # a day of 48 h left out
    assert cov.ratios["n03/npu0-5"]["power_w"] > 0.99 and cov.ratios["n03/npu0-4"]["temp_c"] > 0.99


@pytest.mark.compute
def test_the_frozen_readings_are_no_evidence_for_the_thermal_detector() -> None:
    # the chip froze hot, above the excursion threshold: that is a stuck reading, not a hot chip
    case = StaleCase("stale/frozen-temp_c", 24.0, 9102, metric="temp_c", chip=(2, 1), onset_h=8.0, frozen_h=DAY_H)
    trace = build(case)
    s = trace.get("n02/npu0-1", "temp_c")
    on = (s.t >= s.t[0] + 8 * 3600.0) & (s.t < s.t[0] + 32 * 3600.0)
    hot = type(s)(s.device, s.metric, s.t, np.where(on, 99.0, s.v))
    series = {(x.device, x.metric): x for x in trace.series()}
    series[("n02/npu0-1", "temp_c")] = hot
    trace = type(trace)(series, trace.source, {k: trace.place(k) for k in trace.devices})
    kinds = {(f.kind, f.device) for f in analyze(trace).findings if f.node == "n02"}
    assert ("stale_telemetry", "npu0-1") in kinds and ("thermal", "npu0-1") not in kinds


@pytest.mark.parametrize("case", [
    StaleCase("stale/healthy", 0.0, 9201),
    StaleCase("stale/healthy-idle", 0.0, 9202, idle_h=12.0),
    StaleCase("stale/healthy-counter", 0.0, 9203, counter_per_h=1.0),
    StaleCase("stale/healthy-hung", 0.0, 9204, chip=(4, 4), hung_h=6.0),
], ids=lambda c: c.family)
def test_healthy_halls_give_no_stale_finding(case) -> None:
    r = run_stale_case(case)
    assert r["false"] == [] and r["series_days"] > 500  # 128 chips x 2 sensors x 2 days; 2,048 in all


def test_a_counter_that_stops_while_its_peers_count_is_named() -> None:
    r = run_stale_case(StaleCase("stale/frozen-counter", 6.0, 9301, metric=COUNTER, chip=(7, 2), onset_h=6.0,
                                 frozen_h=6.0, counter_per_h=20.0))
    assert r["detected"] and r["false"] == []


def test_a_hall_where_every_chip_holds_still_names_none() -> None:
    # the idle hall's utilization is 0 on every chip for 12 h: nobody moved, nobody is stale
    trace = build(StaleCase("stale/healthy-idle", 0.0, 9202, idle_h=12.0))
    assert stale.detect(trace, Profile.default(), float(trace.start), float(trace.end)) == []
