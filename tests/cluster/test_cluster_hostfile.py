"""The hostfile and the plan checks of ``soak cluster launch``, before any host is touched."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from soak.cli import main
from soak.cluster import launch
from soak.cluster.hostfile import Host, parse_hostfile
from soak.errors import ConfigError, InputError

HOSTS = """\
# rack 3
root@npu-a01:2222 name=a01
npu-a02            # user and port from ~/.ssh/config
ops@10.1.0.3
[fe80::1%eth0]:22 name=v6
"""


def test_hostfile_ranks_follow_line_order():
    hosts = parse_hostfile(HOSTS, "hosts")
    assert hosts == (
        Host(host="npu-a01", name="a01", rank=0, user="root", port=2222, line=2),
        Host(host="npu-a02", name="npu-a02", rank=1, line=3),
        Host(host="10.1.0.3", name="10.1.0.3", rank=2, user="ops", line=4),
        Host(host="fe80::1%eth0", name="v6", rank=3, port=22, line=5),
    )
    assert [h.destination for h in hosts] == ["root@npu-a01", "npu-a02", "ops@10.1.0.3",
                                              "fe80::1%eth0"]


@pytest.mark.parametrize("text,message", [
    ("", "hosts: no hosts (one [user@]host[:port] [name=NODE_NAME] a line)"),
    ("# only a comment\n", "hosts: no hosts (one [user@]host[:port] [name=NODE_NAME] a line)"),
    ("a\nb:0\n", "hosts:2: bad port '0' (1-65535)"),
    ("a:ssh\n", "hosts:1: bad port 'ssh' (1-65535)"),
    ("a slots=8\n", "hosts:1: unknown option 'slots=8' (only name=NODE_NAME)"),
    ("a name=x\nb name=x\n", "hosts:2: node name 'x' is already used on line 1; give each "
                             "host its own name=NODE_NAME"),
    ("a\na\n", "hosts:2: node name 'a' is already used on line 1; give each host its own "
               "name=NODE_NAME"),
    ("fe80::1\n", "hosts:1: 'fe80::1' is not [user@]host[:port]"),
    ("[fe80::1]\n", "hosts:1: node name 'fe80::1' must be letters, digits, '.', '_' or '-', "
                    "starting with a letter or digit (at most 63); give one with name=NODE_NAME"),
    ("a name=x/y\n", "hosts:1: node name 'x/y' must be letters, digits, '.', '_' or '-', "
                     "starting with a letter or digit (at most 63); give one with name=NODE_NAME"),
    ("-oProxyCommand=x\n", "hosts:1: bad host name '-oProxyCommand=x'"),
    ("-o@a\n", "hosts:1: bad user name '-o'"),
])
def test_bad_hostfile_names_file_and_line(text, message):
    with pytest.raises(InputError) as err:
        parse_hostfile(text, "hosts")
    assert str(err.value) == message


def test_bad_hostfile_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "hosts").write_text("n1\nn2:99999\n")
    (tmp_path / "plan.toml").write_text("")
    assert main(["cluster", "launch", "--hostfile", str(tmp_path / "hosts"),
                 str(tmp_path / "plan.toml")]) == 2
    assert capsys.readouterr().err == \
        f"soak: error: {tmp_path / 'hosts'}:2: bad port '99999' (1-65535)\n"


def test_missing_hostfile(tmp_path, capsys):
    assert main(["cluster", "launch", "--hostfile", str(tmp_path / "nope"), "p.toml"]) == 2
    assert capsys.readouterr().err == f"soak: error: hostfile {tmp_path / 'nope'}: no such file\n"


TWO = parse_hostfile("n0.example\nn1.example\n", "hosts")


def _plan(tmp_path, text: str) -> str:
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return str(path)


def test_rendezvous_defaults_to_first_host_then_plan_then_flag(tmp_path):
    plain = _plan(tmp_path, "[run]\ndb = 'postgresql+psycopg://soak@db/soak'\n")
    assert launch.prepare(TWO, plain).rendezvous == "n0.example:29400"
    v6 = parse_hostfile("[fd00::1] name=a\n", "hosts")
    assert launch.prepare(v6, plain).rendezvous == "[fd00::1]:29400"
    in_plan = _plan(tmp_path, "[cluster]\nnodes = 2\nrendezvous = 'head:29500'\n")
    assert launch.prepare(TWO, in_plan).rendezvous == "head:29500"
    assert launch.prepare(TWO, in_plan, rendezvous="10.0.0.9:1234").rendezvous == "10.0.0.9:1234"


def test_every_agent_gets_the_same_run_id(tmp_path):
    plan = _plan(tmp_path, "[run]\nid = 'acc-07'\n")
    assert launch.prepare(TWO, plan).run_id == "acc-07"
    assert launch.prepare(TWO, plan, run_id="acc-08").run_id == "acc-08"
    made = launch.prepare(TWO, _plan(tmp_path, "")).run_id
    assert made  # made once here, not by each agent
    with pytest.raises(ConfigError, match=r"run.id must be letters"):
        launch.prepare(TWO, plan, run_id="../x")


@pytest.mark.parametrize("text,message", [
    ("[cluster]\nnodes = 3\n", "cluster.nodes = 3 but the hostfile lists 2 host(s)"),
    ("[run]\nduration = 'forever'\n", "run.duration"),
    ("[runn]\n", "runn is not a known section"),
    ("run = [\n", "not valid TOML"),
    ("cluster = 1\n", "cluster must be a table"),
])
def test_plan_mistakes_are_found_before_any_host_is_touched(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        launch.prepare(TWO, _plan(tmp_path, text))


def test_bad_rendezvous_flag(tmp_path):
    with pytest.raises(InputError, match=r"--rendezvous: rendezvous must be HOST:PORT, got 'x'"):
        launch.prepare(TWO, _plan(tmp_path, ""), rendezvous="x")


def test_plan_without_shared_store_is_pointed_out(tmp_path, capsys):
    launch.prepare(TWO, _plan(tmp_path, ""))
    assert "has no run.db: every node keeps a store of its own" in capsys.readouterr().err


def test_user_ssh_options_come_first_so_they_win():
    ssh = launch.SshConfig(options=("StrictHostKeyChecking=yes",), identity="/k")
    host = Host(host="h", name="h", rank=0, user="u", port=2200)
    argv = ssh.argv(host, "true")
    assert argv[:3] == ["ssh", "-o", "StrictHostKeyChecking=yes"]
    assert argv.index("StrictHostKeyChecking=accept-new") > 2
    assert "BatchMode=yes" in argv
    assert argv[-7:] == ["-i", "/k", "-p", "2200", "--", "u@h", "true"]


def test_remote_command_keeps_odd_arguments_intact(tmp_path):
    """What the remote login shell parses gives the agent exactly our arguments."""
    plan = _plan(tmp_path, "[run]\nid = 'r1'\n")
    lch = launch.prepare(TWO, plan, remote_soak="/opt/my soak/bin/soak",
                         agent_args=["--inject", "crash:40 $(reboot)"])
    remote = lch.remote_command(TWO[1], "/tmp/soak-cluster.X")
    argv = shlex.split(remote)
    assert argv[:2] == ["sh", "-c"] and argv[2] == launch.REMOTE_WRAPPER
    assert argv[3:] == ["soak-cluster", "/tmp/soak-cluster.X", "120", "/opt/my soak/bin/soak",
                        "run", "/tmp/soak-cluster.X/plan.toml", "--nodes", "2", "--node-rank",
                        "1", "--node-name", "n1.example", "--rendezvous", "n0.example:29400",
                        "--run-id", "r1", "--inject", "crash:40 $(reboot)"]


def test_remote_wrapper_is_posix_sh():
    for shell in ("sh", "dash", "bash"):
        try:
            out = subprocess.run([shell, "-n", "-c", launch.REMOTE_WRAPPER], capture_output=True,
                                 text=True)
        except FileNotFoundError:
            continue
        assert out.returncode == 0, (shell, out.stderr)


@pytest.mark.parametrize("name", ["[x](http://evil.example)", "![i](http://evil.example/p.png)", "a b", "-o", "n/1",
                                  "x" * 64, "<b>"])
def test_a_node_name_from_the_plan_or_the_environment_is_checked_as_the_host_files(name: str) -> None:
    from soak.cluster.node import node_name
    from soak.config import plan_from_dict
    from soak.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        plan_from_dict({"cluster": {"node_name": name}})
    assert str(err.value).startswith("cluster.node_name ") and "letters, digits" in str(err.value)
    with pytest.raises(ConfigError, match="^NODE_NAME .*a node name must be letters"):
        node_name(None, {"NODE_NAME": name})
    assert node_name(None, {"NODE_NAME": "node-a01.rack_3"}) == "node-a01.rack_3"
