"""A workload's torchrun dies with its agent: an agent SIGKILLed takes its workload along
(Linux's parent-death signal), where an untied one lives on as an orphan (what ``--resume``
ends). Real processes: a parent supervising a child, then SIGKILLed. The daemon ties every
workload it starts (tests/daemon/test_daemon_resume.py)."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests import procs

PARENT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from soak.daemon.supervisor import RestartPolicy, Supervisor
    sup = Supervisor("w", lambda attempt: [sys.executable, "-c", "import time; time.sleep(120)"],
                     Path(sys.argv[1]), RestartPolicy(), progress=lambda name: None,
                     emit=lambda *a: None, die_with_agent=sys.argv[2] == "tie")
    sup.start()
    print(sup.pid, flush=True)
    time.sleep(120)
""")


def _child_of_killed_parent(tmp_path: Path, mode: str) -> int:
    root = Path(__file__).resolve().parents[2]
    parent = procs.start([sys.executable, "-c", PARENT, str(tmp_path / mode), mode], tmp_path, f"parent-{mode}",
                         env={**os.environ, "PYTHONPATH": str(root)}, out=tmp_path / f"{mode}.out")
    try:
        procs.wait_until(lambda: (tmp_path / f"{mode}.out").read_text().strip().isdigit(), parent, 30,
                         what="the child's pid")
        child = int((tmp_path / f"{mode}.out").read_text().strip())
        assert procs.alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
    finally:
        if parent.poll() is None:
            parent.kill()
    return child


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_tied_workload_dies_with_its_agent_and_an_untied_one_lives_on(tmp_path) -> None:
    child = _child_of_killed_parent(tmp_path, "tie")
    deadline = time.monotonic() + 5
    while procs.alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not procs.alive(child), "the tied child outlived its SIGKILLed parent"
    orphan = _child_of_killed_parent(tmp_path, "loose")
    try:
        time.sleep(0.5)
        assert procs.alive(orphan)  # untied: --resume ends it
    finally:
        os.killpg(orphan, signal.SIGKILL)
