"""Every file a plan or a flag names is read by one reader that refuses what is no regular
file and caps its size (was: a plan's ``[exporter] web_config = "/dev/zero"`` was read without
bound until the kernel's OOM killer ended the process at 23.9 GB; so were the host file, the
store's password file, the Grafana token file, the key's passphrase file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Each reader on the path given, in a process of at most 1 GiB of address space: a reader
# without bound ends in MemoryError there (or hangs on a FIFO, which the timeout ends).
_READ = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from soak.errors import UserError
which, path = sys.argv[1], sys.argv[2]
def call():
    if which == "web_config":
        from exporters.webconfig import load_web_config
        return load_web_config(path, "exporter.web_config")
    if which == "plan":
        from soak.config import plan_from_dict
        return plan_from_dict({"exporter": {"web_config": path}})
    if which == "hostfile":
        from soak.cluster.hostfile import read_hostfile
        return read_hostfile(path)
    if which == "db_password_file":
        import os
        from soak.store.engine import _password_from_file
        return _password_from_file({"SOAK_DB_PASSWORD_FILE": path})
    if which == "token_file":
        from soak.dashboards import read_token
        return read_token(path)
    if which == "passphrase_file":
        from soak.report.signing import read_passphrase
        return read_passphrase(path)
    if which == "fault_codes":
        from soak.faultcodes.table import read_levels
        return read_levels(path)
try:
    call()
    print(json.dumps(["read", ""]))
except UserError as exc:
    print(json.dumps(["refused", str(exc)]))
except MemoryError:
    print(json.dumps(["MemoryError", ""]))
"""

READERS = ("web_config", "plan", "hostfile", "db_password_file", "token_file", "passphrase_file", "fault_codes")


def _read(which: str, path: Path | str) -> tuple[str, str]:
    try:
        r = subprocess.run([sys.executable, "-c", _READ, which, str(path)], capture_output=True, text=True,
                           timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        return "hung", ""
    assert r.returncode == 0, r.stderr[-2000:]
    kind, message = json.loads(r.stdout)
    return kind, message


@pytest.mark.parametrize("which", READERS)
def test_a_device_named_as_a_file_is_one_line_before_it_is_read(which: str) -> None:
    kind, message = _read(which, "/dev/zero")
    assert kind == "refused", (kind, message)
    assert message.endswith("/dev/zero: not a regular file") and "\n" not in message


@pytest.mark.parametrize("which", ("web_config", "hostfile", "token_file"))
def test_a_fifo_named_as_a_file_is_one_line_and_no_hang(which: str, tmp_path: Path) -> None:
    fifo = tmp_path / "named.fifo"
    os.mkfifo(fifo)
    kind, message = _read(which, fifo)
    assert (kind, message.endswith(f"{fifo}: not a regular file")) == ("refused", True), (kind, message)


@pytest.mark.parametrize("which", ("web_config", "hostfile", "token_file", "db_password_file"))
def test_a_file_over_the_cap_is_one_line(which: str, tmp_path: Path) -> None:
    big = tmp_path / "big"
    with big.open("wb") as fh:  # sparse: 2 GiB of nothing, read in a 1 GiB process
        fh.truncate(2 << 30)
    kind, message = _read(which, big)
    assert kind == "refused" and f"{big}: larger than " in message, (kind, message)
