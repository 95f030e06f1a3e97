"""``soak run --listen [::1]:PORT`` serves /metrics on IPv6 loopback (was: bound IPv4 only,
and failed after the run folder existed)."""

from __future__ import annotations

import os
import signal
import socket
import sys
import urllib.request
from pathlib import Path

import pytest

from tests import procs


def _ipv6_port() -> int:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
            return int(s.getsockname()[1])
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")


def _scrape(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()
    except OSError:
        return ""


def test_run_serves_metrics_on_ipv6_loopback(tmp_path: Path) -> None:
    port = _ipv6_port()
    proc = procs.start(
        [sys.executable, "-m", "soak", "run", "--duration", "1m", "--workload", "lm", "--backend", "cpu",
         "--no-preflight", "--data-dir", str(tmp_path), "--run-id", "v6", "--listen", f"[::1]:{port}",
         "--interval", "1s"], tmp_path / "procs", env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        def with_a_device() -> str:
            # the sampler's device series come first; the run's once the run has started
            text = _scrape(f"http://[::1]:{port}/metrics")
            return text if 'device="cpu"' in text and 'soak_run_info{run_id="v6"' in text else ""

        text = procs.wait_until(with_a_device, proc, 60, logs=[procs.daemon_log(tmp_path / "v6")], interval_s=0.5)
        assert 'soak_run_info{run_id="v6"' in text
        assert 'soak_device_up{' in text and 'device="cpu"' in text
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        proc.close()
    assert "cannot listen" not in err
