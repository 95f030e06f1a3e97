"""A cluster run keeps one clock: the store's. A node whose own clock is off is refused at
join naming its offset, and within the bound its clock never makes a healthy node look lost
nor makes it the leader (SQLite and PostgreSQL: the database's clock is the one used)."""

from __future__ import annotations

import time

import pytest

from soak.cluster.member import ClusterMember
from soak.config import plan_from_dict
from soak.errors import ClusterError
from soak.store import Store


def _plan(max_offset: str = "2s"):
    return plan_from_dict({"run": {"db": "postgresql+psycopg://soak@db.example/soak", "id": "c1"}, "cluster": {"nodes": 3, "rendezvous": "127.0.0.1:29400", "node_silence": "60s",
                                       "max_clock_offset": max_offset}})


def _member(store: Store, plan, rank: int, skew_s: float = 0.0) -> ClusterMember:
    return ClusterMember(plan, store, "c1", f"node-{rank}", rank, wall=lambda: time.time() + skew_s)


def _run_values(plan) -> dict:
    now = time.time()
    return dict(host="h", plan=plan.to_dict(), started_ts=now, planned_end_ts=now + 3600, workload="lm",
                backend="sim", time_scale=1.0, run_dir="/tmp/none")


def test_the_store_clock_is_the_databases_now(store: Store) -> None:
    before = time.time()
    now = store.store_now()
    assert before - 1.0 <= now <= time.time() + 1.0  # the database runs on this machine's clock


def test_a_node_whose_clock_is_off_is_refused_at_join_naming_it_and_its_offset(store: Store) -> None:
    plan = _plan()
    with pytest.raises(ClusterError) as err:
        _member(store, plan, 2, skew_s=100.0).join(_run_values(plan), host="h2", listen=None)
    assert "node node-2: its clock is +100" in str(err.value) and "cluster.max_clock_offset" in str(err.value)
    assert store.get_run("c1") is None and store.cluster_nodes("c1") == []  # nothing written
    # within the bound it joins, and says its offset
    _member(store, plan, 2, skew_s=0.5).join(_run_values(plan), host="h2", listen=None)
    (joined,) = [e for e in store.load_events("c1") if e.kind == "node_joined"]
    assert 0.3 < joined.detail["clock_offset_s"] < 0.7


def test_a_skewed_clock_neither_loses_healthy_nodes_nor_takes_the_lead(store: Store) -> None:
    """The measured fault: a node 100 s ahead made itself leader and marked both healthy nodes
    lost within a second. With liveness on the store's clock it cannot (the bound here is
    widened so the skewed node may join at all)."""
    plan = _plan(max_offset="10m")
    members = [_member(store, plan, r, skew_s=100.0 if r == 2 else 0.0) for r in range(3)]
    for m in members:
        m.join(_run_values(plan), host=m.node, listen=None)
        m.touch(force=True)
    ahead = members[2]
    assert ahead.find_lost() == [] and not ahead.leader()
    assert members[0].leader() and members[0].find_lost() == []
    # a node really silent past the bound (on the store's clock) is lost, and only it
    store.update_node("c1", "node-1", last_seen=store.store_now() - 61)
    assert [n.name for n in ahead.find_lost()] == ["node-1"]
    assert {n.name: n.status for n in store.cluster_nodes("c1")} == {"node-0": "joined", "node-1": "lost",
                                                                      "node-2": "joined"}
    # a node whose clock is behind does not see a live leader as gone either
    behind = _member(store, plan, 1, skew_s=-100.0)
    assert not behind.leader() and members[0].leader()


def test_a_drift_during_the_run_is_an_event_when_it_crosses_the_bound_and_when_it_is_back(store: Store) -> None:
    from soak.clock import ScaledClock
    from soak.daemon.cluster import ClusterMembership
    from soak.daemon.started import StartedRun

    plan = _plan()
    skew = {"s": 0.0}
    member = ClusterMember(plan, store, "c1", "node-1", 1, wall=lambda: time.time() + skew["s"])
    member.join(_run_values(plan), host="h1", listen=None)
    ms = ClusterMembership(member, out=None, step_window_s=1.0)  # type: ignore[arg-type]
    run = StartedRun("c1", None, plan, None, store, ScaledClock(), time.time(), time.time() + 60, 0, False)  # type: ignore[arg-type]
    assert abs(ms.check_clock(run)) < 0.5 and not store.load_events("c1", kind="clock_drift")
    skew["s"] = 5.0
    assert ms.check_clock(run) == pytest.approx(5.0, abs=0.5) and ms.clock_offset_s == pytest.approx(5.0, abs=0.5)
    ms.check_clock(run)  # still off: no second event
    skew["s"] = 0.0
    ms.check_clock(run)
    drift = store.load_events("c1", kind="clock_drift")
    assert [e.detail["off"] for e in drift] == [True, False] and all(e.node == "node-1" for e in drift)
    assert "drifted +5." in drift[0].message and "cluster.max_clock_offset" in drift[0].message
