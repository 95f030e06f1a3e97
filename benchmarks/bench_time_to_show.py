"""Benchmark: how soon a fault injected mid-run shows where operations look.

    python benchmarks/bench_time_to_show.py --db postgresql+psycopg://... [--wait 480] [--keep DIR]

Starts three `soak run` agents on loopback (simulated fleets of 3 chips, the lm workload on
CPU, an accelerated time line of --scale run seconds per wall second) sharing the PostgreSQL
store --db, each serving /metrics, and Debian's `prometheus` scraping them every --scrape
seconds with dashboards/alerts.yaml loaded. Mid-run two faults begin:

- a slow node: global rank 1 computes three times as long from step --slow-at on
  (`--inject slow-rank:1,3,AT`; the rank's `inject` heartbeat line gives the wall moment);
- a hot chip: npu0-0 heats towards 75 °C at the power of its siblings from run hour --hot-at
  on (`--sim-scenario thermal:...`, part of the plan every node shares, so chip 0 of each node;
  node-2's is watched); its moment is the run's origin plus that.

For each it records, from the injection (wall seconds, and the run time they stand for):
(a) the alert (SoakNodeStraggler, SoakChipOutOfLine) pending, then firing, in Prometheus'
/api/v1/alerts; (b) the finding (`soak_finding_active`, kind straggler / outlier) on an
agent's /metrics; (c) the finding in the store. Prints one JSON object. --keep DIR keeps the
run folders and Prometheus' TSDB there (for `dashboards/preview.py --board cluster`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from soak.store import Store  # noqa: E402

PLAN = '[acceptance.thresholds]\n"peers.min_peers" = 2\n"peers.bucket_s" = 7200\n'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return resp.read().decode()


def start_prometheus(prometheus: str, work: Path, listen: list[int], port: int, scrape_s: float,
                     job: str = "soak") -> subprocess.Popen[bytes]:
    """Debian's prometheus on loopback ``port``, scraping ``listen`` every ``scrape_s`` with
    dashboards/alerts.yaml loaded; its config, TSDB and log in ``work``."""
    targets = ", ".join(f'"127.0.0.1:{p}"' for p in listen)
    (work / "prometheus.yml").write_text(
        f"global: {{scrape_interval: {scrape_s:g}s, scrape_timeout: {min(scrape_s, 5):g}s, "
        f"evaluation_interval: {scrape_s:g}s}}\n"
        f"rule_files: [{ROOT / 'dashboards' / 'alerts.yaml'}]\n"
        f"scrape_configs:\n  - job_name: {job}\n    static_configs: [{{targets: [{targets}]}}]\n")
    with open(work / "prometheus.log", "wb") as out:
        return subprocess.Popen([prometheus, f"--config.file={work / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={work / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _unix(rfc3339: str | None) -> float | None:
    """Prometheus' ``2026-12-01T22:58:49.123456789Z`` as unix seconds."""
    if not rfc3339:
        return None
    from datetime import datetime

    head, _, frac = rfc3339.rstrip("Z").partition(".")
    return datetime.fromisoformat(head + "+00:00").timestamp() + (float("0." + frac) if frac else 0.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=os.environ.get("SOAK_TEST_PG_URL"), help="PostgreSQL URL of the store")
    ap.add_argument("--scale", type=float, default=3600.0, help="run seconds per wall second (default 3600)")
    ap.add_argument("--scrape", type=float, default=15.0, help="scrape and rule interval, s (default 15)")
    ap.add_argument("--slow-at", type=int, default=1500, help="step from which rank 1 is slow (default 1500)")
    ap.add_argument("--hot-at", type=float, default=240.0, help="run hour the hot chip starts (default 240)")
    ap.add_argument("--wait", type=float, default=480.0, help="wall seconds to watch after both injections")
    ap.add_argument("--keep", type=Path, help="keep the run folders and the TSDB in this folder")
    args = ap.parse_args(argv)
    if not args.db:
        ap.error("--db (or SOAK_TEST_PG_URL) is needed: the three agents share a PostgreSQL store")
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        ap.error("prometheus not installed (Debian package 'prometheus')")
    work = args.keep or Path(tempfile.mkdtemp(prefix="soak-tts-"))
    work.mkdir(parents=True, exist_ok=True)
    run_id = f"tts-{uuid.uuid4().hex[:6]}"
    rdzv, p_prom = free_port(), free_port()
    listen = [free_port() for _ in range(3)]
    (work / "plan.toml").write_text(PLAN)
    hot = f"thermal:start_h={args.hot_at:g},duration_h=400,peak_c=75,chips=0"
    procs: list[subprocess.Popen[bytes]] = []
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    for r in range(3):
        node = work / f"node-{r}"
        node.mkdir(exist_ok=True)
        argv_ = [sys.executable, "-m", "soak", "run", str(work / "plan.toml"), "--duration", "2000h",
                 "--workload", "lm", "--size", "tiny", "--backend", "sim", "--sim-chips", "3", "--nproc", "1",
                 "--no-preflight", "--interval", "1s", "--data-dir", str(node), "--db", args.db,
                 "--run-id", run_id, "--nodes", "3", "--node-rank", str(r), "--node-name", f"node-{r}",
                 "--rendezvous", f"127.0.0.1:{rdzv}", "--listen", f"127.0.0.1:{listen[r]}",
                 "--time-scale", f"{args.scale:g}", "--inject", f"slow-rank:1,3,{args.slow_at}",
                 "--sim-scenario", hot]  # every node runs the same plan: chip 0 of each heats
        with open(node / "agent.log", "wb") as out:
            procs.append(subprocess.Popen(argv_, stdout=out, stderr=subprocess.STDOUT, env=env,
                                          start_new_session=True))
    procs.append(start_prometheus(prometheus, work, listen, p_prom, args.scrape, job="soak-cluster"))
    prom = f"http://127.0.0.1:{p_prom}"
    seen: dict[str, float] = {}
    inject: dict[str, float] = {}
    slow_node: str | None = None
    t_begin = time.time()
    try:
        with Store.open(args.db) as store:
            deadline = None
            while deadline is None or time.time() < deadline:
                time.sleep(0.5)
                now = time.time()
                if any(p.poll() is not None for p in procs):
                    raise SystemExit(f"a process ended early; see {work}")
                if slow_node is None:
                    for r in range(3):
                        beats = work / f"node-{r}" / run_id / "heartbeats" / "lm-rank1.jsonl"
                        if beats.exists():
                            for line in beats.read_text().splitlines():
                                rec = json.loads(line)
                                if rec.get("event") == "inject" and "slowed" in (rec.get("message") or ""):
                                    slow_node, inject["slow node"] = f"node-{r}", float(rec["ts"])
                rec = store.get_run(run_id)
                if rec is not None and "hot chip" not in inject:
                    inject["hot chip"] = rec.started_ts + args.hot_at * 3600.0 / args.scale
                if len(inject) == 2 and deadline is None:
                    deadline = max(inject.values()) + args.wait
                try:
                    alerts = get_json(prom + "/api/v1/alerts")["data"]["alerts"]
                except OSError:
                    continue
                for a in alerts:
                    lab = a["labels"]
                    fault = ("slow node" if lab["alertname"] == "SoakNodeStraggler" and lab.get("node") == slow_node
                             else "hot chip" if lab["alertname"] == "SoakChipOutOfLine"
                             and (lab.get("node"), lab.get("device")) == ("node-2", "npu0-0") else None)
                    if fault is not None:
                        # pending since the evaluation that first found it (Prometheus' activeAt)
                        seen.setdefault(f"{fault}: alert pending", _unix(a.get("activeAt")) or now)
                        if a["state"] == "firing":
                            seen.setdefault(f"{fault}: alert firing", now)
                for p in listen:
                    try:
                        text = scrape(p)
                    except OSError:
                        continue
                    for line in text.splitlines():
                        if not line.startswith("soak_finding_active{"):
                            continue
                        if slow_node and 'kind="straggler"' in line and f'node="{slow_node}"' in line:
                            seen.setdefault("slow node: finding on /metrics", now)
                        if 'kind="outlier"' in line and 'device="npu0-0"' in line and 'node="node-2"' in line:
                            seen.setdefault("hot chip: finding on /metrics", now)
                for f in store.load_findings(run_id):
                    if slow_node and f.kind == "straggler" and f.node == slow_node:
                        seen.setdefault("slow node: finding in the store", now)
                    if f.kind == "outlier" and (f.node, f.device) == ("node-2", "npu0-0"):
                        seen.setdefault("hot chip: finding in the store", now)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
    result: dict[str, Any] = {"run_id": run_id, "scale": args.scale, "scrape_s": args.scrape,
                              "slow_node": slow_node, "watched_s": round(time.time() - t_begin, 1),
                              "work": str(work), "injected_wall": inject, "after_injection": {}}
    for what, t in sorted(seen.items()):
        fault = what.split(":")[0]
        wall = t - inject[fault]
        result["after_injection"][what] = {"wall_s": round(wall, 1), "run_h": round(wall * args.scale / 3600, 1)}
    print(json.dumps(result, indent=2))
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
