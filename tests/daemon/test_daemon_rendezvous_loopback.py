"""A single-node ``soak run`` keeps torch's c10d stores on loopback (was: torchrun
``--standalone`` listened on every interface, and its store unpickles what is written to it)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from tests import listeners, procs

pytestmark = pytest.mark.slow


def test_single_node_run_listens_on_no_wildcard_address(tmp_path: Path) -> None:
    proc = procs.start(
        [sys.executable, "-m", "soak", "run", "--duration", "1m", "--workload", "lm", "--backend", "cpu",
         "--no-preflight", "--data-dir", str(tmp_path), "--run-id", "lo", "--listen", "127.0.0.1:0",
         "--interval", "1s"], tmp_path / "procs", env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        def ranks_training() -> list[listeners.Listener]:
            # torchrun starts the ranks once its rendezvous (and the store it shares with
            # them) stands: from then on every store of the job is listening
            found = listeners.listeners(proc.pid)
            agents = [x for x in found if "torch" in x.cmdline and "--nproc-per-node" in x.cmdline]
            ranks = [p for p in listeners.process_tree(proc.pid) if "soak.workloads.lm" in listeners.cmdline(p)
                     and "--nproc-per-node" not in listeners.cmdline(p)]
            return found if agents and ranks else []

        found = procs.wait_until(ranks_training, proc, 90, logs=[procs.daemon_log(tmp_path / "lo")],
                                 interval_s=0.5)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        proc.close()
    wildcard = [x for x in found if x.wildcard]
    assert not wildcard, "\n".join(f"{x.address}:{x.port} pid {x.pid} {x.cmdline[:120]}" for x in wildcard)
    assert any(x.address == "127.0.0.1" for x in found if "--nproc-per-node" in x.cmdline)
