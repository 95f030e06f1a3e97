"""Store throughput and size: can the store keep up with a 16-chip node, and how big is 72 h?

    python benchmarks/bench_store.py [--hours 1] [--chips 16] [--pg postgresql+psycopg://...]

Writes one simulated hour (1 s ticks: 16 chips + the host row, heartbeat step rows every
10 s per rank, a checkpoint event every 10 min) the way the daemon does (BatchWriter,
one commit per 5 ticks), and prints:

* ingest rate in rows/s against what the node needs (17 rows/s): target >= 100x real time;
  reference in the same run: the same rows one transaction per row (what batching saves);
* database size of the hour, extrapolated to 72 h: target < 1 GB;
* read-back: a downsampled 16-chip chart query and the analysis' trace of the run, read as
  arrays (``trace_arrays``), against the long-format rows (``load_trace``) in the same run.

PostgreSQL runs when ``--pg`` or ``SOAK_TEST_PG_URL`` names a database (a throwaway schema).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from soak.store import Store
from soak.telemetry.records import DeviceSample, HostSample, Snapshot

T0 = 1_764_000_000.0
GIB = 1 << 30


def snapshots(chips: int, ticks: int, seed: int = 0) -> Iterator[Snapshot]:
    rnd = random.Random(seed)
    for i in range(ticks):
        devs = tuple(
            DeviceSample(device=f"npu{c}-0", backend="npu", npu_id=c, chip_id=0, healthy=True, health="OK",
                         util_pct=90 + rnd.random() * 10, temp_c=45 + rnd.random() * 5,
                         power_w=300 + rnd.random() * 50, hbm_used_bytes=int(50 * GIB + rnd.random() * GIB),
                         hbm_total_bytes=64 * GIB, ecc_single_bit_errors=0, ecc_double_bit_errors=0, link_up=True)
            for c in range(chips)
        )
        yield Snapshot(ts=T0 + i, host="node", devices=devs,
                       host_sample=HostSample(mem_used_bytes=200 * GIB, mem_total_bytes=1024 * GIB, cpu_pct=30.0,
                                              workload_rss_bytes=40 * GIB),
                       comm_timeouts={"hccl_plog": 0})


def write_hour(store: Store, run_id: str, chips: int, ticks: int) -> tuple[int, float]:
    store.create_run(run_id, host="node", plan={}, started_ts=T0)
    w = store.writer(run_id, max_rows=(chips + 1) * 5, max_delay_s=3600)
    t = time.perf_counter()
    for snap in snapshots(chips, ticks):
        w.add(snap)
        i = int(snap.ts - T0)
        if i % 10 == 9:  # the daemon's step rows: one per rank per 10 s window
            store.add_steps(run_id, [{"ts": snap.ts, "workload": "lm", "rank": r, "step": i, "n_steps": 10,
                                      "step_time_s": 0.5, "loss": 2.0, "tokens_per_s": 5e4, "attempt": 1}
                                     for r in range(chips)])
        if i % 600 == 599:
            store.add_event(run_id, "checkpoint", ts=snap.ts, workload="lm", rank=0, message="ckpt")
    w.flush()
    return w.rows_written, time.perf_counter() - t


def row_per_txn(store: Store, run_id: str, chips: int, ticks: int) -> tuple[int, float]:
    store.create_run(run_id, host="node", plan={}, started_ts=T0)
    n = 0
    t = time.perf_counter()
    for snap in snapshots(chips, ticks):
        for row in Store.snapshot_rows(run_id, snap):
            store.add_sample_rows([row])
            n += 1
    return n, time.perf_counter() - t


def bench(label: str, url: str, chips: int, ticks: int, size_of: Path | None) -> None:
    need = chips + 1  # rows/s at 1 s ticks
    s = Store.open(url)
    rows, dt = write_hour(s, "bench", chips, ticks)
    rate = rows / dt
    ref_ticks = max(60, ticks // 20)
    ref_rows, ref_dt = row_per_txn(s, "bench-ref", chips, ref_ticks)
    print(f"[{label}] ingest, daemon batching : {rate:10.0f} rows/s = {rate / need:8.0f}x real time "
          f"({rows} rows in {dt:.2f} s; target >= 100x)")
    print(f"[{label}] reference, 1 row/commit: {ref_rows / ref_dt:10.0f} rows/s = "
          f"{ref_rows / ref_dt / need:8.0f}x real time")
    t = time.perf_counter()
    chart = s.load_samples("bench", bucket_s=ticks / 300)
    dt_chart = time.perf_counter() - t
    from soak.analysis import Trace

    t = time.perf_counter()
    n_trace = Trace.from_rows(s.load_trace("bench")).n_rows
    dt_trace = time.perf_counter() - t
    t = time.perf_counter()
    n_arrays = Trace.from_arrays(s.trace_arrays("bench")).n_rows
    dt_arrays = time.perf_counter() - t
    assert n_arrays == n_trace, (n_arrays, n_trace)
    print(f"[{label}] chart query (SQL downsampled, {len(chart)} points): {dt_chart * 1000:.0f} ms")
    print(f"[{label}] the analysis' trace: Trace.from_arrays(trace_arrays) {n_arrays / dt_arrays:.0f} values/s "
          f"({dt_arrays:.2f} s); reference Trace.from_rows(load_trace) {n_trace / dt_trace:.0f} values/s "
          f"({dt_trace:.2f} s)")
    if size_of is not None:
        s.checkpoint_wal()
        size = sum(p.stat().st_size for p in size_of.parent.glob(size_of.name + "*"))
        hours = ticks / 3600
        per72 = size / hours * 72
        print(f"[{label}] size: {size / 2**20:.1f} MiB for {hours:g} h of {chips} chips "
              f"-> {per72 / 2**30:.2f} GiB for 72 h (target < 1 GiB)")
    s.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hours", type=float, default=1.0, help="simulated hours to write (default: 1)")
    ap.add_argument("--chips", type=int, default=16)
    ap.add_argument("--pg", default=os.environ.get("SOAK_TEST_PG_URL"), help="PostgreSQL URL")
    a = ap.parse_args()
    ticks = int(a.hours * 3600)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "soak.db"
        bench("sqlite", str(db), a.chips, ticks, db)
    if a.pg:
        from sqlalchemy import create_engine, text

        schema = f"soak_bench_{uuid.uuid4().hex[:8]}"
        admin = create_engine(a.pg)
        with admin.begin() as c:
            c.execute(text(f'CREATE SCHEMA "{schema}"'))
        try:
            sep = "&" if "?" in a.pg else "?"
            bench("postgresql", f"{a.pg}{sep}options={quote(f'-csearch_path={schema}')}", a.chips, ticks, None)
            with admin.connect() as c:
                size = c.execute(text(
                    "SELECT sum(pg_total_relation_size(quote_ident(:s) || '.' || quote_ident(tablename))) "
                    "FROM pg_tables WHERE schemaname = :s"), {"s": schema}).scalar()
            size = float(size or 0)
            print(f"[postgresql] size: {size / 2**20:.1f} MiB for {a.hours:g} h -> "
                  f"{size / a.hours * 72 / 2**30:.2f} GiB for 72 h (target < 1 GiB)")
        finally:
            with admin.begin() as c:
                c.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
            admin.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
