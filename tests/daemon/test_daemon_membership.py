"""The agent's part in its run, without a daemon: a single node owns and judges its run; a
node of a cluster run restarts an attempt of an older job generation, stops when the run
ended elsewhere, names a job failure once, leaves the judgement to the leader, and meets the
job where its rendezvous moved when rank 0 is lost."""

from __future__ import annotations

import io
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from soak.config import Plan, plan_from_dict
from soak.daemon import burnin
from soak.daemon.cluster import ClusterMembership
from soak.daemon.membership import SingleNode
from soak.daemon.started import StartedRun
from soak.runplan import build_profile
from soak.store import Store

PG_URL = os.environ.get("SOAK_TEST_PG_URL")


class FakeSupervisor:
    def __init__(self, name: str) -> None:
        self.name = name
        self.state = "running"
        self.restarted: list[str] = []

    def restart_now(self, why: str) -> None:
        self.restarted.append(why)


def test_single_node_makes_its_run_row_and_judges_the_run(tmp_path) -> None:
    plan = plan_from_dict({"run": {"duration": "150m", "data_dir": str(tmp_path)},
                           "workloads": [{"name": "lm", "nproc": 2}]})
    store = Store.open(tmp_path / "soak.db")
    single = SingleNode()
    run = single.start(plan, "r", tmp_path, store, build_profile(plan))
    assert single.node is None and single.owns_run_row and single.judges()
    [start] = store.load_events("r", kind="start")
    assert start.message == "run started: lm on 2 processes for 2 h 30 min"
    assert (tmp_path / "plan.toml").is_file()
    assert single.workload_failed(run, "crash", "lm exited 1", "lm", 0, {"exit_code": 1}) == (
        "crash", "lm exited 1", {"exit_code": 1})
    assert single.tick(run, [], restarts=0, chips=1, store_back_at=None) is None
    assert single.ended(run, status="finished", ended_ts=run.clock.now(), restarts=3, fatal=None) is True
    assert store.get_run("r").restarts == 3
    store.close()


def _plan(tmp_path: Path, url: str, name: str, rank: int, nodes: int = 2, **cluster: object) -> Plan:
    return plan_from_dict({"run": {"duration": "1h", "data_dir": str(tmp_path), "db": url, "id": "r"},
                           "cluster": {"nodes": nodes, "node_name": name, "node_rank": rank,
                                       "rendezvous": "127.0.0.1:29500", **cluster}})


def _join(tmp_path: Path, store: Store, url: str, name: str, rank: int, out: io.StringIO, nodes: int = 2,
          **cluster: object):
    plan = _plan(tmp_path, url, name, rank, nodes, **cluster)
    (tmp_path / name).mkdir()
    membership = ClusterMembership.of_plan(plan, store, "r", out=out, step_window_s=1.0)
    return membership, membership.start(plan, "r", tmp_path / name, store, build_profile(plan))


@pytest.mark.pg
def test_cluster_node_restarts_an_older_generations_attempt_and_stops_once_the_run_ended(tmp_path, db_url) -> None:
    out = io.StringIO()
    with Store.open(db_url) as store:
        a, run = _join(tmp_path, store, db_url, "a", 0, out)
        assert out.getvalue() == "soak: node a (rank 0 of 2) joined cluster run r\n"
        assert a.metric_labels("r") == {"node": "a", "run_id": "r"} and a.owns_run_row
        a.rendezvous(run.plan.workloads)()  # the attempt starts in generation 0
        assert store.bump_generation("r", 0)  # another node's workload failed
        lm = FakeSupervisor("lm")
        assert a.tick(run, [lm], restarts=0, chips=2, store_back_at=None) is None
        assert lm.restarted == ["the cluster job restarts (generation 1)"]
        store.update_run("r", status="failed")
        assert a.tick(run, [lm], restarts=0, chips=2, store_back_at=None) is None  # once a second
        time.sleep(1.05)
        assert a.tick(run, [lm], restarts=0, chips=2, store_back_at=None) == "cluster run failed"


@pytest.mark.pg
def test_cluster_job_failure_is_named_once_and_the_leader_judges(tmp_path, db_url) -> None:
    out = io.StringIO()
    with Store.open(db_url) as store:
        a, run_a = _join(tmp_path, store, db_url, "a", 0, out)
        b, run_b = _join(tmp_path, store, db_url, "b", 1, out)
        assert a.workload_failed(run_a, "crash", "lm exited 1", "lm", 0, {"exit_code": 1}) == (
            "crash", "lm exited 1", {"exit_code": 1})
        assert b.workload_failed(run_b, "crash", "lm exited 1", "lm", 1, {"exit_code": 1}) == (
            "note", "lm exited 1 (the cluster job had failed on another node)",
            {"exit_code": 1, "failure": "crash", "cluster_note": "failed_elsewhere"})
        assert a.judges() and not b.judges()
        out.truncate(0)
        out.seek(0)
        assert b.ended(run_b, status="finished", ended_ts=run_b.clock.now(), restarts=0, fatal=None) is False
        assert out.getvalue() == ("soak: node b finished; node a judges cluster run r "
                                  "(soak cluster status r --db URL)\n")
        # b may not write the verdict; a, holding the lease, does, once, from its own run folder
        assert not b.finish(run_b, status="finished", ended_ts=run_b.clock.now(), verdict="pass")
        out.truncate(0)
        out.seek(0)
        assert a.ended(run_a, status="finished", ended_ts=run_a.clock.now(), restarts=0, fatal=None) is True
        assert out.getvalue() == "soak: node a judges cluster run r\n"
        assert a.finish(run_a, status="finished", ended_ts=run_a.clock.now(), verdict="fail")
        rec = store.get_run("r")
        assert (rec.status, rec.verdict, rec.leader, rec.lease_until, rec.run_dir) == (
            "finished", "fail", "a", None, str(tmp_path / "a"))
        assert not a.finish(run_a, status="finished", ended_ts=run_a.clock.now(), verdict="pass")
        assert store.get_run("r").verdict == "fail"


@pytest.mark.pg
def test_a_node_ends_its_part_once_the_node_judging_the_run_has_stopped(tmp_path, db_url) -> None:
    """on_node_lost = "stop", or the judge's agent alone sent SIGTERM: the judge stops and
    judges the run as stopped; the other nodes follow at their next look, not after its wait."""
    out = io.StringIO()
    with Store.open(db_url) as store:
        a, run_a = _join(tmp_path, store, db_url, "a", 0, out)
        b, run_b = _join(tmp_path, store, db_url, "b", 1, out)
        for m in (a, b):
            m.member.touch(force=True, status="running")
        assert b.tick(run_b, [], restarts=0, chips=2, store_back_at=None) is None
        assert a.tick(run_a, [], restarts=0, chips=2, store_back_at=None) is None
        assert store.get_run("r").leader == "a"
        a.member.touch(force=True, status="stopped")
        time.sleep(1.05)  # a node looks once a second
        assert b.tick(run_b, [], restarts=0, chips=2, store_back_at=None) == "node a stopped, which judges the run"


@pytest.mark.pg
def test_the_judge_keeps_its_lease_while_every_node_gets_its_grace_after_a_store_outage(tmp_path, db_url) -> None:
    out = io.StringIO()
    with Store.open(db_url) as store:
        a, run_a = _join(tmp_path, store, db_url, "a", 0, out)
        assert a.tick(run_a, [], restarts=0, chips=2, store_back_at=None) is None
        store.update_run("r", lease_until=store.store_now() - 1)  # it ran out while the store was away
        time.sleep(1.05)
        assert a.tick(run_a, [], restarts=0, chips=2, store_back_at=time.monotonic()) is None
        run = store.get_run("r")
        assert run.leader == "a" and run.lease_until > store.store_now() + 50


@pytest.mark.pg
def test_rank_0_lost_moves_the_next_generations_rendezvous_to_the_lowest_live_rank(tmp_path, db_url) -> None:
    said = {name: io.StringIO() for name in "abc"}
    with Store.open(db_url) as store:
        a, run_a = _join(tmp_path, store, db_url, "a", 0, said["a"], 3)
        b, run_b = _join(tmp_path, store, db_url, "b", 1, said["b"], 3, advertise="10.9.0.2")
        c, run_c = _join(tmp_path, store, db_url, "c", 2, said["c"], 3, advertise="10.9.0.3")
        assert [(n.name, n.host) for n in store.cluster_nodes("r")] == [
            ("a", "127.0.0.1"), ("b", "10.9.0.2"), ("c", "10.9.0.3")]
        first = {m.node: m.rendezvous(run_a.plan.workloads)() for m in (a, b, c)}
        assert {n: (r.endpoint, r.is_host, r.nnodes) for n, r in first.items()} == {
            "a": ("127.0.0.1:29500", True, 3), "b": ("127.0.0.1:29500", False, 3), "c": ("127.0.0.1:29500", False, 3)}
        # rank 0 goes silent past node_silence: the next rank leads, marks it lost and moves
        # the job's rendezvous to itself, the lowest live rank, in the generation it starts
        store.update_node("r", "a", last_seen=store.store_now() - 120)
        lm_b, lm_c = FakeSupervisor("lm"), FakeSupervisor("lm")
        assert b.tick(run_b, [lm_b], restarts=0, chips=2, store_back_at=None) is None
        run = store.get_run("r")
        assert (run.generation, run.rendezvous) == (1, "b@10.9.0.2:29500")
        [restart] = store.load_events("r", kind="cluster_restart")
        assert restart.message == ("node a (lost) hosted the job's rendezvous: the job restarts on the other "
                                   "nodes (generation 1), its rendezvous on node b at 10.9.0.2:29500")
        assert restart.detail["lost"] == ["a"] and restart.detail["rendezvous_node"] == "b"
        assert c.tick(run_c, [lm_c], restarts=0, chips=2, store_back_at=None) is None
        assert lm_c.restarted == ["the cluster job restarts (generation 1)"]
        again = {m.node: m.rendezvous(run_b.plan.workloads)() for m in (b, c)}
        assert {n: (r.endpoint, r.is_host, r.nnodes, r.rdzv_id) for n, r in again.items()} == {
            "b": ("10.9.0.2:29500", True, 2, "r-g1"), "c": ("10.9.0.2:29500", False, 2, "r-g1")}
        assert said["b"].getvalue().endswith("soak: the job's rendezvous moved to node b at 10.9.0.2:29500 "
                                             "(this node hosts it)\n")
        assert said["c"].getvalue().endswith("soak: the job's rendezvous moved to node b at 10.9.0.2:29500\n")
        # once moved, nothing moves again; rank 0 back (its agent resumed) joins where the job meets
        time.sleep(1.05)
        assert b.tick(run_b, [lm_b], restarts=0, chips=2, store_back_at=None) is None
        assert store.get_run("r").generation == 1
        a.resume()
        back = a.rendezvous(run_a.plan.workloads)()
        assert (back.endpoint, back.is_host, back.nnodes) == ("10.9.0.2:29500", False, 3)


@pytest.mark.pg
def test_a_rendezvous_host_that_is_alive_stays_and_a_lost_host_moves_once_the_generation_settles(
        tmp_path, db_url) -> None:
    with Store.open(db_url) as store:
        a, _ = _join(tmp_path, store, db_url, "a", 0, io.StringIO(), 3)
        b, _ = _join(tmp_path, store, db_url, "b", 1, io.StringIO(), 3)
        c, _ = _join(tmp_path, store, db_url, "c", 2, io.StringIO(), 3)
        store.update_node("r", "c", status="lost")  # not the host: the rendezvous stays on rank 0
        assert b.member.move_rendezvous() is None and store.get_run("r").rendezvous is None
        store.update_node("r", "a", status="failed")  # its agent gave up and ended
        seen = store.get_run("r").generation
        real = store.bump_generation

        def raced(run_id: str, seen_: int, **kw: object) -> bool:
            real(run_id, seen_)  # another node's workload failed between the look and the compare and set
            return real(run_id, seen_, **kw)

        store.bump_generation = raced  # type: ignore[method-assign]
        assert b.member.move_rendezvous() is None
        store.bump_generation = real  # type: ignore[method-assign]
        assert store.get_run("r").rendezvous is None
        moved = b.member.move_rendezvous()
        assert moved is not None and moved.node == "b" and moved.endpoint == "127.0.0.1:29500"
        run = store.get_run("r")
        assert (run.generation, run.rendezvous) == (seen + 2, "b@127.0.0.1:29500")


# ------------------------------------------------------------------ the burn-in clock on a cluster
BURN_IN = {"thresholds": {"evidence.restart_clock_on_failure": 1, "evidence.min_uninterrupted_h": 1,
                          "evidence.max_duration_h": 3}}


def _burn_in_pair(tmp_path: Path, store: Store, url: str, out: io.StringIO):
    """Nodes a (rank 0) and b of a run with the burn-in clock on, both training, a holding
    the judging lease; b's moved runs are kept in a list, as the daemon would take them."""
    a, run_a = _join(tmp_path, store, url, "a", 0, out)
    b, run_b = _join(tmp_path, store, url, "b", 1, out)
    profile = build_profile(plan_from_dict({**a.plan.to_dict(), "acceptance": BURN_IN}))
    run_a, run_b = replace(run_a, profile=profile), replace(run_b, profile=profile)
    moved: list[StartedRun] = []
    a._moved, b._moved = (lambda run: None), moved.append
    for m in (a, b):
        m.member.touch(force=True, status="running")
    assert a.tick(run_a, [], restarts=0, chips=2, store_back_at=None) is None
    assert b.tick(run_b, [], restarts=0, chips=2, store_back_at=None) is None
    assert store.get_run("r").leader == "a"
    return a, run_a, b, run_b, moved


def _decide(calls: list[str], name: str):
    """The daemon's decision (``Daemon._burn_in_decision``) from the store's events: the run
    row's end moved where the clock asks."""
    def decide(run: StartedRun) -> StartedRun | None:
        calls.append(name)
        ext = burnin.extension(run.store.load_events("r"), ["lm"], planned_start=run.planned_end_ts - 3600,
                               now=max(run.planned_end_ts, time.time()), duration_s=3600,
                               evidence=run.profile.evidence)
        if ext is None:
            return None
        run.store.update_run("r", planned_end_ts=ext.planned_end)
        return burnin.moved(run, ext.planned_end)
    return decide


@pytest.mark.pg
def test_burn_in_the_judge_moves_the_clusters_end_once_and_the_other_node_trains_on_to_it(tmp_path, db_url) -> None:
    out = io.StringIO()
    calls: list[str] = []
    with Store.open(db_url) as store:
        a, run_a, b, run_b, moved = _burn_in_pair(tmp_path, store, db_url, out)
        end = run_a.planned_end_ts
        store.add_event("r", "start", ts=end - 3500, workload="lm", rank=0, node="a")
        store.add_event("r", "crash", ts=end - 600, workload="lm", node="b", message="lm: crashed (exit 1)")
        store.add_event("r", "start", ts=end - 500, workload="lm", rank=0, node="a")
        # b, whose clock runs ahead, is at the end first: it trains on, waiting for a
        assert b.at_planned_end(run_b, _decide(calls, "b")) is None and moved == []
        assert a.at_planned_end(run_a, _decide(calls, "a")) is True
        assert calls == ["a"] and store.get_run("r").planned_end_ts == end - 500 + 3600
        time.sleep(1.05)  # a node looks once a second
        assert b.at_planned_end(run_b, _decide(calls, "b")) is True
        assert calls == ["a"] and [m.planned_end_ts for m in moved] == [end + 3100]
        assert moved[0].plan.run.duration_s == 3600 + 3100  # the soak keeps its start
        assert out.getvalue().endswith("soak: node b: the run's planned end moved to 6700 s into the soak "
                                       "(decided by node a)\n")
        # a node not at its end yet reads the moved end at its next look
        moved.clear()
        time.sleep(1.05)
        assert b.tick(run_b, [], restarts=0, chips=2, store_back_at=None) is None
        assert [m.planned_end_ts for m in moved] == [end + 3100]


@pytest.mark.pg
def test_burn_in_a_clean_run_ends_on_every_node_once_the_judge_decided(tmp_path, db_url) -> None:
    calls: list[str] = []
    with Store.open(db_url) as store:
        a, run_a, b, run_b, moved = _burn_in_pair(tmp_path, store, db_url, io.StringIO())
        store.add_event("r", "start", ts=run_a.planned_end_ts - 3590, workload="lm", rank=0, node="a")
        assert b.at_planned_end(run_b, _decide(calls, "b")) is None
        assert a.at_planned_end(run_a, _decide(calls, "a")) is False
        # its node leaves 'running' before its workload stops: the others read that the run ends
        assert {n.name: n.status for n in store.cluster_nodes("r")} == {"a": "finished", "b": "running"}
        time.sleep(1.05)
        assert b.at_planned_end(run_b, _decide(calls, "b")) is False
        assert calls == ["a"] and moved == [] and store.get_run("r").planned_end_ts == run_a.planned_end_ts


@pytest.mark.pg
def test_burn_in_the_judge_dead_at_the_planned_end_another_node_takes_the_lease_and_counts_the_loss(
        tmp_path, db_url) -> None:
    calls: list[str] = []
    with Store.open(db_url) as store:
        a, run_a, b, run_b, moved = _burn_in_pair(tmp_path, store, db_url, io.StringIO())
        end = time.time()  # b is at its planned end now: the loss below is stamped on the wall clock
        run_b = replace(run_b, planned_end_ts=end)
        store.update_run("r", planned_end_ts=end)
        store.add_event("r", "start", ts=end - 3590, workload="lm", rank=0, node="a")
        # a was SIGKILLed at the end, before it decided: silent, its lease running out
        store.update_node("r", "a", last_seen=store.store_now() - 120)
        store.update_run("r", lease_until=store.store_now() - 1)
        # b takes the lease, but decides only once its next tick marked a lost
        assert b.at_planned_end(run_b, _decide(calls, "b")) is None
        assert store.get_run("r").leader == "b" and calls == []
        time.sleep(1.05)
        assert b.tick(run_b, [], restarts=0, chips=2, store_back_at=None) is None
        [lost] = store.load_events("r", kind="node_lost")
        assert lost.node == "a"
        time.sleep(1.05)
        looked = time.time()
        assert b.at_planned_end(run_b, _decide(calls, "b")) is True
        # the loss is a failure: the clock starts again at this look (the job has not formed again)
        assert calls == ["b"] and store.get_run("r").planned_end_ts == pytest.approx(looked + 3600, abs=1)


@pytest.mark.pg
def test_burn_in_a_node_waits_for_the_decision_no_longer_than_its_bound(tmp_path, db_url, monkeypatch) -> None:
    out = io.StringIO()
    calls: list[str] = []
    monkeypatch.setattr(burnin, "decision_wait_s", lambda plan, evidence: 1.0)
    with Store.open(db_url) as store:
        a, run_a, b, run_b, moved = _burn_in_pair(tmp_path, store, db_url, out)
        assert b.at_planned_end(run_b, _decide(calls, "b")) is None
        time.sleep(1.05)  # a, the judge, never decides
        assert b.at_planned_end(run_b, _decide(calls, "b")) is False
        assert calls == [] and moved == []
        assert out.getvalue().endswith("soak: burn-in clock: no decision from node a within 1 s of this node's "
                                       "planned end; this node ends at its planned end\n")
