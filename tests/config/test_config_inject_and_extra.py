"""A bad fault spec or a bad workload option in a plan stops the plan, in one line naming the
key, before the run folder, the preflight or torchrun exist."""

from __future__ import annotations

import pytest

from soak.cli import main
from soak.config import ConfigError, plan_from_dict


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"faults": {"inject": ["bogus"]}}, "faults.inject 'bogus': expected KIND:ARGS"),
        ({"faults": {"inject": ["leak:5MBs"]}}, "faults.inject 'leak:5MBs': '5MBs' is not a rate"),
        ({"faults": {"inject": ["corrupt:5"]}}, "faults.inject 'corrupt:5': corrupt applies to the gemm workload only"),
        ({"workloads": [{"name": "lm", "extra": ["--bogus"]}]},
         r"workloads\[0\].extra: workload lm: unrecognized arguments: --bogus"),
        ({"workloads": [{"name": "gemm"}, {"name": "lm", "extra": ["--steps", "x"]}]},
         r"workloads\[1\].extra: workload lm: argument --steps: invalid int value: 'x'"),
    ],
)
def test_bad_fault_or_extra_names_the_key(data, message) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        plan_from_dict(data)
    assert "\n" not in str(err.value)


def test_good_fault_and_extra_pass() -> None:
    plan = plan_from_dict({"workloads": [{"name": "gemm", "extra": ["--sdc-every", "5"]}],
                           "faults": {"inject": ["corrupt:50", "leak:50MB/min"]}})
    assert plan.faults.inject == ("corrupt:50", "leak:50MB/min")


def test_soak_run_with_a_bad_inject_leaves_no_run_folder(tmp_path, capsys) -> None:
    data_dir = tmp_path / "runs"
    rc = main(["run", "--duration", "1m", "--backend", "cpu", "--inject", "bogus", "--listen", "",
               "--data-dir", str(data_dir)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.strip().startswith("soak: error: faults.inject 'bogus'")
    assert "preflight" not in err
    assert not data_dir.exists()
