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


# -------------------------------------------------------------------- a cluster run's events

def _n(ts, kind, node, message=None, end_ts=None, rank=0, detail=None):
    return SimpleNamespace(ts=ts, kind=kind, workload="lm" if kind != "node_lost" else None, rank=rank,
                           message=message, detail=detail or {}, end_ts=end_ts, node=node)


def test_a_crash_on_another_node_moves_the_clusters_end_and_names_the_node() -> None:
    # the job's rank 0 trains on node-0; node-1's rank crashed, the whole job started again
    events = [_n(30, "start", "node-0"), _n(31, "start", "node-1", rank=1), _n(3000, "crash", "node-1", rank=None),
              _n(3005, "note", "node-0", "lm: crashed (the cluster job had failed on another node)"),
              _n(3020, "start", "node-0"), _n(3020, "start", "node-1", rank=1)]
    ext = _ext(events)
    assert (ext.since, ext.planned_end, ext.capped, ext.cause, ext.node) == (3020, 3020 + 3600, False, "crash", "node-1")
    msg, detail = burnin.note(ext, ON, planned_start=0.0)
    assert msg == ("burn-in clock: 1 h without an unexpected failure needed since 3020 s into the soak "
                   "(crash on node node-1); the run goes on to 6620 s")
    assert detail == {"burn_in": True, "since": 3020, "planned_end": 6620, "planned_start": 0.0, "capped": False,
                      "min_uninterrupted_h": 1.0, "cause": "crash", "node": "node-1"}


def test_a_node_lost_counts_as_a_failure_from_its_last_sign_of_life_until_the_job_trains_again() -> None:
    lost = _n(2950, "node_lost", "node-2", "node node-2 (rank 2) lost", detail={"node": "node-2", "last_seen": 2900})
    events = [_n(30, "start", "node-0"), lost, _n(3100, "start", "node-0")]
    ext = _ext(events, now=3600)
    assert (ext.since, ext.planned_end, ext.cause, ext.node) == (3100, 3100 + 3600, "node lost", "node-2")
    # a node lost and its rank's crash in the same stretch are one failure, the loss
    both = [*events[:2], _n(2905, "crash", "node-0", rank=None), events[2]]
    assert _ext(both, now=3600).cause == "node lost"
    # a loss still not recovered from at the end: a whole stretch past now
    ext = _ext([_n(30, "start", "node-0"), lost], now=3600)
    assert ext.since == pytest.approx(3600) and ext.planned_end == pytest.approx(7200)
    # one node's agent down alone is no failure of the run: the others trained on (its
    # effect on the job, a crash or its loss, is)
    assert _ext([_n(30, "start", "node-0"), _n(2000, "gap", "node-1", end_ts=2100)]) is None


def test_the_clusters_end_is_capped_like_one_nodes() -> None:
    lost = _n(10000, "node_lost", "node-1", detail={"node": "node-1", "last_seen": 9990})
    ext = _ext([_n(30, "start", "node-0"), lost, _n(10030, "start", "node-0")], now=10040)
    assert ext.capped and ext.planned_end == 3 * 3600 and ext.node == "node-1"
    assert " (its longest allowed)" in burnin.note(ext, ON, planned_start=0.0)[0]


def test_the_moved_run_keeps_the_soaks_start() -> None:
    from dataclasses import replace

    from soak.config import plan_from_dict

    plan = plan_from_dict({"run": {"duration": "1h"}})
    run = burnin.moved(_started(plan, planned_end_ts=5000.0), 8000.0)
    assert (run.planned_end_ts, run.plan.run.duration_s) == (8000.0, 3600.0 + 3000.0)
    assert replace(run.plan, run=plan.run) == plan  # only the duration moved


def _started(plan, planned_end_ts):
    from pathlib import Path

    from soak.clock import ScaledClock
    from soak.daemon.started import StartedRun

    return StartedRun("r", Path("."), plan, None, None, ScaledClock(), 0.0, planned_end_ts, 0, False)


# -------------------------------------------------------------------- the other nodes of a cluster

def _follow(**kw):
    values = dict(stored_end=1000.0, run_status="running", judge="node-0", judge_status="running",
                  waited_s=1.0, bound_s=72.0)
    return burnin.follow(1000.0, **{**values, **kw})


def test_a_node_that_does_not_judge_waits_for_the_judges_decision_and_follows_it() -> None:
    # nothing decided yet: it trains on at its planned end
    assert _follow() == burnin.Follow(burnin.WAITS, 1000.0, "node-0")
    assert _follow(judge=None, judge_status=None).code == burnin.WAITS  # no lease holder yet
    # the judge moved the run row's end: this node goes on to it
    assert _follow(stored_end=4600.0) == burnin.Follow(burnin.MOVED, 4600.0, "node-0")
    # the judge's node left 'running': the run ends at its planned end
    for status in ("finished", "stopped", "failed"):
        assert _follow(judge_status=status) == burnin.Follow(burnin.ENDS, 1000.0, "node-0")
    assert _follow(run_status="finished", judge_status="running").code == burnin.ENDS
    # an earlier end in the run row (rank 0's before its barrier) is never taken
    assert _follow(stored_end=900.0).code == burnin.WAITS


def test_a_node_waits_for_the_decision_no_longer_than_its_bound() -> None:
    assert _follow(waited_s=71.9).code == burnin.WAITS
    assert _follow(waited_s=72.0) == burnin.Follow(burnin.UNDECIDED, 1000.0, "node-0")
    assert _follow(waited_s=72.0, stored_end=4600.0).code == burnin.MOVED  # a decision read late still counts


def test_the_wait_bound_covers_the_judging_lease_and_the_clocks_offset() -> None:
    from soak.config import plan_from_dict

    one = plan_from_dict({"run": {"duration": "1h"}})
    three = plan_from_dict({"run": {"duration": "1h", "db": "postgresql+psycopg://soak@db/soak", "id": "c1"},
                            "cluster": {"nodes": 3, "node_silence": "45s", "max_clock_offset": "3s",
                                        "rendezvous": "10.0.0.1:29500"}})
    assert burnin.decision_wait_s(three, ON) == 45 + 3 + 10
    assert burnin.decision_wait_s(one, ON) == 0 and burnin.decision_wait_s(three, EvidenceParams()) == 0


# -------------------------------------------------------------------- the daemon at the planned end

def test_the_store_away_at_the_planned_end_ends_the_run_as_planned_and_the_log_says_so(tmp_path, caplog) -> None:
    import logging

    from soak.clock import ScaledClock
    from soak.config import plan_from_dict
    from soak.daemon.lifecycle import Daemon
    from soak.daemon.started import StartedRun
    from soak.errors import StoreError
    from soak.runplan import build_profile

    plan = plan_from_dict({"run": {"duration": "1h"}, "acceptance": {"thresholds": {
        "evidence.restart_clock_on_failure": 1, "evidence.min_uninterrupted_h": 1, "evidence.max_duration_h": 3}}})
    d = Daemon(plan)
    d.started = StartedRun("r", tmp_path, plan, build_profile(plan), None, ScaledClock(), 0.0, 3600.0, 0, False)
    looked: list[object] = []
    d.membership = SimpleNamespace(node="node-1", at_planned_end=lambda run, decide: looked.append(run) or True)
    d._spool = SimpleNamespace(down=True)  # the spool holds what the store could not take
    with caplog.at_level(logging.INFO, logger="soak.daemon"):
        assert d._burn_in_extends() is False
        assert looked == []
        assert "burn-in clock not read (the store is away): the run ends at its planned end" in caplog.text

        def gone(run, decide):
            raise StoreError("store postgresql://db/soak: connection refused")

        d._spool = SimpleNamespace(down=False)
        d.membership = SimpleNamespace(node="node-1", at_planned_end=gone)  # it went away during the look
        assert d._burn_in_extends() is False
        assert ("burn-in clock not read (store postgresql://db/soak: connection refused): the run ends at its "
                "planned end") in caplog.text
    # waiting for another node's decision, the run goes on meanwhile
    d.membership = SimpleNamespace(node="node-1", at_planned_end=lambda run, decide: None)
    assert d._burn_in_extends() is True
    # the clock off, nobody is asked
    off = plan_from_dict({"run": {"duration": "1h"}})
    d.started = StartedRun("r", tmp_path, off, build_profile(off), None, ScaledClock(), 0.0, 3600.0, 0, False)
    d.membership = SimpleNamespace(node="node-1", at_planned_end=lambda run, decide: looked.append(run) or True)
    assert d._burn_in_extends() is False and looked == []
