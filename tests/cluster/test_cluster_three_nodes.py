"""One three-node cluster soak that several tests read: three `soak run` agents on loopback
sharing PostgreSQL and a torchrun c10d rendezvous, each serving its /metrics, scraped by Debian's
`prometheus` with soak's rules loaded while the run goes on.

node-1's link-test transfers take twice as long and rank 1 computes three times as long. While
it runs, operations' view is checked through Prometheus' HTTP API: the SoakNodeStraggler alert
(pending or firing) and the leader's `soak_finding_active` straggler finding for that rank's
node; `promtool check metrics` accepts a live scrape of each agent; every panel, variable,
annotation and rule of the dashboards returns series from this cluster (the cluster-only ones
included, which a single node cannot serve). Once it has ended: the records of every node, the
pairwise link test naming node-1, and the straggler named in the verdict, the signed PDF and the
app.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from soak import dashboards as d
from soak.store import Store
from tests import procs, prom_server
from tests.cluster.test_cluster_run import Agent, _free_port, _wait_all, _world_size
from tests.conftest import pg_database

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"
PROMTOOL = shutil.which("promtool")

pytestmark = [pytest.mark.slow, pytest.mark.pg]


@dataclass(frozen=True)
class LiveRun:
    """The three-node run while it goes on: its agents (each serving /metrics on its port in
    ``listen``) and, where Debian's `prometheus` is installed, the Prometheus scraping them
    (``prom``: its HTTP address, else None)."""

    tmp: Path
    db_url: str
    agents: list[Agent]
    listen: list[int]
    prom: str | None
    prom_proc: procs.Proc | None


@dataclass(frozen=True)
class ClusterRun:
    """The three-node run once every agent has ended: its folder (one sub-folder per node),
    its store, and each agent's exit status and output."""

    tmp: Path
    db_url: str
    codes: list[int]
    texts: list[str]


@pytest.fixture(scope="module")
def three_nodes_live(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[LiveRun]:
    """One three-node run for Prometheus, the link test, the straggler and the cluster's
    records, PDF and app: node-1's link-test transfers take twice as long (the pairwise link
    test must name it) and rank 1 computes three times as long (named by its compute time).
    Three chips a node: the chip rule compares a chip with its node's median of three or more.
    An accelerated 110 h (110 s of wall; start-up takes 15-40 s of it on a busy machine, and the
    link tests some of the rest): two-hour buckets of about two step rows each, a link test
    every 10 h of the run's time line (10 s of wall), the online analysis every 5 s of wall.
    Yielded while it runs: the Prometheus test looks at it then (its checks were done 63 s
    into the run on a quiet machine, 94 s at a load average of 8-10), and :func:`three_nodes`
    waits for its end."""
    tmp = tmp_path_factory.mktemp("three_nodes")
    port = _free_port()
    listen = [_free_port() for _ in range(3)]
    plan = tmp / "plan.toml"
    plan.write_text('[cluster]\nlink_test_every = "10h"\nlink_test_bytes = "4MiB"\n'
                    '[acceptance.thresholds]\n"peers.min_peers" = 2\n"peers.bucket_s" = 7200\n', encoding="utf-8")
    with pg_database(request) as db_url:
        prom_proc = None
        if prom_server.PROMETHEUS is not None:
            p_prom = _free_port()
            prom_proc = prom_server.start(tmp, p_prom, {"soak-cluster": listen})
        agents = [Agent(tmp, db_url, r, 3, port, str(plan), "--inject", "slow-link:1,0.5",
                        "--inject", "slow-rank:1,3", "--time-scale", "3600", "--sim-chips", "3",
                        "--listen", f"127.0.0.1:{listen[r]}", duration="110h") for r in range(3)]
        try:
            yield LiveRun(tmp, db_url, agents, listen, prom_proc and f"http://127.0.0.1:{p_prom}", prom_proc)
        finally:
            for a in agents:
                if a.proc.poll() is None:
                    a.kill()
            if prom_proc is not None:
                prom_proc.stop(grace_s=10)


@pytest.fixture(scope="module")
def three_nodes(three_nodes_live: LiveRun) -> ClusterRun:
    """The same run, once every agent has ended."""
    live = three_nodes_live
    codes = _wait_all(live.agents)
    return ClusterRun(live.tmp, live.db_url, codes, [a.text() for a in live.agents])


def _api(prom: str, path: str, **params: str) -> Any:
    url = f"{prom}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    with urllib.request.urlopen(url, timeout=5) as resp:
        answer = json.loads(resp.read())
    assert answer["status"] == "success", answer
    return answer["data"]


def _query(prom: str, expr: str) -> list[dict[str, Any]]:
    return _api(prom, "query", query=expr)["result"]


# alone: the straggler alert and finding need rank 1's threefold compute time to stand out of the
# other nodes' within the wait; other tests sharing the CPU would blur it.
#
# Defined first: it looks at the run while it goes on, the tests after it wait for its end.
@pytest.mark.alone
@pytest.mark.skipif(prom_server.PROMETHEUS is None or PROMTOOL is None,
                    reason="prometheus/promtool not installed (Debian package 'prometheus'; CI installs it)")
def test_prometheus_sees_the_straggler_alert_and_the_leaders_finding_for_the_slow_node(
        three_nodes_live: LiveRun) -> None:
    live = three_nodes_live
    prom, listen, agents = live.prom, live.listen, live.agents
    assert prom is not None and live.prom_proc is not None
    ended = [a.name for a in agents if a.proc.poll() is not None]
    assert not ended, f"the shared run has ended on {ended} before its Prometheus checks: run them first"
    watched = [live.prom_proc, *(a.proc for a in agents)]
    logs = [a.daemon_log for a in agents]

    def seen() -> str:
        try:
            held = _query(prom, 'count by (instance, __name__) ({job="soak-cluster"})')
            return f"Prometheus holds: {[(r['metric'], r['value'][1]) for r in held]}"
        except OSError as exc:
            return f"Prometheus not answering: {exc}"

    def wait(what: str, cond, timeout_s: float):  # noqa: ANN001, ANN202
        return procs.wait_until(cond, watched, timeout_s, what=what, logs=logs, retry_on=(OSError,),
                                interval_s=0.5, context=seen)

    # the rendezvous gives the global ranks in any order: the slow rank 1 is on some node
    (rank1,) = wait("rank 1's compute time in Prometheus",
                    lambda: _query(prom, 'soak_rank_compute_seconds{rank="1"}'), 90)
    slow = rank1["metric"]["node"]
    alert = wait(f"SoakNodeStraggler for {slow}", lambda: [
        a for a in _api(prom, "alerts")["alerts"]
        if a["labels"]["alertname"] == "SoakNodeStraggler" and a["labels"].get("node") == slow], 60)
    assert alert[0]["state"] in ("pending", "firing") and alert[0]["labels"]["run_id"] == "c1"
    finding = wait(f"the straggler finding on {slow}", lambda: _query(
        prom, f'soak_finding_active{{kind="straggler", node="{slow}"}}'), 200)
    # the peer comparison's finding is served by the judging node (the one node that serves
    # the nodes by status), labelled with the node it names
    judge = {r["metric"]["instance"] for r in _query(prom, "soak_cluster_nodes")}
    assert {f["metric"]["instance"] for f in finding} == judge and len(judge) == 1, (finding, judge)
    assert all(f["metric"]["severity"] in ("warn", "fail") and f["metric"]["run_id"] == "c1" for f in finding)

    # a live scrape of each agent passes promtool's checks of the exposition and its names
    for p in listen:
        with urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics", timeout=5) as resp:
            text = resp.read()
        checked = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, timeout=30)
        assert checked.returncode == 0, (p, checked.stdout.decode() + checked.stderr.decode())
    # what the judging node alone serves: the criteria so far, the nodes by status
    assert {r["metric"]["status"]: r["value"][1] for r in _query(prom, "soak_cluster_nodes")}.get("running") == "3"
    wait("the link test's pairs on every node",
         lambda: len(_query(prom, "count by (node) (soak_link_busbw_gbps)")) == 3, 30)
    time.sleep(3)  # a few more scrapes and rule evaluations, so every range has two points
    results = d.verify(DASHBOARDS, prom, cluster=True)
    bad = [r for r in results if not r.ok and r.where.startswith(("soak-cluster", "record "))]
    assert not bad, "\n".join(f"{r.where}: series={r.series} error={r.error} empty={r.empty_selectors}"
                              for r in bad)
    # the cluster alerts' expressions match series here (a clock within 2 s still has its series)
    for name in ("SoakNodeStraggler", "SoakLinkSlow", "SoakFindingOpen", "SoakNodeClockSkew",
                 "SoakChipOutOfLine"):
        (r,) = [r for r in results if r.where == f"alert {name}"]
        assert r.ok, (r.where, r.series, r.error, r.empty_selectors)


# alone (with the straggler's test, which reads the same run): the link test's speeds and the
# ranks' compute times are judged against each other, and other tests sharing the CPU would
# move them.
@pytest.mark.alone
def test_three_node_cluster_trains_across_nodes_and_records_every_node(three_nodes: ClusterRun) -> None:
    tmp_path, db_url, codes, texts = three_nodes.tmp, three_nodes.db_url, three_nodes.codes, three_nodes.texts
    # the leader judges the whole run: the injected slow link (and the slow rank) fail it (exit 1)
    assert codes == [1, 0, 0], [t[-1500:] for t in texts]
    assert "FAIL straggler on node node-1" in texts[0]
    with Store.open(db_url, create=False) as store:
        run = store.get_run("c1")
        nodes = store.cluster_nodes("c1")
        devices = {(node, dev) for _, node, dev in store.run_series("c1")}
        steps = store.load_steps("c1")
        events = store.load_events("c1")
    assert run is not None and run.nodes == 3 and run.status == "finished"
    assert [(n.name, n.rank, n.status, n.chips) for n in nodes] == [
        (f"node-{r}", r, "finished", 3) for r in range(3)]
    assert {(f"node-{r}", f"npu{c}-0") for r in range(3) for c in range(3)} <= devices
    # step heartbeats from all three nodes, the job's global ranks 0..2 spread over them
    assert {s["rank"] for s in steps} == {0, 1, 2}
    with Store.open(db_url, create=False) as store:
        by_node = {e.node for e in store.load_events("c1", kind="start") if e.workload == "lm"}
    assert by_node == {"node-0", "node-1", "node-2"}
    # every event of a cluster run names the node it happened on
    assert not [(e.kind, e.message) for e in events if not e.node]
    # every global rank started in the one job of three nodes (a node training alone says 1)
    starts = [e for e in events if e.kind == "start" and e.workload == "lm"]
    assert {(e.rank, _world_size(e.message)) for e in starts} == {(0, 3), (1, 3), (2, 3)}, [
        (e.node, e.rank, e.message) for e in starts]
    assert sum(s["n_steps"] or 0 for s in steps) > 0
    # the leader judged the whole cluster: one analysis with every node's chips
    analysis = json.loads((tmp_path / "node-0" / "c1" / "report" / "analysis.json").read_text())
    nodes_crit = next(c for c in analysis["criteria"] if c["name"] == "nodes")
    assert nodes_crit["met"] is True and analysis["coverage"]["chips_expected"] == 9
    # each agent summarised its own chips and ranks for the leader, which judged from those
    with Store.open(db_url, create=False) as store:
        summarised = {(r[0], r[1]) for r in store.load_buckets("c1", "temp_c")}
        ranks = {r[0] for r in store.load_buckets("c1", "step_time_s")}
    assert summarised == {(f"node-{r}", f"npu{c}-0") for r in range(3) for c in range(3)}
    assert ranks == {"node-0", "node-1", "node-2"}
    assert analysis["coverage"]["chips_seen"] == 9 and analysis["coverage"]["min_ratio"] > 0.5
    status = subprocess.run([sys.executable, "-m", "soak", "cluster", "status", "c1", "--db", db_url,
                             "--format", "json"], capture_output=True, text=True, timeout=60)
    data = json.loads(status.stdout)
    assert data["run_id"] == "c1" and [n["name"] for n in data["nodes"]] == ["node-0", "node-1", "node-2"]
    assert all({"name", "status", "chips", "last_seen", "restarts"} <= n.keys() for n in data["nodes"])
    assert {e["kind"] for e in data["events"]} >= {"node_joined", "start"}
    listed = subprocess.run([sys.executable, "-m", "soak", "runs", "list", "--db", db_url, "--format", "json"],
                            capture_output=True, text=True, timeout=60)
    assert [(r["id"], r["nodes"]) for r in json.loads(listed.stdout)] == [("c1", 3)]
    # the pairwise link test ran before the first step and every 10 h, inside the training job
    tests = [e for e in events if e.kind == "link_test"]
    assert len(tests) >= 2 and tests[0].detail["when"] == "preflight", [e.message for e in tests]
    for e in tests:
        assert [(p["a"], p["b"], p["size_bytes"]) for p in e.detail["pairs"]] == [
            ("node-0", "node-1", 4 << 20), ("node-0", "node-2", 4 << 20), ("node-1", "node-2", 4 << 20)]
        assert all(p["busbw_gbps"] > 0 for p in e.detail["pairs"])
    links = next(c for c in analysis["criteria"] if c["name"] == "links")
    assert links["met"] is False and "node node-1" in links["measured"], links
    (slow,) = [f for f in analysis["findings"] if f["metric"] == "pair_busbw_gbps"]
    assert (slow["kind"], slow["node"], slow["device"]) == ("straggler", "node-1", None), slow
    assert slow["details"]["injected"] and "slow-link:1,0.5" in slow["summary"]
    assert [n["status"] for n in analysis["links"]["nodes"]] == ["ok", "slow", "ok"]



@pytest.mark.alone
def test_a_straggler_node_is_named_by_its_compute_time_in_the_verdict_pdf_and_app(three_nodes: ClusterRun,
                                                                                  tmp_path) -> None:
    """Three nodes, rank 1 three times slower. Under synchronous data parallelism the
    fast ranks wait in the all-reduce, so the step times of all nodes stay alike; the time
    outside the collective names the slow node. The run's cluster PDF (verified) and app page
    show the three nodes and a verdict that names the slow rank's node."""
    db_url, codes, texts = three_nodes.db_url, three_nodes.codes, three_nodes.texts
    assert all(c in (0, 1) for c in codes), [t[-1500:] for t in texts]  # 1: the verdict fails
    with Store.open(db_url, create=False) as store:
        steps = [s for s in store.load_steps("c1") if s["step_time_s"] is not None]
    node_of_rank = {s["rank"]: s["node"] for s in steps}
    # the rendezvous gives the global ranks in any order: the slow rank 1 is on some node
    assert sorted(node_of_rank) == [0, 1, 2] and sorted(node_of_rank.values()) == ["node-0", "node-1", "node-2"]
    slow = node_of_rank[1]
    step_time = {r: statistics.median(s["step_time_s"] for s in steps if s["rank"] == r) for r in range(3)}
    compute = {r: statistics.median(s["compute_s"] for s in steps if s["rank"] == r) for r in range(3)}
    # the fast ranks wait in the all-reduce for the slow one: their step times are near its
    # own, their time outside the collective is not (the stored compute time names it)
    by_step = step_time[1] / max(step_time[0], step_time[2])
    by_compute = compute[1] / max(compute[0], compute[2])
    assert by_compute >= 2 and by_compute > 2 * by_step, (step_time, compute)
    beats = three_nodes.tmp / slow / "c1" / "heartbeats" / "lm-rank1.jsonl"
    lines = [json.loads(x) for x in beats.read_text().splitlines()]
    assert statistics.median(x["compute_s"] for x in lines if x["event"] == "step") >= 2 * compute[0]

    analysis = json.loads((three_nodes.tmp / "node-0" / "c1" / "report" / "analysis.json").read_text())
    assert analysis["verdict"] == "fail", analysis["reasons"]
    # named by its compute time (node-1's slow link is the links criterion's business, not this
    # test's)
    named = [r for r in analysis["reasons"] if f"straggler on node {slow}" in r and "(lm-rank1): compute_s" in r]
    assert named, analysis["reasons"]

    # the cluster PDF as `soak report pdf` writes it, signed, `soak verify` accepting it
    from soak.cli import main
    from soak.report.signing import create_keys
    from soak.report.verify import verify_pdf

    keys = create_keys(tmp_path / "keys", common_name="Test Engineer")
    pdf = tmp_path / "c1.pdf"
    assert main(["report", "pdf", "c1", "--db", db_url, "-o", str(pdf), "--key", str(keys.key_path),
                 "--cert", str(keys.cert_path)]) == 0
    checked = verify_pdf(pdf, keys.cert_path)
    assert checked.ok and "soak-chips.csv" in checked.attachments, checked.problems
    assert main(["verify", str(pdf), "--cert", str(keys.cert_path)]) == 0
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True,
                          timeout=60).stdout
    matrix = text[text.index("Every chip of every node"):]
    assert all(f"node-{r}" in matrix.split("Verdict per node")[0] for r in range(3))
    assert f"straggler on node {slow}" in text and f"node {slow} (lm-rank1)" in text
    per_node = matrix.split("Verdict per node")[1].split("Stragglers and outliers")[0]
    node_rows: dict[str, str] = {}  # a node's row is its first line; a wrapped reason may start with its name too
    for line in per_node.splitlines():
        if line.strip().startswith("node-"):
            node_rows.setdefault(line.split()[0], line)
    assert " fail " in node_rows[slow] and "straggler" in node_rows[slow], node_rows

    from streamlit.testing.v1 import AppTest

    app = str(Path(__file__).resolve().parents[2] / "soak" / "report" / "app.py")
    os.environ["SOAK_REPORT_DB"] = db_url
    try:
        at = AppTest.from_file(app, default_timeout=90).run()
    finally:
        del os.environ["SOAK_REPORT_DB"]
    assert not at.exception, at.exception
    assert any("3 nodes, 9 chips" in m.value for m in at.markdown), [m.value for m in at.markdown]
    assert any(f"straggler on node {slow}" in m.value for m in at.markdown)
    nodes = at.dataframe[0].value.set_index("Node")
    assert list(nodes.index) == ["node-0", "node-1", "node-2"]
    assert nodes.loc[slow, "Verdict"] == "fail" and "straggler" in nodes.loc[slow, "Why"]
