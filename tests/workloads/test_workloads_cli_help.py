"""`soak workload NAME --help` shows the workload's own options instead of demanding --run-dir."""

from __future__ import annotations

import pytest

from soak.cli import main


@pytest.mark.parametrize("name", ["lm", "gemm", "collective"])
def test_help_after_name_lists_workload_options(name, capsys) -> None:
    rc = main(["workload", name, "--help"])
    cap = capsys.readouterr()
    assert rc == 0
    assert "--run-dir" in cap.out and "--duration-s" in cap.out and "--inject" in cap.out
    assert cap.out.startswith(f"soak workload {name} [--nproc-per-node N]")
    assert "required" not in cap.err


def test_gemm_help_names_its_own_extra_option(capsys) -> None:
    assert main(["workload", "gemm", "-h"]) == 0
    assert "--sdc-every" in capsys.readouterr().out
