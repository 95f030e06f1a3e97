"""A taken --listen port is refused before the run exists: no failed run is left behind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def test_taken_listen_port_leaves_no_run_folder(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        data = tmp_path / "runs"
        out = subprocess.run(
            [sys.executable, "-m", "soak", "run", "--duration", "1m", "--workload", "lm",
             "--backend", "cpu", "--no-preflight", "--data-dir", str(data),
             "--listen", f"127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0] and "cannot listen" in lines[0]
    assert not data.exists() or not any(data.iterdir())
