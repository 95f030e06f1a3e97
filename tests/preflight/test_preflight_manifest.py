"""Version manifest from recorded Ascend version files and a simulated npu-smi; drift."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest

from soak.cli import main
from soak.manifest import Drift, collect_manifest, diff_manifest, write_lock
from soak.preflight import run_preflight


def test_manifest_reads_cann_driver_firmware_and_boards(ascend_roots, sim_npu_smi):
    m = collect_manifest(npu_smi=sim_npu_smi(chips=2), **ascend_roots)
    assert m["cann"] == {"version": "7.0.T10", "components": {"aarch64-linux": "7.0.T10"}}
    assert m["ascend"] == {"driver_version": "23.0.7", "firmware_version": "7.1.0.11.220"}
    npu = m["npu"]
    assert npu["npu_smi_version"] == "25.3.rc1" and npu["chip_count"] == 2
    assert npu["driver_version"] == "23.0.7"  # the driver's own file wins over board info
    assert [c["serial_number"] for c in npu["cards"]] == ["1025C9000007", "1025C9010007"]
    assert {c["firmware_version"] for c in npu["cards"]} == {"7.8.0.6.201"}
    assert npu["cards"][1]["chip_boards"] == [
        {"chip_id": 0, "chip_name": "910B3", "chip_version": "V1", "firmware_version": "7.8.0.6.201"}]
    assert m["packages"]["torch"].startswith("2.") and m["torch_npu"]["loads"] is None


def test_manifest_without_ascend_is_none_not_zero(tmp_path):
    m = collect_manifest(npu_smi=str(tmp_path / "none"), cann_root=tmp_path,
                         driver_root=tmp_path, firmware_root=tmp_path)
    assert m["npu"] is None and m["cann"] == {"version": None, "components": None}
    assert m["ascend"] == {"driver_version": None, "firmware_version": None}


def test_diff_is_field_by_field_and_ignores_host_name():
    locked = {"host": {"hostname": "a", "kernel": "5.10"}, "npu": {"cards": [{"fw": "1"}]}}
    current = {"host": {"hostname": "b", "kernel": "5.15"}, "npu": {"cards": [{"fw": "2"}, {"fw": "2"}]},
               "extra": 1}
    assert diff_manifest(locked, current) == [
        Drift("extra", None, 1),
        Drift("host.kernel", "5.10", "5.15"),
        Drift("npu.cards[0].fw", "1", "2"),
        Drift("npu.cards[1].fw", None, "2"),
    ]


@pytest.mark.slow
def test_manifest_check_prints_drift_and_exits_1(tmp_path, ascend_roots):
    roots = [f"--cann-root={ascend_roots['cann_root']}", f"--driver-root={ascend_roots['driver_root']}",
             f"--firmware-root={ascend_roots['firmware_root']}", f"--npu-smi={tmp_path / 'none'}"]
    lock = tmp_path / "manifest.lock.json"
    cli = [sys.executable, "-m", "soak", "manifest"]
    assert subprocess.run([*cli, "lock", str(lock), *roots], timeout=60).returncode == 0
    same = subprocess.run([*cli, "check", str(lock), *roots], capture_output=True, text=True,
                          timeout=60)
    assert same.returncode == 0 and "no drift" in same.stdout
    data = json.loads(lock.read_text())
    data["ascend"]["driver_version"] = "23.0.6"
    data["packages"]["torch"] = "2.12.0"
    write_lock(lock, data)
    res = subprocess.run([*cli, "check", str(lock), *roots], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 1
    lines = res.stdout.splitlines()
    assert lines[0] == f"2 field(s) drifted from {lock}:"
    assert lines[1].split() == ["ascend.driver_version", "locked", "23.0.6", "now", "23.0.7"]
    assert lines[2].split()[:3] == ["packages.torch", "locked", "2.12.0"]
    r = run_preflight(manifest_lock=lock, only=["manifest_drift"])
    # preflight reads the default roots, so the Ascend fields drift to None as well
    assert r.check("manifest_drift").status == "fail" and "packages.torch: 2.12.0 ->" in (
        r.check("manifest_drift").reason)
    bad = subprocess.run([*cli, "check", str(tmp_path / "missing.json")], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "missing.json" in bad.stderr


def test_nvidia_fields_come_from_nvml_and_unsupported_is_none(monkeypatch, tmp_path):
    class NVMLError(Exception):
        pass

    def not_supported(*_):
        raise NVMLError("Not Supported")

    fake = types.SimpleNamespace(
        nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: "550.54.15",
        nvmlSystemGetCudaDriverVersion_v2=lambda: 12040,
        nvmlDeviceGetCount=lambda: 2, nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: "NVIDIA H100 80GB HBM3",
        nvmlDeviceGetSerial=lambda h: b"165322000" + str(h).encode(),
        nvmlDeviceGetUUID=lambda h: f"GPU-{h}", nvmlDeviceGetVbiosVersion=not_supported,
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    m = collect_manifest(npu_smi=str(tmp_path / "none"), cann_root=tmp_path,
                         driver_root=tmp_path, firmware_root=tmp_path)
    assert m["nvidia"] == {
        "driver_version": "550.54.15", "cuda_driver_version": "12.4",
        "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3", "serial": f"165322000{i}",
                  "uuid": f"GPU-{i}", "vbios_version": None} for i in (0, 1)],
    }


# `soak manifest lock FILE` where FILE is a folder or lies in a missing folder: one line, exit 2,
# no stray temporary file.


def test_lock_into_a_missing_folder(tmp_path, capsys) -> None:
    target = tmp_path / "missing" / "cluster.lock.json"
    rc = main(["manifest", "lock", str(target)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == f"soak: error: {target}: cannot write the lock file (No such file or directory)"


def test_lock_onto_a_folder(tmp_path, capsys) -> None:
    rc = main(["manifest", "lock", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == f"soak: error: {tmp_path}: is a directory; name the lock file, e.g. {tmp_path / 'cluster.lock.json'}"
    assert list(tmp_path.iterdir()) == []
    assert not any(p.name.startswith(f".{tmp_path.name}.tmp") for p in tmp_path.parent.iterdir())
