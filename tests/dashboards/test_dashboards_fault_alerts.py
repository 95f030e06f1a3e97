"""The device-fault alerts fire on what soak really serves for a faulty chip.

alerts_test.yaml writes its label sets by hand; here a chip's fault reports go through the real
path instead (the fault watch, the daemon's open findings, the collectors, a /metrics scrape),
and every scraped sample becomes a promtool input series, labelled as Prometheus stores a
target that deploy/'s scrape configs give a `node` label. promtool then says which alerts fire.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from soak.analysis.device_faults import FaultWatch
from soak.analysis.numerics import NumericTally
from soak.daemon.lifecycle import Daemon
from tests.dashboards.test_dashboards_served_names import EVERY_FIELD, RUN, SNAPSHOT, served_samples

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (Debian package 'prometheus'; CI installs it)")

TARGET = {"instance": "n1:9102", "job": "soak-run", "node": "n1"}
FAULT_ALERTS = "SoakDeviceFaultCode|SoakUncorrectableEcc|SoakPortDown|SoakPortFlapping|SoakGpuXid|SoakFindingOpen"


def _series(name: str, labels: dict[str, str]) -> str:
    body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{body}}}"


def _firing(tmp_path: Path, samples: list[tuple[str, dict[str, str], float]], at: str,
            expected: list[dict[str, str]], alerts: Sequence[dict[str, object]] = ()) -> subprocess.CompletedProcess[str]:
    test = {
        "rule_files": [str(DASHBOARDS / "alerts.yaml")],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [{"series": _series(n, {**lv, **TARGET}), "values": f"{v:g}x10"}
                             for n, lv, v in samples],
            "promql_expr_test": [{
                "expr": f'ALERTS{{alertstate="firing", alertname=~"{FAULT_ALERTS}"}}',
                "eval_time": at,
                "exp_samples": [{"labels": _series("ALERTS", {"alertstate": "firing", **e}), "value": 1}
                                for e in expected],
            }],
            "alert_rule_test": list(alerts),
        }],
    }
    path = tmp_path / "served_test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    return subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, timeout=60)


def test_a_910b_chip_that_reports_a_separate_npu_code_an_uncorrectable_error_and_its_port_down(tmp_path):
    chip = replace(EVERY_FIELD, fault_codes=("80E3A201", "8C03A000"), fault_texts=("", ""),
                   ecc_double_bit_errors=2, link_up=False)
    snapshot = replace(SNAPSHOT, devices=(chip,))
    watch = FaultWatch()
    watch.track(snapshot)
    # what `soak run` serves before its first analysis: the fault watch's open findings
    daemon = SimpleNamespace(found=None, membership=SimpleNamespace(node=None), fault_watch=watch,
                             numerics=NumericTally())
    run = replace(RUN, open_findings=Daemon._open_findings(daemon), findings={})
    samples = served_samples(snapshot, run)
    assert {(lv.get("metric"), lv.get("severity")) for n, lv, _ in samples if n == "soak_finding_active"} == {
        ("fault_code", "fail"), ("ecc_uncorrectable", "fail"), ("link", "warn")}

    chip_labels = {"device": "npu0-0", "npu_id": "0", "chip_id": "0", "model": "910B3", "bus_id": "0000:C1:00.0"}
    finding = {**TARGET, "run_id": "r", "kind": "device_fault", "device": "npu0-0"}
    expected = [
        {"alertname": "SoakDeviceFaultCode", "severity": "critical", "finding_severity": "fail", **finding,
         "metric": "fault_code", "code": "device_fault.fault_code"},
        {"alertname": "SoakUncorrectableEcc", "severity": "critical", "node": "n1", "device": "npu0-0"},
        {"alertname": "SoakPortDown", "severity": "critical", **TARGET, **chip_labels},
        # the port's finding is no alert of its own: SoakFindingOpen carries it
        {"alertname": "SoakFindingOpen", "severity": "warning", "finding_severity": "warn", **finding,
         "metric": "link", "code": "device_fault.link"},
    ]
    # the alert names the codes the chip serves now
    (code_alert,) = [{k: v for k, v in e.items() if k != "alertname"} for e in expected
                     if e["alertname"] == "SoakDeviceFaultCode"]
    description = ("The chip reported a fault code whose level in the fault-code table isolates the chip: the "
                   "run fails. Codes it reports now: 80E3A201, 8C03A000. `soak faults lookup CODE` gives each "
                   "code's level, meaning and action.")
    alerts = [{"eval_time": "3m", "alertname": "SoakDeviceFaultCode", "exp_alerts": [{
        "exp_labels": code_alert,
        "exp_annotations": {"summary": "npu0-0 on n1 reports a fault code (fail) in run r", "description": description,
                            "runbook_url": "https://github.com/soak-project/soak/blob/main/dashboards/runbook.md"
                                           "#soakdevicefaultcode"}}]}]
    out = _firing(tmp_path, samples, "3m", expected, alerts)
    assert out.returncode == 0, out.stdout + out.stderr
    # the same chip without a fault, in a run with no finding open: nothing fires
    quiet = replace(SNAPSHOT, devices=(replace(EVERY_FIELD, fault_codes=(), fault_texts=()),))
    out = _firing(tmp_path, served_samples(quiet, replace(RUN, open_findings=())), "3m", [])
    assert out.returncode == 0, out.stdout + out.stderr
