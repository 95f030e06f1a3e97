"""`soak preflight` given an --npu-smi or --manifest-lock path that is not there: one line
naming it, exit 2 (a typo is not a skipped or failed check); sizes print as GiB/MiB."""

from __future__ import annotations

from soak.cli import main


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
