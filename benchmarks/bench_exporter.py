"""Cost of `soak exporter` on a simulated 16-chip node, next to prometheus-node-exporter.

Starts `soak exporter --backend sim` (1 s ticks) and Debian's `prometheus-node-exporter` on
loopback ports of this machine, then

1. for --duration seconds scrapes each every --scrape-every seconds (as Prometheus would) and
   measures each process's CPU share and peak RSS with psutil. For soak the CPU of the
   exporter process itself is reported apart from its children: with the simulator, every
   tick runs the simulated npu-smi (a Python process), whose cost a real node spends in the
   vendor tool instead;
2. scrapes each --scrapes times back to back and reports /metrics latency p50/p99.

Targets: exporter process under 1 % of a core and under 100 MB RSS; scrape p99 no slower
than node_exporter's. Usage: python benchmarks/bench_exporter.py [--duration 60] [--chips 16]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = resp.read()
    return time.perf_counter() - started, len(body)


def wait_up(url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            get(url)
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer within {timeout_s} s")


def cpu_seconds(proc: psutil.Process) -> tuple[float, float]:
    """(own user+system, reaped children user+system) seconds."""
    t = proc.cpu_times()
    return t.user + t.system, t.children_user + t.children_system


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=60.0, help="measurement window, seconds (default 60)")
    ap.add_argument("--chips", type=int, default=16, help="simulated chips (default 16)")
    ap.add_argument("--interval", type=float, default=1.0, help="soak exporter tick, seconds (default 1)")
    ap.add_argument("--scrape-every", type=float, default=5.0, help="scrape period in the window (default 5)")
    ap.add_argument("--scrapes", type=int, default=200, help="back-to-back scrapes for latency (default 200)")
    ap.add_argument("--format", choices=("table", "json"), default="table")
    args = ap.parse_args()

    node_exporter = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    soak_port, node_port = free_port(), free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    soak = subprocess.Popen(
        [sys.executable, "-m", "soak", "exporter", "--backend", "sim", "--sim-chips", str(args.chips),
         "--interval", str(args.interval), "--listen", f"127.0.0.1:{soak_port}", "--log-level", "WARNING"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    procs = {"soak": (soak, f"http://127.0.0.1:{soak_port}/metrics")}
    if node_exporter:
        node = subprocess.Popen([node_exporter, f"--web.listen-address=127.0.0.1:{node_port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        procs["node_exporter"] = (node, f"http://127.0.0.1:{node_port}/metrics")
    try:
        for _, url in procs.values():
            wait_up(url)
        time.sleep(3)  # past start-up imports and the first detail queries
        ps = {k: psutil.Process(p.pid) for k, (p, _) in procs.items()}
        start_cpu = {k: cpu_seconds(p) for k, p in ps.items()}
        rss_peak = dict.fromkeys(ps, 0)
        t0 = time.monotonic()
        next_scrape = t0
        while (now := time.monotonic()) - t0 < args.duration:
            if now >= next_scrape:
                for _, url in procs.values():
                    get(url)
                next_scrape += args.scrape_every
            for k, p in ps.items():
                rss_peak[k] = max(rss_peak[k], p.memory_info().rss)
            time.sleep(0.25)
        wall = time.monotonic() - t0
        end_cpu = {k: cpu_seconds(p) for k, p in ps.items()}
        text = get(procs["soak"][1])
        latency: dict[str, list[float]] = {k: [] for k in procs}
        size: dict[str, int] = {}
        for _ in range(args.scrapes):
            for k, (_, url) in procs.items():  # interleaved: both see the same machine load
                seconds, size[k] = get(url)
                latency[k].append(seconds)
        ticks_metric = None
        with urllib.request.urlopen(procs["soak"][1], timeout=10) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith('soak_reader_duration_seconds{reader="npu-smi"}'):
                    ticks_metric = float(line.split()[-1])
        del text
    finally:
        for p, _ in procs.values():
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(p.pid, signal.SIGKILL)

    result: dict[str, dict[str, float]] = {}
    for k in procs:
        own = end_cpu[k][0] - start_cpu[k][0]
        children = end_cpu[k][1] - start_cpu[k][1]
        result[k] = {
            "cpu_pct_of_core": 100.0 * own / wall,
            "children_cpu_pct_of_core": 100.0 * children / wall,
            "rss_peak_mb": rss_peak[k] / 2**20,
            "scrape_p50_ms": 1000 * statistics.median(latency[k]),
            "scrape_p99_ms": 1000 * pct(latency[k], 0.99),
            "exposition_bytes": float(size[k]),
        }
    result["soak"]["npu_smi_call_s_last_tick"] = ticks_metric or float("nan")
    result["soak"]["sim_cpu_ms_per_tick"] = 1000 * (end_cpu["soak"][1] - start_cpu["soak"][1]) / (wall / args.interval)
    if args.format == "json":
        print(json.dumps({"chips": args.chips, "interval_s": args.interval, "window_s": wall, **result}, indent=2))
        return 0
    print(f"simulated {args.chips}-chip node, {args.interval:g} s ticks, {wall:.0f} s window, "
          f"scrape every {args.scrape_every:g} s; latency over {args.scrapes} back-to-back scrapes; "
          f"{psutil.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    cols = list(result)
    rows = [
        ("exporter process CPU, % of a core", "cpu_pct_of_core", "{:.2f}"),
        ("child processes CPU (sim npu-smi), % of a core", "children_cpu_pct_of_core", "{:.2f}"),
        ("peak RSS, MB", "rss_peak_mb", "{:.1f}"),
        ("scrape p50, ms", "scrape_p50_ms", "{:.2f}"),
        ("scrape p99, ms", "scrape_p99_ms", "{:.2f}"),
        ("exposition size, bytes", "exposition_bytes", "{:.0f}"),
    ]
    print(f"{'':<48}" + "".join(f"{c:>16}" for c in cols))
    for label, key, fmt in rows:
        print(f"{label:<48}" + "".join(f"{fmt.format(result[c][key]):>16}" for c in cols))
    print(f"sim CPU per tick: {result['soak']['sim_cpu_ms_per_tick']:.0f} ms; "
          f"last npu-smi call: {1000 * result['soak']['npu_smi_call_s_last_tick']:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
