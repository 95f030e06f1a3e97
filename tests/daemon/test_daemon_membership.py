"""The agent's part in its run, without a daemon: a single node owns and judges its run; a
node of a cluster run restarts an attempt of an older job generation, stops when the run
ended elsewhere, names a job failure once, and leaves the judgement to the leader."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest

from soak.config import Plan, plan_from_dict
from soak.daemon.cluster import ClusterMembership
from soak.daemon.membership import SingleNode
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
    assert single.workload_failed(run, "crash", "lm exited 1", "lm", 0) == ("crash", "lm exited 1")
    assert single.tick(run, [], restarts=0, chips=1, store_back_at=None) is None
    assert single.ended(run, status="finished", ended_ts=run.clock.now(), restarts=3, fatal=None) is True
    assert store.get_run("r").restarts == 3
    store.close()


def _plan(tmp_path: Path, url: str, name: str, rank: int) -> Plan:
    return plan_from_dict({"run": {"duration": "1h", "data_dir": str(tmp_path), "db": url, "id": "r"},
                           "cluster": {"nodes": 2, "node_name": name, "node_rank": rank,
                                       "rendezvous": "127.0.0.1:29500"}})


def _join(tmp_path: Path, store: Store, url: str, name: str, rank: int, out: io.StringIO):
    plan = _plan(tmp_path, url, name, rank)
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
        assert a.workload_failed(run_a, "crash", "lm exited 1", "lm", 0) == ("crash", "lm exited 1")
        assert b.workload_failed(run_b, "crash", "lm exited 1", "lm", 1) == (
            "note", "lm exited 1 (the cluster job had failed on another node)")
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
