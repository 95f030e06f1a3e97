"""Every way a cluster run ends gives it a verdict: a run stopped on request is judged as
stopped (not held against the nodes that stopped with it), and ``soak cluster judge`` judges
a run no agent judged (all killed) from what the store holds, refused in one line while a
live agent holds the judging lease. The report re-judges such a run from the store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from soak.cli import main
from soak.judge import judge_run
from soak.store import Store
from tests.report.figures import pdf_text
from tests.report.synth import write_cluster_run

RUN = "c3"


def _running_run(store: Store, *, hours: float = 0.2) -> tuple[float, float]:
    """A three-node run whose agents were killed mid-run: still ``running`` in the store, its
    nodes' rows as they left them, node-00's lease expired. Returns its last reading's time
    and when its nodes were last seen."""
    synth = write_cluster_run(store, RUN, nodes=3, chips=2, hours=hours)
    store.update_run(RUN, status="running", verdict=None, ended_ts=None, leader="node-00",
                     lease_until=store.store_now() - 5)
    for n in store.cluster_nodes(RUN):
        store.update_node(RUN, n.name, status="running", ended_ts=None)
    return store.last_sample_ts(RUN), synth.end


def _judge(capsys, db: Path, *args: str) -> tuple[int, str, str]:
    try:
        rc = main(["cluster", "judge", RUN, "--db", f"sqlite:///{db}", *args])
    except SystemExit as exc:  # a refusal: one line, exit 2
        rc = int(exc.code)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_cluster_run_stopped_on_every_node_is_not_judged_unless_something_failed(tmp_path) -> None:
    with Store.open(tmp_path / "soak.db") as store:
        synth = write_cluster_run(store, RUN, nodes=3, chips=2, hours=0.2)
        mid = (synth.start + synth.end) / 2
        for n in store.cluster_nodes(RUN):
            store.update_node(RUN, n.name, status="stopped", ended_ts=mid)
        judged = judge_run(store, RUN, status="stopped", why="SIGTERM", ended=mid)
        nodes = next(c for c in judged.criteria if c["name"] == "nodes")
        assert nodes["met"] is None  # every node stopped with the run: not one stayed short of it
        assert judged.verdict is None
        assert "run stopped before its planned end (SIGTERM): not judged" in judged.reasons
        # a node lost before the stop still fails it, named
        store.update_node(RUN, "node-01", status="lost")
        judged = judge_run(store, RUN, status="stopped", why="SIGTERM", ended=mid)
        assert judged.verdict == "fail"
        assert "nodes: node node-01 (rank 1) lost" in judged.reasons


def test_cluster_judge_is_refused_in_one_line_while_a_live_agent_holds_the_lease(tmp_path, capsys) -> None:
    db = tmp_path / "soak.db"
    with Store.open(db) as store:
        _running_run(store)
        store.update_run(RUN, lease_until=store.store_now() + 30)
    rc, out, err = _judge(capsys, db)
    assert rc == 2 and out == ""
    [line] = err.strip().splitlines()
    assert re.search(r"run c3 is running and node node-00 holds its judging lease for (29|30) s more: its agent "
                     r"judges it \(--force judges it now\)$", line), line
    with Store.open(db) as store:
        run = store.get_run(RUN)
        assert (run.status, run.verdict, run.leader) == ("running", None, "node-00")


def test_cluster_judge_records_a_run_whose_agents_all_died(tmp_path, capsys) -> None:
    db = tmp_path / "soak.db"
    with Store.open(db) as store:
        last, seen = _running_run(store)
    out_file = tmp_path / "analysis.json"
    rc, out, err = _judge(capsys, db, "-o", str(out_file))
    assert rc == 1, err  # the verdict fails: its nodes were lost
    [line] = out.strip().splitlines()
    assert line.startswith("cluster run c3 failed (no agent finished it: node-00 lost, node-01 lost, node-02 lost), "
                           "verdict fail, ") and "; judged by soak cluster judge on " in line
    with Store.open(db) as store:
        run = store.get_run(RUN)
        assert (run.status, run.verdict, run.ended_ts, run.lease_until) == ("failed", "fail", last, None)
        assert run.leader.startswith("soak cluster judge on ")
        assert [(n.name, n.status) for n in store.cluster_nodes(RUN)] == [
            ("node-00", "lost"), ("node-01", "lost"), ("node-02", "lost")]
        lost = store.load_events(RUN, kind="node_lost")
        # stamped when each node was last seen, not when it was judged
        assert [(e.node, e.ts) for e in lost] == [("node-00", seen), ("node-01", seen), ("node-02", seen)]
        # the agents' last bucket summaries, written for them: the comparison covers the run
        assert {r[0] for r in store.load_buckets(RUN, "temp_c")} == {"node-00", "node-01", "node-02"}
        stored = {f.kind for f in store.load_findings(RUN)}
    analysis = json.loads(out_file.read_text())
    assert (analysis["status"], analysis["verdict"]) == ("failed", "fail")
    assert "run failed: no agent finished it: node-00 lost, node-01 lost, node-02 lost" in analysis["reasons"]
    assert {f["kind"] for f in analysis["findings"]} == stored
    # once judged, it is not judged again by mistake
    rc, out, err = _judge(capsys, db)
    assert rc == 2 and err.strip().endswith(
        "run c3 is failed, verdict fail, judged by " + run.leader + " (--force judges it again)")


def test_cluster_judge_as_json_and_again_with_force(tmp_path, capsys) -> None:
    db = tmp_path / "soak.db"
    with Store.open(db) as store:
        _running_run(store)
        # every agent stopped (SIGTERM), and the one that held the lease died before judging
        for n in store.cluster_nodes(RUN):
            store.update_node(RUN, n.name, status="stopped", ended_ts=n.last_seen)
            store.add_event(RUN, "stop", ts=n.last_seen, node=n.name, message="stopped (SIGTERM)",
                            detail={"reason": "SIGTERM"})
    rc, out, _ = _judge(capsys, db, "--format", "json")
    data = json.loads(out)
    assert rc == 0 and (data["status"], data["why"], data["verdict"]) == ("stopped", "SIGTERM", None)
    assert data["lost"] == [] and data["closed"] == []  # every agent ended its part itself
    assert "run stopped before its planned end (SIGTERM): not judged" in data["analysis"]["reasons"]
    rc, out, _ = _judge(capsys, db, "--force", "--format", "json")
    assert rc == 0 and json.loads(out)["status"] == "stopped"


def test_cluster_judge_needs_a_cluster_run(tmp_path, capsys) -> None:
    db = tmp_path / "soak.db"
    with Store.open(db) as store:
        store.create_run(RUN, host="h", plan={}, started_ts=1.0)
    rc, _, err = _judge(capsys, db)
    assert rc == 2 and "run c3 is not a cluster run (soak analyze c3 judges a run on one host)" in err
    rc, _, err = _judge(capsys, db, "-o", str(tmp_path / "no" / "such" / "a.json"))
    assert rc == 2 and f"-o {tmp_path}/no/such/a.json: no folder {tmp_path}/no/such" in err


@pytest.mark.slow
def test_the_report_rejudges_a_run_judged_by_cluster_judge_from_the_store(tmp_path, capsys) -> None:
    db = tmp_path / "soak.db"
    with Store.open(db) as store:
        _running_run(store)
    assert _judge(capsys, db)[0] == 1
    from soak.report.loader import load_report_data

    with Store.open(db, create=False) as store:
        data = load_report_data(store, RUN, with_series=False)
    assert (data.run.status, data.verdict) == ("failed", "fail")
    nodes = next(c for c in data.criteria if c.name == "nodes")
    assert nodes.met is False
    pdf = tmp_path / "c3.pdf"
    assert main(["report", "pdf", RUN, "--db", f"sqlite:///{db}", "-o", str(pdf), "--unsigned"]) == 0
    text = pdf_text(pdf)
    assert "node node-00 (rank 0) lost" in text, text[:3000]
