"""A cluster soak as operations see it: three `soak run` agents on loopback sharing PostgreSQL,
each serving its /metrics, scraped by Debian's `prometheus` with soak's rules loaded.

One rank computes three times as long. Through Prometheus' HTTP API the test sees the
SoakNodeStraggler alert (pending or firing) and the leader's `soak_finding_active` straggler
finding for that rank's node; `promtool check metrics` accepts a live scrape of an agent; and
every panel, variable, annotation and rule of the dashboards returns series from this cluster
(the cluster-only ones included, which a single node cannot serve).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from soak import dashboards as d
from tests import procs, prom_server
from tests.cluster.test_cluster_run import Agent, _free_port

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"
PROMTOOL = shutil.which("promtool")

pytestmark = [
    pytest.mark.slow, pytest.mark.pg,
    pytest.mark.skipif(prom_server.PROMETHEUS is None or PROMTOOL is None,
                       reason="prometheus/promtool not installed (Debian package 'prometheus'; CI installs it)"),
]

# An accelerated 150 h (one run hour a wall second; the test stops it once it has seen all), compared in two-hour buckets by the three
# nodes' medians, with the online analysis every 5 s of wall.
PLAN = '[acceptance.thresholds]\n"peers.min_peers" = 2\n"peers.bucket_s" = 7200\n'


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
@pytest.mark.alone
def test_prometheus_sees_the_straggler_alert_and_the_leaders_finding_for_the_slow_node(tmp_path, db_url) -> None:
    port, p_prom = _free_port(), _free_port()
    listen = [_free_port() for _ in range(3)]
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN, encoding="utf-8")
    # three chips a node: the chip rule compares a chip with its node's median of three or more
    agents = [Agent(tmp_path, db_url, r, 3, port, "--inject", "slow-rank:1,3", "--time-scale", "3600",
                    "--sim-chips", "3", "--listen", f"127.0.0.1:{listen[r]}", str(plan), duration="150h")
              for r in range(3)]
    prom_proc = prom_server.start(tmp_path, p_prom, {"soak-cluster": listen})
    prom = f"http://127.0.0.1:{p_prom}"
    watched = [prom_proc, *(a.proc for a in agents)]
    logs = [a.daemon_log for a in agents]
    try:
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
    finally:
        for a in agents:
            if a.proc.poll() is None:
                a.proc.stop(grace_s=30)
        prom_proc.stop(grace_s=10)
