"""A real cluster soak on this machine: several `soak run` agents, each with its own simulated
fleet, data folder and node name, sharing one PostgreSQL store and a torchrun c10d rendezvous
on loopback, with gloo collectives crossing the "nodes". And its failures: a node SIGKILLed,
rank 0 (the rendezvous host) SIGKILLed, a node with another driver, a node that never joins.
The three-node run that Prometheus, the link test and the straggler's verdict read together is in
test_cluster_three_nodes.py; every agent sent SIGTERM, in test_cluster_store_outage.py (its run
ends so)."""

from __future__ import annotations

import json
import shutil
import socket
import sys
import time

import pytest

from soak.errors import StoreError
from soak.store import Store
from tests import procs
from tests.cluster.agents import (
    Agent,
    events,
    exit_times,
    first_step,
    judge_training,
    kill_all,
    node_records,
    ranks_stepping,
    stop_all,
    wait_all,
    wait_for,
)
from tests.conftest import IN_CI

pytestmark = [pytest.mark.slow, pytest.mark.pg]
# The cluster lanes of make test (tests/conftest.py) these tests run in: each names its own, as
# xdist makes a test marked with two groups a third group of its own.
LANE_A = pytest.mark.xdist_group("cluster-a")
LANE_B = pytest.mark.xdist_group("cluster-b")


@LANE_B
def test_a_node_sigkilled_mid_run_is_lost_within_the_bound_named_and_can_come_back(tmp_path, db_url) -> None:
    """node-1's agent SIGKILLed with its workers: the leader finds it lost at its first look
    past node_silence; node-1's agent resumed, it rejoins and the job forms again with it.
    Both agents are then stopped (SIGTERM): the verdict fails on the loss, which came back."""
    port = procs.free_port()
    # node_silence: above a node's silences under the parallel tests' load (its own analysis,
    # a slow store call); the hang timeout above a start of torch and the job under that load
    plan = tmp_path / "plan.toml"
    plan.write_text('[cluster]\nnode_silence = "12s"\njoin_timeout = "2m"\n', encoding="utf-8")
    agents = [Agent(tmp_path, db_url, r, 2, port, "--max-restarts", "5", "--hang-timeout", "60s", str(plan),
                    duration="20m") for r in range(2)]
    leader, victim = agents
    back: Agent | None = None
    try:
        wait_for(lambda: ranks_stepping(db_url) == 2, 240, "both nodes stepping", agents)
        with Store.open(db_url, create=False) as store:
            before = store.count_samples("c1")
        killed_at = time.time()
        victim.kill()  # the agent and its workers
        [found] = wait_for(lambda: events(db_url, "node_lost"), 90, "the leader to find node-1 lost", [leader])
        # the node comes back: its agent resumes the run and the job forms again with it
        back = Agent.resumed(victim, db_url)
        wait_for(lambda: first_step(victim.run_dir, found.ts, 2), 240, "node-1 stepping again in the job of two",
                 [leader, back])
        rc, back_rc = stop_all([leader, back])
        back_out = back.text()
    finally:
        kill_all([*agents, *([back] if back else [])])
    with Store.open(db_url, create=False) as store:
        lost = store.load_events("c1", kind="node_lost")
        nodes = {n.name: n for n in store.cluster_nodes("c1")}
        after = store.count_samples("c1")
        run = store.get_run("c1")
        restarts = [e.message for e in store.load_events("c1", kind="cluster_restart")]
        gaps = store.load_events("c1", kind="gap")
    assert [e.node for e in lost] == ["node-1"] and "node-1" in lost[0].message, [e.message for e in lost]
    # found at the leader's first look past the bound, on the store's clock: not before it, and
    # not long after (the leader looks every half second; 10 s leaves room for a loaded machine)
    d = lost[0].detail
    assert d["bound_s"] == 12 and 12 <= d["silent_s"] <= 12 + 10, d
    assert d["last_seen"] <= killed_at + 1 < lost[0].ts, (d, killed_at)  # seen until the kill
    assert nodes["node-1"].status == "stopped"  # it came back and stayed until the stop
    assert after >= before  # nothing committed before the kill is lost
    assert (run.status, run.verdict) == ("stopped", "fail"), run
    judge = {"node-0": rc, "node-1": back_rc}
    assert judge.pop(run.leader) == 1 and list(judge.values()) == [0], (run.leader, rc, back_rc, back_out[-1500:])
    assert "rejoined cluster run c1" in back_out
    assert any("node-1 is back" in m for m in restarts), restarts
    assert gaps and gaps[0].node == "node-1"
    analysis = json.loads((tmp_path / run.leader / "c1" / "report" / "analysis.json").read_text())
    assert any("node node-1 (rank 1) lost (came back later)" in r for r in analysis["reasons"]), analysis["reasons"]


@LANE_A
def test_a_node_with_another_driver_fails_the_cluster_preflight_naming_it(tmp_path, db_url) -> None:
    port = procs.free_port()
    other = tmp_path / "other-driver.toml"
    other.write_text('[sim]\ndriver_version = "24.1.rc9"\n', encoding="utf-8")
    a0 = Agent(tmp_path, db_url, 0, 2, port, duration="30s")
    a1 = Agent(tmp_path, db_url, 1, 2, port, str(other), duration="30s")
    codes = [a0.wait(), a1.wait()]
    assert codes == [2, 2], [a0.text()[-800:], a1.text()[-800:]]
    for a in (a0, a1):
        line = [x for x in a.text().splitlines() if "version lock" in x]
        assert line and "node-1: 24.1.rc9" in line[0] and "node-0:" in line[0], a.text()[-800:]
    with Store.open(db_url, create=False) as store:
        run = store.get_run("c1")
        assert (run.status, run.verdict) == ("failed", "fail")
        assert not store.load_steps("c1")  # no training started


@LANE_A
def test_a_node_that_never_joins_is_one_line_after_the_join_timeout(tmp_path, db_url) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text('[cluster]\njoin_timeout = "6s"\n', encoding="utf-8")
    alone = Agent(tmp_path, db_url, 0, 2, procs.free_port(), str(plan), duration="30s")
    assert alone.wait(120) == 2
    last = alone.text().strip().splitlines()[-1]
    assert last.startswith("soak: error:") and "only 1 of 2 nodes joined within 6 s" in last
    assert "missing rank 1" in last


@LANE_B
def test_refused_joins_name_their_reason_and_leave_nothing_that_refuses_the_corrected_command(tmp_path, db_url) -> None:
    """A node given a store that does not answer, another node count or another plan is
    refused in one line, before it writes its plan.toml or anything of the run's in the
    store; the corrected command, same run id and folder, joins and the run ends."""
    port = procs.free_port()
    a0 = Agent(tmp_path, db_url, 0, 2, port, duration="4s")
    procs.wait_until(lambda: any(n.name == "node-0" for n in node_records(db_url)), a0.proc, 60, what="node-0 to join",
                     retry_on=(StoreError,), logs=[a0.daemon_log])
    folder = tmp_path / "node-1" / "c1"
    wrong = [
        ((db_url.rsplit("/", 1)[0] + "/no_such_db", 2), "store postgresql"),
        ((db_url, 3), "node node-1: --nodes 3, but cluster run c1 has 2 nodes"),
        ((db_url, 2, "--max-restarts", "9"), "node node-1: its plan differs from cluster run c1's"),
    ]
    if shutil.which("faketime"):  # a node whose clock is 100 s ahead of the store's (libfaketime)
        wrong.append(((db_url, 2, "--wrap", "faketime", "-f", "+100s"), "node node-1: its clock is +100."))
    elif IN_CI:
        pytest.fail("faketime is not installed, and CI must try the skewed-clock join")
    for (db, nodes, *extra), said in wrong:
        wrap = tuple(extra[extra.index("--wrap") + 1:]) if "--wrap" in extra else ()
        extra = extra[:extra.index("--wrap")] if "--wrap" in extra else extra
        refused = Agent(tmp_path, db, 1, nodes, port, *extra, duration="4s", wrap=wrap)
        assert refused.wait(120) == 2, refused.text()[-1500:]
        last = refused.text().strip().splitlines()[-1]
        assert last.startswith("soak: error:") and said in last, refused.text()[-1500:]
        assert folder.is_dir() and not (folder / "plan.toml").exists()
        assert [n.name for n in node_records(db_url)] == ["node-0"]
    a1 = Agent(tmp_path, db_url, 1, 2, port, duration="4s")
    codes = wait_all([a0, a1])
    # the leader judges: 4 s may end before torchrun trained a step, which fails the run (1)
    assert codes[1] == 0 and codes[0] in (0, 1), [a.text()[-1500:] for a in (a0, a1)]
    assert "run c1 finished, verdict" in a0.text()
    assert "joined cluster run c1" in a1.text() and (folder / "plan.toml").is_file()
    assert [(n.name, n.status) for n in node_records(db_url)] == [("node-0", "finished"), ("node-1", "finished")]
    # the refusals are in the node's log, kept in the folder the corrected run took again
    log = (folder / "logs" / "daemon.log").read_text(encoding="utf-8")
    assert "--nodes 3, but cluster run c1 has 2 nodes" in log and "plan differs" in log


@LANE_A
def test_cluster_judge_records_a_run_whose_agents_were_all_sigkilled(tmp_path, db_url) -> None:
    port = procs.free_port()
    plan = tmp_path / "plan.toml"
    plan.write_text('[cluster]\nnode_silence = "4s"\njoin_timeout = "2m"\n', encoding="utf-8")
    agents = [Agent(tmp_path, db_url, r, 2, port, str(plan), duration="10m") for r in range(2)]
    try:
        wait_for(lambda: judge_training(db_url, 2), 240, "both nodes training and one holding the judging lease",
                  agents)
        for a in agents:
            a.kill()  # the agent and its workers: nobody is left to judge the run
    finally:
        for a in agents:
            if a.proc.poll() is None:
                a.kill()

    def lease_expired() -> bool:
        with Store.open(db_url, create=False) as store:
            return store.store_now() > store.get_run("c1").lease_until + 0.5
    procs.wait_until(lease_expired, timeout_s=30, what="the judging lease to expire")
    t0 = time.monotonic()
    judged = procs.run([sys.executable, "-m", "soak", "cluster", "judge", "c1", "--db", db_url], tmp_path,
                       "cluster-judge", timeout_s=120)
    print(f"\nsoak cluster judge took {time.monotonic() - t0:.1f} s")
    assert judged.returncode == 1, judged.stdout + judged.stderr  # the verdict fails: both nodes lost
    [line] = judged.stdout.strip().splitlines()
    assert line.startswith("cluster run c1 failed (no agent finished it: node-0 lost, node-1 lost), verdict fail, "), line
    assert f"; judged by soak cluster judge on {socket.gethostname()}" in line
    with Store.open(db_url, create=False) as store:
        run = store.get_run("c1")
        nodes = store.cluster_nodes("c1")
        lost = store.load_events("c1", kind="node_lost")
    assert (run.status, run.verdict, run.lease_until) == ("failed", "fail", None)
    assert run.leader == f"soak cluster judge on {socket.gethostname()}"
    assert [(n.name, n.status) for n in nodes] == [("node-0", "lost"), ("node-1", "lost")]
    assert sorted(e.node for e in lost) == ["node-0", "node-1"]

@LANE_B
def test_on_node_lost_stop_ends_the_run_on_every_node_judged_once_naming_the_lost_node(tmp_path, db_url) -> None:
    """``on_node_lost = "stop"``: the lease holder finds the SIGKILLed node lost, stops and
    judges the run as stopped, failing it on that node; the other live node follows at its
    next look."""
    port = procs.free_port()
    plan = tmp_path / "plan.toml"
    # node_silence above a live node's silences under the parallel tests' load: stopping its
    # workload (stop_grace) and its own analysis at the end (a survivor taken for lost at 6 s)
    plan.write_text('[cluster]\nnode_silence = "15s"\njoin_timeout = "2m"\non_node_lost = "stop"\n'
                    '[restart]\nstop_grace = "3s"\n', encoding="utf-8")
    agents = [Agent(tmp_path, db_url, r, 3, port, str(plan), duration="10m") for r in range(3)]
    survivors = agents[:2]
    try:
        wait_for(lambda: ranks_stepping(db_url) == 3 and judge_training(db_url, 3), 240,
                 "all three nodes stepping and one holding the judging lease", agents)
        killed = time.time()
        agents[2].kill()
        exits = exit_times(survivors, 120)
    finally:
        for a in agents:
            if a.proc.poll() is None:
                a.kill()
    with Store.open(db_url, create=False) as store:
        run = store.get_run("c1")
        nodes = {n.name: n.status for n in store.cluster_nodes("c1")}
        (lost,) = store.load_events("c1", kind="node_lost")
        restarts = store.load_events("c1", kind="cluster_restart")
    judge = next(a for a in survivors if a.name == run.leader)
    other = next(a for a in survivors if a is not judge)
    print(f"\nnode-2 lost {lost.ts - killed:.1f} s after its SIGKILL (node_silence 15 s); the judge exited "
          f"{exits[survivors.index(judge)] - exits[survivors.index(other)]:+.1f} s after {other.name}")
    assert lost.node == "node-2" and "node-2" in lost.message, lost
    # found at the lease holder's first look past the bound (store clock; 10 s for a loaded machine)
    assert 15 <= lost.detail["silent_s"] <= 15 + 10 and lost.detail["last_seen"] <= killed + 1 < lost.ts, lost
    # stopped, not restarted without it (its rank's death failed the job before it was found lost:
    # that restart, a crash's, is torchrun's)
    assert [e.detail for e in restarts if "lost" in e.detail] == [], restarts
    assert (run.status, run.verdict, run.lease_until) == ("stopped", "fail", None), run
    assert nodes == {"node-0": "stopped", "node-1": "stopped", "node-2": "lost"}, nodes
    assert [a.proc.returncode for a in (judge, other)] == [1, 0]
    assert f"soak: node {judge.name} judges cluster run c1" in judge.text()
    assert "judges cluster run c1" in other.text() and f"node {other.name} judges" not in other.text()
    analysis = json.loads((judge.dir / "c1" / "report" / "analysis.json").read_text())
    assert (analysis["status"], analysis["verdict"]) == ("stopped", "fail")
    assert any("node node-2 (rank 2) lost" in r for r in analysis["reasons"]), analysis["reasons"]
