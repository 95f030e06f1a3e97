"""The leader's cluster step at scale: 64 nodes x 16 chips x 72 h at 5 s ticks, on this machine.

    python benchmarks/bench_cluster_scale.py [--pg URL] [--nodes 64[,256,1024]] [--chips 16] [--hours 72]
                                             [--raw-nodes 2] [--raw-hours 6] [--skip raw,read,online,final]

``--nodes 64,256,1024`` measures each fleet in turn (a fresh database each) and ends with
the growth table: per node count the summary rows and their size in PostgreSQL
(``pg_total_relation_size`` of ``chip_buckets``, indexes included), the synthesis time, and
per step its wall time, its multiple of the first fleet's and its peak RSS. The plain read
holds every summary row in one list (about 26 GiB at 1,024 nodes x 16 x 72 h): skip it
(``--skip read``) for large fleets; ``--skip raw`` leaves out the old raw path.

In a cluster run every node agent analyses its own chips and stores its findings and, per
chip and rank, bucket summaries (``chip_buckets``: per 600 s bucket of the peer comparison
the median, or HBM minimum, of temperature, power, utilization, HBM used and total, step
and compute time, with the readings and the seconds they cover). The leader's cluster step
(``soak.judge.judge_run`` on a cluster run: the node agents' findings, the peer comparison
over every node's buckets, coverage and chip-hours summed by the store) never reads a raw
sample. This script synthesizes in PostgreSQL what the leader reads for the given fleet,
with COPY (the summaries of 64 x 16 chips and as many ranks, findings of the nodes, the
run's nodes and events; 72 h of raw samples, 53 M rows, are not needed: the leader does not
read them, and the agents write them as they go), then runs, each in a fresh process:

* **final**: the leader's judgement of the finished run (what ``soak run`` does at the end);
* **online**: its cluster step while the run goes (the online analysis);
* **plain read**: the same summary rows read in one query as tuples, nothing computed;
* **old raw path** (``--raw-nodes`` x chips x ``--raw-hours`` of raw samples at 5 s):
  the leader judging the raw samples of every node, as before the summaries, measured on a
  smaller run and extrapolated linearly to the fleet (its cost grows with the samples).

Each prints its wall time and peak RSS (``ru_maxrss`` of the process, interpreter and
imports included; the RSS after the imports alone is printed beside it). Targets: < 60 s
and < 2 GB for the final step at 64 x 16 x 72 h.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GIB = 1 << 30
T0 = 1_767_225_600.0
WIDTH = 600.0
TICK = 5.0
RUN = "scale"


def fleet_plan(nodes: int, chips: int, hours: float, tick: float = TICK,  # noqa: ANN201 (a soak.config.Plan)
               node_silence: str = "60s"):
    """The plan of the fleet's cluster run (the benchmarks' nodes join with it)."""
    from soak.config import plan_from_dict

    return plan_from_dict({
        "run": {"id": RUN, "duration": f"{hours:g}h", "preflight": False, "db": "postgresql+psycopg://u@h/d"},
        "sampling": {"interval": f"{tick:g}s"}, "devices": {"backend": "npu", "expect_chips": chips},
        "workloads": [{"name": "lm", "nproc": chips}], "cluster": {"nodes": nodes, "rendezvous": "127.0.0.1:1",
                                                              "node_silence": node_silence},
    })


def plan_dict(nodes: int, chips: int, hours: float) -> dict:
    return fleet_plan(nodes, chips, hours).to_dict()


def _start_run(store, run_id: str, nodes: int, chips: int, hours: float) -> None:  # noqa: ANN001
    plan = plan_dict(nodes, chips, hours)
    for r in range(nodes):
        store.join_cluster(run_id, node=f"n{r:02d}", rank=r, nodes=nodes, plan_digest="bench", joined_ts=T0 - 60,
                           run=dict(host="n00", plan=plan, started_ts=T0 - 60, planned_end_ts=T0 + hours * 3600,
                                    workload="lm", backend="npu", time_scale=1.0, run_dir=None) if r == 0 else {},
                           chips=chips)
        store.update_node(run_id, f"n{r:02d}", status="finished", ended_ts=T0 + hours * 3600)
    store.add_event(run_id, "start", ts=T0 + 30, workload="lm", rank=0, node="n00", message="started")


def _copy(store, table: str, columns: str, text: str) -> None:  # noqa: ANN001
    """Synthesis only (the store's own writes go through its methods): PostgreSQL's COPY."""
    raw = store.engine.raw_connection()
    try:
        cur = raw.cursor()
        with cur.copy(f"COPY {table} ({columns}) FROM STDIN") as cp:
            cp.write(text)
        raw.commit()
    finally:
        raw.close()


def synthesize(url: str, nodes: int, chips: int, hours: float) -> dict[str, int]:
    """The run as its node agents leave it for the leader: summaries, findings, nodes, events."""
    from soak.analysis.model import Finding
    from soak.cluster.analysis import NODE_KINDS
    from soak.store import Store

    rng = np.random.default_rng(1)
    nb = int(hours * 3600 / WIDTH)
    ts = T0 + np.arange(nb) * WIDTH
    per = round(WIDTH / TICK)
    rows = 0
    with Store.open(url) as store:
        _start_run(store, RUN, nodes, chips, hours)
        for r in range(nodes):
            node = f"n{r:02d}"
            buf = io.StringIO()
            for c in range(chips):
                dev = f"npu{c}-0"
                hot = 6.0 * (ts >= T0 + 10 * 3600) if (r, c) == (7, 3) else 0.0
                series = {
                    "temp_c": 55 + rng.normal(0, 1.0) + rng.normal(0, 0.3, nb) + hot,
                    "power_w": 300 + rng.normal(0, 5) + rng.normal(0, 2, nb),
                    "util_pct": 95 + rng.normal(0, 1, nb),
                    "hbm_used_bytes": 50 * GIB + rng.normal(0, 1e8) + rng.normal(0, 1e7, nb),
                    "hbm_total_bytes": np.full(nb, 64.0 * GIB),
                }
                for metric, v in series.items():
                    buf.write("".join(f"{RUN}\t{node}\t{dev}\t{metric}\t{t!r}\t{x!r}\t{per}\t{WIDTH!r}\n"
                                      for t, x in zip(ts.tolist(), v.tolist(), strict=True)))
                buf.write("".join(f"{RUN}\t{node}\t{dev}\tany\t{t!r}\t\\N\t{per}\t{WIDTH!r}\n" for t in ts.tolist()))
                rank = f"lm-rank{r * chips + c}"
                slow = 1.09 if r == 21 else 1.0
                for metric, base in (("step_time_s", 0.5), ("compute_s", 0.3)):
                    v = base * slow * (1 + rng.normal(0, 0.004, nb))
                    buf.write("".join(f"{RUN}\t{node}\t{rank}\t{metric}\t{t!r}\t{x!r}\t{per}\t{WIDTH!r}\n"
                                      for t, x in zip(ts.tolist(), v.tolist(), strict=True)))
                rows += 8 * nb
            _copy(store, "chip_buckets", "run_id, node, device, metric, ts, value, n, covered_s", buf.getvalue())
            # a few findings of each node's own detectors
            found = [Finding(kind="memory_creep", device=f"npu{c}-0", metric="hbm_used_bytes", start=T0 + 3600.0,
                             end=T0 + hours * 3600, severity="warn", summary="slow leak", slope_per_hour=12e6,
                             node=node, details={"slope_ci": [10e6, 14e6]}).to_dict() for c in range(3)]
            store.replace_findings(RUN, found, node=node, kinds=NODE_KINDS)
    return {"bucket_rows": rows, "findings": 3 * nodes, "buckets": nb}


def synthesize_raw(url: str, run_id: str, nodes: int, chips: int, hours: float) -> int:
    """Raw samples of a smaller cluster run, no summaries: the leader's old path."""
    from soak.store import Store
    from soak.store import schema as S
    from soak.telemetry.records import DeviceSample, Snapshot

    rng = np.random.default_rng(2)
    n = int(hours * 3600 / TICK)
    t = T0 + np.arange(n) * TICK
    with Store.open(url) as store:
        _start_run(store, run_id, nodes, chips, hours)
        for r in range(nodes):  # one tick through the store makes the series
            w = store.writer(run_id, node=f"n{r:02d}")
            w.add(Snapshot(ts=T0 - TICK, host="h", devices=tuple(DeviceSample(device=f"npu{c}-0", backend="npu")
                                                                  for c in range(chips))))
            w.flush()
        ids = {(node, dev): sid for sid, node, dev in store.run_series(run_id)}
        cols = ["series_id", "ts", "util_pct", "temp_c", "power_w", "hbm_used_bytes", "hbm_total_bytes", "up"]
        for r in range(nodes):
            buf = io.StringIO()
            for c in range(chips):
                sid = ids[(f"n{r:02d}", f"npu{c}-0")]
                util = 95 + rng.normal(0, 1, n)
                temp = 55 + rng.normal(0, 1) + rng.normal(0, 0.5, n)
                power = 300 + rng.normal(0, 3, n)
                hbm = (50 * GIB + rng.normal(0, 1e7, n)).astype(np.int64)
                buf.write("".join(f"{sid}\t{a!r}\t{u:.3f}\t{te:.2f}\t{p:.1f}\t{h}\t{64 * GIB}\tt\n" for a, u, te, p, h in
                                  zip(t.tolist(), util.tolist(), temp.tolist(), power.tolist(), hbm.tolist(), strict=True)))
            _copy(store, S.samples.name, ", ".join(cols), buf.getvalue())
    return nodes * chips * n


def child(what: str, url: str, run_id: str, hours: float) -> None:
    """One measurement in this (fresh) process; prints a JSON line."""
    import soak.judge  # noqa: F401  (the imports, before the baseline)
    from soak.store import Store

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    end = T0 + hours * 3600
    t0 = time.perf_counter()
    extra: dict = {}
    with Store.open(url, create=False) as store:
        if what == "read":
            rows = store.load_buckets(run_id)
            extra["rows"] = len(rows)
        else:
            from soak.analysis.model import PEER_KINDS
            from soak.judge import judge_run

            if what == "online":
                j = judge_run(store, run_id, status="running", now=end - 60)
            else:
                j = judge_run(store, run_id, status="finished", ended=end)
            extra = {"verdict": j.verdict, "findings": len(j.findings), "chip_hours": j.chip_hours,
                     "kinds": sorted({(f["kind"], f.get("node"), f.get("device")) for f in j.findings
                                      if f["kind"] in PEER_KINDS}),
                     "coverage_min": None if j.coverage is None else j.coverage.worst[2],
                     "chips_seen": None if j.coverage is None else j.coverage.chips_seen}
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"wall_s": wall, "peak_rss": peak, "import_rss": base, **extra}, default=str))


def measure(what: str, url: str, run_id: str, hours: float) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", what, "--url", url, "--run-id", run_id,
                          "--hours", str(hours)], capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"{what}: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def one_fleet(pg: str, nodes: int, chips: int, hours: float, skip: set[str], raw_nodes: int,
              raw_hours: float) -> dict:
    """Synthesize one fleet in a fresh database and time the leader's steps on it."""
    from tests.pgdb import fresh_database

    mib = 1 << 20
    out: dict = {"nodes": nodes}
    with fresh_database(pg, "soak_bench") as url:
        t = time.perf_counter()
        made = synthesize(url, nodes, chips, hours)
        out["synth_s"] = time.perf_counter() - t
        out["bucket_rows"] = made["bucket_rows"]
        out["bucket_bytes"] = table_bytes(url, "chip_buckets")
        print(f"\nsynthesized {nodes} nodes x {chips} chips x {hours:g} h: {made['bucket_rows']:,} bucket rows "
              f"({made['buckets']} buckets of {WIDTH:g} s x 8 metrics x chips and ranks; "
              f"{out['bucket_bytes'] / mib:,.0f} MiB with indexes), {made['findings']} node "
              f"findings, in {out['synth_s']:.0f} s (COPY); raw samples this run would hold: "
              f"{nodes * chips * int(hours * 3600 / TICK):,} rows (not synthesized: the leader reads none)")
        print(f"{'leader step':<34}{'wall s':>8}{'peak RSS MiB':>14}{'imports MiB':>13}  result")
        steps = [("final", "final judgement (cluster path)"), ("online", "online cluster step"),
                 ("read", "plain read of the summary rows")]
        for what, label in steps:
            if what in skip:
                continue
            r = out[what] = measure(what, url, RUN, hours)
            said = (f"{r['rows']:,} rows" if what == "read" else
                    f"verdict {r['verdict']}, {r['findings']} findings, {r['chips_seen']} chips, "
                    f"{r['chip_hours']:.0f} chip-hours, peers: {r['kinds']}")
            print(f"{label:<34}{r['wall_s']:>8.1f}{r['peak_rss'] / mib:>14.0f}{r['import_rss'] / mib:>13.0f}  {said}",
                  flush=True)
        if "raw" not in skip:
            raw_id = "raw"
            n_raw = synthesize_raw(url, raw_id, raw_nodes, chips, raw_hours)
            r = measure("final", url, raw_id, raw_hours)
            scale = (nodes * chips * hours) / (raw_nodes * chips * raw_hours)
            print(f"{'old raw path, ' + str(raw_nodes) + ' nodes x ' + f'{raw_hours:g} h':<34}{r['wall_s']:>8.1f}"
                  f"{r['peak_rss'] / mib:>14.0f}{r['import_rss'] / mib:>13.0f}  {n_raw:,} sample rows")
            print(f"{'  extrapolated x' + f'{scale:.0f}':<34}{r['wall_s'] * scale:>8.0f}"
                  f"{r['import_rss'] / mib + (r['peak_rss'] - r['import_rss']) * scale / mib:>14.0f}"
                  f"{'':>13}  (linear in the samples; not measured)")
        if "final" in out:
            f = out["final"]
            print(f"targets for the final step: < 60 s ({'met' if f['wall_s'] < 60 else 'NOT met'}), "
                  f"< 2 GB peak RSS ({'met' if f['peak_rss'] < 2e9 else 'NOT met'})")
    return out


def table_bytes(url: str, table: str) -> int:
    """``pg_total_relation_size`` of ``table`` (heap, indexes, TOAST)."""
    from sqlalchemy import create_engine, text

    eng = create_engine(url)
    try:
        with eng.connect() as conn:
            return int(conn.execute(text(f"SELECT pg_total_relation_size('{table}')")).scalar_one())
    finally:
        eng.dispose()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pg", default=os.environ.get("SOAK_TEST_PG_URL"), help="PostgreSQL URL")
    ap.add_argument("--nodes", default="64", help="node count, or a comma list (64,256,1024): one fleet each")
    ap.add_argument("--chips", type=int, default=16)
    ap.add_argument("--hours", type=float, default=72.0)
    ap.add_argument("--raw-nodes", type=int, default=2)
    ap.add_argument("--raw-hours", type=float, default=6.0)
    ap.add_argument("--skip", default="", help="comma list of steps to skip: raw, read, online, final")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--run-id", default=RUN, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.url, a.run_id, a.hours)
        return 0
    if not a.pg:
        print("bench_cluster_scale: give --pg or set SOAK_TEST_PG_URL (a cluster store is PostgreSQL)", file=sys.stderr)
        return 2
    skip = set(filter(None, a.skip.split(",")))
    fleets = [int(x) for x in a.nodes.split(",")]
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    done = [one_fleet(a.pg, n, a.chips, a.hours, skip, a.raw_nodes, a.raw_hours) for n in fleets]
    if len(done) > 1:
        mib = 1 << 20
        print(f"\ngrowth, {a.chips} chips x {a.hours:g} h (wall s / peak RSS MiB; x: to the first fleet)")
        print(f"{'nodes':>6}{'bucket rows':>13}{'MiB':>7}{'synth s':>9}"
              + "".join(f"{w + ' s':>10}{'x':>6}{w + ' MiB':>12}" for w in ("final", "online", "read")
                        if w not in skip))
        first = done[0]
        for d in done:
            line = (f"{d['nodes']:>6}{d['bucket_rows']:>13,}{d['bucket_bytes'] / mib:>7.0f}{d['synth_s']:>9.0f}")
            for w in ("final", "online", "read"):
                if w in skip:
                    continue
                r = d[w]
                line += f"{r['wall_s']:>10.1f}{r['wall_s'] / first[w]['wall_s']:>6.1f}{r['peak_rss'] / mib:>12.0f}"
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
