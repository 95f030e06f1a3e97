"""Slow and half-open clients: a bounded number of threads, and /metrics still answers."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

from exporter_helpers import free_port, http_get, scrape_when, soak_exporter_argv

from exporters.collector import SoakCollector, make_registry
from exporters.server import MAX_CONNECTIONS, serve
from soak.telemetry.backends import CpuBackend
from soak.telemetry.sampler import Sampler

HALF_OPEN = 500


def _threads(pid: int) -> int:
    return int(re.search(r"^Threads:\s+(\d+)", Path(f"/proc/{pid}/status").read_text(), re.M).group(1))  # type: ignore[union-attr]


def _half_open(port: int, n: int) -> list[socket.socket]:
    """``n`` connections: half send nothing, half the start of a request line and no more."""
    socks = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        if i % 2:
            s.sendall(b"GET /metr")
        socks.append(s)
    return socks


def test_500_half_open_connections_hold_a_bounded_number_of_threads(spawn) -> None:
    port = free_port()
    proc = spawn(soak_exporter_argv(port, "--backend", "cpu", "--interval", "1"))
    url = f"http://127.0.0.1:{port}/metrics"
    scrape_when(url, "soak_device_up{", 30)
    idle_threads = _threads(proc.pid)
    socks = _half_open(port, HALF_OPEN)
    try:
        latencies = []
        for _ in range(10):
            started = time.monotonic()
            assert 'soak_device_up{' in http_get(url, timeout_s=5.0)  # answered, not refused
            latencies.append(time.monotonic() - started)
        threads = _threads(proc.pid)
    finally:
        for s in socks:
            s.close()
    # one thread per connection being served, never one per half-open connection
    assert threads <= idle_threads + MAX_CONNECTIONS
    print(f"{HALF_OPEN} half-open: {threads} threads (idle {idle_threads}); "
          f"/metrics latency max {max(latencies) * 1000:.1f} ms")


def test_a_silent_connection_is_closed_after_the_read_timeout() -> None:
    sampler = Sampler(CpuBackend(), interval_s=60)
    sampler.tick()
    server = serve(make_registry(SoakCollector.for_sampler(sampler)), "127.0.0.1:0", read_timeout_s=0.5)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as silent:
            started = time.monotonic()
            assert silent.recv(1024) == b""  # the server hung up on us
            assert time.monotonic() - started < 8  # at the read timeout, not the 10 s client bound
    finally:
        server.stop()


def test_at_the_connection_limit_the_oldest_idle_one_makes_room() -> None:
    sampler = Sampler(CpuBackend(), interval_s=60)
    sampler.tick()
    server = serve(make_registry(SoakCollector.for_sampler(sampler)), "127.0.0.1:0", max_connections=2)
    try:
        first, second = _half_open(server.port, 2)
        with first, second:
            assert "soak_device_up{" in http_get(server.url, timeout_s=5.0)
            first.settimeout(5)
            assert first.recv(1024) == b""  # the oldest was closed for the scrape's sake
    finally:
        server.stop()
