"""``soak cluster status``: every finding of a node is counted, however it was stored."""

from __future__ import annotations

import json
import subprocess
import sys

from soak.cluster.status import cluster_status
from soak.store import Store
from tests.report.synth import write_cluster_run


def _finding(kind: str, device: str | None, **extra: object) -> dict:
    return {"kind": kind, "device": device, "metric": "util_pct", "start": 1.0, "end": 2.0, "severity": "warn",
            "summary": kind, **extra}


def test_findings_stored_by_node_agents_with_plain_or_no_device_count_for_their_node(tmp_path):
    db = tmp_path / "soak.db"
    with Store.open(db) as store:
        write_cluster_run(store, "c1", nodes=3, chips=2, hours=0.1)
        # what the node agents leave: their own chips' findings on plain device keys
        store.replace_findings("c1", [_finding("utilization_dropouts", "npu0-0"), _finding("thermal", "npu0-1")],
                               node="node-01", kinds=("utilization_dropouts", "thermal"))
        # the leader's peer comparison: a straggling node (no device), and a chip of another node
        store.replace_findings("c1", [_finding("straggler", None, node="node-02"),
                                      _finding("outlier", "npu0-1", node="node-00")], kinds=("straggler", "outlier"))
        data = cluster_status(store, "c1")
        # the agents' rows: node in its own column, the device as named on the node
        assert {(f.node, f.device) for f in store.load_findings("c1") if f.kind == "thermal"} == {("node-01", "npu0-1")}
    assert {n["name"]: n["findings"] for n in data["nodes"]} == {"node-00": 1, "node-01": 2, "node-02": 1}
    out = subprocess.run([sys.executable, "-m", "soak", "cluster", "status", "c1", "--db", f"sqlite:///{db}",
                          "--format", "json"], capture_output=True, text=True, timeout=120, check=True)
    assert [n["findings"] for n in json.loads(out.stdout)["nodes"]] == [1, 2, 1]


def test_the_status_names_who_judges_the_run_and_the_lease_left(tmp_path):
    db = tmp_path / "soak.db"
    with Store.open(db) as store:
        write_cluster_run(store, "c1", nodes=2, chips=1, hours=0.05)
        judged = cluster_status(store, "c1")
        store.update_run("c1", status="running", verdict=None, leader="node-01", lease_until=store.store_now() + 40)
        running = cluster_status(store, "c1")
    assert (judged["leader"], judged["lease_left_s"]) == ("node-00", None)  # released with the verdict
    assert running["leader"] == "node-01" and 38 < running["lease_left_s"] <= 40
    out = subprocess.run([sys.executable, "-m", "soak", "cluster", "status", "c1", "--db", f"sqlite:///{db}"],
                         capture_output=True, text=True, timeout=120, check=True)
    first = out.stdout.splitlines()[0]
    assert first.startswith("cluster run c1: running, verdict N/A, 2 of 2 nodes, job generation 0, judge node-01 "
                            "(lease ") and first.endswith(" s left)"), first
