"""The daemon's own cost while it supervises a soak: CPU share of one core and RSS.

    python benchmarks/bench_daemon.py [--seconds 40] [--backend cpu|sim]

Starts a real ``soak run`` (the lm workload under torchrun, telemetry at 1 s ticks, /metrics
served, scheduler jobs running), skips the start-up, then measures over a steady window:

* the daemon process's own CPU time (user+system) as % of one core: target < 2 %;
* the CPU of the tools it runs each tick (reaped children: the simulated npu-smi), shown
  apart, since on a real node that is npu-smi's cost, not the daemon's;
* its RSS at the end of the window;
* reference in the same run: the workload's process tree over the same window.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]


def tree_cpu(pid: int) -> float:
    total = 0.0
    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    for q in procs:
        try:
            t = q.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=40.0, help="measured window (default: 40)")
    ap.add_argument("--warmup", type=float, default=20.0, help="start-up skipped (default: 20)")
    ap.add_argument("--backend", default="cpu", choices=("cpu", "sim"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        total = a.warmup + a.seconds + 15
        argv = [sys.executable, "-m", "soak", "run", "--duration", f"{total:.0f}s", "--workload", "lm",
                "--backend", a.backend, "--interval", "1s", "--listen", "127.0.0.1:0", "--no-preflight",
                "--data-dir", tmp, "--run-id", "bench", "--progress-every", "5"]
        if a.backend == "sim":
            argv += ["--sim-chips", "16"]
        daemon = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            me = psutil.Process(daemon.pid)
            time.sleep(a.warmup)
            workload = [c for c in me.children() if "torch.distributed.run" in " ".join(c.cmdline())]
            t0, c0 = time.monotonic(), me.cpu_times()
            w0 = tree_cpu(workload[0].pid) if workload else 0.0
            time.sleep(a.seconds)
            t1, c1 = time.monotonic(), me.cpu_times()
            w1 = tree_cpu(workload[0].pid) if workload else 0.0
            rss = me.memory_info().rss
        finally:
            daemon.terminate()
            daemon.wait(60)
    wall = t1 - t0
    own = (c1.user + c1.system) - (c0.user + c0.system)
    tools = (c1.children_user + c1.children_system) - (c0.children_user + c0.children_system)
    print(f"backend {a.backend}, window {wall:.1f} s after {a.warmup:.0f} s start-up")
    print(f"daemon own CPU : {own:6.2f} s = {100 * own / wall:5.2f} % of one core (target < 2 %)")
    print(f"tools per tick : {tools:6.2f} s = {100 * tools / wall:5.2f} % of one core (reaped children, e.g. npu-smi)")
    print(f"daemon RSS     : {rss / 2**20:6.1f} MiB")
    print(f"reference, workload tree CPU: {w1 - w0:6.2f} s = {100 * (w1 - w0) / wall:5.1f} % of one core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
