"""deploy/kubernetes/cluster: the Indexed Job and the Volcano Job of a cluster soak, checked
offline. Built-in kinds against the Kubernetes OpenAPI schemas (kubernetes-validate --strict);
the vcjob against Volcano's published CRD schema (tests/fixtures/volcano, provenance there),
made strict the way kubeconform's -strict is. Then the wiring the schemas cannot see: ranks,
node count, rendezvous name, the Secret, the same chips and mounts as the single-node Job."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "deploy" / "kubernetes" / "cluster"
VOLCANO_CRD = REPO / "tests" / "fixtures" / "volcano" / "batch.volcano.sh_jobs.yaml"
# Volcano's job actions (staging/src/volcano.sh/apis/pkg/apis/bus/v1alpha1/actions.go); the
# CRD types `action` as a plain string, so a typo would pass the schema.
VOLCANO_JOB_ACTIONS = {"AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition",
                       "TerminateJob", "CompleteJob", "ResumeJob"}


def _docs(name: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((CLUSTER / name).read_text()))


def _one(name: str) -> dict[str, Any]:
    (doc,) = _docs(name)
    return doc


INDEXED = _one("indexed-job.yaml")
VCJOB = _one("volcano-job.yaml")
SERVICE = _one("service.yaml")


def _pod(job: dict[str, Any]) -> dict[str, Any]:
    if job["apiVersion"].startswith("batch.volcano.sh/"):
        return job["spec"]["tasks"][0]["template"]["spec"]
    return job["spec"]["template"]["spec"]


def _strict(schema: Any) -> Any:
    """An object schema that lists its properties rejects others (kubeconform -strict), except
    where the CRD keeps unknown fields on purpose."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def _volcano_errors(doc: dict[str, Any]) -> list[str]:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed "
                                     "(it comes with check-jsonschema)")
    crd = yaml.safe_load(VOLCANO_CRD.read_text())
    assert crd["spec"]["group"] == "batch.volcano.sh" and crd["spec"]["names"]["kind"] == "Job"
    group, version = doc["apiVersion"].split("/")
    assert group == crd["spec"]["group"] and doc["kind"] == crd["spec"]["names"]["kind"]
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
    validator = jsonschema.Draft7Validator(_strict(served["schema"]["openAPIV3Schema"]))
    return sorted(f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
                  for e in validator.iter_errors(doc))


def test_built_in_kinds_match_the_api_schemas():
    files = sorted(str(p) for p in CLUSTER.glob("*.yaml"))
    pytest.importorskip("kubernetes_validate", reason="kubernetes-validate not installed")
    out = subprocess.run([sys.executable, "-m", "kubernetes_validate", "--strict",
                          "--kubernetes-version", "1.30", *files], capture_output=True, text=True)
    text = out.stdout + out.stderr
    for kind in ("job/soak-cluster", "service/soak-cluster", "configmap/soak-cluster-plan",
                 "networkpolicy/soak-cluster-peers"):
        assert f"passed for resource {kind}" in text, text
    # the vcjob has no built-in schema; it is checked against Volcano's CRD below
    problems = [line for line in text.splitlines() if "WARN" in line or "ERROR" in line]
    assert problems == [line for line in problems if "volcano-job.yaml" in line
                        and "batch.volcano.sh/v1alpha1" in line] and len(problems) == 1, text


@pytest.mark.slow
def test_volcano_job_matches_volcanos_crd_schema():
    assert _volcano_errors(VCJOB) == []


@pytest.mark.parametrize("change,error", [
    (lambda d: d["spec"].update(minAvaliable=2), "spec: Additional properties are not allowed "
                                                 "('minAvaliable' was unexpected)"),
    (lambda d: d["spec"]["policies"][0].update(event="PodLost"), "spec.policies.0.event: "
                                                                 "'PodLost' is not one of"),
    (lambda d: d["spec"]["tasks"][0].update(replicas="2"), "spec.tasks.0.replicas: '2' is not "
                                                           "of type 'integer'"),
    (lambda d: _pod(d)["containers"][0].update(volumeMount=[]),
     "spec.tasks.0.template.spec.containers.0: Additional properties are not allowed "
     "('volumeMount' was unexpected)"),
    (lambda d: _pod(d)["containers"][0].pop("name"),
     "spec.tasks.0.template.spec.containers.0: 'name' is a required property"),
])
@pytest.mark.slow
def test_volcano_schema_check_can_fail(change, error):
    doc = yaml.safe_load((CLUSTER / "volcano-job.yaml").read_text())
    change(doc)
    errors = _volcano_errors(doc)
    assert len(errors) == 1 and errors[0].startswith(error), errors


def test_volcano_policies_name_real_actions():
    actions = {p["action"] for p in VCJOB["spec"]["policies"]}
    assert actions <= VOLCANO_JOB_ACTIONS
    assert {p["event"] for p in VCJOB["spec"]["policies"]} == {"PodEvicted", "PodFailed"}


def _agent_argv(job: dict[str, Any], env: dict[str, str], tmp_path: Path) -> list[str]:
    """The soak command line the container's shell really runs, with a fake soak on PATH."""
    container = _pod(job)["containers"][0]
    assert container["command"] == ["/bin/sh", "-c"]
    fake = tmp_path / "bin" / "soak"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    fake.chmod(0o755)
    plain = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    out = subprocess.run(["sh", "-c", container["args"][0]], capture_output=True, text=True,
                         env={"PATH": f"{fake.parent}:/usr/bin:/bin", **plain, **env},
                         check=True)
    return out.stdout.splitlines()


@pytest.mark.parametrize("job,rank_env,rendezvous_host", [
    (INDEXED, "JOB_COMPLETION_INDEX", "soak-cluster-0.soak-cluster"),
    (VCJOB, "VC_TASK_INDEX", "soak-cluster-vc-node-0.soak-cluster"),
])
def test_every_pod_runs_one_agent_of_the_same_run(job, rank_env, rendezvous_host, tmp_path):
    env = {rank_env: "1", "NODE_NAME": "npu-b07",
           "SOAK_DB_URL": "postgresql+psycopg://soak@postgres.soak:5432/soak"}
    argv = _agent_argv(job, env, tmp_path)
    nodes = (job["spec"]["completions"] if job["kind"] == "Job" and "completions" in job["spec"]
             else job["spec"]["tasks"][0]["replicas"])
    assert argv == ["run", "/etc/soak/plan.toml", "--nodes", str(nodes), "--node-rank", "1",
                    "--node-name", "npu-b07", "--rendezvous", f"{rendezvous_host}:29400",
                    "--run-id", "cluster-acceptance-01", "--db", env["SOAK_DB_URL"],
                    "--data-dir", "/var/lib/soak/runs", "--listen", ":19400"]
    # the rendezvous name is rank 0's: <hostname>.<subdomain>, the headless Service
    pod = _pod(job)
    assert pod["subdomain"] == SERVICE["metadata"]["name"]
    if job["kind"] == "Job" and job["apiVersion"] == "batch/v1":
        # Indexed Job pods are named <job>-<index> as hostname
        assert job["spec"]["completionMode"] == "Indexed"
        assert job["spec"]["parallelism"] == job["spec"]["completions"] == nodes
        assert rendezvous_host.split(".")[0] == f"{job['metadata']['name']}-0"
        assert job["spec"]["backoffLimit"] == 0 and pod["restartPolicy"] == "Never"
    else:
        # Volcano's svc plugin sets hostname = pod name <job>-<task>-<index>
        task = job["spec"]["tasks"][0]
        assert "svc" in job["spec"]["plugins"] and "env" in job["spec"]["plugins"]
        assert job["spec"]["minAvailable"] == task["replicas"] == nodes  # gang: all or none
        assert rendezvous_host.split(".")[0] == f"{job['metadata']['name']}-{task['name']}-0"
        assert job["spec"]["schedulerName"] == "volcano"


@pytest.mark.parametrize("job", [INDEXED, VCJOB], ids=["indexed", "volcano"])
def test_pods_have_the_chips_mounts_and_secret_of_a_soak_node(job):
    single = next(d for d in yaml.safe_load_all(
        (REPO / "deploy" / "kubernetes" / "soak-job.yaml").read_text()) if d["kind"] == "Job")
    spod, pod = single["spec"]["template"]["spec"], _pod(job)
    sc, c = spod["containers"][0], pod["containers"][0]
    assert c["resources"] == sc["resources"]  # huawei.com/Ascend910: 8, like one node
    host_paths = {v["name"]: v["hostPath"] for v in pod["volumes"] if "hostPath" in v}
    single_paths = {v["name"]: v["hostPath"] for v in spod["volumes"] if "hostPath" in v}
    assert {k: v for k, v in host_paths.items() if k != "data"} == single_paths
    assert [m for m in c["volumeMounts"] if m["name"] != "plan"] == \
        [m for m in sc["volumeMounts"] if m["name"] != "plan"]
    env = {e["name"]: e for e in c["env"]}
    assert env["SOAK_DB_URL"]["valueFrom"]["secretKeyRef"] == {"name": "soak-db", "key": "url"}
    assert env["PGPASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "soak-db",
                                                              "key": "password"}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["HCCL_IF_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert "password" not in c["args"][0].lower()
    plan = next(v for v in pod["volumes"] if v["name"] == "plan")
    assert plan["configMap"]["name"] == _one("plan.yaml")["metadata"]["name"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert {p["targetPort"]: p["port"] for p in SERVICE["spec"]["ports"]} == ports
    labels = (job["spec"]["tasks"][0]["template"] if "tasks" in job["spec"]
              else job["spec"]["template"])["metadata"]["labels"]
    assert SERVICE["spec"]["selector"].items() <= labels.items()
    peers = _one("networkpolicy.yaml")["spec"]
    assert peers["podSelector"]["matchLabels"].items() <= labels.items()
    assert peers["ingress"][0]["from"][0]["podSelector"] == peers["podSelector"]
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["topologyKey"] == "kubernetes.io/hostname"


def test_headless_service_answers_before_readiness():
    spec = SERVICE["spec"]
    assert spec["clusterIP"] == "None" and spec["publishNotReadyAddresses"] is True
    # scraped by the namespace's ServiceMonitor: job label soak-cluster matches soak.*
    sm = yaml.safe_load((REPO / "deploy" / "kubernetes" / "servicemonitor.yaml").read_text())
    assert sm["spec"]["selector"]["matchLabels"].items() <= SERVICE["metadata"]["labels"].items()
    assert "metrics" in {p["name"] for p in spec["ports"]}


def test_cluster_plan_is_a_valid_soak_plan(tmp_path):
    from soak.config import load_plan

    (tmp_path / "plan.toml").write_text(_one("plan.yaml")["data"]["plan.toml"])
    plan = load_plan(tmp_path / "plan.toml")
    assert plan.devices.backend == "npu" and plan.workloads[0].nproc == 8


def test_container_scripts_parse_as_shell():
    for job in (INDEXED, VCJOB):
        script = _pod(job)["containers"][0]["args"][0]
        out = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert shlex.split(script)[0] == "exec"
