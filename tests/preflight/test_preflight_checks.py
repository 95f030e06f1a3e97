"""Preflight on this CPU host, against a simulated Ascend fleet, and with a broken torch_npu."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from soak.cli import main
from soak.device import detect_backend, probe_torch_npu
from soak.errors import DeviceUnavailable, InputError
from soak.preflight import CHECKS, run_preflight


def soak_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "soak", *args], capture_output=True, text=True,
                          timeout=180, env=env)


@pytest.mark.slow
def test_preflight_json_passes_on_this_cpu_machine(tmp_path):
    res = soak_cli("preflight", "--format", "json", "--run-dir", str(tmp_path / "runs"))
    assert res.returncode == 0, res.stdout + res.stderr
    out = json.loads(res.stdout)
    assert out["status"] == "pass" and out["backend"] == "cpu"
    by = {c["name"]: c for c in out["checks"]}
    assert list(by) == list(CHECKS)
    assert by["collective"]["status"] == "pass" and "2 ranks" in by["collective"]["reason"]
    assert by["matmul"]["status"] == "pass" and by["matmul"]["value"] < 1e-6
    assert by["memory"]["value"] == 256 * 2**20
    assert by["adapter"]["status"] == "skip" and by["manifest_drift"]["status"] == "skip"
    assert all(set(c) == {"name", "status", "value", "unit", "reason", "duration_s"}
               for c in out["checks"])


@pytest.mark.slow
def test_sim_fleet_with_every_chip_ok_passes(sim_npu_smi):
    smi = sim_npu_smi(chips=4)
    r = run_preflight(npu_smi=smi, expect_chips=4, only=["npu_smi"])
    check = r.check("npu_smi")
    assert (check.status, check.value, check.unit) == ("pass", 4, "chips")
    assert "npu-smi 25.3.rc1" in check.reason


@pytest.mark.slow
def test_sim_fleet_alarm_chip_and_missing_chip_fail_with_codes(sim_npu_smi):
    smi = sim_npu_smi(chips=2, scenario="health_alarm:at_h=0,chips=1")
    res = soak_cli("preflight", "--npu-smi", smi, "--expect-chips", "3", "--only", "npu_smi",
                   "--format", "json")
    assert res.returncode == 1
    check = json.loads(res.stdout)["checks"][0]
    assert check["status"] == "fail" and check["value"] == 2
    assert check["reason"] == ("expected 3 chips, npu-smi lists 2; "
                               "npu 1 chip 0 health Alarm codes A4025021,8C03A000")


def test_missing_npu_smi_is_skipped_on_cpu_and_failed_on_npu(tmp_path):
    r = run_preflight(npu_smi=str(tmp_path / "no-npu-smi"), only=["npu_smi"])
    assert r.check("npu_smi").status == "skip" and r.ok


def test_bad_input_is_a_user_error(tmp_path):
    with pytest.raises(InputError, match="--expect-chips 0"):
        run_preflight(expect_chips=0)
    res = soak_cli("preflight", "--only", "nope")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "nope" in res.stderr


@pytest.mark.slow
def test_broken_torch_npu_gives_the_fix_not_a_crash(fake_torch_npu, tmp_path):
    probe = probe_torch_npu(timeout_s=120)
    assert probe.installed and not probe.ok and "libhccl.so" in probe.error
    with pytest.raises(DeviceUnavailable) as err:
        detect_backend("npu", probe=probe)
    text = str(err.value)
    assert "source /usr/local/Ascend/ascend-toolkit/set_env.sh" in text
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in text and "libhccl.so" in text
    with pytest.raises(DeviceUnavailable):
        detect_backend("auto", probe=probe)  # would break `import torch` in a real install
    r = run_preflight(only=["adapter", "backend"])
    assert r.check("adapter").status == "fail" and r.check("backend").status == "fail"
    assert not r.ok and r.backend is None
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # undone by the fixture's monkeypatch
    try:
        assert detect_backend("auto", probe=probe) == "cpu"
        r = run_preflight(only=["adapter", "backend"])
        assert r.check("adapter").status == "warn" and r.backend == "cpu" and r.ok
    finally:
        del os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"]
    res = subprocess.run([sys.executable, "-m", "soak.workloads.lm", "--run-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "set_env.sh" in res.stderr


# `soak preflight` given an --npu-smi or --manifest-lock path that is not there: one line
# naming it, exit 2 (a typo is not a skipped or failed check); sizes print as GiB/MiB.


def test_missing_npu_smi_path(tmp_path, capsys) -> None:
    missing = tmp_path / "npu-smi"
    rc = main(["preflight", "--npu-smi", str(missing), "--only", "npu_smi"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == f"soak: error: --npu-smi {missing}: no such executable"


def test_missing_manifest_lock(tmp_path, capsys) -> None:
    missing = tmp_path / "cluster.lock.json"
    rc = main(["preflight", "--manifest-lock", str(missing), "--only", "manifest_drift"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith(f"soak: error: --manifest-lock {missing}: no such file")
    assert "\n" not in err


def test_table_prints_sizes_in_binary_units(tmp_path, capsys) -> None:
    rc = main(["preflight", "--only", "host_memory", "--only", "disk_free", "--run-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc in (0, 1)
    lines = {line.split()[1]: line for line in out.splitlines()[1:]}
    assert "GiB" in lines["disk_free"] and "bytes" not in lines["disk_free"].split("GiB")[0]
    assert " Gi " not in out
