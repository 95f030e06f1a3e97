"""Acting as another local user (``nobody``) in a test: what a user of the same host who is not
soak's can do to what soak runs, writes and listens on.

Needs root (``runuser``); a test that uses it is skipped elsewhere, with the reason.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

USER = "nobody"
REPO = Path(__file__).resolve().parent.parent


def uid() -> int:
    return pwd.getpwnam(USER).pw_uid


def require() -> None:
    """Skip unless this test can act as ``nobody``."""
    if os.geteuid() != 0:
        pytest.skip("acting as another user needs root (runuser)")
    if shutil.which("runuser") is None:
        pytest.skip("runuser (util-linux) is not installed")
    try:
        uid()
    except KeyError:
        pytest.skip(f"no user {USER} on this host")


def run(argv: Sequence[str], *, timeout_s: float = 60, env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] = "/") -> subprocess.CompletedProcess[str]:
    """``argv`` as ``nobody`` (from ``/``: nobody cannot enter a test's private folders)."""
    return subprocess.run(["runuser", "-u", USER, "--", "env", "-i", "HOME=/nonexistent",
                           "PATH=/usr/bin:/bin",
                           *[f"{k}={v}" for k, v in (env or {}).items()], *argv],
                          capture_output=True, text=True, timeout=timeout_s, cwd=cwd)


def sh(script: str, *, timeout_s: float = 30) -> subprocess.CompletedProcess[str]:
    done = run(["/bin/sh", "-c", script], timeout_s=timeout_s)
    assert done.returncode == 0, f"as {USER}: {script}\n{done.stderr}"
    return done


def python() -> tuple[str, dict[str, str]]:
    """An interpreter ``nobody`` may run, of this one's version, and the environment that gives
    it this interpreter's packages and the repository (a virtual environment under a folder
    closed to others is no use to it)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (os.path.realpath(sys.executable), f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
        if os.path.exists(candidate) and run(["/usr/bin/test", "-x", candidate], timeout_s=10).returncode == 0:
            site = sysconfig.get_paths()["purelib"]
            return candidate, {"PYTHONPATH": os.pathsep.join([str(REPO), site]), "PYTHONDONTWRITEBYTECODE": "1"}
    pytest.skip(f"no {version} that {USER} may run")


@contextmanager
def shared_folder() -> Iterator[Path]:
    """A root-owned 0755 folder ``nobody`` can reach (a test's own ``tmp_path`` is not), with a
    ``/tmp``-like sticky ``1777`` folder ``open`` inside; removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="soak-otheruser-", dir="/tmp"))
    try:
        base.chmod(0o755)
        (base / "open").mkdir()
        (base / "open").chmod(0o1777)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)
