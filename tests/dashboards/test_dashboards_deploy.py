"""Deployment files, each checked by a tool made for it: systemd-analyze, the Kubernetes
OpenAPI schemas (kubernetes-validate), the compose-spec schema (check-jsonschema), promtool."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
PROMTOOL = shutil.which("promtool")
SOAK = Path(sys.executable).with_name("soak")


def _tool(module: str) -> list[str]:
    """A validator installed in this Python environment, run as a module."""
    pytest.importorskip(module, reason=f"{module} not installed (pip install it; CI does)")
    return [sys.executable, "-m", module]


@pytest.fixture
def units(tmp_path) -> Path:
    """The unit files with ExecStart pointed at this environment's soak, so systemd-analyze
    can check that the command exists; the template gets an instance name."""
    for unit in (DEPLOY / "systemd").glob("*.service"):
        text = unit.read_text().replace("/opt/soak/venv/bin/soak", str(SOAK))
        name = unit.name.replace("@.service", "@ci.service")
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze not installed")
def test_systemd_units_verify_clean(units):
    files = sorted(str(p) for p in units.glob("*.service"))
    assert len(files) == 2
    out = subprocess.run([SYSTEMD_ANALYZE, "verify", *files], capture_output=True, text=True)
    ours = [line for line in (out.stdout + out.stderr).splitlines() if "soak-" in line]
    assert out.returncode == 0 and ours == [], out.stdout + out.stderr


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze not installed")
def test_systemd_analyze_reports_a_broken_unit(units):
    """The check above can fail: a bad value in our unit is reported."""
    path = units / "soak-run@ci.service"
    path.write_text(path.read_text().replace("Type=notify", "Type=notifyy"))
    out = subprocess.run([SYSTEMD_ANALYZE, "verify", str(path)], capture_output=True, text=True)
    assert "Failed to parse service type" in out.stdout + out.stderr


def test_systemd_run_unit_settings():
    text = (DEPLOY / "systemd" / "soak-run@.service").read_text()
    for line in ("Type=notify", "WatchdogSec=120s", "Restart=on-failure", "NoNewPrivileges=yes",
                 "ProtectSystem=strict", "ReadWritePaths=/var/lib/soak", "ProtectHome=yes",
                 "PrivateTmp=yes", "DevicePolicy=closed", "DeviceAllow=/dev/davinci_manager rw",
                 "DeviceAllow=/dev/devmm_svm rw", "DeviceAllow=/dev/hisi_hdc rw",
                 "DeviceAllow=/dev/davinci0 rw", "Conflicts=soak-exporter.service",
                 # torch's stores run what is written to them: no public network, files its own
                 "UMask=0077", "IPAddressDeny=any", "IPAddressAllow=localhost"):
        assert line in text.splitlines(), line
    assert "--resume %i" in text and "--run-id %i" in text


def test_kubernetes_manifests_match_the_api_schemas():
    files = sorted(str(p) for p in (DEPLOY / "kubernetes").glob("*.yaml"))
    cmd = _tool("kubernetes_validate") + ["--strict", "--kubernetes-version", "1.30", *files]
    out = subprocess.run(cmd, capture_output=True, text=True)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    for kind in ("daemonset/soak-exporter", "job/soak-run", "service/soak-exporter",
                 "service/soak-run", "networkpolicy/soak-metrics-from-prometheus",
                 "configmap/soak-plan"):
        assert f"passed for resource {kind}" in text
    # only the Prometheus Operator's CRD has no built-in schema
    assert [line for line in text.splitlines() if "WARN" in line or "ERROR" in line] == [
        line for line in text.splitlines() if "ServiceMonitor" in line]


def test_kubernetes_schema_check_can_fail(tmp_path):
    doc = (DEPLOY / "kubernetes" / "exporter-daemonset.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(doc.replace("containerPort: 19400", "containerPort: metrics-port"))
    out = subprocess.run(_tool("kubernetes_validate") + ["--strict", str(bad)],
                         capture_output=True, text=True)
    assert out.returncode != 0


def _docs(name: str) -> list[dict]:
    return list(yaml.safe_load_all((DEPLOY / "kubernetes" / name).read_text()))


def test_kubernetes_wiring():
    ds = _docs("exporter-daemonset.yaml")[0]
    pod = ds["spec"]["template"]["spec"]
    host_paths = {v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert {"/usr/local/Ascend/driver", "/usr/local/dcmi", "/usr/local/bin/npu-smi",
            "/var/log/npu"} <= host_paths
    job = next(d for d in _docs("soak-job.yaml") if d["kind"] == "Job")
    limits = job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["huawei.com/Ascend910"] == 8
    sm = _docs("servicemonitor.yaml")[0]
    assert sm["apiVersion"] == "monitoring.coreos.com/v1" and sm["kind"] == "ServiceMonitor"
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    # the judging node's peer findings keep the node they name over the target's `node`
    assert sm["spec"]["endpoints"][0]["honorLabels"] is True
    services = _docs("service.yaml")
    # the job label is the Service name: the alert rules select up{job=~"soak.*"}
    assert all(s["metadata"]["name"].startswith("soak") for s in services)
    assert all(s["metadata"]["labels"] | sm["spec"]["selector"]["matchLabels"] ==
               s["metadata"]["labels"] for s in services)
    # the exporter reads the plogs only; the run is no root, seccomp'd, on a read-only root
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["npu-log"]["readOnly"] is True
    spec = job["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = spec["containers"][0]["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["capabilities"] == {"drop": ["ALL"]}
    assert {"/tmp", "/dev/shm", "/var/lib/soak"} <= {m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
    pol = _docs("networkpolicy.yaml")[0]
    assert pol["spec"]["policyTypes"] == ["Ingress"]
    assert pol["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 19400}]


def test_kubernetes_plan_is_a_valid_soak_plan(tmp_path):
    from soak.config import load_plan

    cm = next(d for d in _docs("soak-job.yaml") if d["kind"] == "ConfigMap")
    (tmp_path / "plan.toml").write_text(cm["data"]["plan.toml"])
    plan = load_plan(tmp_path / "plan.toml")
    assert plan.run.duration_s == 72 * 3600
    assert plan.devices.backend == "npu"


def test_compose_files_match_the_compose_spec():
    files = [str(DEPLOY / "compose" / n) for n in ("compose.yaml", "compose.ascend.yaml")]
    out = subprocess.run(_tool("check_jsonschema") + ["--builtin-schema", "vendor.compose-spec",
                                                      *files], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_compose_schema_check_can_fail(tmp_path):
    bad = tmp_path / "compose.yaml"
    bad.write_text((DEPLOY / "compose" / "compose.yaml").read_text().replace(
        "    ports:\n", "    portz:\n", 1))
    out = subprocess.run(_tool("check_jsonschema") + ["--builtin-schema", "vendor.compose-spec",
                                                      str(bad)], capture_output=True, text=True)
    assert out.returncode == 1 and "'portz' was unexpected" in out.stdout


def test_compose_requires_the_grafana_password_and_has_no_lifecycle_api():
    doc = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    password = doc["services"]["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"]
    assert password.startswith("${GRAFANA_ADMIN_PASSWORD:?")  # no default: "change-me" was one
    assert "--web.enable-lifecycle" not in doc["services"]["prometheus"]["command"]
    ascend = yaml.safe_load((DEPLOY / "compose" / "compose.ascend.yaml").read_text())
    assert "/var/log/npu:/var/log/npu:ro" in ascend["services"]["soak-exporter"]["volumes"]


def test_compose_mounts_exist_in_the_repository():
    doc = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    sources = [v.split(":")[0] for s in doc["services"].values() for v in s.get("volumes", [])
               if v.startswith(".")]
    assert len(sources) >= 6
    for src in sources:
        assert (DEPLOY / "compose" / src).exists(), src


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed")
def test_compose_prometheus_config(tmp_path):
    text = (DEPLOY / "compose" / "prometheus.yml").read_text().replace(
        "/etc/prometheus/soak/alerts.yaml", str(REPO / "dashboards" / "alerts.yaml"))
    (tmp_path / "prometheus.yml").write_text(text)
    out = subprocess.run([PROMTOOL, "check", "config", str(tmp_path / "prometheus.yml")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 1 rule files found" in out.stdout


def test_grafana_provisioning_uses_the_fixed_datasource_uid():
    prov = REPO / "dashboards" / "provisioning"
    ds = yaml.safe_load((prov / "datasources" / "soak.yaml").read_text())["datasources"][0]
    assert (ds["uid"], ds["type"]) == ("soak-prometheus", "prometheus")
    provider = yaml.safe_load((prov / "dashboards" / "soak.yaml").read_text())["providers"][0]
    assert provider["type"] == "file" and provider["options"]["path"].startswith("/var/lib/grafana")


def test_restart_scripts_resume_the_run_and_parse_as_shell():
    """Both the systemd unit and the Job restart a dead daemon by resuming the same run."""
    unit = (DEPLOY / "systemd" / "soak-run@.service").read_text()
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    script = exec_start.split("-c '", 1)[1].rstrip("'").replace("%i", "acceptance-01")
    job = next(d for d in _docs("soak-job.yaml") if d["kind"] == "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    # the shell's own "$RUN_ID", quoted: Kubernetes' $(RUN_ID) pasted the value into the script
    assert "$(RUN_ID)" not in container["args"][0] and '"$RUN_ID"' in container["args"][0]
    job_script = container["args"][0].replace('"$RUN_ID"', container["env"][0]["value"])
    for text in (script, job_script):
        assert "soak run --resume acceptance-01" in text
        assert "--run-id acceptance-01" in text
        out = subprocess.run(["sh", "-n", "-c", text], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
