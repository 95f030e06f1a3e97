from __future__ import annotations

import subprocess
import sys

from soak.cli import main


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


def test_version_runs_as_module():
    out = subprocess.run(
        [sys.executable, "-m", "soak", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("soak ")
