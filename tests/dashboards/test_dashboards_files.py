"""The dashboard JSON and alert rule files: structure, metric names, promtool."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from soak import dashboards as d
from soak.cli import main

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (Debian package 'prometheus'; CI installs it)")
BOARDS = d.load_dashboards(DASHBOARDS)
DS_REF = {"type": "prometheus", "uid": "${datasource}"}


def test_generated_json_is_up_to_date():
    out = subprocess.run([sys.executable, str(DASHBOARDS / "generate.py"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("board", BOARDS, ids=lambda b: b["uid"])
def test_dashboard_structure(board):
    assert "__inputs" not in board and "__requires" not in board
    assert board["id"] is None
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for var in variables.values():
        if var["type"] == "query":
            assert var["datasource"] == DS_REF
            assert var["query"]["query"].startswith("label_values(")
    panels = d.panels_of(board)
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    for p in panels:
        assert p["datasource"] == DS_REF, p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"] == DS_REF and t["expr"].strip()
        if p["type"] == "table" and not p["fieldConfig"]["defaults"].get("unit"):  # one unit per column
            # (a node x peer matrix or a list of findings has one unit for every cell instead)
            units = [prop for o in p["fieldConfig"]["overrides"] for prop in o["properties"]
                     if prop["id"] == "unit"]
            assert len(units) == len(p["targets"]), p["title"]
        else:
            assert p["fieldConfig"]["defaults"].get("unit"), f"{p['title']} has no unit"
        # a grid of 24 columns: nothing sticks out on the right
        assert p["gridPos"]["x"] + p["gridPos"]["w"] <= 24


def test_uids_are_stable_and_unique():
    assert [b["uid"] for b in BOARDS] == ["soak-fleet-overview", "soak-chip-detail", "soak-run", "soak-cluster"]


def test_variables_per_dashboard():
    names = [[v["name"] for v in b["templating"]["list"]] for b in BOARDS]
    assert names == [["datasource", "node", "chip"], ["datasource", "node", "chip"],
                     ["datasource", "run", "node"], ["datasource", "run", "node"]]
    # the `node` variable filters every panel that has nodes to filter
    for board in BOARDS:
        for q in d.queries_of(board):
            if any(name in q.expr for name in (
                    "soak_run_info", "soak_cluster_nodes", "soak_run_verdict_so_far", "soak_link_test_timestamp_seconds",
                    "soak_run_ettr_ratio", "soak_run_node_mttf_lower90_seconds", "soak_run_failures",
                    "soak_run_lost_seconds")):
                continue  # of the run as a whole: the judging node serves them, or every node
            assert '$node' in q.expr, q.where


def test_units_match_metrics():
    """Each metric's unit suffix is shown with the matching Grafana unit."""
    want = {"_ratio": "percentunit", "_celsius": "celsius", "_watts": "watt"}
    seen = 0
    for board in BOARDS:
        for p in d.panels_of(board):
            if p["type"] not in ("timeseries", "stat"):
                continue
            names = set().union(*(d.metric_names(t["expr"]) for t in p["targets"]))
            for suffix, unit in want.items():
                if names and all(n.endswith(suffix) for n in names):
                    assert p["fieldConfig"]["defaults"]["unit"] == unit, p["title"]
                    seen += 1
    assert seen >= 8


def test_fleet_overview_covers_every_signal():
    names = set()
    for q in d.queries_of(BOARDS[0]):
        names |= d.metric_names(q.expr)
    assert {"soak_device_healthy", "soak_device_up", "soak_device_utilization_ratio",
            "soak_device_temperature_celsius", "soak_device_memory_used_bytes",
            "soak_device_power_watts", "soak_comm_timeouts_total",
            "soak_exporter_snapshot_timestamp_seconds"} <= names


@pytest.mark.parametrize("board", BOARDS[:2], ids=lambda b: b["uid"])
def test_fleet_and_chip_detail_show_the_chips_own_fault_reports(board):
    """The row "Device faults" reads each fault signal /metrics serves for a chip, and the
    device_fault findings the run opens from them."""
    rows = [p["title"] for p in board["panels"] if p["type"] == "row"]
    assert "Device faults" in rows
    start = next(i for i, p in enumerate(board["panels"]) if p["title"] == "Device faults")
    end = next((i for i, p in enumerate(board["panels"]) if i > start and p["type"] == "row"), None)
    names: set[str] = set()
    exprs: list[str] = []
    for p in board["panels"][start + 1:end]:
        for t in p["targets"]:
            names |= d.metric_names(t["expr"])
            exprs.append(t["expr"])
    assert names == {"soak_device_ecc_errors_total", "soak_device_ecc_isolated_pages", "soak_device_link_up",
                     "soak_device_link_ups_total", "soak_device_fault_code", "soak_finding_active"}
    for kind in ('type="single"', 'type="double"'):
        assert any("soak_device_ecc_errors_total{" in e and kind in e for e in exprs)
        assert any("soak_device_ecc_isolated_pages{" in e and kind in e for e in exprs)
    assert all('kind="device_fault"' in e for e in exprs if "soak_finding_active" in e)
    assert all('device=~"$chip"' in e for e in exprs)


def test_fleet_overview_groups_by_node():
    """A cluster run's nodes side by side: the `node` label, never host:port `instance`."""
    board = BOARDS[0]
    var = next(v for v in board["templating"]["list"] if v["name"] == "node")
    assert var["query"]["query"] == "label_values(soak_device_up, node)"
    exprs = [q.expr for q in d.queries_of(board)]
    assert not [e for e in exprs if "instance" in e]
    nodes = next(p for p in d.panels_of(board) if p["title"] == "Nodes now")
    assert len(nodes["targets"]) == 7
    assert all(" by (node) (" in t["expr"] for t in nodes["targets"])
    run = BOARDS[2]
    assert "count(count by (node) (soak_run_info{run_id=~\"$run\"}))" in [
        q.expr for q in d.queries_of(run)]


def test_lint_is_clean(capsys):
    assert main(["dashboards", "lint", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["problems"] == []


def test_lint_finds_unknown_metric_and_inputs(tmp_path, capsys):
    for name in d.DASHBOARD_FILES + (d.ALERTS_FILE,):
        shutil.copy(DASHBOARDS / name, tmp_path / name)
    board = json.loads((tmp_path / "chip-detail.json").read_text())
    board["__inputs"] = [{"name": "DS_PROMETHEUS"}]
    board["panels"][2]["targets"][0]["expr"] = "max(npu_chip_info_temperature{id=\"0\"})"
    (tmp_path / "chip-detail.json").write_text(json.dumps(board))
    rules = (tmp_path / "alerts.yaml").read_text().replace(
        "expr: soak_device_up == 0", "expr: soak_device_reading_ok == 0")
    (tmp_path / "alerts.yaml").write_text(rules)
    assert main(["dashboards", "lint", "--dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "soak-chip-detail: has __inputs (breaks file provisioning)" in out
    assert "soak-chip-detail / Reading / A: unknown metric npu_chip_info_temperature" in out
    assert "alert SoakDeviceReadFailing: unknown metric soak_device_reading_ok" in out


@pytest.mark.parametrize("expr,names", [
    ('sum by (instance, source) (increase(soak_comm_timeouts_total{instance=~"$node"}[5m]))',
     {"soak_comm_timeouts_total"}),
    ('time() - soak_exporter_snapshot_timestamp_seconds > 120',
     {"soak_exporter_snapshot_timestamp_seconds"}),
    ('label_replace(max_over_time(a_b[30m]), "host", "$1", "instance", "(.+?)(?::[0-9]+)?") '
     '== 0 and on (host) up{job=~"soak.*"}', {"a_b", "up"}),
    ('deriv(min_over_time(x{kind="hbm"}[30m])[3h:5m]) * 3600 / y offset 3h > 1e-2', {"x", "y"}),
    ("max_over_time(soak_device_utilization_ratio[$__rate_interval])",
     {"soak_device_utilization_ratio"}),
])
def test_metric_names(expr, names):
    assert d.metric_names(expr) == names


@pytest.mark.parametrize("selector,only_on_a_fault", [
    ('soak_device_fault_code{node=~".*", device=~".*"}', True),
    ('soak_finding_active{kind="device_fault", metric="xid", severity=~"warn|fail"}', True),
    ('soak_finding_active{node=~".*", kind=~"device_fault"}', True),
    ('soak_finding_active{severity=~"warn|fail"}', False),  # any finding: the thermal one of a healthy run
    ('soak_finding_active{kind="thermal"}', False),
    ('soak_device_ecc_errors_total{type="double"}', False),  # a healthy chip counts 0
    ('soak_device_link_up{kind="device_fault"}', False),
])
def test_what_only_a_chips_fault_serves(selector, only_on_a_fault):
    # `soak dashboards verify` on a healthy fleet reports these selectors' empty answer, not fails it
    assert d.fault_only(selector) is only_on_a_fault


def test_probe_expr_keeps_matchers_and_strings():
    expr = ('up{job!="x", a=~"b"} == 0 and on (i) label_replace(v, "h", "$1", "i", "(.+)>") '
            '>= 2 unless w != bool 1')
    assert d.probe_expr(expr) == (
        'up{job!="x", a=~"b"} == bool 0 and on (i) label_replace(v, "h", "$1", "i", "(.+)>") '
        '>= bool 2 unless w != bool 1')


def test_substitute_variables():
    assert d.substitute('x{instance=~"$node", device=~"${chip}"}[$__rate_interval]') == \
        'x{instance=~".*", device=~".*"}[1m]'
    assert d.substitute("[[run]] $unknown", {"run": "r1"}) == "r1 $unknown"


def test_every_alert_links_its_runbook_section():
    rules = d.load_alert_rules(DASHBOARDS / "alerts.yaml")
    runbook = (DASHBOARDS / "runbook.md").read_text(encoding="utf-8")
    anchors = {h.strip().lower() for h in re.findall(r"^## (\w+)\s*$", runbook, re.M)}
    base = "https://github.com/soak-project/soak/blob/main/dashboards/runbook.md#"
    assert len(rules) >= 12
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        assert url == base + rule["alert"].lower()
        assert rule["alert"].lower() in anchors, f"runbook.md has no '## {rule['alert']}'"


@needs_promtool
def test_promtool_check_rules():
    out = subprocess.run([PROMTOOL, "check", "rules", str(DASHBOARDS / "alerts.yaml")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 32 rules found" in out.stdout


@needs_promtool
def test_promtool_test_rules():
    out = subprocess.run([PROMTOOL, "test", "rules", "alerts_test.yaml"], cwd=DASHBOARDS,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@needs_promtool
def test_every_alert_has_firing_and_quiet_cases():
    import yaml

    doc = yaml.safe_load((DASHBOARDS / "alerts_test.yaml").read_text())
    fired, quiet = set(), set()
    for case in doc["tests"]:
        for t in case.get("alert_rule_test", []):
            (fired if t["exp_alerts"] else quiet).add(t["alertname"])
    names = {r["alert"] for r in d.load_alert_rules(DASHBOARDS / "alerts.yaml")}
    assert fired == names and quiet == names


def test_what_only_a_cluster_serves_includes_the_series_recorded_from_it():
    # `soak dashboards verify` on a single node's Prometheus does not fail these; --cluster does
    assert d.cluster_names(DASHBOARDS) == d.CLUSTER_METRICS | {"soak:link_busbw_vs_test_median:ratio"}
    assert d.recorded_names(DASHBOARDS) == {
        "soak:chip_temperature_vs_node_median:celsius", "soak:node_compute_seconds:median",
        "soak:node_compute_vs_cluster_median:ratio", "soak:link_busbw_vs_test_median:ratio"}


def test_a_finding_alerts_severity_may_follow_the_finding_only_as_critical_or_warning(tmp_path):
    for name in d.DASHBOARD_FILES + (d.ALERTS_FILE,):
        shutil.copy(DASHBOARDS / name, tmp_path / name)
    assert d.lint(tmp_path) == []  # the template yields critical or warning
    rules = (tmp_path / "alerts.yaml").read_text()
    template = '''severity: '{{ if eq $labels.severity "fail" }}critical{{ else }}warning{{ end }}\''''
    assert template in rules
    (tmp_path / "alerts.yaml").write_text(rules.replace(template, "severity: '{{ $labels.severity }}'"))
    assert d.lint(tmp_path) == [f"alert {name}: severity must be critical or warning"
                                for name in ("SoakDeviceFaultCode", "SoakGpuXid", "SoakSilentDataCorruption", "SoakFindingOpen")]
