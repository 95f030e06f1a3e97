#!/usr/bin/env python3
"""Build the Grafana dashboards kept in this folder (classic JSON model).

The JSON files are what Grafana loads (file provisioning, `soak dashboards push`, or a manual
import); this script is where they are written from, so that every panel shares the same
datasource reference, units, thresholds and legend layout. Edit here, then run

    python dashboards/generate.py          # rewrite the JSON files
    python dashboards/generate.py --check  # exit 1 if a JSON file differs from what this builds

No `__inputs` block: a `datasource` variable (type datasource, query prometheus) is referenced by
every panel as ``${datasource}``, so file provisioning works as well as import (an `__inputs`
placeholder is only resolved by the UI import flow).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DS = {"type": "prometheus", "uid": "${datasource}"}
SCHEMA_VERSION = 39  # Grafana 10.x/11.x classic model; newer Grafana migrates it on load

# Selector fragments shared by every device query ($node and $chip are multi-value variables).
# A node is the `node` label: `soak run` of a cluster run exports it, and the scrape configs
# in deploy/ set it for a single node, where `instance` (host:port) would split one machine
# in two when the exporter and a run listen on different ports.
NODE = 'node=~"$node"'
CHIP = 'node=~"$node", device=~"$chip"'
RUN = 'run_id=~"$run"'
RUN_NODE = 'run_id=~"$run", node=~"$node"'

GREEN, YELLOW, ORANGE, RED, BLUE = "green", "yellow", "orange", "red", "blue"


def steps(*pairs: tuple[float | None, str]) -> dict[str, Any]:
    return {"mode": "absolute", "steps": [{"value": v, "color": c} for v, c in pairs]}


UTIL_STEPS = steps((None, RED), (0.05, ORANGE), (0.5, GREEN))  # idle chips read red on a wall
TEMP_STEPS = steps((None, GREEN), (75, YELLOW), (85, ORANGE), (95, RED))
HBM_STEPS = steps((None, GREEN), (0.85, YELLOW), (0.95, RED))
HEALTH_STEPS = steps((None, RED), (1, GREEN))
FRESH_STEPS = steps((None, GREEN), (30, YELLOW), (120, RED))
COUNT_BAD_STEPS = steps((None, GREEN), (1, RED))


def value_map(bad: str, good: str) -> list[dict[str, Any]]:
    """A 0/1 series shown as words: 0 is ``bad`` in red, 1 is ``good`` in green."""
    return [
        {
            "type": "value",
            "options": {
                "0": {"text": bad, "color": RED, "index": 0},
                "1": {"text": good, "color": GREEN, "index": 1},
            },
        }
    ]


HEALTH_MAP = value_map("FAULT", "OK")
UP_MAP = value_map("READ FAIL", "read ok")
VERDICT_MAP = value_map("FAIL", "PASS so far")


class Layout:
    """Places panels left to right on Grafana's 24-column grid and hands out panel ids."""

    def __init__(self) -> None:
        self.x = 0
        self.y = 0
        self.row_h = 0
        self.next_id = 1
        self.panels: list[dict[str, Any]] = []

    def add(self, panel: dict[str, Any], w: int, h: int) -> None:
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        panel["id"] = self.next_id
        self.next_id += 1
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)

    def row(self, title: str) -> None:
        if self.x:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        self.add({"type": "row", "title": title, "collapsed": False, "panels": []}, 24, 1)
        self.x, self.y, self.row_h = 0, self.y + 1, 0


def panel(kind: str, title: str, description: str, **body: Any) -> dict[str, Any]:
    """A panel of ``kind`` (Grafana's panel type) reading the dashboard's datasource; ``body``
    is the rest of its model (fieldConfig, options, targets, ...), in that order."""
    return {"type": kind, "title": title, "description": description, "datasource": DS, **body}


def target(expr: str, legend: str = "", ref: str = "A", instant: bool = False,
           fmt: str = "time_series") -> dict[str, Any]:
    return {
        "refId": ref,
        "datasource": DS,
        "expr": expr,
        "legendFormat": legend or "__auto",
        "range": not instant,
        "instant": instant,
        "format": fmt,
        "editorMode": "code",
    }


def timeseries(title: str, exprs: list[tuple[str, str]], unit: str, description: str,
               thresholds: dict[str, Any] | None = None, minv: float | None = None,
               maxv: float | None = None, stack: bool = False) -> dict[str, Any]:
    defaults: dict[str, Any] = {
        "unit": unit,
        "color": {"mode": "palette-classic"},
        "custom": {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 10 if stack else 0,
            "showPoints": "never",
            "spanNulls": False,  # a gap is a failed reading: keep it visible, never bridge it
            "stacking": {"mode": "normal" if stack else "none", "group": "A"},
            "thresholdsStyle": {"mode": "line" if thresholds else "off"},
        },
        "thresholds": thresholds or steps((None, GREEN)),
    }
    if minv is not None:
        defaults["min"] = minv
    if maxv is not None:
        defaults["max"] = maxv
    return panel(
        "timeseries", title, description,
        fieldConfig={"defaults": defaults, "overrides": []},
        options={
            "legend": {"showLegend": True, "displayMode": "table", "placement": "right",
                       "calcs": ["lastNotNull", "max"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        targets=[target(e, leg, ref=chr(65 + i)) for i, (e, leg) in enumerate(exprs)],
    )


def stat(title: str, expr: str, unit: str, description: str, thresholds: dict[str, Any],
         mappings: list[dict[str, Any]] | None = None, legend: str = "",
         decimals: int | None = None) -> dict[str, Any]:
    defaults: dict[str, Any] = {
        "unit": unit,
        "color": {"mode": "thresholds"},
        "thresholds": thresholds,
        "mappings": mappings or [],
    }
    if decimals is not None:
        defaults["decimals"] = decimals
    return panel(
        "stat", title, description,
        fieldConfig={"defaults": defaults, "overrides": []},
        options={
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "background",
            "graphMode": "none",
            "justifyMode": "center",
            "textMode": "value_and_name" if legend else "value",
            "orientation": "auto",
        },
        targets=[target(expr, legend, instant=True)],
    )


def bargauge(title: str, expr: str, legend: str, description: str, thresholds: dict[str, Any],
             overrides: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Counts by label as horizontal bars, one a series."""
    return panel(
        "bargauge", title, description,
        fieldConfig={"defaults": {"unit": "none", "decimals": 0, "min": 0,
                                  "color": {"mode": "thresholds"},
                                  "thresholds": thresholds}, "overrides": overrides or []},
        options={"orientation": "horizontal", "displayMode": "basic", "showUnfilled": True,
                 "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}},
        targets=[target(expr, legend, instant=True)],
    )


def status_history(title: str, expr: str, legend: str, unit: str, description: str,
                   thresholds: dict[str, Any],
                   mappings: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return panel(
        "status-history", title, description,
        fieldConfig={
            "defaults": {
                "unit": unit,
                "color": {"mode": "thresholds"},
                "thresholds": thresholds,
                "mappings": mappings or [],
                "custom": {"fillOpacity": 80, "lineWidth": 0},
            },
            "overrides": [],
        },
        options={"showValue": "never", "rowHeight": 0.9, "colWidth": 0.9,
                    "legend": {"showLegend": False},
                    "tooltip": {"mode": "single", "sort": "none"}},
        targets=[target(expr, legend)],
    )


def column(ref: str, unit: str, thresholds: dict[str, Any], name: str,
           mappings: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    props: list[dict[str, Any]] = [
        {"id": "displayName", "value": name},
        {"id": "unit", "value": unit},
        {"id": "thresholds", "value": thresholds},
        {"id": "custom.cellOptions", "value": {"type": "color-background", "mode": "basic"}},
    ]
    if mappings:
        props.append({"id": "mappings", "value": mappings})
    return {"matcher": {"id": "byName", "options": f"Value #{ref}"}, "properties": props}


def table(title: str, description: str, cols: list[tuple[str, str, str, dict[str, Any], str,
                                                         list[dict[str, Any]] | None]],
          rename: dict[str, str], sort_by: str) -> dict[str, Any]:
    """One row per label set, one coloured column (ref, expr, unit, thresholds, name,
    mappings) per signal."""
    return panel(
        "table", title, description,
        fieldConfig={
            "defaults": {"custom": {"align": "center", "cellOptions": {"type": "auto"}}},
            "overrides": [column(r, u, t, n, m) for r, _, u, t, n, m in cols],
        },
        options={"showHeader": True, "cellHeight": "sm",
                    "sortBy": [{"displayName": sort_by, "desc": False}]},
        targets=[target(e, ref=r, instant=True, fmt="table") for r, e, *_ in cols],
        transformations=[
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {"excludeByName": {"Time": True},
                                           "renameByName": rename}},
        ],
    )


def chip_table(title: str, description: str) -> dict[str, Any]:
    """One row per chip, one coloured column per signal: the wall-screen view of the fleet."""
    by = "max by (node, device)"
    cols = [
        ("A", f"{by} (soak_device_healthy{{{CHIP}}})", "none", HEALTH_STEPS, "Health", HEALTH_MAP),
        ("B", f"{by} (soak_device_up{{{CHIP}}})", "none", HEALTH_STEPS, "Reading", UP_MAP),
        ("C", f"{by} (soak_device_utilization_ratio{{{CHIP}}})", "percentunit", UTIL_STEPS,
         "Utilization", None),
        ("D", f"{by} (soak_device_temperature_celsius{{{CHIP}}})", "celsius", TEMP_STEPS,
         "Temperature", None),
        ("E", f'{by} (soak_device_memory_used_bytes{{{CHIP}, kind="hbm"}}'
              f' / soak_device_memory_total_bytes{{{CHIP}, kind="hbm"}})',
         "percentunit", HBM_STEPS, "HBM used", None),
        ("F", f"{by} (soak_device_power_watts{{{CHIP}}})", "watt", steps((None, BLUE)),
         "Power", None),
    ]
    return table(title, description, cols, {"node": "Node", "device": "Chip"}, "Health")


def node_table(title: str, description: str) -> dict[str, Any]:
    """One row per node: a cluster run's nodes side by side, a bad node stands out."""
    cols = [
        ("A", f"count by (node) (soak_device_up{{{CHIP}}})", "none", steps((None, BLUE)),
         "Chips", None),
        ("B", f"sum by (node) (1 - soak_device_healthy{{{CHIP}}})", "none", COUNT_BAD_STEPS,
         "Unhealthy", None),
        ("C", f"sum by (node) (1 - soak_device_up{{{CHIP}}})", "none", COUNT_BAD_STEPS,
         "Failed readings", None),
        ("D", f"avg by (node) (soak_device_utilization_ratio{{{CHIP}}})", "percentunit",
         UTIL_STEPS, "Mean utilization", None),
        ("E", f"max by (node) (soak_device_temperature_celsius{{{CHIP}}})", "celsius",
         TEMP_STEPS, "Hottest chip", None),
        ("F", f"sum by (node) (soak_device_power_watts{{{CHIP}}})", "watt", steps((None, BLUE)),
         "Power", None),
        ("G", f"sum by (node) (increase(soak_comm_timeouts_total{{{NODE}}}[$__range]))", "none",
         COUNT_BAD_STEPS, "Comm timeouts (range)", None),
    ]
    return table(title, description, cols, {"node": "Node"}, "Node")


def label_table(title: str, expr: str, description: str, columns: dict[str, str],
                sort_by: str) -> dict[str, Any]:
    """One row per series of ``expr``: its labels ``columns`` (label -> column name), in that
    order; the value (always 1) is left out."""
    return panel(
        "table", title, description,
        fieldConfig={"defaults": {"unit": "none", "custom": {"align": "left"}}, "overrides": []},
        options={"showHeader": True, "cellHeight": "sm",
                    "sortBy": [{"displayName": sort_by, "desc": False}]},
        targets=[target(expr, instant=True, fmt="table")],
        transformations=[
            {"id": "organize", "options": {
                "excludeByName": {"Time": True, "Value": True},
                "indexByName": {label: i for i, label in enumerate(columns)},
                "renameByName": columns}},
        ],
    )


def findings_table(title: str, expr: str, description: str) -> dict[str, Any]:
    """One row per open finding: its node, chip, kind, severity and code."""
    return label_table(title, expr, description, {
        "node": "Node", "device": "Chip", "kind": "Kind", "severity": "Severity", "metric": "Metric",
        "code": "Code"}, "Severity")


# The chips' own fault reports (soak/analysis/device_faults.py): a double-bit error or page, a
# port down, a fault code or an open device_fault finding is red; the flaps' bound is the
# profile's faults.max_link_flaps (2).
PORT_MAP = value_map("DOWN", "up")
FLAP_STEPS = steps((None, GREEN), (1, ORANGE), (3, RED))
DEVICE_FAULT = 'kind="device_fault"'


def fault_table(title: str, description: str) -> dict[str, Any]:
    """One row per chip: its ECC counts and isolated pages, its port, and the fault codes and
    findings open on it."""
    by = "max by (node, device)"
    cols = [
        ("A", f'{by} (soak_device_ecc_errors_total{{{CHIP}, type="single"}})', "none", steps((None, BLUE)),
         "ECC correctable", None),
        ("B", f'{by} (soak_device_ecc_errors_total{{{CHIP}, type="double"}})', "none", COUNT_BAD_STEPS,
         "ECC uncorrectable", None),
        ("C", f'{by} (soak_device_ecc_isolated_pages{{{CHIP}, type="single"}})', "none",
         steps((None, GREEN), (1, ORANGE)), "Pages isolated (single-bit)", None),
        ("D", f'{by} (soak_device_ecc_isolated_pages{{{CHIP}, type="double"}})', "none", COUNT_BAD_STEPS,
         "Pages isolated (double-bit)", None),
        ("E", f"{by} (soak_device_link_up{{{CHIP}}})", "none", HEALTH_STEPS, "Port", PORT_MAP),
        ("F", f"{by} (round(increase(soak_device_link_ups_total{{{CHIP}}}[1h])))", "none", FLAP_STEPS,
         "Port flaps (1 h)", None),
        ("G", f"count by (node, device) (soak_device_fault_code{{{CHIP}}})", "none", COUNT_BAD_STEPS,
         "Fault codes", None),
        ("H", f'count by (node, device) (soak_finding_active{{{CHIP}, {DEVICE_FAULT}, severity=~"warn|fail"}})',
         "none", COUNT_BAD_STEPS, "Open faults", None),
    ]
    return table(title, description, cols, {"node": "Node", "device": "Chip"}, "Node")


def fault_codes_table(title: str, description: str) -> dict[str, Any]:
    return label_table(title, f"max by (node, device, code) (soak_device_fault_code{{{CHIP}}})", description,
                       {"node": "Node", "device": "Chip", "code": "Code"}, "Node")


def fault_findings_table(title: str, description: str) -> dict[str, Any]:
    return findings_table(title, f"max by (node, device, kind, severity, metric, code) "
                          f"(soak_finding_active{{{CHIP}, {DEVICE_FAULT}}})", description)


def variable_ds() -> dict[str, Any]:
    return {
        "name": "datasource",
        "label": "Prometheus",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "refresh": 1,
        "regex": "",
        "includeAll": False,
        "multi": False,
        "options": [],
    }


def variable_query(name: str, label: str, query: str, multi: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-query"},
        "refresh": 2,  # on time-range change: chips come and go
        "sort": 3,  # natural sort: npu2-0 before npu10-0
        "multi": multi,
        "includeAll": multi,
        "allValue": ".*" if multi else None,
        "current": {},
        "hide": 0,
        "regex": "",
        "options": [],
    }


def dashboard(uid: str, title: str, description: str, tags: list[str], layout: Layout,
              variables: list[dict[str, Any]], refresh: str = "30s",
              time_from: str = "now-6h") -> dict[str, Any]:
    return {
        "id": None,
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["soak", *tags],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,  # shared crosshair: line a temperature spike up with a util drop
        "refresh": refresh,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "time": {"from": time_from, "to": "now"},
        "timepicker": {},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "annotations": {"list": [{
            "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
            "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
            "name": "Annotations & Alerts", "type": "dashboard",
        }]},
        "links": [{"title": "soak dashboards", "type": "dashboards", "tags": ["soak"],
                   "asDropdown": True, "includeVars": True, "keepTime": True}],
        "templating": {"list": [variable_ds(), *variables]},
        "panels": layout.panels,
    }


NODE_VAR = variable_query("node", "Node", "label_values(soak_device_up, node)")
RUN_VAR = variable_query("run", "Run", "label_values(soak_run_info, run_id)")
# the nodes of the chosen runs: a cluster run's agents serve `node`, and the scrape configs in
# deploy/ set it for a single node
RUN_NODE_VAR = variable_query("node", "Node", 'label_values(soak_run_info{run_id=~"$run"}, node)')
CHIP_VAR = variable_query("chip", "Chip", 'label_values(soak_device_up{node=~"$node"}, device)')


def fleet_overview() -> dict[str, Any]:
    lay = Layout()
    lay.row("Fleet at a glance")
    lay.add(stat("Nodes reporting", f"count(count by (node) (soak_device_up{{{CHIP}}}))",
                 "none", "Nodes with at least one chip series.", steps((None, BLUE))), 3, 4)
    lay.add(stat("Chips reporting", f"count(soak_device_up{{{CHIP}}})", "none",
                 "Chips with a series from the exporter (read OK or not).", steps((None, BLUE))),
            3, 4)
    lay.add(stat("Unhealthy chips", f"sum(1 - soak_device_healthy{{{CHIP}}})", "none",
                 "Chips whose health is not OK (npu-smi Warning/Alarm/Critical).",
                 COUNT_BAD_STEPS, decimals=0), 3, 4)
    lay.add(stat("Failed readings", f"sum(1 - soak_device_up{{{CHIP}}})", "none",
                 "Chips whose last reading failed (tool error, timeout).",
                 COUNT_BAD_STEPS, decimals=0), 3, 4)
    lay.add(stat("Mean utilization", f"avg(soak_device_utilization_ratio{{{CHIP}}})",
                 "percentunit", "AI core / SM utilization averaged over the selected chips.",
                 UTIL_STEPS), 3, 4)
    lay.add(stat("Hottest chip", f"max(soak_device_temperature_celsius{{{CHIP}}})", "celsius",
                 "Highest chip temperature now.", TEMP_STEPS), 3, 4)
    lay.add(stat("Fleet power", f"sum(soak_device_power_watts{{{CHIP}}})", "watt",
                 "Sum of chip power.", steps((None, BLUE))), 3, 4)
    lay.add(stat("Comm timeouts (range)",
                 f"sum(increase(soak_comm_timeouts_total{{{NODE}}}[$__range]))", "none",
                 "Collective communication timeouts counted over the dashboard time range.",
                 COUNT_BAD_STEPS, decimals=0), 3, 4)
    lay.add(node_table("Nodes now",
                       "One row per node: chips, faults, load, heat, power and communication "
                       "timeouts. In a cluster run all nodes should look alike; the odd one "
                       "out is the one to look at."), 24, 6)
    lay.add(chip_table("Chips now",
                       "One row per chip. Red cells need a look: health not OK, reading "
                       "failed, chip idle, hot, or HBM nearly full."), 24, 9)
    lay.row("Health over time")
    lay.add(status_history("Health per chip", f"max by (node, device) "
                           f"(soak_device_healthy{{{CHIP}}})", "{{node}} {{device}}", "none",
                           "Green OK, red a health fault reported by the vendor tool.",
                           HEALTH_STEPS, HEALTH_MAP), 12, 8)
    lay.add(status_history("Reading OK per chip", f"max by (node, device) "
                           f"(soak_device_up{{{CHIP}}})", "{{node}} {{device}}", "none",
                           "Red where the reading of that chip failed: a marked gap, not zero.",
                           HEALTH_STEPS, UP_MAP), 12, 8)
    lay.row("Load")
    lay.add(timeseries("Utilization", [(f"soak_device_utilization_ratio{{{CHIP}}}",
                                        "{{node}} {{device}}")], "percentunit",
                       "AI core (Ascend) / SM (NVIDIA) / CPU utilization, 0-1.",
                       minv=0, maxv=1), 12, 8)
    lay.add(timeseries("Temperature", [(f"soak_device_temperature_celsius{{{CHIP}}}",
                                        "{{node}} {{device}}")], "celsius",
                       "Chip temperature. Lines at 85 and 95 C match the alert thresholds.",
                       thresholds=steps((None, GREEN), (85, ORANGE), (95, RED))), 12, 8)
    lay.add(timeseries("HBM used", [(f'soak_device_memory_used_bytes{{{CHIP}, kind="hbm"}} / '
                                     f'soak_device_memory_total_bytes{{{CHIP}, kind="hbm"}}',
                                     "{{node}} {{device}}")], "percentunit",
                       "HBM in use as a share of capacity. A sawtooth is the allocator; a "
                       "rising floor is a leak (see the memory-creep alert).",
                       thresholds=HBM_STEPS, minv=0, maxv=1), 12, 8)
    lay.add(timeseries("Power", [(f"soak_device_power_watts{{{CHIP}}}",
                                  "{{node}} {{device}}")], "watt",
                       "Chip power (board power on Atlas inference cards).", minv=0), 12, 8)
    lay.row("Device faults")
    lay.add(fault_table("Device faults per chip",
                        "One row per chip: ECC error counts, pages isolated for them, its network "
                        "port and its flaps in the last hour, the fault codes it reports now and the "
                        "device-fault findings open on it. Red: an uncorrectable error or page, a port "
                        "down, more than 2 flaps (faults.max_link_flaps), a fault code, an open finding."),
            24, 8)
    lay.add(fault_codes_table("Fault codes now",
                              "Each fault code a chip reports now (npu-smi info -t health). "
                              "`soak faults lookup CODE` gives its level, meaning and action."), 8, 8)
    lay.add(fault_findings_table("Open device-fault findings",
                                 "The chips' own faults the run holds (soak run's fault watch, within one "
                                 "detail interval): metric fault_code, health, ecc_*, link, xid, row_remap, "
                                 "reset_pending; severity as the verdict weighs it."), 16, 8)
    lay.row("Communication and monitoring")
    lay.add(timeseries("Comm timeouts per 5 min",
                       [(f"sum by (node, source) "
                         f"(increase(soak_comm_timeouts_total{{{NODE}}}[5m]))",
                         "{{node}} {{source}}")], "none",
                       "Collective (HCCL/NCCL) timeouts seen in plogs and by the workload.",
                       thresholds=COUNT_BAD_STEPS, minv=0), 8, 8)
    lay.add(timeseries("Exporter snapshot age",
                       [(f"time() - soak_exporter_snapshot_timestamp_seconds{{{NODE}}}",
                         "{{node}} {{instance}}")], "s",
                       "Seconds since the snapshot the exporter serves was taken. Above 120 s "
                       "the device tools are hanging or the sampler stopped.",
                       thresholds=FRESH_STEPS, minv=0), 8, 8)
    lay.add(timeseries("Reader duration",
                       [(f"soak_reader_duration_seconds{{{NODE}}}", "{{node}} {{reader}}")],
                       "s", "Wall time of each reader's last call (npu-smi, hccn_tool, ...).",
                       minv=0), 8, 8)
    return dashboard("soak-fleet-overview", "soak / Fleet overview",
                     "Every node and chip under soak: health, load, memory, power, the chips' "
                     "own fault reports, communication and the health of the monitoring itself.",
                     ["fleet"], lay, [NODE_VAR, CHIP_VAR])


def chip_detail() -> dict[str, Any]:
    lay = Layout()
    node = variable_query("node", "Node", "label_values(soak_device_up, node)", multi=False)
    chip = variable_query("chip", "Chip", 'label_values(soak_device_up{node=~"$node"}, device)',
                          multi=False)
    lay.row("$node $chip now")
    lay.add(stat("Health", f"max(soak_device_healthy{{{CHIP}}})", "none",
                 "Vendor health of this chip.", HEALTH_STEPS, HEALTH_MAP), 4, 4)
    lay.add(stat("Reading", f"max(soak_device_up{{{CHIP}}})", "none",
                 "Whether the last reading of this chip succeeded.", HEALTH_STEPS, UP_MAP), 4, 4)
    lay.add(stat("Utilization", f"max(soak_device_utilization_ratio{{{CHIP}}})", "percentunit",
                 "AI core / SM utilization now.", UTIL_STEPS), 4, 4)
    lay.add(stat("Temperature", f"max(soak_device_temperature_celsius{{{CHIP}}})", "celsius",
                 "Chip temperature now.", TEMP_STEPS), 4, 4)
    lay.add(stat("HBM used", f'max(soak_device_memory_used_bytes{{{CHIP}, kind="hbm"}})',
                 "bytes", "HBM in use now.", steps((None, BLUE))), 4, 4)
    lay.add(stat("Power", f"max(soak_device_power_watts{{{CHIP}}})", "watt",
                 "Chip power now.", steps((None, BLUE))), 4, 4)
    lay.row("Timelines")
    lay.add(timeseries("Utilization", [(f"soak_device_utilization_ratio{{{CHIP}}}",
                                        "utilization")], "percentunit",
                       "Drops to zero at checkpoints and evals are normal; long flat zeros "
                       "with HBM held are a hang.", minv=0, maxv=1), 12, 8)
    lay.add(timeseries("Temperature", [(f"soak_device_temperature_celsius{{{CHIP}}}",
                                        "temperature")], "celsius", "Chip temperature.",
                       thresholds=steps((None, GREEN), (85, ORANGE), (95, RED))), 12, 8)
    lay.add(timeseries("Memory", [
        (f'soak_device_memory_used_bytes{{{CHIP}, kind="hbm"}}', "HBM used"),
        (f'soak_device_memory_total_bytes{{{CHIP}, kind="hbm"}}', "HBM total"),
        (f'min_over_time(soak_device_memory_used_bytes{{{CHIP}, kind="hbm"}}[30m])',
         "HBM floor (30 min min)"),
    ], "bytes", "Used and total HBM, and the 30-minute floor the creep alert trends: the "
                "floor stays flat under an allocator sawtooth and rises on a leak.",
        minv=0), 12, 8)
    lay.add(timeseries("Power", [(f"soak_device_power_watts{{{CHIP}}}", "power")], "watt",
                       "Chip power.", minv=0), 12, 8)
    lay.add(timeseries("Health and reading", [
        (f"soak_device_healthy{{{CHIP}}}", "healthy"),
        (f"soak_device_up{{{CHIP}}}", "reading ok"),
    ], "none", "1 = OK. A dip of 'reading ok' is a failed tool call, not a chip fault.",
        minv=0, maxv=1), 12, 8)
    lay.add(timeseries("Comm timeouts on this node per 5 min",
                       [(f"sum by (source) (increase(soak_comm_timeouts_total{{{NODE}}}[5m]))",
                         "{{source}}")], "none",
                       "Communication timeouts are counted per node (plog) and per rank.",
                       thresholds=COUNT_BAD_STEPS, minv=0), 12, 8)
    lay.row("Device faults")
    lay.add(timeseries("ECC errors", [
        (f'soak_device_ecc_errors_total{{{CHIP}, type="single"}}', "correctable (single-bit)"),
        (f'soak_device_ecc_errors_total{{{CHIP}, type="double"}}', "uncorrectable (double-bit)"),
    ], "none", "ECC error counts the chip reports (npu-smi info -t ecc; NVML). Any uncorrectable "
               "error fails the soak (SoakUncorrectableEcc).", minv=0), 8, 8)
    lay.add(timeseries("Isolated pages", [
        (f'soak_device_ecc_isolated_pages{{{CHIP}, type="single"}}', "single-bit"),
        (f'soak_device_ecc_isolated_pages{{{CHIP}, type="double"}}', "double-bit"),
    ], "none", "Memory pages the chip took out of service for ECC errors: a double-bit page fails "
               "the soak, a single-bit page warns.", minv=0), 8, 8)
    lay.add(timeseries("Port up and up count", [
        (f"soak_device_link_up{{{CHIP}}}", "port up"),
        (f"soak_device_link_ups_total{{{CHIP}}}", "times up (hccn_tool -link_stat)"),
    ], "none", "1 while the chip's network port is up; the up count steps by one per flap. Down "
               "past 60 s (faults.max_link_down_s) or more than 2 flaps (faults.max_link_flaps) fail "
               "the soak.", minv=0), 8, 8)
    lay.add(fault_codes_table("Fault codes now",
                              "The fault codes this chip reports now (npu-smi info -t health). "
                              "`soak faults lookup CODE` gives each code's level, meaning and action."), 8, 8)
    lay.add(fault_findings_table("Open device-fault findings",
                                 "This chip's own faults the run holds, with the severity the verdict gives "
                                 "them (soak run's fault watch, within one detail interval)."), 16, 8)
    return dashboard("soak-chip-detail", "soak / Chip detail",
                     "One chip's timelines: load, temperature, memory floor, power, health, "
                     "and its own fault reports.",
                     ["chip"], lay, [node, chip])


def soak_run() -> dict[str, Any]:
    lay = Layout()
    lay.row("Run $run")
    lay.add(stat("Verdict so far", f"min(soak_run_verdict_pass{{{RUN_NODE}}})", "none",
                 "PASS while no failing finding has been seen; FAIL as soon as one is.",
                 HEALTH_STEPS, VERDICT_MAP), 4, 5)
    lay.add(stat("Nodes reporting", f"count(count by (node) (soak_run_info{{{RUN}}}))", "none",
                 "Nodes serving this run now; a cluster run that loses one raises "
                 "SoakNodeMissing.", steps((None, BLUE))), 4, 5)
    lay.add(stat("Elapsed", f"max(soak_run_elapsed_seconds{{{RUN_NODE}}})", "dtdurations",
                 "Time since the run started.", steps((None, BLUE))), 4, 5)
    lay.add(stat("Remaining", f"max(soak_run_remaining_seconds{{{RUN_NODE}}})", "dtdurations",
                 "Planned time left.", steps((None, BLUE))), 4, 5)
    lay.add(stat("Restarts", f"max(soak_run_restarts_total{{{RUN_NODE}}})", "none",
                 "Workload restarts after a crash or hang (resumed from checkpoint).",
                 steps((None, GREEN), (1, ORANGE), (3, RED)), decimals=0), 4, 5)
    lay.add(stat("Findings", f"sum(soak_run_findings{{{RUN_NODE}}})", "none",
                 "Findings raised so far by the online detectors.",
                 COUNT_BAD_STEPS, decimals=0), 4, 5)
    lay.row("Progress")
    lay.add(timeseries("Step", [(f"soak_run_step{{{RUN_NODE}}}", "{{run_id}} {{node}} rank {{rank}}")],
                       "none", "Global optimizer step per rank. A flat line while the run is "
                       "active is a hang.", minv=0), 12, 8)
    lay.add(timeseries("Step time", [(f"soak_run_step_time_seconds{{{RUN_NODE}}}",
                                      "{{run_id}} {{node}} rank {{rank}}")], "s",
                       "Wall time of the last step per rank: a slow rank stands out.",
                       minv=0), 12, 8)
    lay.add(timeseries("Tokens per second", [(f"soak_run_tokens_per_second{{{RUN_NODE}}}",
                                              "{{run_id}} {{node}} rank {{rank}}")], "none",
                       "Language-model throughput per rank.", minv=0), 12, 8)
    lay.add(timeseries("Heartbeat age", [(f"time() - soak_run_last_heartbeat_timestamp_seconds"
                                          f"{{{RUN_NODE}}}", "{{run_id}} {{node}} rank {{rank}}")], "s",
                       "Seconds since each rank last wrote a heartbeat.",
                       thresholds=steps((None, GREEN), (60, YELLOW), (300, RED)), minv=0),
            12, 8)
    lay.row("Findings and restarts")
    lay.add(bargauge("Findings by kind", f"sum by (kind, severity) (soak_run_findings{{{RUN_NODE}}})",
                     "{{kind}} ({{severity}})", "Findings so far, by kind and severity.", COUNT_BAD_STEPS), 12, 8)
    lay.add(timeseries("Restarts", [(f"soak_run_restarts_total{{{RUN_NODE}}}", "{{run_id}}")],
                       "none", "Cumulative workload restarts.", minv=0), 12, 8)
    return dashboard("soak-run", "soak / Soak run",
                     "One soak run: time elapsed and left, progress per rank, throughput, "
                     "findings and the verdict so far.",
                     ["run"], lay, [RUN_VAR, RUN_NODE_VAR], refresh="30s", time_from="now-24h")


# The cluster dashboard reads what soak's analysis reads, through the recording rules of
# alerts.yaml (group soak-peers), with the acceptance profile's floors as thresholds.
TEMP_DEV_STEPS = steps((None, BLUE), (-2, GREEN), (2, YELLOW), (4.5, RED))  # peers.temp_min_c
STRAGGLER_STEPS = steps((None, GREEN), (1.05, ORANGE), (1.1, RED))  # step_min_frac, straggler_fail_frac
LINK_STEPS = steps((None, RED), (0.8, GREEN))  # links.max_below_median_frac
CRITERION_MAP = value_map("MISSED", "met")
CLOCK_STEPS = steps((None, RED), (-2, GREEN), (2, RED))  # cluster.max_clock_offset


def matrix(title: str, expr: str, unit: str, thresholds: dict[str, Any], description: str,
           decimals: int = 2) -> dict[str, Any]:
    """A node x peer table: one row per node, one column per peer, a coloured cell per pair."""
    return panel(
        "table", title, description,
        fieldConfig={
            "defaults": {"unit": unit, "decimals": decimals, "thresholds": thresholds,
                         "color": {"mode": "thresholds"},
                         "custom": {"align": "center",
                                    "cellOptions": {"type": "color-background", "mode": "basic"}}},
            "overrides": [{"matcher": {"id": "byName", "options": "node\\peer"},
                           "properties": [{"id": "custom.cellOptions", "value": {"type": "auto"}}]}],
        },
        options={"showHeader": True, "cellHeight": "sm"},
        targets=[target(expr, instant=True, fmt="table")],
        transformations=[
            {"id": "groupingToMatrix", "options": {"columnField": "peer", "rowField": "node",
                                                   "valueField": "Value"}},
        ],
    )


def annotation(name: str, expr: str, color: str, title: str, tags: str) -> dict[str, Any]:
    """A Prometheus annotation: a mark wherever ``expr`` returns a series."""
    return {"name": name, "datasource": DS, "enable": True, "hide": False, "iconColor": color,
            "expr": expr, "step": "1m", "titleFormat": title, "tagKeys": tags, "textFormat": "",
            "useValueForTime": False}


def cluster() -> dict[str, Any]:
    lay = Layout()
    lay.row("Run $run: the verdict so far")
    lay.add(stat("Criteria so far", f"max by (criterion) (soak_run_verdict_so_far{{{RUN}}})", "none",
                 "Each criterion the judging node has judged so far: met, or MISSED. A criterion not "
                 "judged yet is not shown.", HEALTH_STEPS, CRITERION_MAP, legend="{{criterion}}"), 12, 6)
    lay.add(bargauge("Nodes by status", f"max by (status) (soak_cluster_nodes{{{RUN}}})", "{{status}}",
                     "The run's nodes in each status, as the judging node reads them from the store.",
                     steps((None, BLUE)),
                     overrides=[{"matcher": {"id": "byName", "options": name},
                                 "properties": [{"id": "thresholds", "value": steps((None, GREEN), (1, RED))}]}
                                for name in ("lost", "failed")]), 6, 6)
    lay.add(stat("Open findings", f"count(soak_finding_active{{{RUN_NODE}}}) or vector(0)", "none",
                 "Findings the run's latest analysis holds on the selected nodes.",
                 COUNT_BAD_STEPS, decimals=0), 3, 6)
    lay.add(stat("Worst clock offset", f"max(abs(soak_node_clock_offset_seconds{{{RUN_NODE}}}))", "s",
                 "The largest distance of a node's clock from the store's (2 s: cluster.max_clock_offset).",
                 steps((None, GREEN), (2, RED))), 3, 6)
    lay.row("Run $run: reliability so far")
    lay.add(stat("ETTR so far", f"max(soak_run_ettr_ratio{{{RUN}}})", "percentunit",
                 "Effective training time ratio so far: productive training over the time so far less the "
                 "plan's injected faults (the acceptance report's figure, from the latest analysis).",
                 steps((None, BLUE))), 4, 6)
    lay.add(stat("Node MTTF, 90 % lower bound", f"max(soak_run_node_mttf_lower90_seconds{{{RUN}}})", "s",
                 "With 90 % confidence a node's mean time to failure is at least this, from the node-hours and "
                 "unexpected failures so far (2T / chi2(0.90; 2r+2)): a bound, not a forecast.",
                 steps((None, BLUE))), 4, 6)
    lay.add(bargauge("Failures by cause", f"max by (cause) (soak_run_failures{{{RUN}}})", "{{cause}}",
                     "Unexpected failures of the machine so far: crashes and hangs not injected, nodes lost, "
                     "link failures.", steps((None, GREEN), (1, RED))), 6, 6)
    lay.add(timeseries("Time lost by cause", [(f"max by (cause) (soak_run_lost_seconds{{{RUN}}}) > 0", "{{cause}}")],
                       "s", "Time so far in which the job did not train productively, by cause: failures and "
                       "their restart, soak's own outages, start-up, and inside the training checkpoints, link "
                       "tests, data stalls and work redone since the last checkpoint.", stack=True, minv=0), 10, 6)
    lay.row("Chips against their siblings")
    lay.add(status_history(
        "Chip temperature against its node's median",
        f"max by (node, device) (soak:chip_temperature_vs_node_median:celsius{{{NODE}}})",
        "{{node}} {{device}}", "celsius",
        "Node x chip: each chip's temperature minus its node's median, while its power is within 10 % "
        "of the node's median (nodes of 3 chips or more). Red from 4.5 °C: SoakChipOutOfLine, and an "
        "outlier finding once it lasts 2 h of run time.", TEMP_DEV_STEPS), 24, 9)
    lay.row("Stragglers")
    cols = [
        ("A", f"max by (node) (soak:node_compute_seconds:median{{{RUN_NODE}}})", "s", steps((None, BLUE)),
         "Compute time (median)", None),
        ("B", f"max by (node) (soak:node_compute_vs_cluster_median:ratio{{{RUN_NODE}}})", "none",
         STRAGGLER_STEPS, "Over the cluster median", None),
    ]
    lay.add(table("Stragglers: nodes", "Each node's time outside the collectives (its ranks' median) and "
                  "that over the cluster's median node: above 1.05 a straggler, above 1.1 it fails the run.",
                  cols, {"node": "Node"}, "Node"), 8, 8)
    rank_ratio = (f"max by (node, rank) (soak_rank_compute_seconds{{{RUN_NODE}}} / on (run_id) group_left "
                  f"quantile by (run_id) (0.5, soak_rank_compute_seconds{{{RUN}}}))")
    cols = [
        ("A", f"max by (node, rank) (soak_rank_compute_seconds{{{RUN_NODE}}})", "s", steps((None, BLUE)),
         "Compute time (last step)", None),
        ("B", rank_ratio, "none", STRAGGLER_STEPS, "Over the median rank", None),
    ]
    lay.add(table("Stragglers: ranks", "Each rank's last step outside the collectives, and that over the "
                  "median rank of the run.", cols, {"node": "Node", "rank": "Rank"}, "Node"), 8, 8)
    lay.add(timeseries("Node compute time over the cluster median",
                       [(f"soak:node_compute_vs_cluster_median:ratio{{{RUN_NODE}}}", "{{node}}")], "none",
                       "1 = the cluster's median node. Lines at 1.05 (straggler) and 1.1 (fails the run).",
                       thresholds=STRAGGLER_STEPS, minv=0), 8, 8)
    lay.row("Links")
    lay.add(matrix("Link matrix: bus bandwidth over the test's median",
                   f"max by (node, peer) (soak:link_busbw_vs_test_median:ratio{{{RUN_NODE}}})", "percentunit",
                   LINK_STEPS, "Node x peer in the last pairwise link test: each pair's bus bandwidth as a "
                   "share of the test's median pair. Red below 80 %: SoakLinkSlow. A row red everywhere "
                   "is the node; one red pair is the path between two nodes.", decimals=0), 10, 8)
    lay.add(matrix("Link matrix: bus bandwidth", f"max by (node, peer) (soak_link_busbw_gbps{{{RUN_NODE}}})",
                   "none", steps((None, BLUE)), "Node x peer: bus bandwidth (GB/s) of each pair in the "
                   "last link test.", decimals=1), 10, 8)
    lay.add(stat("Last link test", f"max(soak_link_test_timestamp_seconds{{{RUN}}}) * 1000", "dateTimeAsIso",
                 "When the last link test ran (the run's time line: accelerated in a simulated run).",
                 steps((None, BLUE))), 4, 8)
    lay.row("Findings and nodes")
    lay.add(findings_table("Findings", f"max by (node, device, kind, severity, metric, code) "
                           f"(soak_finding_active{{{RUN_NODE}}})",
                           "What the report will say: each finding the run's latest analysis holds. "
                           "The judging node serves the peer comparison's findings, each with the node "
                           "it names."), 12, 8)
    lay.add(timeseries("Nodes by status over time", [(f"max by (status) (soak_cluster_nodes{{{RUN}}})", "{{status}}")],
                       "none", "The run's nodes in each status over time: a lost node is a step here "
                       "and an annotation on every panel.", minv=0), 6, 8)
    lay.add(timeseries("Clock offset against the store",
                       [(f"soak_node_clock_offset_seconds{{{RUN_NODE}}}", "{{node}}")], "s",
                       "Each node's clock minus the store's, measured at join and every 5 minutes. "
                       "Past 2 s: SoakNodeClockSkew.", thresholds=CLOCK_STEPS), 6, 8)
    board = dashboard("soak-cluster", "soak / Cluster",
                      "A cluster run as the report will judge it: chips against their siblings, "
                      "straggler nodes and ranks, the link matrix, open findings, the verdict so far "
                      "and the nodes by status.", ["cluster"], lay, [RUN_VAR, RUN_NODE_VAR],
                      time_from="now-6h")
    board["annotations"]["list"] += [
        annotation("Findings", f"count by (node, kind, severity) (soak_finding_active{{{RUN_NODE}}} unless "
                   f"soak_finding_active{{{RUN_NODE}}} offset 2m)", ORANGE, "finding {{kind}} ({{severity}})",
                   "node,kind,severity"),
        annotation("Node lost", f"max by (run_id) (soak_cluster_nodes{{{RUN}, status=\"lost\"}}) > "
                   f"max by (run_id) (soak_cluster_nodes{{{RUN}, status=\"lost\"}} offset 2m)", RED,
                   "node lost in run {{run_id}}", "run_id"),
    ]
    return board


DASHBOARDS = {
    "fleet-overview.json": fleet_overview,
    "chip-detail.json": chip_detail,
    "soak-run.json": soak_run,
    "cluster.json": cluster,
}


def render(build: Any) -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a file is out of date")
    args = ap.parse_args(argv)
    stale = []
    for name, build in DASHBOARDS.items():
        path = HERE / name
        text = render(build)
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print("out of date (run python dashboards/generate.py): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
