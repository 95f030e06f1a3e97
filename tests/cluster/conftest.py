"""A real OpenSSH server on loopback for the launcher tests, with keys made for the test, and a
fresh PostgreSQL database for each cluster run.

sshd runs in the foreground (``-D -e``) on a free port with its own configuration: host key,
client key and ``authorized_keys`` in a temporary folder, ``UsePAM no`` and ``StrictModes no``
so it needs nothing from the system, and root allowed by key only. The client side gets its
own known_hosts file, so the user's ``~/.ssh`` is neither read for hosts nor written.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import procs

PG_URL = os.environ.get("SOAK_TEST_PG_URL")
SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").exists() else None)
SSH = shutil.which("ssh")


@dataclass(frozen=True)
class Sshd:
    port: int
    user: str
    identity: Path
    known_hosts: Path
    log: Path

    def launch_args(self) -> list[str]:
        """The ``soak cluster launch`` options that reach this server and no other."""
        return ["--ssh-identity", str(self.identity),
                "--ssh-option", f"UserKnownHostsFile={self.known_hosts}",
                "--ssh-option", "GlobalKnownHostsFile=/dev/null",
                "--ssh-option", "IdentitiesOnly=yes",
                "--ssh-option", "LogLevel=ERROR"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def sshd(tmp_path_factory) -> Iterator[Sshd]:
    if SSHD is None or SSH is None:
        pytest.skip("OpenSSH server or client not installed (Debian: apt-get install "
                    "openssh-server openssh-client)")
    tmp = tmp_path_factory.mktemp("sshd")
    for key in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / key)],
                       check=True)
    (tmp / "authorized_keys").write_text((tmp / "client_key.pub").read_text())
    # sshd refuses to start without its privilege separation folder (Debian: /run/sshd).
    privsep = Path("/run/sshd")
    if os.geteuid() == 0 and not privsep.exists():
        privsep.mkdir(mode=0o755, parents=True)
    port = _free_port()
    config = tmp / "sshd_config"
    config.write_text(f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {tmp / 'host_key'}
AuthorizedKeysFile {tmp / 'authorized_keys'}
PidFile {tmp / 'sshd.pid'}
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
PrintMotd no
""")
    log = tmp / "sshd.log"
    proc = procs.start([SSHD, "-D", "-e", "-f", config], tmp, "sshd", out=log, merge_output=True)
    try:
        def listening() -> bool:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True

        try:
            procs.wait_until(listening, proc, 15, what=f"sshd listening on port {port}", retry_on=(OSError,))
        except AssertionError as exc:  # this machine cannot run an sshd of ours: no launcher test here
            pytest.skip(f"sshd did not start: {exc}")
        yield Sshd(port=port, user=getpass.getuser(), identity=tmp / "client_key",
                   known_hosts=tmp / "known_hosts", log=log)
    finally:
        proc.stop(grace_s=10)

