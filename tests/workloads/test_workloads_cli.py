"""`soak workload NAME` as a user types it: --help lists the workload's own options, and a bad
workload option (also in `soak run`'s workloads[].extra) is one line naming it, exit 2, before
torchrun starts (a typo used to fail in every rank and print torchrun's ChildFailedError
pages, or loop through restarts under `soak run`)."""

from __future__ import annotations

import pytest

from soak.cli import main


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--size", "huge"], "workload lm: argument --size: invalid choice: 'huge'"),
        (["--steps", "abc"], "workload lm: argument --steps: invalid int value: 'abc'"),
        (["--steps", "0"], "--steps must be positive, got 0"),
        (["--bogus", "1"], "workload lm: unrecognized arguments: --bogus 1"),
        (["--sdc-every", "3"], "workload lm: unrecognized arguments: --sdc-every 3"),
    ],
)
def test_bad_option_is_one_line_exit_2(tmp_path, capsys, extra, message) -> None:
    rc = main(["workload", "lm", "--run-dir", str(tmp_path), "--nproc-per-node", "1", *extra, "--print"])
    cap = capsys.readouterr()
    assert rc == 2
    assert cap.out == ""
    err = cap.err.strip()
    assert "\n" not in err
    assert err.startswith("soak: error: ") and message in err


def test_good_options_still_print_the_command(tmp_path, capsys) -> None:
    rc = main(["workload", "gemm", "--run-dir", str(tmp_path), "--nproc-per-node", "2", "--sdc-every", "3",
               "--steps", "5", "--print"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "-m soak.workloads.gemm" in out and "--sdc-every 3" in out and "--nproc-per-node=2" in out


def test_build_command_rejects_a_bad_extra_before_anything_starts(tmp_path) -> None:
    # What `soak run` launches from workloads[].extra: a typo is named at once, not a restart loop.
    from soak.errors import InputError
    from soak.workloads.launch import build_command

    with pytest.raises(InputError, match=r"^workload lm: unrecognized arguments: --bogus$"):
        build_command("lm", tmp_path, 1, extra=("--bogus",))
    with pytest.raises(InputError, match="invalid choice: 'huge'"):
        build_command("gemm", tmp_path, 1, size="huge")
    argv = build_command("gemm", tmp_path, 1, extra=("--sdc-every", "5", "--device-backend", "cpu"))
    assert argv[-4:] == ["--sdc-every", "5", "--device-backend", "cpu"]


# `soak workload NAME --help` shows the workload's own options instead of demanding --run-dir.


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
