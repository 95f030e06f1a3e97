"""Every way a cluster run ends gives it a verdict: a run stopped on request is judged as
stopped, not held against the nodes that stopped with it."""

from __future__ import annotations

from soak.judge import judge_run
from soak.store import Store
from tests.report.synth import write_cluster_run

RUN = "c3"


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
