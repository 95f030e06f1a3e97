"""A run id that is not a plain folder name, and a --listen port out of range, are named
in one line before anything runs."""

from __future__ import annotations

import pytest

from soak.cli import main
from soak.config import ConfigError, plan_from_dict


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
    assert err == ("soak: error: run.id must be letters, digits, '.', '_' or '-' (starting with a "
                   "letter or digit, at most 128), got '../escape'")
    assert not (tmp_path / "escape").exists()


def test_listen_port_out_of_range_says_so() -> None:
    with pytest.raises(ConfigError) as err:
        plan_from_dict({"exporter": {"listen": "127.0.0.1:99999"}})
    assert str(err.value) == "exporter.listen '127.0.0.1:99999': port 99999 is outside 0-65535"


def test_listen_without_port_names_the_default_port_as_example() -> None:
    with pytest.raises(ConfigError, match="like 127.0.0.1:19400, got 'nonsense'"):
        plan_from_dict({"exporter": {"listen": "nonsense"}})
