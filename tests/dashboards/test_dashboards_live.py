"""Every dashboard panel and alert rule, run through a real Prometheus scraping real soak.

Debian's `prometheus` starts on loopback (temporary config and storage, free ports, 1 s scrape
and rule interval) and scrapes two soak processes:

- job `soak`: `soak exporter --backend sim` (a simulated 910B node),
- job `soak-run`: `soak run --backend sim` with the lm workload on CPU, an accelerated time line
  and a thermal scenario, so that it has ranks, steps and a finding to serve.

Then `soak.dashboards.verify` runs every panel, variable and alert expression (template
variables set to match everything, comparisons turned into `bool` comparisons so a healthy
alert still returns its series) and each of their vector selectors alone. Every query must
return series, except those that look back further than a fresh Prometheus holds (`offset`,
subqueries): for those the selectors must match. Every metric name a query reads must be one
that the scraped processes actually expose.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from soak import dashboards as d
from tests import procs, prom_server

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(prom_server.PROMETHEUS is None,
                       reason="prometheus not installed (Debian package 'prometheus'; CI installs it)"),
]

PLAN = """\
[jobs]
analysis_every = "3s"
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout_s: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return resp.read().decode()


def _wait(what: str, check: Callable[[], bool], limit_s: float, started: list[procs.Proc], logs: list[Path]) -> None:
    """Fails at once when Prometheus or a soak process has died, with its output."""
    procs.wait_until(check, started, limit_s, what=what, logs=logs, retry_on=(OSError,), interval_s=0.5)


def _count(prom: str, expr: str) -> int:
    return max(0, d._count(d.prometheus_query(prom, expr)))


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("live")
    p_exp, p_run, p_prom = _free_port(), _free_port(), _free_port()
    (tmp / "plan.toml").write_text(PLAN)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    soak = [sys.executable, "-m", "soak"]
    commands = {
        "exporter": soak + ["exporter", "--backend", "sim", "--listen", f"127.0.0.1:{p_exp}",
                            "--interval", "1", "--sim-chips", "4", "--detail-interval", "5"],
        "run": soak + ["run", str(tmp / "plan.toml"), "--backend", "sim", "--duration", "10h",
                       "--time-scale", "60", "--workload", "lm", "--size", "tiny", "--nproc", "1",
                       "--interval", "1s", "--listen", f"127.0.0.1:{p_run}", "--no-preflight",
                       "--data-dir", str(tmp / "runs"), "--run-id", "live", "--sim-chips", "2", "--sim-scenario",
                       "thermal:start_h=0,duration_h=0.3,peak_c=99,chips=0"],
    }
    started: list[procs.Proc] = []
    logs = [procs.daemon_log(tmp / "runs" / "live")]
    try:
        for name, cmd in commands.items():
            started.append(procs.start(cmd, tmp, name, out=tmp / f"{name}.log", merge_output=True, env=env, cwd=tmp))
        started.append(prom_server.start(tmp, p_prom, {"soak": [p_exp], "soak-run": [p_run]}, node_label=True))
        prom = f"http://127.0.0.1:{p_prom}"
        _wait("Prometheus ready", lambda: "Ready" in _get(prom + "/-/ready"), 40, started, logs)
        _wait("both soak targets scraped",
              lambda: _count(prom, 'up{job=~"soak.*"} == 1') == 2, 40, started, logs)
        # The run needs its workload stepping (torch start-up) and its first finding.
        _wait("run metrics with steps and a finding",
              lambda: _count(prom, "soak_run_step") > 0 and _count(prom, "soak_run_findings") > 0,
              40, started, logs)
        time.sleep(3)  # a few more scrapes, so every range function has two points
        yield {"prom": prom, "exporter": f"http://127.0.0.1:{p_exp}/metrics",
               "run": f"http://127.0.0.1:{p_run}/metrics", "procs": started}
    finally:
        for p in reversed(started):
            p.stop(grace_s=20)


def _exposed_names(text: str) -> set[str]:
    names = set()
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            names.add(m.group(1))
            if m.group(2) == "counter":
                names.add(m.group(1) + "_total")
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def test_every_panel_and_alert_query_returns_series(stack):
    results = d.verify(DASHBOARDS, stack["prom"])
    assert len(results) >= 60
    bad = [r for r in results if not r.ok]
    assert not bad, "\n".join(
        f"{r.where}: series={r.series} error={r.error} empty={list(r.empty_selectors)}\n  {r.expr}"
        for r in bad)
    # the only queries allowed to be empty as a whole are the ones that need history, and
    # those of what only a cluster run serves (tests/cluster/test_cluster_three_nodes.py runs them)
    empty = sorted(r.where for r in results if r.series == 0 and not r.cluster_only and not r.fault_only)
    assert empty == ["alert SoakHBMCreep"]
    # the simulated chips report no fault: what only a chip's fault serves is reported, not failed
    # (tests/dashboards/test_dashboards_files.py runs the alerts on faults with promtool)
    assert sorted(r.where for r in results if r.fault_only) == [
        "alert SoakDeviceFaultCode", "alert SoakFindingOpen", "alert SoakGpuXid", "alert SoakSilentDataCorruption",
        "alert SoakUncorrectableEcc",
        "soak-chip-detail / Fault codes now / A", "soak-chip-detail / Open device-fault findings / A",
        "soak-fleet-overview / Device faults per chip / G", "soak-fleet-overview / Device faults per chip / H",
        "soak-fleet-overview / Fault codes now / A", "soak-fleet-overview / Open device-fault findings / A"]
    assert all(r.series > 0 for r in results if r.fault_only and r.where in (
        "alert SoakUncorrectableEcc", "alert SoakFindingOpen"))  # their other selectors still match
    assert sorted(r.where for r in results if r.cluster_only) == [
        "alert SoakLinkSlow", "alert SoakNodeClockSkew", "record soak:link_busbw_vs_test_median:ratio",
        "soak-cluster / Clock offset against the store / A", "soak-cluster / Last link test / A",
        "soak-cluster / Link matrix: bus bandwidth / A",
        "soak-cluster / Link matrix: bus bandwidth over the test's median / A",
        "soak-cluster / Nodes by status / A", "soak-cluster / Nodes by status over time / A",
        "soak-cluster / Worst clock offset / A",
        "soak-cluster / annotation Node lost"]
    # what a single node serves of the cluster dashboard returns series here
    served = [r for r in results if r.where.startswith(("soak-cluster", "record")) and not r.cluster_only]
    assert len(served) >= 10 and all(r.series > 0 or r.needs_history for r in served), served


def test_every_metric_named_is_exposed_by_soak(stack):
    exposed = _exposed_names(_get(stack["exporter"])) | _exposed_names(_get(stack["run"]))
    named = set()
    for q in d.all_queries(DASHBOARDS):
        named |= d.metric_names(q.expr)
    assert "soak_run_findings" in named and "soak_device_healthy" in named
    # `up` is added by Prometheus itself; a cluster run alone serves the cluster metrics, and
    # the recording rules' series are read only through names a scrape holds
    assert named - exposed - d.recorded_names(DASHBOARDS) == {"up"} | d.CLUSTER_METRICS | d.FAULT_ONLY_METRICS
    recorded = set().union(*(d.metric_names(r["expr"]) for r in d.load_recording_rules(DASHBOARDS / "alerts.yaml")))
    assert recorded - exposed - d.recorded_names(DASHBOARDS) == {"soak_link_busbw_gbps"}


def test_prometheus_evaluates_every_alert_rule_without_error(stack):
    flat: list[dict[str, Any]] = []

    def every_rule_evaluated() -> list[dict[str, Any]]:
        nonlocal flat
        rules = json.loads(_get(stack["prom"] + "/api/v1/rules?type=alert"))["data"]["groups"]
        flat = [r for g in rules for r in g["rules"]]
        done = all(r.get("lastEvaluation", "").startswith("2") and
                   not r["lastEvaluation"].startswith("0001") for r in flat)
        return flat if done else []

    procs.wait_until(every_rule_evaluated, stack["procs"], 20, retry_on=(OSError,), interval_s=1.0,
                     context=lambda: f"rules: {[(r['name'], r.get('lastEvaluation')) for r in flat]}")
    assert len(flat) == 28
    assert [(r["name"], r["health"], r.get("lastError", "")) for r in flat
            if r["health"] != "ok"] == []


def test_verify_command_passes(stack, capsys):
    from soak.cli import main

    assert main(["dashboards", "verify", "--prometheus-url", stack["prom"], "--format",
                 "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["failed"] == [] and out["queries"] >= 60


def test_verify_catches_a_wrong_matcher_and_a_wrong_name(stack, tmp_path):
    for name in d.DASHBOARD_FILES + (d.ALERTS_FILE,):
        shutil.copy(DASHBOARDS / name, tmp_path / name)
    board = json.loads((tmp_path / "chip-detail.json").read_text())
    memory = next(p for p in board["panels"] if p["title"] == "Memory")
    memory["targets"][0]["expr"] = memory["targets"][0]["expr"].replace('kind="hbm"', 'kind="HBM"')
    (tmp_path / "chip-detail.json").write_text(json.dumps(board))
    rules = (tmp_path / "alerts.yaml").read_text().replace(
        "expr: soak_device_healthy == 0", "expr: soak_device_health == 0").replace(
        'soak_device_ecc_errors_total{type="double"}', 'soak_device_ecc_errors_total{type="uncorrectable"}')
    (tmp_path / "alerts.yaml").write_text(rules)
    bad = {r.where: r for r in d.verify(tmp_path, stack["prom"]) if not r.ok}
    assert sorted(bad) == ["alert SoakChipUnhealthy", "alert SoakUncorrectableEcc", "soak-chip-detail / Memory / A"]
    assert bad["alert SoakChipUnhealthy"].empty_selectors == ("soak_device_health",)
    # a query that a healthy fleet leaves partly empty still fails on a wrong matcher elsewhere
    assert bad["alert SoakUncorrectableEcc"].empty_selectors == (
        'soak_finding_active{kind="device_fault", metric=~"ecc_uncorrectable|ecc_isolated_double"}',
        'soak_device_ecc_errors_total{type="uncorrectable"}')
    assert bad["soak-chip-detail / Memory / A"].series == 0
