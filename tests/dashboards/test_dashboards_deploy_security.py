"""The deploy manifests run as documented (was: the cluster jobs, uid 1000, could not write their
hostPath data folder, which kubelet makes root's 0755; docs/security.md cited the "restricted"
Pod Security level for pods no level but "privileged" admits; the exporter DaemonSet served
/metrics without the web config the docs offer)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
KUBE = REPO / "deploy" / "kubernetes"
CLUSTER_JOBS = ("cluster/indexed-job.yaml", "cluster/volcano-job.yaml")


def _docs(name: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((KUBE / name).read_text()))


def _pods() -> dict[str, dict[str, Any]]:
    pods = {}
    for name in (p.relative_to(KUBE).as_posix() for p in sorted(KUBE.rglob("*.yaml"))):
        for doc in _docs(name):
            if not isinstance(doc, dict):
                continue
            spec = doc.get("spec", {})
            if doc.get("apiVersion", "").startswith("batch.volcano.sh/"):
                pods[name] = spec["tasks"][0]["template"]["spec"]
            elif "template" in spec:
                pods[name] = spec["template"]["spec"]
    return pods


def _data_dir(pod: dict[str, Any]) -> str:
    script = " ".join(pod["containers"][0].get("args", []))
    words = shlex.split(script.replace(";", " "))
    return words[words.index("--data-dir") + 1]


@pytest.mark.parametrize("name", CLUSTER_JOBS)
def test_the_cluster_jobs_user_can_write_its_hostpath_data_dir(name: str) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to play kubelet and the job's user")
    pod = _pods()[name]
    data = next(v for v in pod["volumes"] if v["name"] == "data")
    assert data["hostPath"]["type"] == "DirectoryOrCreate"
    uid, gid = pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]
    mount = next(m["mountPath"] for m in pod["containers"][0]["volumeMounts"] if m["name"] == "data")
    run_dir = _data_dir(pod) + "/r-1"
    # kubelet makes the hostPath folder: root's, 0755 (here where the job's user may reach it)
    host = Path(tempfile.mkdtemp(prefix="soak-hostpath-", dir="/tmp"))
    os.chmod(host, 0o755)
    try:
        _run_the_pod(pod, host, mount, uid, gid, run_dir)
    finally:
        shutil.rmtree(host)


def _run_the_pod(pod: dict[str, Any], host: Path, mount: str, uid: int, gid: int, run_dir: str) -> None:
    # each init container that mounts it runs its command as the manifest says, in that folder
    for init in pod.get("initContainers", []):
        if not any(m["name"] == "data" for m in init.get("volumeMounts", [])):
            continue
        sc = init.get("securityContext", {})
        caps = ",".join(f"+{c.lower()}" for c in sc.get("capabilities", {}).get("add", []))
        script = init["command"][-1].replace(mount, str(host))
        r = subprocess.run(["setpriv", f"--reuid={sc.get('runAsUser', uid)}", f"--regid={sc.get('runAsUser', gid)}",
                            "--clear-groups", "--inh-caps=-all" + ("," + caps if caps else ""),
                            "--bounding-set=-all" + ("," + caps if caps else ""), "sh", "-c", script],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
    # then the run, as its user, makes its run folder
    target = host / Path(run_dir).relative_to(mount)
    r = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "mkdir", "-p", str(target)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"uid {uid} cannot make {run_dir}: {r.stderr.strip()}"


def test_the_namespace_states_the_pod_security_level_its_pods_need() -> None:
    (ns,) = _docs("namespace.yaml")
    labels = ns["metadata"]["labels"]
    pods = _pods()
    needs_privileged = any(c.get("securityContext", {}).get("privileged") for p in pods.values()
                           for c in p["containers"])
    host_paths = any("hostPath" in v for p in pods.values() for v in p.get("volumes", []))
    # baseline and restricted admit no hostPath volume and no privileged container
    assert host_paths and needs_privileged
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    text = (REPO / "docs" / "security.md").read_text()
    assert "pod-security.kubernetes.io/enforce: privileged" in text


def test_the_exporter_daemonset_serves_with_its_web_config() -> None:
    (ds,) = _docs("exporter-daemonset.yaml")
    pod = ds["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    path = Path(args[args.index("--web-config") + 1])
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    mount = mounts[str(path.parent)]
    assert mount["readOnly"] is True
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "soak-exporter-web"
    # the kubelet's probe has no password: it checks the port
    assert "httpGet" not in pod["containers"][0]["readinessProbe"]
    (sm,) = _docs("servicemonitor.yaml")
    assert sm["spec"]["endpoints"][0]["basicAuth"]["password"]["name"] == "soak-exporter-scrape"
