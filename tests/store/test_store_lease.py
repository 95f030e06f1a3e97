"""The judging lease of a cluster run, on every backend: one holder at a time by compare and
set on the store's clock, renewed by its holder, taken over once expired; the run's end and
verdict written by the holder alone, and once. The store's clock is set by the test
(``Store.clock``), so a lease expires without waiting."""

from __future__ import annotations

import time

import pytest

from soak.cluster.member import ClusterMember
from soak.config import plan_from_dict
from soak.store import Store

T0 = 1_790_000_000.0


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock(store: Store) -> Clock:
    c = Clock(T0)
    store.clock = c
    return c


def _plan(nodes: int = 3):
    return plan_from_dict({"run": {"db": "postgresql+psycopg://soak@db.example/soak", "id": "c1"},
                           "cluster": {"nodes": nodes, "rendezvous": "127.0.0.1:29400", "node_silence": "60s"}})


def _cluster_run(store: Store, nodes: int = 3) -> list[ClusterMember]:
    plan = _plan(nodes)
    members = [ClusterMember(plan, store, "c1", f"node-{r}", r, wall=lambda: T0) for r in range(nodes)]
    for m in members:
        store.join_cluster("c1", node=m.node, rank=m.rank, nodes=nodes, plan_digest=plan.digest(), joined_ts=T0,
                           run=dict(host="h", plan=plan.to_dict(), started_ts=T0, planned_end_ts=T0 + 3600,
                                    workload="lm", backend="sim", time_scale=1.0, run_dir="/tmp/none"), host=m.node)
    return members


def _lease(store: Store) -> tuple:
    run = store.get_run("c1")
    return run.leader, run.lease_until


def test_one_holder_at_a_time_renewed_by_it_and_taken_over_once_expired(store: Store, clock: Clock) -> None:
    _cluster_run(store)
    assert store.take_lease("c1", "node-0", 60.0)
    assert _lease(store) == ("node-0", T0 + 60)
    # a second holder is refused while the lease runs, and changes nothing
    clock.t = T0 + 59
    assert not store.take_lease("c1", "node-1", 60.0)
    assert _lease(store) == ("node-0", T0 + 60)
    assert store.take_lease("c1", "node-0", 60.0)  # renewed: a new term from now
    assert _lease(store) == ("node-0", T0 + 119)
    clock.t = T0 + 119
    assert not store.take_lease("c1", "node-1", 60.0)  # its last instant still holds
    clock.t = T0 + 119.5
    assert store.take_lease("c1", "node-1", 60.0)  # expired: taken over
    assert _lease(store) == ("node-1", T0 + 179.5)
    assert not store.take_lease("c1", "node-0", 60.0)  # the old holder cannot renew a lease taken


def test_an_expired_lease_no_other_took_is_still_its_holders(store: Store, clock: Clock) -> None:
    """A holder whose store was away for longer than the term keeps its lease if no other
    node took it meanwhile (the others were cut off alike)."""
    _cluster_run(store)
    assert store.take_lease("c1", "node-0", 60.0)
    clock.t = T0 + 300
    assert store.take_lease("c1", "node-0", 60.0)
    assert _lease(store) == ("node-0", T0 + 360)


def test_the_verdict_is_written_by_the_lease_holder_alone_and_once(store: Store, clock: Clock) -> None:
    _cluster_run(store)
    assert store.take_lease("c1", "node-0", 60.0)
    # a node that does not hold the lease is refused, and nothing of its verdict is written
    assert not store.finish_cluster_run("c1", "node-1", status="stopped", ended_ts=T0 + 10, verdict="pass")
    # nor does the unguarded end of a run on one host write a cluster run's
    assert not store.finish_run("c1", status="finished", ended_ts=T0 + 10, verdict="pass")
    run = store.get_run("c1")
    assert (run.status, run.verdict, run.ended_ts) == ("running", None, None)
    assert store.finish_cluster_run("c1", "node-0", status="stopped", ended_ts=T0 + 20, verdict="fail",
                                    run_dir="/data/node-0/c1")
    run = store.get_run("c1")
    assert (run.status, run.verdict, run.ended_ts, run.run_dir) == ("stopped", "fail", T0 + 20, "/data/node-0/c1")
    # the write released the lease and names who judged
    assert (run.leader, run.lease_until) == ("node-0", None)
    # once: a second verdict is refused, even from the holder, and no node takes the lease of
    # a run that ended, however long after
    assert not store.finish_cluster_run("c1", "node-0", status="finished", ended_ts=T0 + 30, verdict="pass")
    clock.t = T0 + 10_000
    assert not store.take_lease("c1", "node-1", 60.0)
    assert not store.finish_cluster_run("c1", "node-1", status="finished", ended_ts=T0 + 30, verdict="pass")
    run = store.get_run("c1")
    assert (run.status, run.verdict, run.leader) == ("stopped", "fail", "node-0")
    # the same write again (a commit whose answer was lost, tried again) finds itself there
    assert store.finish_cluster_run("c1", "node-0", status="stopped", ended_ts=T0 + 20, verdict="fail")


def test_force_takes_the_lease_from_a_live_holder_whose_verdict_is_then_refused(store: Store, clock: Clock) -> None:
    _cluster_run(store)
    assert store.take_lease("c1", "node-0", 60.0)
    assert store.take_lease("c1", "soak cluster judge on ops", 60.0, force=True)
    assert not store.finish_cluster_run("c1", "node-0", status="finished", ended_ts=T0 + 5, verdict="pass")
    assert store.finish_cluster_run("c1", "soak cluster judge on ops", status="failed", ended_ts=T0 + 5,
                                    verdict="fail")
    assert store.get_run("c1").leader == "soak cluster judge on ops"


def test_a_run_on_one_host_is_finished_as_before(store: Store) -> None:
    store.create_run("single", host="h", plan={}, started_ts=T0)
    assert store.finish_run("single", status="finished", ended_ts=T0 + 5, verdict="pass")
    assert store.get_run("single").verdict == "pass"


def test_the_lowest_live_rank_takes_the_lease_and_the_next_takes_over_when_it_goes_silent(
        store: Store, clock: Clock) -> None:
    members = _cluster_run(store)
    for m in members:
        m.touch(force=True)
    # every node looks each second; only rank 0 takes the free lease, whatever the order
    assert [m.leader() for m in reversed(members)] == [False, False, True]
    assert [m.leader() for m in members] == [True, False, False]
    # rank 0 goes silent: past node_silence, its lease has expired too, and rank 1 takes over
    clock.t = T0 + 61
    members[1].touch(force=True)
    members[2].touch(force=True)
    assert [m.leader() for m in members[1:]] == [True, False]
    assert store.get_run("c1").leader == "node-1"
    # rank 0 back (its store was away): it is the lowest rank again, but the lease is node-1's
    members[0].touch(force=True)
    assert not members[0].leader() and members[1].leader()


def test_while_the_lease_is_held_the_other_nodes_look_reads_the_holders_row_alone(
        store: Store, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every node looks each second: the others' look reads the run row and the holder's node,
    never every node's row (at 1,024 nodes, a million rows a second)."""
    members = _cluster_run(store)
    for m in members:
        m.touch(force=True, status="running")
    assert members[0].leader()
    reads: list[dict] = []
    real = store.cluster_nodes

    def counted(run_id: str, **kw: object) -> list:
        reads.append(kw)
        return real(run_id, **kw)

    monkeypatch.setattr(store, "cluster_nodes", counted)
    assert [m.leader() for m in members[1:]] == [False, False]
    assert [m.judge_ended(store.get_run("c1")) for m in members[1:]] == [None, None]
    assert reads == [{"name": "node-0"}, {"name": "node-0"}]
    # the holder silent past its term: the lease is open again and the lowest live rank looks
    clock.t = T0 + 61
    members[1].touch(force=True)
    members[2].touch(force=True)
    assert [m.leader() for m in members[1:]] == [True, False]


def test_at_the_end_a_free_or_expired_lease_goes_to_one_node_whatever_its_rank(store: Store, clock: Clock) -> None:
    """Every agent stopped before any took the lease: the first to end judges, the others
    say who does."""
    members = _cluster_run(store)
    for m in members:
        m.touch(force=True, status="stopped", ended_ts=T0 + 5)
    assert [m.lead_at_end() for m in (members[2], members[0], members[1])] == [True, False, False]
    assert store.get_run("c1").leader == "node-2"
    # the holder of a lease that expired is gone: the last node to end takes it
    clock.t = T0 + 61
    assert members[1].lead_at_end() and not members[2].leader()


def test_the_holders_node_stopping_ends_the_others_part(store: Store, clock: Clock) -> None:
    members = _cluster_run(store)
    for m in members:
        m.touch(force=True, status="running")
    assert members[0].leader()
    assert members[1].judge_ended(store.get_run("c1")) is None
    members[0].touch(force=True, status="stopped", ended_ts=T0 + 5)
    ended = members[1].judge_ended(store.get_run("c1"))
    assert ended is not None and (ended.name, ended.status) == ("node-0", "stopped")
    assert members[0].judge_ended(store.get_run("c1")) is None  # the holder follows nobody


def test_the_lease_runs_on_the_databases_clock(store: Store) -> None:
    _cluster_run(store)
    before = time.time()
    assert store.take_lease("c1", "node-0", 60.0)
    until = store.get_run("c1").lease_until
    assert before + 59.0 <= until <= time.time() + 61.0


def test_an_accelerated_runs_lost_node_is_stamped_on_its_time_line_and_away_from_its_last_reading(
        store: Store, clock: Clock) -> None:
    """A cluster run at 3600x (an hour a wall second): its samples and its workloads' events are
    on the run's time line, so its nodes' events are too. node-1 last seen 10 s in (the store's
    clock) and found lost 100 s in: the loss is stamped 100 h into the run, and node-1's time
    under test ends 10 h in (it was once stamped at the wall second, before the run began)."""
    from soak.judge import reliability_of_run

    plan = plan_from_dict({"run": {"db": "postgresql+psycopg://soak@db.example/soak", "id": "c1",
                                   "duration": "200h", "time_scale": 3600}, "devices": {"backend": "sim"},
                           "cluster": {"nodes": 2, "rendezvous": "127.0.0.1:29400", "node_silence": "60s"}})
    members = [ClusterMember(plan, store, "c1", f"node-{r}", r, wall=clock) for r in range(2)]
    values = dict(host="h", plan=plan.to_dict(), started_ts=T0, planned_end_ts=T0 + 200 * 3600, workload="lm",
                  backend="sim", time_scale=3600.0, run_dir="/tmp/none")
    for m in members:
        m.join(values, host=m.node, listen=None)
        m.touch(force=True, status="running")
    clock.t = T0 + 10
    members[1].touch(force=True)
    clock.t = T0 + 100
    members[0].touch(force=True)
    assert [n.name for n in members[0].find_lost()] == ["node-1"]
    [lost] = store.load_events("c1", kind="node_lost")
    assert lost.ts == T0 + 100 * 3600 and lost.detail["last_seen"] == T0 + 10 and lost.detail["silent_s"] == 90
    assert [(n.name, n.status, n.ended_ts) for n in store.cluster_nodes("c1")][1] == ("node-1", "lost",
                                                                                      T0 + 100 * 3600)
    rel = reliability_of_run(store, "c1", now=T0 + 150 * 3600)
    hours = {n["node"]: n["node_hours"] for n in rel.per_node}
    assert hours == {"node-0": pytest.approx(150.0), "node-1": pytest.approx(10.0)}, hours
