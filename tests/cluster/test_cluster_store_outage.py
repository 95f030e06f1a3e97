"""Three real `soak run` agents of one cluster run whose shared PostgreSQL store goes away
mid-run and comes back: every node keeps training and sampling, spools what it cannot write,
writes it once the store answers, no node is taken for lost (even when the store was away
longer than ``cluster.node_silence``), and when every agent is then sent SIGTERM the run ends
stopped, judged once by the node holding the lease (this run is the one that proves it).

A relay between the agents and the server stands in for the server's restart (the shared
test server is never restarted): stopping it drops every connection and refuses new ones."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from soak.errors import StoreError
from soak.store import Store
from tests import procs
from tests.cluster.agents import Agent, judge_training, stop_all, wait_for
from tests.relay import Relay

pytestmark = [pytest.mark.slow, pytest.mark.pg, pytest.mark.xdist_group("cluster-a")]  # tests/conftest.py
NODES = ("node-0", "node-1", "node-2")


def _steps_by_rank(db_url: str) -> dict[int, list[float]]:
    try:
        with Store.open(db_url, create=False) as store:
            rows = store.load_steps("c1")
    except StoreError:
        return {}
    out: dict[int, list[float]] = {}
    for s in rows:
        out.setdefault(s["rank"], []).append(s["ts"])
    return out


def _stored_since(db_url: str, since: float) -> set[str]:
    """The nodes with a chip reading stamped after ``since`` in the store."""
    with Store.open(db_url, create=False) as s:
        return {n for n in NODES if any(r["ts"] > since for r in s.load_samples("c1", device="npu0-0", node=n))}


def _ride_out(tmp_path: Path, db_url: str, relay: Relay, outage_s: float, *extra: str) -> dict:
    """Three agents through the relay (``extra``: more `soak run` arguments); the store away
    ``outage_s`` once all three train and one holds the judging lease; once every node's
    spool is written and each has stored readings taken after the store came back, every
    agent is sent SIGTERM (the run lasts what the outage needs, however long the start took).
    What the store holds at the end, and the times measured."""
    port = procs.free_port()
    started = time.monotonic()
    agents = [Agent(tmp_path, relay.url(db_url), r, 3, port, *extra, duration="20m") for r in range(3)]
    try:
        wait_for(lambda: len(_steps_by_rank(db_url)) == 3 and judge_training(db_url, 3), 240,
                 "all three nodes stepping and one holding the judging lease", agents)
        training_s = time.monotonic() - started
        relay.stop()
        down = time.monotonic()
        down_wall = time.time()
        # every agent lives through it (one that exits fails the wait with its output)
        wait_for(lambda: time.monotonic() - down >= outage_s, outage_s + 10, "the outage's end", agents)
        relay.start()
        back = time.monotonic()
        back_wall = time.time()

        def replayed() -> bool:
            with Store.open(db_url, create=False) as s:
                return {e.node for e in s.load_events("c1", kind="store_outage")} == set(NODES)

        wait_for(replayed, 60, "a store_outage event from every node", agents)
        replayed_s = time.monotonic() - back
        wait_for(lambda: _stored_since(db_url, back_wall) == set(NODES), 60,
                 "every node storing readings taken since the store came back", agents)
    except BaseException:
        for a in agents:
            a.kill()
        raise
    codes = stop_all(agents)
    with Store.open(db_url, create=False) as s:
        held = {
            "run": s.get_run("c1"),
            "nodes": s.cluster_nodes("c1"),
            "outages": s.load_events("c1", kind="store_outage"),
            "lost": s.load_events("c1", kind="node_lost"),
            "restarts": s.load_events("c1", kind="cluster_restart"),
            "stops": s.load_events("c1", kind="stop"),
            "steps": _steps_by_rank(db_url),
            "samples": {f"{n}/npu{i}-0": [r["ts"] for r in s.load_samples("c1", device=f"npu{i}-0", node=n)]
                        for n in NODES for i in range(2)},
        }
    # what each node's sampler took (its daemon.log, once it stopped) against what the store holds
    taken = {a.name: a.readings_taken() for a in agents}
    judges = [a.name for a in agents if f"soak: node {a.name} judges cluster run c1" in a.text()]
    print(f"\nall three trained {training_s:.1f} s after their start; "
          f"store away {back - down:.1f} s; every node's spool written {replayed_s:.1f} s after it came back; "
          f"judged by {judges}; exit codes {codes}")
    for e in held["outages"]:
        print(f"  {e.node}: {e.message} {e.detail}")
    for device, ts in held["samples"].items():
        gaps = [b - a for a, b in zip(ts, ts[1:], strict=False)]
        print(f"  {device}: {len(ts)} readings stored of {taken[device.split('/')[0]]} taken; "
              f"widest gap {max(gaps):.1f} s")
    return {**held, "taken": taken, "codes": codes, "judges": judges, "down_wall": down_wall, "back_wall": back_wall, "outage_s": outage_s,
            "agents": agents}


def _assert_stopped_by_sigterm(h: dict) -> None:
    """What scancel, kubectl delete or Ctrl-C of `soak cluster launch` do: every agent got
    SIGTERM mid-run. The one holding the judging lease waited for the others to mark their
    node stopped and judged the run as stopped, once; every agent exited."""
    run, agents = h["run"], h["agents"]
    # one node judges it, once. Nothing of the outage fails it (a verdict is given only when
    # something failed: the link test's pairs, timed on two shared cores, can)
    assert (run.status, run.lease_until) == ("stopped", None) and run.ended_ts is not None, run
    assert run.verdict in (None, "fail"), run
    assert len(h["judges"]) == 1 and h["judges"] == [run.leader], h["judges"]
    codes = dict(zip(NODES, h["codes"], strict=True))
    assert codes.pop(run.leader) == (1 if run.verdict == "fail" else 0) and set(codes.values()) == {0}, (
        h["codes"], [a.text()[-2000:] for a in agents])
    assert [(n.name, n.status) for n in h["nodes"]] == [(n, "stopped") for n in NODES]
    assert {e.node for e in h["stops"]} == set(NODES)
    # the judge says so; the others name it and keep no analysis of their own
    judge = next(a for a in agents if a.name == run.leader)
    for a in agents:
        if a is not judge:
            assert "judges cluster run c1" not in a.text().replace(f"node {judge.name} judges", ""), a.text()[-1500:]
            assert f"soak: node {a.name} stopped; node {judge.name} judge" in a.text(), a.text()[-1500:]
            assert not (a.dir / "c1" / "report" / "analysis.json").exists()
    # the verdict of a run stopped on request, with its analysis in the judge's run folder,
    # where the run row points the report
    analysis = json.loads((judge.dir / "c1" / "report" / "analysis.json").read_text())
    assert (analysis["status"], analysis["verdict"]) == ("stopped", run.verdict)
    assert run.run_dir == str(judge.dir / "c1")
    if run.verdict is None:
        assert "run stopped before its planned end (SIGTERM): not judged" in analysis["reasons"], analysis["reasons"]
    assert f"run c1 stopped, verdict {run.verdict or 'N/A'}" in judge.text()


def _assert_rode_out(h: dict) -> None:
    _assert_stopped_by_sigterm(h)
    # nobody was taken for lost and the job was never restarted for it
    assert h["lost"] == [] and h["restarts"] == [], (h["lost"], h["restarts"])
    # one outage a node, its node named, lasting about as long as the store was away, and
    # every record it spooled written
    assert sorted(e.node for e in h["outages"]) == list(NODES)
    for e in h["outages"]:
        d = e.detail
        assert d["node"] == e.node and d["records"] > 0 and d["replayed"] == d["records"], d
        assert h["outage_s"] - 8 <= d["wall_s"] <= h["outage_s"] + 8, d
    # no reading lost: every tick each node's sampler took is stored, for each of its chips
    for device, ts in h["samples"].items():
        assert len(set(ts)) == h["taken"][device.split("/")[0]], (device, len(set(ts)), h["taken"])
    # training went on through the outage on every rank: step rows (one a 10 s window) stamped
    # while the store was away reached the store from the spools
    for rank, ts in h["steps"].items():
        assert any(h["down_wall"] <= t <= h["back_wall"] for t in ts), (rank, "no step stored from the outage")


def test_three_agents_ride_out_a_store_away_longer_than_node_silence(tmp_path: Path, db_url: str,
                                                                    relay: Relay) -> None:
    # node_silence 20 s (default 60 s) and the store away 35 s: every node, and the judging
    # lease (its term is node_silence), is silent 15 s past the bound, as with the default and
    # 75 s. A store away for less than node_silence (a quick restart) asks the same of every
    # part (spool, replay, no loss, one judge) and less of the lease: it has no test of its own.
    plan = tmp_path / "plan.toml"
    plan.write_text('[cluster]\nnode_silence = "20s"\n', encoding="utf-8")
    _assert_rode_out(_ride_out(tmp_path, db_url, relay, 35.0, str(plan)))
