"""The shared store's load from a fleet of 64 to 1,024 node agents, on this machine.

    python benchmarks/bench_cluster_load.py [--nodes 64,256,1024] [--chips 16] [--procs 16] [--seconds 25]
                                            [--loads 1s,5s,flat] [--no-liveness] [--pg URL]

Every node is what an agent keeps open against the store: its own ``Store.open(url)`` and
``store.writer(run_id, node=...)`` (one PostgreSQL connection each), writing a snapshot of
``--chips`` chips plus the host row per tick (``bench_cluster.snapshot``), committed as the
daemon commits (``sampling.flush_every``, 5 s: every 5 ticks at a 1 s tick, every tick at
5 s). With liveness on (the default) each node also does, once a second, what the daemon's
cluster loop does against the store: its ``ClusterMember`` touches ``last_seen``, reads the
run row and asks whether it leads (rank 0 holds the judging lease from before the window, as
in a running cluster, and looks for lost nodes, as the leader does). 1,024 processes do not fit this machine, so the nodes are threads,
``--procs`` forked processes of nodes/procs threads each; each thread still has its own
store, engine and connection.

Loads, each ``--seconds`` long in a fresh database (node rows, series and connections made
before the window):

* **1s** / **5s**: paced at a 1 s / 5 s tick, the nodes' ticks spread over the tick as
  independent machines' would be. The need is nodes x (chips + 1) rows per tick;
* **flat**: as fast as the writers go (5 ticks a commit, no pacing, no liveness): the
  headroom, in rows/s.

PostgreSQL is, by default, a throwaway server this script starts (``initdb`` in a temporary
folder as the user ``postgres`` when run as root, on a free loopback port, ``max_connections``
= the largest fleet + 20, the rest stock: ``shared_buffers`` 128 MB, fsync and synchronous
commit on), stopped and removed at the end; its CPU and memory are then its own processes'
alone. ``--pg URL`` uses a running server instead (its ``max_connections`` must hold the
fleet; every ``postgres`` process of the machine is counted).

Columns:

* ``need/s``: rows per second the fleet writes at that tick; ``rows/s``: written (stored
  rows over the window's wall time; paced loads write their need when every node keeps up);
* ``commits``, ``p50``/``p99``/``max ms``: the sample commits (one COPY each) and their
  latency as the writer sees it (the writer's ``flush()``);
* ``late s``: the worst lateness of a node's tick against its schedule (a node that cannot
  keep up falls behind here first);
* ``looks/s``: the nodes' liveness looks made per second (the need: one per node);
  ``live p99 ms``: the p99 of one node's whole look (touch, run row, lease);
* ``PG CPU %``: user+system time of the server's processes over the window, % of one core;
  ``writers CPU %``: the writer processes' (all their threads), % of one core: the fleet's
  client cost, which real nodes spread over their own machines;
* ``backends``: the server's processes during the window; ``PG MiB``: the sum of their
  unique memory (USS, private pages) plus ``shared_buffers``;
* ``B/row``: after the flat load, ``pg_total_relation_size('samples')`` (heap, index,
  TOAST) over the rows stored: what a sample row costs on disk.

A machine with 2 cores runs the fleet's writers and the server together: the writers' CPU
competes with PostgreSQL's, which a real fleet's does not. There 1,024 nodes' looks need
more client CPU than the machine has (about 2.8 ms a look at 256 nodes): the writers fall
behind (``late s``, ``looks/s``) and the server's cost of a look is measured at 64 and 256
nodes (PostgreSQL's CPU with the look less without it, over the looks a second); the 1,024
nodes' samples alone (``--no-liveness``) keep up. Making 1,024 nodes' stores takes minutes
before each window.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing as mp
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_cluster import postgres_cpu_s, snapshot  # noqa: E402
from bench_cluster_scale import fleet_plan  # noqa: E402

from soak.store import Store  # noqa: E402
from tests.pgdb import fresh_database  # noqa: E402

RUN = "load"
FLUSH_EVERY_S = 5.0  # the daemon's sampling.flush_every default
T0 = 1_764_000_000.0
MIB = 1 << 20
# Making 1,024 nodes' stores here takes minutes (their connections and series, before the
# window): none may be found lost meanwhile. The leader still looks for lost nodes each second.
SILENCE = "1h"


# ---------------------------------------------------------------------- a throwaway server
@contextmanager
def throwaway_server(max_connections: int) -> Iterator[tuple[str, int]]:
    """A PostgreSQL cluster of its own (URL, postmaster pid), stopped and removed afterwards."""
    bindir = Path(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip()
                  or "/usr/lib/postgresql/15/bin")
    if not (bindir / "initdb").exists():
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if not found:
            raise SystemExit("bench_cluster_load: no initdb found: give --pg URL")
        bindir = found[-1].parent
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    tmp = Path(tempfile.mkdtemp(prefix="soak-load-pg-"))
    data, log = tmp / "data", tmp / "server.log"
    if as_user:
        shutil.chown(tmp, "postgres")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = False
    try:
        subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                        "-E", "UTF8"], check=True, capture_output=True, timeout=120)
        opts = (f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c max_connections={max_connections} "
                "-c shared_buffers=128MB")
        r = subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", opts,
                            "-w", "-t", "60", "start"], capture_output=True, text=True, timeout=90)
        if r.returncode != 0:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise SystemExit(f"bench_cluster_load: the throwaway server did not start: {r.stderr.strip()}\n{tail}")
        started = True
        pid = int((data / "postmaster.pid").read_text().split()[0])
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres", pid
    finally:
        if started:
            subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "-t", "60",
                            "stop"], capture_output=True, timeout=90)
        shutil.rmtree(tmp, ignore_errors=True)


def server_procs(postmaster: int | None) -> list[psutil.Process]:
    if postmaster is None:
        return [p for p in psutil.process_iter(["name"]) if p.info["name"] == "postgres"]
    root = psutil.Process(postmaster)
    return [root, *root.children()]


def server_cpu_s(postmaster: int | None) -> float:
    if postmaster is None:
        return postgres_cpu_s()
    total = 0.0
    for p in server_procs(postmaster):
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def server_memory(postmaster: int | None) -> tuple[int, int]:
    """(processes, sum of their USS in bytes)."""
    n = uss = 0
    for p in server_procs(postmaster):
        try:
            uss += p.memory_full_info().uss
            n += 1
        except psutil.Error:
            pass
    return n, uss


# ---------------------------------------------------------------------- the nodes
class Node:
    """One node agent's store side: its store, writer and cluster member."""

    def __init__(self, url: str, rank: int, nodes: int, chips: int, tick: float) -> None:
        from soak.cluster.member import ClusterMember

        self.rank = rank
        self.name = f"node-{rank:04d}"
        rnd = random.Random(rank)
        self.snaps = [snapshot(chips, T0, rnd) for _ in range(4)]
        self.store = Store.open(url, create=False)
        self.writer = self.store.writer(RUN, max_rows=1 << 30, max_delay_s=1e9, node=self.name)
        self.member = ClusterMember(plan=fleet_plan(nodes, chips, 72, tick, SILENCE), store=self.store, run_id=RUN,
                                    node=self.name, rank=rank)
        self.ts = T0
        self.tick(0)
        self.writer.flush()  # the series made, the connection open, before the window

    def tick(self, i: int) -> None:
        self.ts += 1.0
        self.writer.append(dataclasses.replace(self.snaps[i % len(self.snaps)], ts=self.ts))

    def liveness(self) -> None:
        """The daemon's cluster look, once a second (``ClusterDaemon.tick``'s store calls)."""
        m = self.member
        m.touch(force=True, restarts=0, chips=16)
        self.store.get_run(RUN)
        if m.leader():
            m.find_lost()
            m.move_rendezvous([])


def run_node(node: Node, tick: float, seconds: float, start: float, paced: bool, liveness: bool,
             spread: float, out: dict) -> None:
    commit_every = max(1, round(FLUSH_EVERY_S / tick)) if paced else 5
    step = 1.0 if (paced and liveness) else tick  # the cluster look is once a second whatever the tick
    per_tick = max(1, round(tick / step))
    lat: list[float] = []
    live: list[float] = []
    late = 0.0
    rows = ticks = errors = 0
    end = start + seconds
    due = start + spread
    i = 0
    try:
        while True:
            if paced:
                now = time.monotonic()
                if due >= end or now >= end:  # a node behind its ticks stops with the window too
                    break
                if now < due:
                    time.sleep(due - now)
                else:
                    late = max(late, now - due)
                due += step
            elif time.monotonic() >= end:
                break
            if liveness and paced:
                t = time.perf_counter()
                node.liveness()
                live.append(time.perf_counter() - t)
            if i % per_tick == 0:
                node.tick(ticks)
                ticks += 1
                if ticks % commit_every == 0:
                    t = time.perf_counter()
                    rows += node.writer.flush()
                    lat.append(time.perf_counter() - t)
            i += 1
    except Exception as exc:  # noqa: BLE001 (counted and shown: a node that fails stops, the others go on)
        errors += 1
        out.setdefault("error", f"{type(exc).__name__}: {exc}")
    out.update(rows=rows, lat=lat, live=live, late=late, errors=errors, done=time.monotonic())


def writer_proc(url: str, ranks: list[int], nodes: int, chips: int, tick: float, seconds: float, paced: bool,
                liveness: bool, ready: mp.Barrier, start_at: mp.Value, out: mp.Queue) -> None:
    made: list[Node] = []
    try:
        for r in ranks:
            made.append(Node(url, r, nodes, chips, tick))
    finally:
        ready.wait(timeout=900)  # the parent waits for every process, made or not
    if len(made) < len(ranks):
        out.put({"error": "nodes not made", "rows": 0, "lat": [], "live": [], "late": 0.0, "errors": len(ranks)})
        return
    ready.wait(timeout=900)  # the start time is set
    start = start_at.value
    results = [{} for _ in made]
    cpu0 = time.process_time()
    threads = [threading.Thread(target=run_node, args=(n, tick, seconds, start, paced, liveness,
                                                       tick * (n.rank % 64) / 64, res), daemon=True)
               for n, res in zip(made, results, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 120)
    cpu = time.process_time() - cpu0
    out.put({"rows": sum(r.get("rows", 0) for r in results), "lat": [x for r in results for x in r.get("lat", [])],
             "live": [x for r in results for x in r.get("live", [])],
             "late": max((r.get("late", 0.0) for r in results), default=0.0),
             "errors": sum(r.get("errors", 1) for r in results), "cpu": cpu,
             "done": max((r.get("done", 0.0) for r in results), default=0.0),
             "error": next((r["error"] for r in results if "error" in r), None)})
    ready.wait(timeout=900)  # the parent has read the server's memory: the connections may go
    for n in made:
        n.store.close()


def pct(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def one_load(server: str, postmaster: int | None, nodes: int, chips: int, procs: int, seconds: float, tick: float,
             paced: bool, liveness: bool) -> dict:
    from sqlalchemy import create_engine, text

    ctx = mp.get_context("fork")
    procs = min(procs, nodes)
    with fresh_database(server, "soak_load") as url:
        with Store.open(url) as s:  # the run and every node's row, as the joins leave them
            plan = fleet_plan(nodes, chips, 72, tick, SILENCE).to_dict()
            for r in range(nodes):
                s.join_cluster(RUN, node=f"node-{r:04d}", rank=r, nodes=nodes, plan_digest="bench", joined_ts=T0,
                               run=dict(host="node-0000", plan=plan, started_ts=T0, planned_end_ts=T0 + 72 * 3600,
                                        workload="lm", backend="npu", time_scale=1.0, run_dir=None) if r == 0 else {},
                               chips=chips, manifest={"python": "3.12", "torch": "2.7.1", "npu.driver_version": "25"})
            s.update_node(RUN, "node-0000", status="running")
            # a running cluster's steady state: rank 0 holds the judging lease (at the start of
            # a run every node reads every node's row until it does: a second's burst)
            s.take_lease(RUN, "node-0000", 3600.0)
        ready, start_at, out = ctx.Barrier(procs + 1), ctx.Value("d", 0.0), ctx.Queue()
        groups = [list(range(p, nodes, procs)) for p in range(procs)]
        ps = [ctx.Process(target=writer_proc, args=(url, g, nodes, chips, tick, seconds, paced, liveness, ready,
                                                    start_at, out)) for g in groups]
        for p in ps:
            p.start()
        try:
            ready.wait(timeout=600)  # every node made
            start_at.value = time.monotonic() + 1.0
            cpu0 = server_cpu_s(postmaster)
            ready.wait(timeout=60)
            time.sleep(max(0.0, start_at.value - time.monotonic()))
            t0 = time.monotonic()
            results = [out.get(timeout=seconds + 300) for _ in ps]
            t1 = max(r.get("done", 0.0) for r in results) or time.monotonic()
            cpu1 = server_cpu_s(postmaster)
            backends, uss = server_memory(postmaster)  # every node's connection still open
            ready.wait(timeout=60)
        finally:
            for p in ps:
                p.join(60)
                if p.is_alive():
                    p.kill()
        eng = create_engine(url)
        try:
            with eng.connect() as conn:
                stored = conn.execute(text("SELECT count(*) FROM samples")).scalar_one()
                size = conn.execute(text("SELECT pg_total_relation_size('samples')")).scalar_one()
                sbuf = conn.execute(text("SELECT setting::bigint * 8192 FROM pg_settings "
                                         "WHERE name = 'shared_buffers'")).scalar_one()
        finally:
            eng.dispose()
    wall = t1 - t0
    lat = [x for r in results for x in r["lat"]]
    live = [x for r in results for x in r["live"]]
    written = sum(r["rows"] for r in results)
    return {"need": nodes * (chips + 1) / tick, "rows_per_s": written / wall, "commits": len(lat),
            "p50_ms": 1000 * statistics.median(lat) if lat else float("nan"), "p99_ms": 1000 * pct(lat, 0.99),
            "max_ms": 1000 * max(lat, default=float("nan")), "late_s": max(r["late"] for r in results),
            "live_p99_ms": 1000 * pct(live, 0.99), "looks": len(live), "looks_per_s": len(live) / wall,
            "pg_cpu_pct": 100 * (cpu1 - cpu0) / wall, "writers_cpu_pct": 100 * sum(r["cpu"] for r in results) / wall,
            "backends": backends, "pg_mib": (uss + sbuf) / MIB, "errors": sum(r["errors"] for r in results),
            "error": next((r["error"] for r in results if r.get("error")), None),
            "bytes_per_row": size / stored if stored else float("nan"), "stored": stored}


LOADS = {"1s": (1.0, True), "5s": (5.0, True), "flat": (1.0, False)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pg", default=None, help="a running PostgreSQL server (default: a throwaway one)")
    ap.add_argument("--nodes", default="64,256,1024", help="comma list of fleet sizes (default: 64,256,1024)")
    ap.add_argument("--chips", type=int, default=16)
    ap.add_argument("--procs", type=int, default=16, help="writer processes the nodes are spread over (default: 16)")
    ap.add_argument("--seconds", type=float, default=25.0, help="window of each load (default: 25)")
    ap.add_argument("--loads", default="1s,5s,flat", help="comma list of 1s, 5s, flat (default: all)")
    ap.add_argument("--no-liveness", action="store_true", help="samples only, no cluster look a second")
    a = ap.parse_args()
    fleets = [int(x) for x in a.nodes.split(",")]
    loads = [x for x in a.loads.split(",") if x]
    if unknown := set(loads) - set(LOADS):
        ap.error(f"unknown loads: {', '.join(sorted(unknown))}")
    print(f"machine: {os.cpu_count()} CPUs, {psutil.virtual_memory().total / (1 << 30):.0f} GiB, "
          f"load average {os.getloadavg()[0]:.1f} at start; {a.procs} writer processes, {a.chips} chips a node, "
          f"liveness {'off' if a.no_liveness else 'on'}, {a.seconds:g} s a load")

    @contextmanager
    def given() -> Iterator[tuple[str, int | None]]:
        yield a.pg, None

    server = given() if a.pg else throwaway_server(max(fleets) + 20)
    head = (f"{'nodes':>6}{'load':>6}{'need/s':>9}{'rows/s':>9}{'commits':>9}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}"
            f"{'late s':>8}{'looks/s':>8}{'live p99':>9}{'PG CPU %':>9}{'wr CPU %':>9}{'backends':>9}{'PG MiB':>8}{'B/row':>7}")
    table: list[str] = []
    with server as (url, postmaster):
        if postmaster is not None:
            print(f"throwaway server: pid {postmaster}, max_connections {max(fleets) + 20}, shared_buffers 128MB")
        print(head)
        for n in fleets:
            for load in loads:
                tick, paced = LOADS[load]
                r = one_load(url, postmaster, n, a.chips, a.procs, a.seconds, tick, paced,
                             paced and not a.no_liveness)
                live = f"{r['live_p99_ms']:.1f}" if r["looks"] else "N/A"
                looks = f"{r['looks_per_s']:.0f}" if r["looks"] else "N/A"
                late = f"{r['late_s']:.2f}" if paced else "N/A"
                need = f"{r['need']:.0f}" if paced else "N/A"
                line = (f"{n:>6}{load:>6}{need:>9}{r['rows_per_s']:>9.0f}{r['commits']:>9}{r['p50_ms']:>8.1f}"
                        f"{r['p99_ms']:>8.1f}{r['max_ms']:>8.1f}{late:>8}{looks:>8}{live:>9}{r['pg_cpu_pct']:>9.0f}"
                        f"{r['writers_cpu_pct']:>9.0f}{r['backends']:>9}{r['pg_mib']:>8.0f}"
                        f"{r['bytes_per_row'] if not paced else float('nan'):>7.0f}")
                table.append(line)
                print(line + (f"   {r['errors']} nodes failed: {r['error']}" if r["errors"] else ""), flush=True)
    print("\n" + head + "\n" + "\n".join(table))
    print("(need/s: nodes x (chips + 1) / tick; late s: worst tick lateness; looks/s, live p99: the nodes'\n"
          " cluster looks, one a node a second; CPU % of one core; PG MiB: the server's processes' USS + shared_buffers; B/row: samples'\n"
          " pg_total_relation_size over its rows, after the flat load)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
