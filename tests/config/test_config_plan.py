"""The run plan: TOML in, frozen dataclasses out, one-line errors naming the dotted key."""

from __future__ import annotations

import pytest

from soak.cli import main
from soak.config import ConfigError, Plan, dump_plan, load_plan, plan_from_dict, plan_reference
from soak.errors import UserError

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


# A bad simulated-fleet spec stops the plan in one line, before the run folder exists (it
# used to leave a run 'running' forever in `soak runs list`).


@pytest.mark.parametrize(
    ("sim", "message"),
    [
        ({"scenario": "bogus"}, "sim: scenario 'bogus' is unknown"),
        ({"scenario": "hbm_creep:rate=5"}, "sim: scenario hbm_creep: unknown parameter 'rate'"),
        ({"fault": "boom"}, "sim: fault 'boom' is unknown"),
        ({"chips": 65}, "sim.chips 65: must be between 1 and 64"),
        ({"family": "910c"}, "sim.family '910c' is unknown"),
    ],
)
def test_bad_sim_section_names_it(sim, message) -> None:
    with pytest.raises(ConfigError, match=message):
        plan_from_dict({"devices": {"backend": "sim"}, "sim": sim})


def test_sim_section_is_not_judged_for_other_backends() -> None:
    assert plan_from_dict({"devices": {"backend": "cpu"}, "sim": {"scenario": "bogus"}}).sim.scenario == "bogus"


def test_comm_timeouts_scenario_gets_the_run_plog_folder(tmp_path) -> None:
    import time

    from soak.clock import ScaledClock
    from soak.daemon.telemetry import make_backend
    from soak.runfolder import PLOG

    # the plan check accepts the scenario (it needs a plog folder, and the plan names none) ...
    plan = plan_from_dict({"devices": {"backend": "sim"}, "sim": {"scenario": "healthy,comm_timeouts", "chips": 2}})
    # ... because the daemon gives it the run's plog/: an hour into the run (6 timeouts an hour
    # by default), the fleet has written its plog lines there and the backend counted them
    backend = make_backend(plan, tmp_path, ScaledClock(scale=1.0, origin=time.time() - 3600), lambda: ())
    try:
        snapshot = backend.read()
    finally:
        backend.close()
    assert {p.parent for p in tmp_path.rglob("plog-*.log")} == {tmp_path / PLOG}
    assert sum(snapshot.comm_timeouts.values()) == 6, snapshot.comm_timeouts


def test_soak_run_leaves_no_run_folder(tmp_path, capsys) -> None:
    data_dir = tmp_path / "runs"
    rc = main(["run", "--duration", "1m", "--backend", "sim", "--sim-scenario", "bogus", "--no-preflight",
               "--listen", "", "--data-dir", str(data_dir)])
    assert rc == 2
    assert capsys.readouterr().err.startswith("soak: error: sim: scenario 'bogus' is unknown")
    assert not data_dir.exists()


# A run id that is not a plain folder name, and a --listen port out of range, are named
# in one line before anything runs.


@pytest.mark.parametrize("run_id", ["a/b", "../escape", ".hidden", "-x", "node 1", "x" * 129])
def test_run_id_that_is_not_a_folder_name_is_refused(run_id) -> None:
    with pytest.raises(ConfigError, match=r"run\.id must be letters, digits") as err:
        plan_from_dict({"run": {"id": run_id}})
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("run_id", ["node-a01", "20261129-075348-node1.example.com", "soak_72h"])
def test_plain_run_ids_are_kept(run_id) -> None:
    assert plan_from_dict({"run": {"id": run_id}}).run.id == run_id


def test_run_id_with_slash_on_the_command_line_is_one_line_exit_2(tmp_path, capsys) -> None:
    rc = main(["run", "--duration", "1m", "--run-id", "../escape", "--data-dir", str(tmp_path / "runs"),
               "--no-preflight", "--listen", ""])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == ("soak: error: --run-id: run.id must be letters, digits, '.', '_' or '-' (starting with a "
                   "letter or digit, at most 64), got '../escape'")
    assert not (tmp_path / "escape").exists()


def test_listen_port_out_of_range_says_so() -> None:
    with pytest.raises(ConfigError) as err:
        plan_from_dict({"exporter": {"listen": "127.0.0.1:99999"}})
    assert str(err.value) == "exporter.listen '127.0.0.1:99999': port 99999 is outside 0-65535"


def test_listen_without_port_names_the_default_port_as_example() -> None:
    with pytest.raises(ConfigError, match="like 127.0.0.1:19400, got 'nonsense'"):
        plan_from_dict({"exporter": {"listen": "nonsense"}})


# A bad fault spec or a bad workload option in a plan stops the plan, in one line naming the
# key, before the run folder, the preflight or torchrun exist.


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"faults": {"inject": ["bogus"]}}, "faults.inject 'bogus': expected KIND:ARGS"),
        ({"faults": {"inject": ["leak:5MBs"]}}, "faults.inject 'leak:5MBs': '5MBs' is not a rate"),
        ({"workloads": [{"name": "collective"}], "faults": {"inject": ["corrupt:5"]}},
         "faults.inject 'corrupt:5': corrupt applies to the gemm and lm workloads only"),
        ({"workloads": [{"name": "gemm"}], "faults": {"inject": ["nan:5,1"]}},
         "faults.inject 'nan:5,1': nan applies to the lm workload only"),
        ({"numerics": {"check_every": -1}}, "numerics.check_every must be an integer >= 0, got -1"),
        ({"numerics": {"spike_multiple": 0.5}}, "numerics.spike_multiple must be a number > 1, got 0.5"),
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
    assert err.strip().startswith("soak: error: --inject: faults.inject 'bogus'")
    assert "preflight" not in err
    assert not data_dir.exists()


@pytest.mark.parametrize("rendezvous", [":29400", "[]:29400", "node0:", "node0:0", "node0:70000", "node0"])
def test_a_cluster_rendezvous_without_a_host_or_a_port_is_refused(rendezvous: str) -> None:
    data = {"run": {"id": "c1", "db": "postgresql+psycopg://u@h/db"}, "workloads": [{"name": "lm"}],
            "cluster": {"nodes": 2, "rendezvous": rendezvous}}
    with pytest.raises(ConfigError) as refused:
        plan_from_dict(data)
    assert str(refused.value).startswith("cluster.rendezvous") and rendezvous in str(refused.value)


@pytest.mark.parametrize("rendezvous", ["node0:29400", "10.0.0.1:29400", "[fd00::1]:29400"])
def test_a_cluster_rendezvous_with_a_host_and_a_port_is_taken(rendezvous: str) -> None:
    data = {"run": {"id": "c1", "db": "postgresql+psycopg://u@h/db"}, "workloads": [{"name": "lm"}],
            "cluster": {"nodes": 2, "rendezvous": rendezvous}}
    assert plan_from_dict(data).cluster.rendezvous == rendezvous


def test_soak_run_with_a_rendezvous_without_host_is_one_line_and_exit_2(capsys) -> None:
    assert main(["run", "--duration", "5m", "--nodes", "2", "--node-rank", "1", "--rendezvous", ":29400", "--run-id", "c1",
                 "--db", "postgresql+psycopg://u@127.0.0.1:1/db", "--workload", "lm"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cluster.rendezvous must be HOST:PORT with the host" in err[0] and "':29400'" in err[0]


@pytest.mark.parametrize("advertise", ["node1:29400", "10.0.0.2:29400", "a b", "node@1", "[]"])
def test_a_cluster_advertise_address_with_a_port_or_odd_characters_is_refused(advertise: str) -> None:
    data = {"run": {"id": "c1", "db": "postgresql+psycopg://u@h/db"}, "workloads": [{"name": "lm"}],
            "cluster": {"nodes": 2, "rendezvous": "node0:29400", "advertise": advertise}}
    with pytest.raises(ConfigError) as refused:
        plan_from_dict(data)
    assert str(refused.value).startswith("cluster.advertise must be a host name or address without a port")


@pytest.mark.parametrize(("advertise", "kept"), [("node1", "node1"), ("10.0.0.2", "10.0.0.2"),
                                                 ("fd00::2", "fd00::2"), ("[fd00::2]", "fd00::2")])
def test_a_cluster_advertise_address_is_node_local(advertise: str, kept: str) -> None:
    data = {"run": {"id": "c1", "db": "postgresql+psycopg://u@h/db"}, "workloads": [{"name": "lm"}],
            "cluster": {"nodes": 2, "rendezvous": "node0:29400"}}
    plain = plan_from_dict(data)
    data["cluster"]["advertise"] = advertise
    given = plan_from_dict(data)
    assert given.cluster.advertise == kept
    assert given.digest() == plain.digest()  # every node may give its own


# faults.codes_file names the site's own faultCode.json; `soak run` reads it before anything
# runs, and a file that is missing or bad is one line naming the key and the file.


def test_faults_codes_file_is_kept_and_dumped(tmp_path) -> None:
    plan = plan_from_dict({"faults": {"codes_file": "/etc/soak/faultCode.json"}})
    assert plan.faults.codes_file == "/etc/soak/faultCode.json"
    path = tmp_path / "plan.toml"
    path.write_text(dump_plan(plan))
    assert load_plan(path) == plan
    assert plan_from_dict({}).faults.codes_file is None


def test_faults_codes_file_that_is_no_string_names_the_key() -> None:
    with pytest.raises(ConfigError) as err:
        plan_from_dict({"faults": {"codes_file": 5}})
    assert str(err.value) == "faults.codes_file must be a string, got 5"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "no such file"),
        ('{"SeparateCodes": []}', "'SeparateCodes' is not a level key (known: NotHandleFaultCodes, "),
        ('{"SeparateNPUCodes": ["80E018"]}', "SeparateNPUCodes: '80E018' is not 8 hex digits"),
        ("{", "not JSON: "),
    ],
)
def test_soak_run_with_a_bad_codes_file_is_one_line_and_leaves_no_run_folder(tmp_path, capsys, content,
                                                                            problem) -> None:
    codes = tmp_path / "faultCode.json"
    if content is not None:
        codes.write_text(content)
    plan = tmp_path / "plan.toml"
    plan.write_text(f'[faults]\ncodes_file = "{codes}"\n')
    data_dir = tmp_path / "runs"
    rc = main(["run", str(plan), "--duration", "1m", "--backend", "cpu", "--listen", "", "--data-dir",
               str(data_dir)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith(f"soak: error: faults.codes_file: fault codes file {codes}: {problem}")
    assert err.count("\n") == 1
    assert not data_dir.exists()


def test_soak_run_with_a_good_codes_file_starts(tmp_path, monkeypatch) -> None:
    from soak.daemon import lifecycle

    started: list[str | None] = []
    monkeypatch.setattr(lifecycle.Daemon, "run", lambda self: started.append(self.plan.faults.codes_file) or 0)
    codes = tmp_path / "faultCode.json"
    codes.write_text('{"SeparateNPUCodes": ["80E01801"]}')
    plan = tmp_path / "plan.toml"
    plan.write_text(f'[faults]\ncodes_file = "{codes}"\n')
    assert main(["run", str(plan), "--duration", "1m", "--backend", "cpu", "--listen", ""]) == 0
    assert started == [str(codes)]


@pytest.mark.parametrize(("section", "key", "what"), [("acceptance", "profile", "acceptance.profile"),
                                                      ("faults", "codes_file", "faults.codes_file: fault codes file")])
def test_a_file_name_with_a_nul_character_is_one_line(tmp_path, capsys, section, key, what) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(f'[{section}]\n{key} = "a\\u0000b"\n')
    rc = main(["run", str(plan), "--duration", "1m", "--backend", "cpu", "--listen", "",
               "--data-dir", str(tmp_path / "runs")])
    assert rc == 2
    assert capsys.readouterr().err == f"soak: error: {what} a\\x00b: not a file name (it holds a NUL character)\n"
    assert not (tmp_path / "runs").exists()
