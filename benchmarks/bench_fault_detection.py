"""Benchmark: how soon a chip's own fault report shows where operations look.

    python benchmarks/bench_fault_detection.py [--detail-interval 10] [--scale 60] [--at-h 0.1]

Starts one `soak run` agent on loopback (a simulated fleet of 4 chips, the lm workload on CPU,
an accelerated time line of --scale run seconds per wall second, each chip's slow views read
every --detail-interval wall seconds) serving /metrics, and Debian's `prometheus` scraping it
every second with dashboards/alerts.yaml loaded. At run hour --at-h four faults begin, one per
chip: uncorrectable ECC errors (npu1-0), the health word Alarm with a SeparateNPU fault code
(npu2-0), a port that goes down and stays down (npu0-0), a port that flaps every 0.1 run hours
(npu3-0). Their wall moment is the run's origin plus that.

For each signal it records, in wall seconds from the fault: the finding open on /metrics
(`soak_finding_active{kind="device_fault"}`), the `device_fault` event in the store, and the
alert firing in Prometheus' /api/v1/alerts (SoakUncorrectableEcc, SoakDeviceFaultCode,
SoakChipUnhealthy, SoakPortDown, SoakPortFlapping). The bound to compare with is one detail
interval (plus the alert's `for`). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_time_to_show import free_port, start_prometheus  # noqa: E402
from soak.store import Store  # noqa: E402

# signal (finding metric) -> chip, the alert that names it
WATCHED = {"ecc_uncorrectable": ("npu1-0", "SoakUncorrectableEcc"), "fault_code": ("npu2-0", "SoakDeviceFaultCode"),
           "health": ("npu2-0", "SoakChipUnhealthy"), "link": ("npu0-0", "SoakPortDown"),
           "link_flap": ("npu3-0", "SoakPortFlapping")}


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.read().decode()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--detail-interval", type=float, default=10.0, help="wall seconds between a chip's slow views")
    ap.add_argument("--scale", type=float, default=60.0, help="run seconds per wall second (default 60)")
    ap.add_argument("--at-h", type=float, default=0.1, help="run hour the faults begin (default 0.1)")
    ap.add_argument("--duration-h", type=float, default=2.0, help="run hours (default 2)")
    args = ap.parse_args(argv)
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        ap.error("prometheus not installed (Debian package 'prometheus')")
    work = Path(tempfile.mkdtemp(prefix="soak-faults-"))
    at = args.at_h
    scenario = (f"ecc_errors:double_per_h=30,onset_h={at:g},chips=1,"
                f"health_alarm:at_h={at:g},status=Alarm,codes=80E3A201,chips=2,"
                f"link_down:at_h={at:g},chips=0,link_flap:every_h=0.1,down_s=20,onset_h={at:g},chips=3")
    listen, p_prom = free_port(), free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    argv_ = [sys.executable, "-m", "soak", "run", "--duration", f"{args.duration_h:g}h", "--workload", "lm",
             "--size", "tiny", "--nproc", "1", "--backend", "sim", "--sim-chips", "4", "--no-preflight",
             "--interval", "1s", "--detail-interval", f"{args.detail_interval:g}s", "--data-dir", str(work / "runs"),
             "--run-id", "faults", "--listen", f"127.0.0.1:{listen}", "--time-scale", f"{args.scale:g}",
             "--sim-scenario", scenario]
    procs: list[subprocess.Popen[bytes]] = []
    with open(work / "agent.log", "wb") as out:
        procs.append(subprocess.Popen(argv_, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True))
    procs.append(start_prometheus(prometheus, work, [listen], p_prom, 1.0))
    seen: dict[str, dict[str, float]] = {k: {} for k in WATCHED}
    fault_wall: float | None = None
    deadline = time.time() + args.duration_h * 3600 / args.scale + 120
    db = work / "runs" / "faults" / "soak.db"
    try:
        while time.time() < deadline and not all(len(v) == 3 for v in seen.values()):
            time.sleep(0.25)
            now = time.time()
            if procs[0].poll() is not None:
                break
            if fault_wall is None and db.exists():
                try:
                    with Store.open(db, create=False) as store:
                        run = store.get_run("faults")
                except Exception:  # the store is being made
                    run = None
                if run is not None:  # the run's origin: its time line starts there
                    fault_wall = run.started_ts + at * 3600 / args.scale
            try:
                text = get(f"http://127.0.0.1:{listen}/metrics")
            except OSError:
                continue
            for line in text.splitlines():
                if line.startswith("soak_finding_active{") and 'kind="device_fault"' in line:
                    for name, (chip, _) in WATCHED.items():
                        metric = "link" if name == "link_flap" else name
                        if f'device="{chip}"' in line and f'metric="{metric}"' in line:
                            seen[name].setdefault("metrics", now)
            try:
                alerts = json.loads(get(f"http://127.0.0.1:{p_prom}/api/v1/alerts"))["data"]["alerts"]
            except (OSError, ValueError, KeyError):
                alerts = []
            for a in alerts:
                for name, (chip, alert) in WATCHED.items():
                    if a["labels"].get("alertname") == alert and a["labels"].get("device") == chip \
                            and a.get("state") == "firing":
                        seen[name].setdefault("alert", now)
            if fault_wall is not None:
                with Store.open(db, create=False) as store:
                    for e in store.load_events("faults", kind="device_fault"):
                        d = e.detail or {}
                        for name, (chip, _) in WATCHED.items():
                            signal_ = {"link": "link_down", "health": "health"}.get(name, name)
                            if d.get("device") == chip and d.get("signal") == signal_:
                                # the event's own time is on the run's time line: its wall moment
                                seen[name].setdefault("event", run.started_ts + (e.ts - run.started_ts) / args.scale)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
    if fault_wall is None:
        raise SystemExit(f"the run did not start; see {work / 'agent.log'}")
    out: dict[str, Any] = {"detail_interval_s": args.detail_interval, "scale": args.scale, "at_h": at,
                           "bound_s": args.detail_interval, "work": str(work), "signals": {}}
    for name, where in seen.items():
        out["signals"][name] = {k: round(v - fault_wall, 1) for k, v in sorted(where.items())}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
