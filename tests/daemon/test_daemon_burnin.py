"""The burn-in clock's decision at the planned end, from the run's events."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from soak.analysis.profile import EvidenceParams
from soak.daemon import burnin

ON = EvidenceParams(min_uninterrupted_h=1.0, restart_clock_on_failure=True, max_duration_h=3.0)


def _e(ts, kind, message=None, end_ts=None):
    return SimpleNamespace(ts=ts, kind=kind, workload="lm", rank=0, message=message, detail={}, end_ts=end_ts,
                           node=None)


def _ext(events, now=3600.0, evidence=ON):
    return burnin.extension(events, ["lm"], planned_start=0.0, now=now, duration_s=3600.0, evidence=evidence)


def test_a_clean_hour_ends_at_the_planned_end() -> None:
    assert _ext([_e(30, "start")]) is None
    # off, the clock never moves the end, whatever failed
    assert _ext([_e(30, "start"), _e(3000, "crash"), _e(3010, "start")], evidence=EvidenceParams()) is None


def test_a_crash_starts_the_clock_again_when_training_resumes() -> None:
    ext = _ext([_e(30, "start"), _e(3000, "crash"), _e(3010, "start")])
    assert (ext.since, ext.planned_end, ext.capped) == (3010, 3010 + 3600, False)


def test_an_injected_crash_does_not_but_the_daemons_outage_does() -> None:
    injected = [_e(30, "start"), _e(2990, "inject", "crash: exiting at step 40"), _e(3000, "crash"),
                _e(3010, "start")]
    assert _ext(injected) is None
    ext = _ext([_e(30, "start"), _e(2000, "gap", end_ts=2100), _e(2130, "start")])
    assert ext.since == 2130 and ext.planned_end == 2130 + 3600


def test_the_clock_stops_at_the_longest_allowed_duration() -> None:
    ext = _ext([_e(30, "start"), _e(10000, "hang"), _e(10020, "start")], now=10030)
    assert ext.capped and ext.planned_end == 3 * 3600
    assert _ext([_e(30, "start"), _e(10000, "hang"), _e(10020, "start")], now=3 * 3600) is None
    assert burnin.cap_s(ON, 3600.0) == 3 * 3600 and burnin.cap_s(EvidenceParams(), 3600.0) == 3600


def test_a_workload_not_back_yet_moves_the_end_a_whole_stretch_past_now() -> None:
    ext = _ext([_e(30, "start"), _e(3500, "crash")])
    assert ext.since == pytest.approx(3600) and ext.planned_end == pytest.approx(7200)
