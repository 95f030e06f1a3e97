"""The run plan: TOML in, frozen dataclasses out, one-line errors naming the dotted key."""

from __future__ import annotations

import pytest

from soak.config import Plan, dump_plan, load_plan, plan_from_dict, plan_reference
from soak.errors import ConfigError, UserError

FULL = """
[run]
duration = "72h"
data_dir = "/srv/soak"
db = "postgresql+psycopg://soak@db/soak"
time_scale = 720
preflight = false

[devices]
backend = "sim"

[[workloads]]
name = "lm"
size = "small"
nproc = 8

[[workloads]]
name = "gemm"
extra = ["--ckpt-every", "50"]

[sampling]
interval = "2s"

[faults]
inject = ["crash:40", "leak:50MB/min"]

[acceptance]
thresholds = { memory_creep_mb_per_h = 50 }

[phases]
checkpoint_every = "30m"

[sim]
chips = 16
scenario = "hbm_creep:rate_mb_h=200"

[exporter]
listen = "0.0.0.0:9464"

[restart]
max_restarts = 3
backoff_initial = "10s"
hang_timeout = "2m"

[jobs]
min_free = "2GiB"
"""


def test_full_plan_parses_every_section(tmp_path) -> None:
    p = tmp_path / "plan.toml"
    p.write_text(FULL)
    plan = load_plan(p)
    assert plan.run.duration_s == 72 * 3600 and plan.run.time_scale == 720.0 and plan.run.preflight is False
    assert plan.run.db == "postgresql+psycopg://soak@db/soak"
    assert [(w.name, w.size, w.nproc) for w in plan.workloads] == [("lm", "small", 8), ("gemm", "tiny", 1)]
    assert plan.workloads[1].extra == ("--ckpt-every", "50")
    assert plan.sampling.interval_s == 2.0
    assert plan.faults.inject == ("crash:40", "leak:50MB/min")
    assert plan.acceptance.thresholds == {"memory_creep_mb_per_h": 50.0}
    assert plan.phases.checkpoint_every_s == 1800.0
    assert (plan.sim.chips, plan.sim.scenario) == (16, "hbm_creep:rate_mb_h=200")
    assert plan.exporter.listen == "0.0.0.0:9464"
    assert (plan.restart.max_restarts, plan.restart.backoff_initial_s, plan.restart.hang_timeout_s) == (3, 10.0, 120.0)
    assert plan.jobs.min_free_bytes == 2 << 30


def test_dumped_plan_reads_back_equal(tmp_path) -> None:
    p = tmp_path / "plan.toml"
    p.write_text(FULL)
    plan = load_plan(p)
    again = tmp_path / "again.toml"
    again.write_text(dump_plan(plan))
    assert load_plan(again) == plan
    defaults = tmp_path / "defaults.toml"
    defaults.write_text(dump_plan(Plan()))
    assert load_plan(defaults) == Plan()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"run": {"duration": "72 hours"}}, "run.duration must be like 72h, 30m or 90s"),
        ({"run": {"duraton": "1h"}}, "run.duraton is not a known key"),
        ({"runn": {}}, "runn is not a known section"),
        ({"devices": {"backend": "tpu"}}, "devices.backend must be one of auto, npu, cuda, cpu, sim"),
        ({"workloads": [{"name": "lm", "nproc": 0}]}, r"workloads\[0\].nproc must be an integer >= 1"),
        ({"workloads": [{"name": "lm"}, {"name": "bert"}]}, r"workloads\[1\].name must be one of"),
        ({"exporter": {"listen": "localhost"}}, "exporter.listen must be HOST:PORT"),
        ({"run": {"time_scale": 60}}, "run.time_scale other than 1 needs devices.backend"),
        ({"faults": {"inject": [1]}}, "faults.inject must be a list of strings"),
        ({"jobs": {"min_free": "lots"}}, "jobs.min_free must be a size"),
        ({"restart": {"max_restarts": -1}}, "restart.max_restarts must be an integer >= 0"),
        ({"run": {"preflight": "yes"}}, "run.preflight must be true or false"),
    ],
)
def test_bad_plans_name_the_dotted_key(data, message) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        plan_from_dict(data)
    assert "\n" not in str(err.value)
    assert isinstance(err.value, UserError)


def test_unreadable_plan_file_is_one_line(tmp_path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_plan(tmp_path / "absent.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[run\nduration=")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_plan(bad)


def test_every_key_is_documented() -> None:
    ref = plan_reference()
    keys = [k for k, _, _ in ref]
    assert "run.duration" in keys and "restart.hang_timeout" in keys and "workloads[].nproc" in keys
    assert all(doc.strip() for _, _, doc in ref)
