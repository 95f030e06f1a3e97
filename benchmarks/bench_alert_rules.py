"""Benchmark: the HBM-creep alert against the common raw-series rule, on a real Prometheus.

    python benchmarks/bench_alert_rules.py [--chips 256] [--leaks 4] [--hours 7]

1. Writes OpenMetrics history for --chips chips at 30 s resolution: every chip's HBM is an
   allocator sawtooth (random period 4-25 min, amplitude 10-40 % of 64 GiB); --leaks of them
   also have a floor rising 1.5 % of capacity per hour. Loads it into a fresh TSDB with
   `promtool tsdb create-blocks-from openmetrics` and starts Debian's `prometheus` on it.
2. Runs, as range queries over the last 3 h at a 1 min step (what rule evaluation does once
   a minute), in the same run on the same data:
   - soak: the `SoakHBMCreep` expression from dashboards/alerts.yaml;
   - reference: the rule most public GPU rule sets use,
     `predict_linear(used[1h], 3600) > total` (the OOM forecast);
   - reference: the same on a 10 min window, `predict_linear(used[10m], 3600) > total`;
   - reference: soak's slope threshold on the raw series, `deriv(used[3h]) * 3600 / total
     > 0.01`, i.e. the creep rule without the floor and without the magnitude check.
   For each: chips flagged at any step (healthy ones are false alarms, leaking ones hits),
   the share of steps a healthy chip is flagged, and the median query time of 5 repeats.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
GIB = 1024**3
TOTAL = 64 * GIB


def write_history(path: Path, chips: int, leaks: int, hours: float, end: int) -> list[str]:
    rng = random.Random(7)
    step = 30
    start = end - int(hours * 3600)
    leaking = [f"npu{i}-0" for i in range(leaks)]
    lines = ["# TYPE soak_device_memory_used_bytes gauge"]
    totals = ["# TYPE soak_device_memory_total_bytes gauge"]
    for i in range(chips):
        dev = f"npu{i}-0"
        labels = f'instance="bench:19400",job="soak",device="{dev}",kind="hbm"'
        period = rng.uniform(240, 1500)
        amp = rng.uniform(0.10, 0.40) * TOTAL
        base = rng.uniform(0.05, 0.30) * TOTAL
        phase = rng.uniform(0, period)
        for t in range(start, end + 1, step):
            saw = amp * (((t + phase) % period) / period)
            floor = base + (0.015 * TOTAL * (t - start) / 3600 if dev in leaking else 0)
            value = min(TOTAL, floor + saw + rng.uniform(0, 0.005) * TOTAL)
            lines.append(f"soak_device_memory_used_bytes{{{labels}}} {value:.0f} {t}")
            totals.append(f"soak_device_memory_total_bytes{{{labels}}} {TOTAL} {t}")
    path.write_text("\n".join(lines + totals + ["# EOF", ""]))
    return leaking


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query_range(base: str, expr: str, start: float, end: float) -> tuple[list, float]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": 60})
    t0 = time.perf_counter()
    with urllib.request.urlopen(f"{base}/api/v1/query_range?{params}", timeout=120) as resp:
        answer = json.loads(resp.read())
    elapsed = time.perf_counter() - t0
    if answer["status"] != "success":
        raise SystemExit(f"query failed: {answer.get('error')}")
    return answer["data"]["result"], elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chips", type=int, default=256)
    ap.add_argument("--leaks", type=int, default=4)
    ap.add_argument("--hours", type=float, default=7.0)
    args = ap.parse_args()
    prom_bin, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prom_bin or not promtool:
        print("needs prometheus and promtool (Debian package 'prometheus')", file=sys.stderr)
        return 2
    rules = yaml.safe_load((ROOT / "dashboards" / "alerts.yaml").read_text())
    creep = next(r["expr"] for g in rules["groups"] for r in g["rules"]
                 if r.get("alert") == "SoakHBMCreep")
    exprs = {
        "soak SoakHBMCreep": creep,
        "reference predict_linear[1h] > total": 'predict_linear(soak_device_memory_used_bytes'
        '{kind="hbm"}[1h], 3600) > soak_device_memory_total_bytes{kind="hbm"}',
        "reference predict_linear[10m] > total": 'predict_linear(soak_device_memory_used_bytes'
        '{kind="hbm"}[10m], 3600) > soak_device_memory_total_bytes{kind="hbm"}',
        "reference raw deriv[3h], soak's threshold": 'deriv(soak_device_memory_used_bytes'
        '{kind="hbm"}[3h]) * 3600 / soak_device_memory_total_bytes{kind="hbm"} > 0.01',
    }
    end = int(time.time()) // 60 * 60 - 60
    with tempfile.TemporaryDirectory(prefix="soak-bench-rules-") as tmp_:
        tmp = Path(tmp_)
        t0 = time.perf_counter()
        leaking = write_history(tmp / "history.om", args.chips, args.leaks, args.hours, end)
        subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics",
                        str(tmp / "history.om"), str(tmp / "tsdb")], check=True,
                       capture_output=True)
        load_s = time.perf_counter() - t0
        (tmp / "prometheus.yml").write_text("global: {scrape_interval: 1h}\n")
        port = free_port()
        proc = subprocess.Popen([prom_bin, f"--config.file={tmp / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=error"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(base + "/-/ready", timeout=2).read()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit("prometheus did not become ready") from None
                    time.sleep(0.5)
            out: dict[str, object] = {
                "chips": args.chips, "leaking": len(leaking), "hours": args.hours,
                "samples": args.chips * 2 * (int(args.hours * 3600) // 30 + 1),
                "history_write_and_load_s": round(load_s, 1), "window": "last 3 h, 1 min step",
            }
            for name, expr in exprs.items():
                times = []
                for _ in range(5):
                    result, elapsed = query_range(base, expr, end - 3 * 3600, end)
                    times.append(elapsed)
                flagged = {s["metric"]["device"]: len(s["values"]) for s in result}
                healthy_steps = sum(n for d, n in flagged.items() if d not in leaking)
                out[name] = {
                    "leaks_found": sum(d in flagged for d in leaking),
                    "healthy_chips_flagged": sum(d not in leaking for d in flagged),
                    "healthy_flagged_step_share": round(
                        healthy_steps / ((args.chips - len(leaking)) * 181), 4),
                    "query_median_s": round(statistics.median(times), 3),
                }
            print(json.dumps(out, indent=2))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
