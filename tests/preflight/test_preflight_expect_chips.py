"""`soak preflight --expect-chips N` on a host that shows fewer chips: a failed check naming the
count found and the count expected (it used to PASS on a CPU host, where nothing counted them)."""

from __future__ import annotations

import json

import pytest

from soak.cli import main
from soak.preflight import _backend_check, run_preflight


@pytest.fixture
def no_npu_smi_on_path(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))


def test_expect_8_chips_on_a_cpu_host_fails_naming_the_count(no_npu_smi_on_path, capsys):
    rc = main(["preflight", "--expect-chips", "8", "--only", "backend", "--only", "npu_smi", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["status"] == "fail" and out["backend"] == "cpu"
    by = {c["name"]: c for c in out["checks"]}
    assert by["npu_smi"]["status"] == "fail"
    assert by["npu_smi"]["reason"] == "npu-smi not found: no chips counted, 8 expected (--expect-chips)"
    # The backend check leaves the count to npu_smi here: one failure, not two for one cause.
    assert by["backend"]["status"] == "pass" and "counted by npu_smi" in by["backend"]["reason"]


def test_expect_chips_with_only_the_backend_check_on_cpu_fails_with_zero_found(capsys):
    rc = main(["preflight", "--expect-chips", "8", "--only", "backend"])
    out = capsys.readouterr().out
    assert rc == 1
    assert out.splitlines()[0] == "preflight: FAIL  (backend cpu)"
    assert "FAIL  backend         0 chips" in out
    assert "cpu: no accelerator, 0 chips found, 8 expected (--expect-chips)" in out


def test_fewer_gpus_than_expected_fail_the_backend_check():
    check = _backend_check("cuda", 4, 8, smi_counts=True)
    assert (check.status, check.value) == ("fail", 4)
    assert check.reason == "cuda: 4 device(s) found, 8 expected (--expect-chips)"
    assert _backend_check("npu", 8, 8, smi_counts=True).status == "pass"
    assert _backend_check("cuda", 4, None, smi_counts=False).status == "pass"


def test_simulated_fleet_on_a_cpu_host_is_counted_by_npu_smi(sim_npu_smi):
    smi = sim_npu_smi(chips=4)
    assert run_preflight(npu_smi=smi, expect_chips=4, only=["backend", "npu_smi"]).ok
    r = run_preflight(npu_smi=smi, expect_chips=8, only=["backend", "npu_smi"])
    assert not r.ok
    assert r.check("npu_smi").reason == "expected 8 chips, npu-smi lists 4"
    assert r.check("backend").status == "pass"


def test_expect_chips_with_checks_that_cannot_count_chips_is_bad_input(capsys):
    rc = main(["preflight", "--expect-chips", "8", "--only", "disk_free"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err == ("soak: error: --expect-chips 8: needs the backend or npu_smi check "
                   "(add --only backend or --only npu_smi)\n")
