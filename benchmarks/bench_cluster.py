"""What a cluster soak asks of this machine: the shared store's ingest, the start-up, one agent.

    python benchmarks/bench_cluster.py [--pg URL] [--agents 64] [--chips 16] [--seconds 20]
                                       [--rounds 3] [--nodes 2,4,8] [--agent-seconds 60] [--copy-format binary|text]
                                       [--skip ingest,paced,start,agent]

Three parts, each against what a cluster needs:

* **ingest**: ``--agents`` forked processes, each a node agent with its own ``Store`` and
  ``BatchWriter(node=...)``, writing snapshots of ``--chips`` chips plus the host row. Two
  loads in one run: *paced* (one tick a second and a commit every 5 ticks, as the daemon
  does: the real load, its p99 commit latency and PostgreSQL's CPU for it) and *flat out*
  (as fast as they can: the headroom). Need: agents x (chips + 1) rows/s. PostgreSQL's CPU
  is the user+system time of every ``postgres`` process on this machine over the window, as
  % of one core (other clients of the same server count too: run it on a quiet server). A
  third load is the reference: the same rows by the same writers through psycopg's binary
  ``COPY`` alone, flat out; soak's flat out is given as a ratio of it. ``--rounds`` rounds
  of the three, soak and the reference back to back in alternating order, each round's
  ratio printed (a shared machine's throughput drifts between windows);
* **start**: N real ``soak run`` agents (``--backend sim --sim-chips 2 --nproc 1
  --workload lm``, rendezvous on loopback) started together; from the first start to every
  node's ``start`` event (process group formed) and to every node's first step row in the
  store (step rows close every 10 s). The load average is printed with it: on a 2-core
  machine 8 agents with their torchrun and workers compete for the CPU;
* **agent**: one agent's own CPU (user+system, % of one core) and RSS, its torchrun and
  workers left out, over ``--agent-seconds`` of a 2-node run after training started.

PostgreSQL comes from ``--pg`` or ``SOAK_TEST_PG_URL``; each part uses a throwaway database.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AbstractContextManager
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from soak.errors import StoreError  # noqa: E402
from soak.store import Store  # noqa: E402
from soak.telemetry.records import DeviceSample, HostSample, Snapshot  # noqa: E402
from tests.pgdb import fresh_database  # noqa: E402

GIB = 1 << 30
COMMIT_EVERY_TICKS = 5  # the daemon's default sampling.flush_every = 5 s at 1 s ticks


# ---------------------------------------------------------------------- databases
def database(pg: str) -> AbstractContextManager[str]:
    """A fresh database on the server of ``pg``, dropped afterwards."""
    return fresh_database(pg, "soak_bench")


def postgres_cpu_s() -> float:
    """User+system seconds of every process named postgres (server and backends)."""
    total = 0.0
    for p in psutil.process_iter(["name"]):
        try:
            if p.info["name"] == "postgres":
                t = p.cpu_times()
                total += t.user + t.system
        except psutil.Error:
            pass
    return total


# ---------------------------------------------------------------------- ingest
def snapshot(chips: int, ts: float, rnd: random.Random) -> Snapshot:
    devs = tuple(
        DeviceSample(device=f"npu{c}-0", backend="npu", npu_id=c, chip_id=0, healthy=True, health="OK",
                     util_pct=90 + rnd.random() * 10, temp_c=45 + rnd.random() * 5, power_w=300 + rnd.random() * 50,
                     hbm_used_bytes=int(50 * GIB + rnd.random() * GIB), hbm_total_bytes=64 * GIB,
                     ecc_single_bit_errors=0, ecc_double_bit_errors=0, link_up=True)
        for c in range(chips))
    return Snapshot(ts=ts, host="node", devices=devs,
                    host_sample=HostSample(mem_used_bytes=200 * GIB, mem_total_bytes=1024 * GIB, cpu_pct=30.0,
                                           workload_rss_bytes=40 * GIB),
                    comm_timeouts={"hccl_plog": 0})


# The reference: the same rows written by the same writers with nothing between them and the
# server but psycopg's binary COPY (the series made beforehand, one transaction per batch).
# Every column of ``samples`` is sent, as soak sends it: a column the rows leave empty is a
# NULL in both.
_REF_COLUMNS = ("series_id", "ts", "util_pct", "temp_c", "power_w", "hbm_used_bytes", "hbm_total_bytes",
                "host_rss_bytes", "comm_timeouts_total", "ddr_used_bytes", "ddr_total_bytes",
                "ecc_single_bit_errors", "ecc_double_bit_errors", "ecc_single_bit_isolated_pages",
                "ecc_double_bit_isolated_pages", "xid_errors", "link_up_count", "detail_ts", "up", "healthy",
                "link_up", "health", "error")
_REF_TYPES = ("int4", "float8", "float4", "float4", "float4", "int8", "int8", "int8", "int8", "int8", "int8",
              "int8", "int8", "int8", "int8", "int8", "int8", "float8", "bool", "bool", "bool", "text", "text")


def reference_rows(snap: Snapshot, ids: dict[str, int]) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = [
        (ids[d.device], snap.ts, d.util_pct, d.temp_c, d.power_w, d.hbm_used_bytes, d.hbm_total_bytes, None, None,
         d.ddr_used_bytes, d.ddr_total_bytes, d.ecc_single_bit_errors, d.ecc_double_bit_errors,
         d.ecc_single_bit_isolated_pages, d.ecc_double_bit_isolated_pages, d.xid_errors, d.link_up_count,
         d.detail_ts, d.up, d.healthy, d.link_up, d.health, d.error)
        for d in snap.devices]
    hs = snap.host_sample
    assert hs is not None
    rows.append((ids["host"], snap.ts, hs.cpu_pct, None, None, None, None, hs.workload_rss_bytes,
                 sum(snap.comm_timeouts.values()), hs.mem_used_bytes, hs.mem_total_bytes, None, None, None, None,
                 None, None, None, True, None, None, None, None))
    return rows


def reference_agent(url: str, run_id: str, node: int, chips: int, seconds: float,
                    ready: mp.Barrier, go: mp.Barrier, read: mp.Event, out: mp.Queue) -> None:
    import psycopg
    from sqlalchemy.engine import make_url

    rnd = random.Random(node)
    store = Store.open(url, create=False)
    w = store.writer(run_id, max_rows=1 << 30, max_delay_s=1e9, node=f"node-{node}")
    ts = 1_764_000_000.0
    w.add(snapshot(chips, ts, rnd))  # the series, made as the agents make them
    w.flush()
    ids = {dev: i for (_, _, dev), i in store._series.items()}
    store.close()
    u = make_url(url)
    conn = psycopg.connect(host=u.host, port=u.port, user=u.username, password=u.password, dbname=u.database)
    sql = f"COPY samples ({', '.join(_REF_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
    ready.wait()
    go.wait()
    latencies: list[float] = []
    rows = 0
    cpu0, t0 = time.process_time(), time.monotonic()
    end = t0 + seconds
    while time.monotonic() < end:
        batch: list[tuple[object, ...]] = []
        for _ in range(COMMIT_EVERY_TICKS):
            ts += 1.0
            batch.extend(reference_rows(snapshot(chips, ts, rnd), ids))
        t = time.perf_counter()
        with conn.transaction(), conn.cursor() as cur, cur.copy(sql) as cp:
            cp.set_types(_REF_TYPES)
            for r in batch:
                cp.write_row(r)
        rows += len(batch)
        latencies.append(time.perf_counter() - t)
    out.put((rows, time.monotonic() - t0, latencies, time.process_time() - cpu0, 0.0))
    read.wait()
    conn.close()


def ingest_agent(url: str, run_id: str, node: int, chips: int, seconds: float, paced: bool,
                 ready: mp.Barrier, go: mp.Barrier, read: mp.Event, out: mp.Queue) -> None:
    rnd = random.Random(node)
    store = Store.open(url, create=False)
    w = store.writer(run_id, max_rows=1 << 30, max_delay_s=1e9, node=f"node-{node}")
    ts = 1_764_000_000.0
    w.add(snapshot(chips, ts, rnd))  # connect and create the series before the window
    w.flush()
    ready.wait()
    go.wait()
    latencies: list[float] = []
    rows = 0
    lag = 0.0
    cpu0, t0 = time.process_time(), time.monotonic()
    end = t0 + seconds
    # paced agents start spread over the first second, as independent nodes would
    next_tick = t0 + (node % 64) / 64 if paced else t0
    while time.monotonic() < end:
        for _ in range(COMMIT_EVERY_TICKS):
            if paced:
                lag = max(lag, time.monotonic() - next_tick)
                time.sleep(max(0.0, next_tick - time.monotonic()))
                next_tick += 1.0
            ts += 1.0
            w.add(snapshot(chips, ts, rnd))
        t = time.perf_counter()
        rows += w.flush()
        latencies.append(time.perf_counter() - t)
    out.put((rows, time.monotonic() - t0, latencies, time.process_time() - cpu0, lag))
    read.wait()
    store.close()


def ingest(pg: str, agents: int, chips: int, seconds: float, paced: bool, reference: bool = False) -> dict[str, float]:
    ctx = mp.get_context("fork")  # the children inherit the imports: 64 starts stay cheap
    with database(pg) as url:
        with Store.open(url) as s:
            s.create_run("bench", host="node-0", plan={}, started_ts=1_764_000_000.0)
        ready, go, read, out = ctx.Barrier(agents + 1), ctx.Barrier(agents + 1), ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=reference_agent, args=(url, "bench", i, chips, seconds, ready, go, read, out))
                 if reference else
                 ctx.Process(target=ingest_agent, args=(url, "bench", i, chips, seconds, paced, ready, go, read, out))
                 for i in range(agents)]
        for p in procs:
            p.start()
        try:
            ready.wait(timeout=300)
            cpu0, t0 = postgres_cpu_s(), time.monotonic()
            go.wait(timeout=60)
            results = [out.get(timeout=seconds + 300) for _ in procs]
            cpu1, t1 = postgres_cpu_s(), time.monotonic()
        finally:
            read.set()
            for p in procs:
                p.join(60)
                if p.is_alive():
                    p.kill()
    rows = sum(r[0] for r in results)
    wall = max(r[1] for r in results)
    lat = sorted(x for r in results for x in r[2])
    return {"rows_per_s": rows / wall, "need": agents * (chips + 1), "commits": len(lat),
            "p50_ms": 1000 * statistics.median(lat), "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))],
            "max_ms": 1000 * lat[-1], "pg_cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0),
            "agents_cpu_pct": 100 * sum(r[3] for r in results) / wall, "lag_s": max(r[4] for r in results)}


# ---------------------------------------------------------------------- real agents
def start_agents(tmp: Path, db: str, nodes: int, port: int, duration: str) -> list[subprocess.Popen[bytes]]:
    procs = []
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for r in range(nodes):
        d = tmp / f"node-{r}"
        d.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "soak", "run", "--duration", duration, "--workload", "lm", "--backend", "sim",
                "--sim-chips", "2", "--nproc", "1", "--no-preflight", "--listen", "", "--interval", "1s",
                "--data-dir", str(d), "--db", db, "--run-id", "bench", "--nodes", str(nodes), "--node-rank", str(r),
                "--node-name", f"node-{r}", "--rendezvous", f"127.0.0.1:{port}", "--progress-every", "10"]
        with open(d / "agent.log", "wb") as log:
            procs.append(subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=env, start_new_session=True))
    return procs


def stop_agents(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 60
    for p in procs:
        try:
            p.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the agent's torchrun and workers too
        except ProcessLookupError:
            pass
        p.wait(10)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def time_to_training(pg: str, nodes: int, bound_s: float) -> dict[str, float | None]:
    """Seconds from the first agent's start to every node's ``start`` event and first step row."""
    with database(pg) as db, tempfile.TemporaryDirectory() as tmp:
        load0 = os.getloadavg()[0]
        t0 = time.time()
        procs = start_agents(Path(tmp), db, nodes, free_port(), "10m")
        started = stepped = None
        peak_load = load0
        try:
            while time.time() - t0 < bound_s and stepped is None:
                time.sleep(0.5)
                peak_load = max(peak_load, os.getloadavg()[0])
                if any(p.poll() is not None for p in procs):
                    break
                try:
                    with Store.open(db, create=False) as s:
                        ev = [e for e in s.load_events("bench", kind="start") if e.workload == "lm"]
                        steps = s.load_steps("bench")
                except StoreError:
                    continue  # no tables yet
                if started is None and len({e.node for e in ev}) == nodes:
                    started = max(min(e.ts for e in ev if e.node == n) for n in {e.node for e in ev}) - t0
                if len({r["node"] for r in steps}) == nodes:
                    stepped = time.time() - t0
        finally:
            stop_agents(procs)
    return {"start_s": started, "step_row_s": stepped, "load0": load0, "peak_load": peak_load}


def agent_cost(pg: str, seconds: float) -> dict[str, float]:
    """Rank 0's and rank 1's agent processes alone (not their torchrun) over a steady window."""
    with database(pg) as db, tempfile.TemporaryDirectory() as tmp:
        procs = start_agents(Path(tmp), db, 2, free_port(), f"{seconds + 120:.0f}s")
        try:
            deadline = time.time() + 180
            while time.time() < deadline:
                time.sleep(1)
                try:
                    with Store.open(db, create=False) as s:
                        if len({r["node"] for r in s.load_steps("bench")}) == 2:
                            break
                except StoreError:
                    pass
            else:
                raise SystemExit("agent: the 2-node run did not start training within 180 s")
            me = [psutil.Process(p.pid) for p in procs]
            c0, t0 = [m.cpu_times() for m in me], time.monotonic()
            time.sleep(seconds)
            c1, t1 = [m.cpu_times() for m in me], time.monotonic()
            rss = [m.memory_info().rss for m in me]
            tools = [(b.children_user + b.children_system) - (a.children_user + a.children_system)
                     for a, b in zip(c0, c1, strict=True)]
        finally:
            stop_agents(procs)
    wall = t1 - t0
    own = [(b.user + b.system) - (a.user + a.system) for a, b in zip(c0, c1, strict=True)]
    return {"wall": wall, **{f"cpu{r}": 100 * own[r] / wall for r in range(2)},
            **{f"tools{r}": 100 * tools[r] / wall for r in range(2)}, **{f"rss{r}": rss[r] / 2**20 for r in range(2)}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pg", default=os.environ.get("SOAK_TEST_PG_URL"), help="PostgreSQL URL")
    ap.add_argument("--agents", type=int, default=64)
    ap.add_argument("--chips", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=20.0, help="ingest window per load (default: 20)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="ingest rounds, each paced + flat out + raw COPY (default: 3)")
    ap.add_argument("--nodes", default="2,4,8", help="node counts for the start-up part (default: 2,4,8)")
    ap.add_argument("--start-bound", type=float, default=240.0, help="give up a start-up after this (s)")
    ap.add_argument("--agent-seconds", type=float, default=60.0)
    ap.add_argument("--copy-format", choices=("binary", "text"), default=None,
                    help="how soak's writers COPY (default: as soak ships)")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: ingest, paced, start, agent")
    a = ap.parse_args()
    if not a.pg:
        print("bench_cluster: a cluster store is PostgreSQL: give --pg or set SOAK_TEST_PG_URL", file=sys.stderr)
        return 2
    skip = set(filter(None, a.skip.split(",")))
    if a.copy_format:
        import soak.store.engine

        soak.store.engine.PG_COPY_FORMAT = a.copy_format  # the forked agents inherit it
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    if "ingest" not in skip:
        need = a.agents * (a.chips + 1)
        print(f"\ningest: {a.agents} agents x {a.chips} chips (+ host row), need {need} rows/s")
        print(f"{'load':<12}{'rows/s':>8}{'x need':>8}{'commits':>9}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}"
              f"{'PG CPU %':>10}{'agents CPU %':>14}{'late s':>8}")
        # Rounds side by side: a shared 2-core machine's throughput drifts by +-15 % from one
        # 20 s window to the next, so one pair of windows can say 0.74x or 1.03x of the same
        # code. Each round runs soak and the reference back to back, in alternating order
        # (drift within a round cancels over two), and the ratio is judged per round.
        ratios: list[float] = []
        p99s: list[float] = []
        for rnd in range(a.rounds):
            flat_first = rnd % 2 == 0
            loads = [("paced 1 s", True, False)] if "paced" not in skip else []
            pair = [("flat out", False, False), ("raw COPY", False, True)]
            loads += pair if flat_first else pair[::-1]
            got: dict[str, dict[str, float]] = {}
            for label, paced, ref in loads:
                r = ingest(a.pg, a.agents, a.chips, a.seconds, paced, reference=ref)
                got[label] = r
                late = f"{r['lag_s']:.2f}" if paced else "N/A"  # flat out has no schedule to be late for
                name = f"{label} #{rnd + 1}" if a.rounds > 1 else label
                print(f"{name:<12}{r['rows_per_s']:>8.0f}{r['rows_per_s'] / need:>8.1f}"
                      f"{r['commits']:>9}{r['p50_ms']:>9.1f}{r['p99_ms']:>9.1f}{r['max_ms']:>9.1f}"
                      f"{r['pg_cpu_pct']:>10.1f}{r['agents_cpu_pct']:>14.1f}{late:>8}"
                      f"   agents {r['agents_cpu_pct'] * 10 / r['rows_per_s']:.3f} ms CPU/row", flush=True)
            ratios.append(got["flat out"]["rows_per_s"] / got["raw COPY"]["rows_per_s"])
            if "paced 1 s" in got:
                p99s.append(got["paced 1 s"]["p99_ms"])
        print("flat out / raw COPY per round: " + ", ".join(f"{x:.2f}x" for x in ratios)
              + (f"; median {statistics.median(ratios):.2f}x" if len(ratios) > 1 else ""))
        if p99s:
            print("paced p99 commit per round: " + ", ".join(f"{x:.1f} ms" for x in p99s)
                  + f"; worst {max(p99s):.1f} ms")
        print("(CPU % is of one core; paced = a tick a second and the daemon's commit every 5 ticks, its\n"
              " rows/s is the need when every agent keeps up: 'late s' is the worst lateness of a tick;\n"
              " the agents' CPU is what 64 nodes' writers cost here on this machine's cores; raw COPY =\n"
              " the same rows by the same writers through psycopg's binary COPY alone, the reference)")
    if "start" not in skip:
        print("\nstart-up: first agent started -> every node's workload start / first step row in the store")
        print(f"{'nodes':>5}{'start s':>10}{'step row s':>12}{'load before':>13}{'peak load':>11}")
        for n in (int(x) for x in a.nodes.split(",")):
            r = time_to_training(a.pg, n, a.start_bound)

            def fmt(v: float | None) -> str:
                return "N/A" if v is None else f"{v:.1f}"
            print(f"{n:>5}{fmt(r['start_s']):>10}{fmt(r['step_row_s']):>12}{r['load0']:>13.1f}{r['peak_load']:>11.1f}")
        print("(step rows close every 10 s of steps, so the row comes up to 10 s after the start)")
    if "agent" not in skip:
        r = agent_cost(a.pg, a.agent_seconds)
        print(f"\none agent, 2-node lm run on the simulated fleet, window {r['wall']:.0f} s after training started")
        for rank in (0, 1):
            print(f"rank {rank} agent: CPU {r[f'cpu{rank}']:5.2f} % of one core, RSS {r[f'rss{rank}']:6.1f} MiB, "
                  f"reaped tools {r[f'tools{rank}']:5.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
