"""Contract suite of the store API, run against SQLite file, SQLite memory and PostgreSQL."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, UniqueConstraint, update

from soak.errors import StoreError
from soak.store import HOST_DEVICE, STEP_TRACE_METRICS, Store
from soak.store import schema as S
from soak.telemetry.records import DeviceSample, HostSample, Snapshot

T0 = 1_764_000_000.0


def _snap(ts: float, util: float | None, hbm: int | None, *, up: bool = True, rss: int = 1000) -> Snapshot:
    return Snapshot(
        ts=ts,
        host="node1",
        devices=(
            DeviceSample(device="npu0-0", backend="sim", up=up, util_pct=util, hbm_used_bytes=hbm,
                         hbm_total_bytes=64 << 30 if up else None, temp_c=40.0 if up else None,
                         power_w=None, healthy=True if up else None, health="OK" if up else None,
                         error=None if up else "timeout"),
            DeviceSample(device="npu1-0", backend="sim", util_pct=50.0, hbm_used_bytes=10,
                         hbm_total_bytes=100, temp_c=41.5, power_w=90.25, healthy=False, health="Warning"),
        ),
        host_sample=HostSample(workload_rss_bytes=rss, mem_used_bytes=5, mem_total_bytes=10, cpu_pct=12.5),
        comm_timeouts={"hccl_plog:notify_timeout": 2, "torch_watchdog": 1},
    )


def _new_run(store: Store, run_id: str = "r1", started: float = T0) -> None:
    store.create_run(run_id, host="node1", plan={"run": {"duration": "72h"}}, started_ts=started,
                     planned_end_ts=started + 72 * 3600, workload="lm", backend="sim", time_scale=720.0)


def test_run_round_trip_and_listing_newest_first(store: Store) -> None:
    _new_run(store, "old", T0)
    _new_run(store, "new", T0 + 10)
    runs = store.list_runs()
    assert [r.id for r in runs] == ["new", "old"]
    r = store.get_run("old")
    assert r is not None
    assert r.plan == {"run": {"duration": "72h"}}
    assert (r.status, r.verdict, r.ended_ts, r.time_scale, r.restarts) == ("running", None, None, 720.0, 0)
    assert r.planned_end_ts == T0 + 72 * 3600
    assert store.get_run("missing") is None
    store.finish_run("old", status="finished", ended_ts=T0 + 99, verdict="fail")
    store.update_run("old", restarts=3, manifest={"torch": "2.13"})
    r = store.get_run("old")
    assert (r.status, r.verdict, r.ended_ts, r.restarts, r.manifest) == ("finished", "fail", T0 + 99, 3, {"torch": "2.13"})


def test_a_generation_moves_once_and_takes_its_rendezvous_with_it(store: Store) -> None:
    _new_run(store)
    assert store.bump_generation("r1", 0)  # a job failure: the rendezvous stays where it was
    assert (store.get_run("r1").generation, store.get_run("r1").rendezvous) == (1, None)
    assert store.bump_generation("r1", 1, rendezvous="node-1@10.0.0.2:29400")
    # a node that saw generation 1 too is refused, and moves nothing
    assert not store.bump_generation("r1", 1, rendezvous="node-2@10.0.0.3:29400")
    run = store.get_run("r1")
    assert (run.generation, run.rendezvous) == (2, "node-1@10.0.0.2:29400")
    assert store.bump_generation("r1", 2)  # a later failure keeps the moved rendezvous
    assert store.get_run("r1").rendezvous == "node-1@10.0.0.2:29400"


def test_duplicate_run_id_is_refused(store: Store) -> None:
    _new_run(store)
    with pytest.raises(StoreError, match="run r1 already exists"):
        _new_run(store)


def test_snapshot_rows_keep_none_as_null_and_add_host_row(store: Store) -> None:
    _new_run(store)
    assert store.add_snapshot("r1", _snap(T0, None, None, up=False)) == 3
    rows = store.load_samples("r1")
    by_dev = {r["device"]: r for r in rows}
    assert set(by_dev) == {"npu0-0", "npu1-0", HOST_DEVICE}
    down = by_dev["npu0-0"]
    assert down["up"] is False and down["util_pct"] is None and down["hbm_used_bytes"] is None
    assert by_dev["npu1-0"]["power_w"] == 90.25 and by_dev["npu1-0"]["healthy"] is False
    assert by_dev[HOST_DEVICE]["host_rss_bytes"] == 1000
    assert by_dev[HOST_DEVICE]["comm_timeouts_total"] == 3


def test_load_trace_is_long_format_without_gaps_as_zero(store: Store) -> None:
    _new_run(store)
    store.add_snapshot("r1", _snap(T0, 90.0, 1 << 30))
    store.add_snapshot("r1", _snap(T0 + 1, None, None, up=False, rss=2000))
    store.add_steps("r1", [{"ts": T0 + 5, "workload": "lm", "rank": 1, "step": 40, "step_time_s": 0.25,
                            "tokens_per_s": 800.0, "compute_s": 0.125}])
    trace = list(store.load_trace("r1"))
    npu0 = [(ts, m, v) for ts, d, m, v in trace if d == "npu0-0"]
    assert (T0, "util_pct", 90.0) in npu0
    assert (T0, "hbm_used_bytes", float(1 << 30)) in npu0
    # the failed reading is a gap: no util_pct row at T0+1, and never a 0
    assert [x for x in npu0 if x[0] == T0 + 1] == []
    assert (T0 + 1, HOST_DEVICE, "host_rss_bytes", 2000.0) in trace
    assert (T0 + 5, "lm-rank1", "step_time_s", 0.25) in trace
    assert (T0 + 5, "lm-rank1", "tokens_per_s", 800.0) in trace
    assert (T0 + 5, "lm-rank1", "compute_s", 0.125) in trace
    assert all(m in S.SAMPLE_METRIC_COLUMNS + ("step_time_s", "tokens_per_s", "compute_s") for _, _, m, _ in trace)


def test_load_trace_reads_in_chunks_without_losing_rows(store: Store) -> None:
    _new_run(store)
    for i in range(7):
        store.add_snapshot("r1", _snap(T0 + i, float(i), i))
    full = list(store.load_trace("r1"))
    chunked = list(store.load_trace("r1", chunk_rows=2))
    assert sorted(full) == sorted(chunked)
    assert sorted(v for ts, d, m, v in full if d == "npu0-0" and m == "util_pct") == [float(i) for i in range(7)]


def _same_trace(a, b) -> None:  # noqa: ANN001
    assert [(s.device, s.metric) for s in a.series()] == [(s.device, s.metric) for s in b.series()]
    for s in a.series():
        o = b.get(s.device, s.metric)
        assert s.t.tolist() == o.t.tolist() and s.v.tolist() == o.v.tolist(), (s.device, s.metric)
    assert {d: a.place(d) for d in a.devices} == {d: b.place(d) for d in b.devices}


@pytest.mark.parametrize("how", [{}, {"node": "b"}, {"start": T0 + 3}, {"bucket_s": 3}, {"node": "a", "bucket_s": 2}])
def test_trace_arrays_are_load_traces_readings(store: Store, how: dict) -> None:
    """The analysis reads a run as arrays (``trace_arrays``): the trace is the one the
    long-format rows make, a cluster's nodes, a node alone, from a start, in buckets."""
    from soak.analysis.trace import Trace

    _new_run(store)
    for node in ("a", "b"):
        w = store.writer("r1", max_rows=1 << 20, max_delay_s=1e9, node=node)
        for i in range(8):
            w.add(_snap(T0 + i, None if i == 4 else float(10 * i), 1 << 30, up=i != 5, rss=1000 + i))
        w.flush()
        store.add_steps("r1", [{"ts": T0 + 2 * i, "workload": "lm", "rank": int(node == "b"), "step": i,
                                "step_time_s": 0.25 + i / 100, "compute_s": None if i == 2 else 0.125}
                               for i in range(4)], node=node)
    rows = Trace.from_rows(store.load_trace("r1", **how), source="r1")
    arrays = Trace.from_arrays(store.trace_arrays("r1", **how), source="r1")
    assert len(rows) > 5
    _same_trace(rows, arrays)


def test_load_samples_downsamples_in_sql(store: Store) -> None:
    _new_run(store)
    for i in range(6):  # buckets of 3 s: [0,1,2], [3,4,5]; T0 is a multiple of 3
        store.add_snapshot("r1", _snap(T0 + i, float(10 * i), 100 * i, up=(i != 4)))
    rows = store.load_samples("r1", device="npu0-0", bucket_s=3)
    assert [r["ts"] for r in rows] == [T0, T0 + 3]
    assert rows[0]["util_pct"] == pytest.approx(10.0)  # mean of 0, 10, 20
    assert rows[1]["util_pct"] == pytest.approx(40.0)  # mean of 30, 50: the gap is left out
    assert rows[0]["up"] is True and rows[1]["up"] is False  # the worst of the bucket
    assert rows[0]["n"] == 3
    assert rows[1]["hbm_used_bytes"] == pytest.approx(400.0)
    assert len(store.load_samples("r1", bucket_s=3)) == 6  # 3 devices x 2 buckets
    assert [r["ts"] for r in store.load_samples("r1", device="npu0-0", start=T0 + 2, end=T0 + 3)] == [T0 + 2, T0 + 3]


def test_events_round_trip_in_time_order(store: Store) -> None:
    _new_run(store)
    store.add_event("r1", "restart", ts=T0 + 20, workload="lm", rank=None, message="crash",
                    detail={"attempt": 2, "exit_code": -9})
    store.add_event("r1", "gap", ts=T0 + 5, end_ts=T0 + 15, message="daemon down")
    ev = store.load_events("r1")
    assert [e.kind for e in ev] == ["gap", "restart"]
    assert ev[0].end_ts == T0 + 15
    assert ev[1].detail == {"attempt": 2, "exit_code": -9} and ev[1].workload == "lm"
    assert [e.kind for e in store.load_events("r1", kind="gap")] == ["gap"]
    with pytest.raises(ValueError):
        store.add_event("r1", "nonsense", ts=T0)


def test_the_last_events_of_a_kind_come_in_time_order(store: Store) -> None:
    _new_run(store)
    for i, ts in enumerate((T0 + 30, T0 + 10, T0 + 20, T0 + 20)):
        store.add_event("r1", "link_test", ts=ts, detail={"n": i})
    store.add_event("r1", "gap", ts=T0 + 40)
    assert [e.detail["n"] for e in store.load_events("r1", "link_test", last=1)] == [0]
    # two at the same time: the one written later is the later one
    assert [e.detail["n"] for e in store.load_events("r1", "link_test", last=3)] == [2, 3, 0]
    assert [e.kind for e in store.load_events("r1", last=1)] == ["gap"]


def test_replace_findings_keeps_analysis_keys(store: Store) -> None:
    _new_run(store)
    f1 = {"kind": "memory_creep", "device": "npu0-0", "metric": "hbm_used_bytes", "start": T0,
          "end": T0 + 3600, "severity": "fail", "summary": "HBM grows 1 GiB/h", "slope_per_hour": 1.5e9}
    assert store.replace_findings("r1", [f1, {**f1, "device": "npu1-0"}]) == 2
    assert store.replace_findings("r1", [f1]) == 1
    got = store.load_findings("r1")
    assert len(got) == 1
    assert got[0].as_dict() == f1
    assert store.replace_findings("r1", []) == 0
    assert store.load_findings("r1") == []


def test_export_csv_is_the_analysis_trace_format(store: Store, tmp_path) -> None:
    _new_run(store)
    store.add_snapshot("r1", _snap(T0 + 0.5, 75.5, 7))
    out = tmp_path / "trace.csv"
    n = store.export_csv("r1", out)
    with open(out, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["timestamp", "device", "metric", "value"]
    assert len(rows) == n + 1
    assert [str(T0 + 0.5), "npu0-0", "util_pct", "75.5"] in rows
    assert [str(T0 + 0.5), "npu1-0", "power_w", "90.25"] in rows


def test_a_cluster_runs_export_names_node_slash_device_and_reads_back_with_the_two_apart(store: Store, tmp_path) -> None:
    from soak.analysis import Trace

    _new_run(store)
    for node, util in (("n1", 10.0), ("n2", 20.0)):
        w = store.writer("r1", node=node)
        w.add(_snap(T0, util, 5))
        w.flush()
    out = tmp_path / "trace.csv"
    store.export_csv("r1", out)
    with open(out, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["timestamp", "device", "metric", "value"]  # the format soak analyze reads
    assert [str(T0), "n2/npu0-0", "util_pct", "20.0"] in rows and [str(T0), "n1/host", "util_pct", "12.5"] in rows
    back, stored = Trace.from_csv(out), Trace.from_rows(store.load_trace("r1"))
    assert back.nodes == stored.nodes == ["n1", "n2"]
    assert {d: back.place(d) for d in back.devices} == {d: stored.place(d) for d in stored.devices}
    assert back.place("n2/npu0-0") == ("n2", "npu0-0") and back.place("n1/host") == ("n1", "host")
    assert float(back.get("n2/npu0-0", "util_pct").v[0]) == 20.0


def test_batch_writer_commits_only_full_batches_until_flushed(store: Store) -> None:
    _new_run(store)
    w = store.writer("r1", max_rows=6, max_delay_s=3600)
    w.add(_snap(T0, 1.0, 1))  # 3 rows: buffered
    assert store.count_samples("r1") == 0 and w.pending() == 3
    w.add(_snap(T0 + 1, 1.0, 1))  # 6 rows: committed as one batch
    assert store.count_samples("r1") == 6 and w.pending() == 0
    w.add(_snap(T0 + 2, 1.0, 1))
    assert w.flush() == 3
    assert store.count_samples("r1") == 9 and store.last_sample_ts("r1") == T0 + 2


class _FailingWrites:
    """The store, but its next ``fail`` sample writes raise as an unreachable store does."""

    def __init__(self, store: Store, fail: int) -> None:
        self.store, self.fail, self.url = store, fail, store.url

    def add_sample_rows(self, rows):
        if self.fail:
            self.fail -= 1
            raise StoreError(f"store {self.url}: write failed: server closed the connection unexpectedly")
        self.store.add_sample_rows(rows)


def test_batch_writer_keeps_every_row_of_a_failed_write_and_writes_them_in_order_later(store: Store) -> None:
    from soak.store import BatchWriter

    _new_run(store)
    flaky = _FailingWrites(store, fail=2)
    w = BatchWriter(flaky, "r1", max_rows=6, max_delay_s=3600, max_buffered=12)
    w.add(_snap(T0, 1.0, 1))
    with pytest.raises(StoreError, match="server closed"):
        w.add(_snap(T0 + 1, 2.0, 1))  # due: the write fails, nothing leaves the buffer
    assert w.pending() == 6 and store.count_samples("r1") == 0
    with pytest.raises(StoreError):
        w.add(_snap(T0 + 2, 3.0, 1))
    assert w.pending() == 9
    w.append(_snap(T0 + 3, 4.0, 1))
    with pytest.raises(StoreError, match="12 sample rows wait"):  # the bound: this tick is refused
        w.append(_snap(T0 + 4, 5.0, 1))
    assert w.pending() == 12
    assert w.flush() == 12 and w.pending() == 0
    util = [(s["ts"], s["util_pct"]) for s in store.load_samples("r1", device="npu0-0")]
    assert util == [(T0, 1.0), (T0 + 1, 2.0), (T0 + 2, 3.0), (T0 + 3, 4.0)]


def test_schema_version_mismatch_is_refused(store_url: str) -> None:
    if store_url == "sqlite://":
        pytest.skip("a memory database does not outlive its handle")
    s = Store.open(store_url)
    with s.engine.begin() as conn:
        conn.execute(update(S.meta).where(S.meta.c.key == "schema_version").values(value="999"))
    s.close()
    with pytest.raises(StoreError, match="schema version 999"):
        Store.open(store_url)


def test_load_trace_bucketed_averages_device_metrics_but_keeps_steps(store: Store) -> None:
    _new_run(store)
    for i in range(6):
        store.add_snapshot("r1", _snap(T0 + i, float(10 * i), 100))
    store.add_steps("r1", [{"ts": T0 + 1, "workload": "lm", "rank": 0, "step": 1, "step_time_s": 0.5}])
    trace = list(store.load_trace("r1", bucket_s=3))
    util = sorted((ts, v) for ts, d, m, v in trace if d == "npu0-0" and m == "util_pct")
    assert util == [(T0, 10.0), (T0 + 3, 40.0)]
    assert (T0 + 1, "lm-rank0", "step_time_s", 0.5) in trace


def test_rank_rates_are_the_mean_gemm_rate_per_node_and_rank(store: Store) -> None:
    _new_run(store)
    store.add_steps("r1", [{"ts": T0 + i, "workload": "gemm", "rank": 0, "step": i, "tflops": 10.0 + i}
                           for i in range(4)], node="a")
    store.add_steps("r1", [{"ts": T0 + 2, "workload": "gemm", "rank": 1, "step": 1, "tflops": 4.0},
                           {"ts": T0 + 3, "workload": "gemm", "rank": 1, "step": 2, "tflops": None}], node="b")
    store.add_steps("r1", [{"ts": T0, "workload": "lm", "rank": 0, "step": 1, "step_time_s": 0.5}], node="a")
    assert store.rank_rates("r1") == [("a", "gemm", 0, 11.5, 4, T0, T0 + 3), ("b", "gemm", 1, 4.0, 1, T0 + 2, T0 + 2)]


def test_older_schema_is_refused_in_one_line_and_left_untouched(store_url: str) -> None:
    if store_url == "sqlite://":
        pytest.skip("a memory database does not outlive its handle")
    from sqlalchemy import Column, MetaData, String, Table, create_engine, inspect

    # A version-1 store: its meta row and its samples table with a surrogate id.
    engine = create_engine(store_url)
    md = MetaData()
    meta = Table("soak_meta", md, Column("key", String(64), primary_key=True), Column("value", String(256)))
    Table("samples", md, Column("id", S._ID, primary_key=True), Column("run_id", String(64)))
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(meta.insert().values(key="schema_version", value="1"))
    with pytest.raises(StoreError) as err:
        Store.open(store_url)
    msg = str(err.value)
    assert f"schema version 1, this soak reads version {S.SCHEMA_VERSION}" in msg and "\n" not in msg
    assert not inspect(engine).has_table("sample_series")  # nothing created on the way
    engine.dispose()


def _version_5_sample_series(md: MetaData) -> Table:
    """``sample_series`` as soak wrote it up to schema version 5: one ``device`` string per
    series, a cluster node's device as ``node/device``."""
    return Table("sample_series", md,
                 Column("id", Integer, primary_key=True, autoincrement=True),
                 Column("run_id", String(64), nullable=False),
                 Column("device", String(64), nullable=False),
                 UniqueConstraint("run_id", "device", name="uq_sample_series_run_device"))


def _downgrade(store_url: str, version: int) -> None:
    """Make a store as soak wrote it at ``version``: drop what every later migration added
    (``sample_series`` is made anew as version 5 had it: its series are not kept)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(store_url)
    with engine.begin() as conn:
        for v in sorted(S.MIGRATIONS, reverse=True):
            if v < version:
                continue
            if v == 5:
                conn.execute(text("DROP TABLE sample_series"))
                _version_5_sample_series(MetaData()).create(conn)
                continue
            for ddl in S.MIGRATIONS[v]:
                table, column = ddl.split()[2], ddl.split()[5]
                conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
            if v == 2:
                conn.execute(text("DROP TABLE nodes"))
            if v == 4:
                conn.execute(text("DROP TABLE chip_buckets"))
        conn.execute(text(f"UPDATE soak_meta SET value = '{version}' WHERE key = 'schema_version'"))
    engine.dispose()


def test_a_version_3_store_gains_compute_s_in_place_keeping_its_steps(store_url: str) -> None:
    if store_url == "sqlite://":
        pytest.skip("a memory database does not outlive its handle")
    with Store.open(store_url) as first:
        _new_run(first)
        first.add_steps("r1", [{"ts": T0, "workload": "lm", "rank": 0, "step": 1, "step_time_s": 0.5}],
                        node="node-a")
    _downgrade(store_url, 3)
    with Store.open(store_url) as upgraded:
        (old,) = upgraded.load_steps("r1")
        assert (old["step_time_s"], old["node"], old["compute_s"]) == (0.5, "node-a", None)
        upgraded.add_steps("r1", [{"ts": T0 + 1, "workload": "lm", "rank": 0, "step": 2, "step_time_s": 0.5,
                                   "compute_s": 0.2}], node="node-a")
        assert (T0 + 1, "lm-rank0", "compute_s", 0.2) in list(upgraded.load_trace("r1"))
        assert upgraded.rank_places("r1") == {"lm-rank0": ("node-a", "lm-rank0")}


def test_a_version_8_store_gains_numeric_checks_in_place_and_counts_them_per_rank(store_url: str) -> None:
    if store_url == "sqlite://":
        pytest.skip("a memory database does not outlive its handle")
    with Store.open(store_url) as first:
        _new_run(first)
        first.add_steps("r1", [{"ts": T0, "workload": "gemm", "rank": 0, "step": 10, "step_time_s": 0.5}], node="a")
    _downgrade(store_url, 8)
    with Store.open(store_url) as upgraded:
        (old,) = upgraded.load_steps("r1")
        assert old["numeric_checks"] is None
        assert upgraded.numeric_checks("r1") == []  # a row without the count is no evidence
        upgraded.add_steps("r1", [{"ts": T0 + i, "workload": "gemm", "rank": r, "step": 20 + 10 * i,
                                   "numeric_checks": 2 + i + r} for r in (0, 1) for i in range(3)], node="a")
        assert upgraded.numeric_checks("r1") == [("a", "gemm", 0, 4, 20, 40), ("a", "gemm", 1, 5, 20, 40)]


def test_a_version_2_store_is_upgraded_in_place_keeping_its_runs(store_url: str) -> None:
    if store_url == "sqlite://":
        pytest.skip("a memory database does not outlive its handle")
    # A version-2 store as soak 0.1 wrote it: today's tables less what later versions added.
    with Store.open(store_url) as first:
        _new_run(first)
        first.add_event("r1", "note", ts=T0, message="written by 0.1")
    _downgrade(store_url, 2)
    with Store.open(store_url) as upgraded:
        run = upgraded.get_run("r1")
        assert run is not None and (run.nodes, run.generation, run.plan_digest) == (1, 0, None)
        assert [e.message for e in upgraded.load_events("r1")] == ["written by 0.1"]
        upgraded.add_event("r1", "note", ts=T0 + 1, message="after the upgrade", node="node-a")
        assert upgraded.load_events("r1")[-1].node == "node-a"
        assert upgraded.cluster_nodes("r1") == []


def test_a_repeated_reading_is_kept_once_and_series_are_per_run(store: Store) -> None:
    _new_run(store)
    _new_run(store, "r2")
    store.add_snapshot("r1", _snap(T0, 1.0, 1))
    store.add_snapshot("r1", _snap(T0, 2.0, 2))  # same devices, same instant: the first stays
    store.add_snapshot("r2", _snap(T0, 3.0, 3))
    assert store.count_samples("r1") == 3 and store.count_samples("r2") == 3
    assert store.devices("r1") == store.devices("r2") == [(None, d) for d in sorted(["npu0-0", "npu1-0", HOST_DEVICE])]
    rows = store.load_samples("r1", device="npu0-0")
    assert [(r["util_pct"], r["hbm_used_bytes"]) for r in rows] == [(1.0, 1)]
    assert [r["util_pct"] for r in store.load_samples("r2", device="npu0-0")] == [3.0]


def test_a_batch_repeating_a_stored_reading_writes_its_new_rows_and_keeps_the_first(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    _new_run(store)
    with caplog.at_level("INFO", logger="soak.store"):
        store.add_snapshot("r1", _snap(T0, 1.0, 1))
        assert not [r for r in caplog.records if "COPY refused" in r.getMessage()]  # the plain batch: one COPY
        # a write repeated after its commit was lost, with the next tick behind it
        store.add_sample_rows(Store.snapshot_rows("r1", _snap(T0, 9.0, 9)) + Store.snapshot_rows("r1", _snap(T0 + 1, 2.0, 2)))
    assert [(r["ts"], r["util_pct"]) for r in store.load_samples("r1", device="npu0-0")] == [(T0, 1.0), (T0 + 1, 2.0)]
    assert store.count_samples("r1") == 6
    refused = [r.getMessage() for r in caplog.records if "COPY refused" in r.getMessage()]
    assert len(refused) == (1 if store.engine.dialect.name == "postgresql" else 0), refused


def test_a_batch_with_a_bad_row_is_never_half_written_and_the_daemon_spools_it_whole(store: Store, tmp_path) -> None:
    from soak.daemon.spool import StoreSpool, replay_file
    from soak.store.samples import sample_tuple

    _new_run(store)
    good = Store.snapshot_rows("r1", _snap(T0, 1.0, 1))
    bad = Store.snapshot_rows("r1", _snap(T0 + 1, 2.0, 2))
    bad[1] = {**bad[1], "up": None}  # a row the table refuses (up is NOT NULL), amid good ones
    with pytest.raises(StoreError, match=r"write failed: .*up"):
        store.add_sample_rows(good + bad)
    assert store.count_samples("r1") == 0 and store.devices("r1") == []  # not one row, not one series

    # the daemon's path: the writer's batch fails, and goes to the spool whole
    spool = StoreSpool(store, "r1", tmp_path / "spool.jsonl", node=None, now=lambda: T0 + 2, outage_max_s=60)
    spool.enabled = True  # (a SQLite store never spools in a daemon; the path is the same)
    w = store.writer("r1", max_rows=6, max_delay_s=3600)
    w.rows = lambda snap: [sample_tuple(r) for r in (bad if snap.ts == T0 + 1 else Store.snapshot_rows("r1", snap))]
    w.append(_snap(T0, 1.0, 1))
    w.append(_snap(T0 + 1, 2.0, 2))
    spool.samples(w, force=True)
    assert spool.down and w.pending() == 0 and store.count_samples("r1") == 0
    kept = [json.loads(line) for line in (tmp_path / "spool.jsonl").read_text().splitlines()]
    assert [(r["ts"], r["device"], r["up"]) for k in kept for r in k["rows"]] == \
        [(r["ts"], r["device"], r["up"]) for r in good + bad]
    with pytest.raises(StoreError):  # replayed, it is refused again, and stays kept
        replay_file(store, "r1", tmp_path / "spool.jsonl")
    assert store.count_samples("r1") == 0 and len((tmp_path / "spool.jsonl").read_text().splitlines()) == 1

    # the same batch without the bad row is committed whole
    store.add_sample_rows(good + [r for r in bad if r["up"] is not None])
    assert store.count_samples("r1") == 5


def test_steps_with_a_float_in_an_integer_column_are_written_as_before(store: Store) -> None:
    _new_run(store)
    store.add_steps("r1", [{"ts": T0, "workload": "lm", "rank": 0, "step": 5, "mem_peak_bytes": 1.5e9,
                            "numeric_checks": 3, "loss": 2.5},
                           {"ts": T0 + 10, "workload": "lm", "rank": 0, "step": 6, "numeric_checks": 4}], node="n1")
    rows = store.load_steps("r1")
    assert [(r["step"], r["mem_peak_bytes"], r["numeric_checks"], r["loss"], r["node"]) for r in rows] == \
        [(5, 1_500_000_000, 3, 2.5, "n1"), (6, None, 4, None, "n1")]


def test_printed_floats_keep_their_digits_and_bytes_and_times_stay_exact(store: Store) -> None:
    _new_run(store)
    ts = T0 + 0.123456789  # sub-microsecond timestamps survive (8-byte float)
    snap = Snapshot(ts=ts, host="n", devices=(
        DeviceSample(device="npu0-0", backend="sim", util_pct=87.3, temp_c=61.25, power_w=312.7,
                     hbm_used_bytes=(60 << 30) + 12345, hbm_total_bytes=64 << 30),))
    store.add_snapshot("r1", snap)
    (row,) = store.load_samples("r1", device="npu0-0")
    assert row["ts"] == ts and row["hbm_used_bytes"] == (60 << 30) + 12345
    # REAL keeps 7 significant digits: far more than the 3-4 the tools report and print
    assert row["util_pct"] == pytest.approx(87.3, rel=1e-6) and row["power_w"] == pytest.approx(312.7, rel=1e-6)
    assert row["temp_c"] == 61.25


def _flaky_begin(store: Store, monkeypatch: pytest.MonkeyPatch, message: str, failures: int) -> list[int]:
    """``store.engine.begin`` raising an OperationalError with ``message`` ``failures`` times."""
    from sqlalchemy.exc import OperationalError

    real_begin = store.engine.begin
    calls: list[int] = []

    def begin():
        calls.append(1)
        if len(calls) <= failures:
            raise OperationalError("INSERT ...", {}, Exception(message))
        return real_begin()

    monkeypatch.setattr(store.engine, "begin", begin)
    monkeypatch.setattr("soak.store.engine.RETRY_WAIT_S", 0.0)
    return calls


@pytest.mark.parametrize("writer", ["add_event", "add_sample_rows", "replace_findings"])
def test_a_busy_database_is_retried_and_each_retry_logged(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, writer: str
) -> None:
    _new_run(store)
    calls = _flaky_begin(store, monkeypatch, "database is locked", failures=2)
    if writer == "add_event":
        store.add_event("r1", "note", ts=T0, message="hello")
    elif writer == "add_sample_rows":
        store.add_sample_rows(Store.snapshot_rows("r1", _snap(T0, 1.0, 1)))
    else:
        store.replace_findings("r1", [{"kind": "hang", "device": "npu0-0", "severity": "fail"}])
    monkeypatch.undo()
    assert len(calls) == 3
    busy = [r.getMessage() for r in caplog.records if r.name == "soak.store"]
    assert busy == ["store busy (attempt 1/3): database is locked", "store busy (attempt 2/3): database is locked"]
    if writer == "add_event":
        assert [e.message for e in store.load_events("r1")] == ["hello"]
    elif writer == "add_sample_rows":
        assert store.count_samples("r1") == 3
    else:
        assert [f.kind for f in store.load_findings("r1")] == ["hang"]


def test_a_database_busy_three_times_or_broken_is_one_store_error(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _new_run(store)
    calls = _flaky_begin(store, monkeypatch, "database is locked", failures=3)
    with pytest.raises(StoreError, match=r"write failed: database is locked$"):
        store.add_event("r1", "note", ts=T0)
    assert len(calls) == 3
    monkeypatch.undo()
    calls = _flaky_begin(store, monkeypatch, "disk I/O error", failures=1)
    with pytest.raises(StoreError, match=r"write failed: disk I/O error$"):
        store.replace_findings("r1", [])
    assert len(calls) == 1  # not transient: not retried


def test_snapshot_rows_fill_every_sample_column(store: Store) -> None:
    rows = Store.snapshot_rows("r1", _snap(T0, 90.0, 1))
    columns = {c.name for c in S.samples.c} - {"series_id"} | {"run_id", "node", "device"}
    assert [set(r) for r in rows] == [columns] * 3
    npu1 = rows[1]
    assert (npu1["healthy"], npu1["health"], npu1["host_rss_bytes"]) == (False, "Warning", None)


def test_chip_stats_are_true_extremes_per_chip_without_the_host(store: Store) -> None:
    _new_run(store)
    _new_run(store, "other")
    store.add_snapshot("r1", _snap(T0, 90.0, 3 << 30))
    store.add_snapshot("r1", _snap(T0 + 10, None, None, up=False))  # a gap: counted, no values
    store.add_snapshot("r1", _snap(T0 + 20, 60.0, 5 << 30))
    store.add_snapshot("other", _snap(T0 + 30, 1.0, 99 << 30))  # another run's rows stay out
    stats = store.chip_stats("r1")
    assert list(stats) == [(None, "npu0-0"), (None, "npu1-0")]  # sorted, no host row
    assert stats[(None, "npu0-0")] == {
        "samples": 3.0,
        "util_mean_pct": 75.0,
        "util_min_pct": 60.0,
        "temp_max_c": 40.0,
        "power_mean_w": None,  # never reported: None, not 0
        "power_max_w": None,
        "hbm_peak_bytes": float(5 << 30),
        "hbm_total_bytes": float(64 << 30),
        "first_ts": T0,
        "last_ts": T0 + 20,
    }
    assert stats[(None, "npu1-0")]["power_mean_w"] == 90.25 and stats[(None, "npu1-0")]["temp_max_c"] == 41.5
    assert store.chip_stats("missing") == {}


def test_chip_fault_readings_give_the_worst_health_word_ecc_extremes_and_port_downs(store: Store) -> None:
    _new_run(store)
    words = ["OK", "Alarm", "Warning", "OK"]
    for i, word in enumerate(words):
        snap = _snap(T0 + 10 * i, 90.0, 1 << 30)
        npu0 = replace(snap.devices[0], health=word, ecc_double_bit_errors=2 + i // 2, ecc_single_bit_errors=10 * i,
                       link_up=i != 2)
        npu1 = replace(snap.devices[1], health="UNKNOWN" if i else None)  # no ECC view, no port state
        store.add_snapshot("r1", replace(snap, devices=(npu0, npu1)))
    expected = {
        (None, "npu0-0"): {"health": "Alarm", "ecc_double_min": 2, "ecc_double_max": 3, "ecc_single_min": 0,
                           "ecc_single_max": 30, "link_readings": 4, "link_down_readings": 1},
        # a word the tool gives that ranks nothing is kept as given; never read is None, not 0
        (None, "npu1-0"): {"health": "UNKNOWN", "ecc_double_min": None, "ecc_double_max": None, "ecc_single_min": None,
                           "ecc_single_max": None, "link_readings": 0, "link_down_readings": None},
    }
    assert store.chip_fault_readings("r1") == expected
    # the same in the statistics' own scan, the statistics unchanged
    with_faults = store.chip_stats("r1", faults=True)
    assert {k: v.pop("faults") for k, v in with_faults.items()} == expected
    assert with_faults == store.chip_stats("r1")


def test_step_series_averages_window_medians_per_rank_and_bucket(store: Store) -> None:
    _new_run(store)
    rows = [
        {"ts": T0 + 0, "workload": "lm", "rank": 10, "step": 1, "step_time_s": 0.5},
        {"ts": T0 + 1, "workload": "lm", "rank": 10, "step": 2, "step_time_s": 0.7},
        {"ts": T0 + 4, "workload": "lm", "rank": 10, "step": 3, "step_time_s": 0.9},
        {"ts": T0 + 1, "workload": "lm", "rank": 2, "step": 1, "step_time_s": 0.25},
        {"ts": T0 + 1, "workload": "lm", "rank": 2, "step": 2, "step_time_s": 0.75},  # same instant
        {"ts": T0 + 2, "workload": "lm", "rank": 2, "step": 3, "step_time_s": None},
    ]
    store.add_steps("r1", rows)
    raw = store.step_series("r1")
    assert list(raw) == ["lm-rank2", "lm-rank10"]  # ranks in numeric order
    assert raw["lm-rank2"] == ((T0 + 1, T0 + 2), (0.5, None))
    assert raw["lm-rank10"][0] == (T0, T0 + 1, T0 + 4)
    bucketed = store.step_series("r1", bucket_s=3)  # T0 is a multiple of 3
    assert bucketed["lm-rank10"][0] == (T0, T0 + 3)
    assert bucketed["lm-rank10"][1] == pytest.approx((0.6, 0.9))
    assert bucketed["lm-rank2"] == ((T0,), (0.5,))
    with pytest.raises(ValueError, match="bucket_s"):
        store.step_series("r1", bucket_s=-1)


def test_export_rows_are_the_trace_before_it_is_made_long(store: Store) -> None:
    _new_run(store)
    store.add_snapshot("r1", _snap(T0, 90.0, 1 << 30))
    store.add_snapshot("r1", _snap(T0 + 1, None, None, up=False))
    store.add_steps("r1", [{"ts": T0 + 5, "workload": "lm", "rank": 1, "step": 40, "step_time_s": 0.25,
                            "tokens_per_s": 800.0, "compute_s": 0.125},
                           {"ts": T0 + 6, "workload": "lm", "rank": 0, "step": 41, "step_time_s": None,
                            "tokens_per_s": 700.0}])
    ex = store.export_rows("r1")
    assert ex.metrics == S.SAMPLE_METRIC_COLUMNS
    # device by device in series order (created sorted within a tick), each in time order
    assert [r[:3] for r in ex.samples] == [(ts, None, dev) for dev in ("host", "npu0-0", "npu1-0")
                                           for ts in (T0, T0 + 1)]
    assert ex.samples[2][3 + ex.metrics.index("hbm_used_bytes")] == 1 << 30  # bytes stay exact
    assert ex.steps == [(T0 + 5, "lm-rank1", 0.25, 800.0, 0.125), (T0 + 6, "lm-rank0", None, 700.0, None)]
    long = [(r[0], r[2], m, float(v)) for r in ex.samples for m, v in zip(ex.metrics, r[3:], strict=True)
            if v is not None]
    for ts, dev, *values in ex.steps:
        long += [(ts, dev, m, v) for m, v in zip(STEP_TRACE_METRICS, values, strict=True) if v is not None]
    assert long == list(store.load_trace("r1"))  # same values, same order
    assert store.export_rows("missing").samples == []


def test_chip_buckets_are_written_once_and_summed_per_chip_and_per_bucket(store: Store) -> None:
    _new_run(store)
    rows = [("npu0-0", "temp_c", T0, 50.0, 60, 600.0), ("npu0-0", "temp_c", T0 + 600, 51.5, 30, 300.0),
            ("npu0-0", "any", T0, None, 60, 600.0), ("npu0-0", "any", T0 + 600, None, 30, 300.0),
            ("lm-rank0", "step_time_s", T0, 0.25, 60, 600.0)]
    assert store.bucket_mark("r1") is None and store.bucket_mark("r1", "n1") is None
    assert store.add_buckets("r1", "n1", rows) == 5
    # an agent resumed writes its last bucket again: kept as first written, nothing twice
    store.add_buckets("r1", "n1", [("npu0-0", "temp_c", T0 + 600, 99.0, 60, 600.0)])
    store.add_buckets("r1", "n2", [("npu0-0", "temp_c", T0, 49.0, 60, 600.0), ("npu0-0", "any", T0, None, 60, 590.0)])
    assert store.bucket_mark("r1", "n1") == T0 + 600 and store.bucket_mark("r1", "n2") == T0
    assert store.bucket_mark("r1") == T0 + 600 and store.bucket_mark("r2") is None
    assert store.load_buckets("r1", "temp_c") == [("n1", "npu0-0", "temp_c", T0, 50.0, 60),
                                                 ("n1", "npu0-0", "temp_c", T0 + 600, 51.5, 30),
                                                 ("n2", "npu0-0", "temp_c", T0, 49.0, 60)]
    # rows without a value (coverage only) are not compared
    assert {r[2] for r in store.load_buckets("r1")} == {"temp_c", "step_time_s"}
    assert store.bucket_coverage("r1", T0, T0 + 1200, 600) == {
        ("n1", "npu0-0", "temp_c"): 900.0, ("n1", "npu0-0", "any"): 900.0, ("n1", "lm-rank0", "step_time_s"): 600.0,
        ("n2", "npu0-0", "temp_c"): 600.0, ("n2", "npu0-0", "any"): 590.0}
    # a window that holds the second bucket only
    assert store.bucket_coverage("r1", T0 + 600, T0 + 1200, 600)[("n1", "npu0-0", "any")] == 300.0
    assert store.bucket_totals("r1", "any", T0, T0 + 1200, 600) == [(T0, 1190.0, 2), (T0 + 600, 300.0, 1)]


def test_findings_replaced_for_one_node_or_some_kinds_leave_the_others(store: Store) -> None:
    _new_run(store)

    def f(kind: str, node: str | None, device: str | None) -> dict:
        return {"kind": kind, "node": node, "device": device, "metric": "temp_c", "start": T0, "end": T0 + 1,
                "severity": "warn", "summary": f"{kind} {node} {device}"}

    store.replace_findings("r1", [f("thermal", "n1", "npu0-0"), f("thermal", "n2", "npu0-0"),
                                  f("outlier", "n1", "npu1-0"), f("straggler", "n2", None)])
    store.replace_findings("r1", [f("memory_creep", "n1", "npu0-0")], node="n1", kinds=("thermal", "memory_creep"))
    store.replace_findings("r1", [f("outlier", "n2", "npu3-0")], kinds=("outlier", "straggler"))
    got = sorted((r.kind, r.node, r.device) for r in store.load_findings("r1"))
    assert got == [("memory_creep", "n1", "npu0-0"), ("outlier", "n2", "npu3-0"), ("thermal", "n2", "npu0-0")]


def test_load_trace_of_one_node_names_its_devices_as_on_the_node(store: Store) -> None:
    _new_run(store)
    for node in ("n1", "n2"):
        w = store.writer("r1", node=node)
        for i in range(4):
            w.add(_snap(T0 + i, 10.0 * i, 100))
        w.flush()
        store.add_steps("r1", [{"ts": T0 + 2, "workload": "lm", "rank": int(node[1]), "step": 1,
                                "step_time_s": 0.5}], node=node)
    rows = list(store.load_trace("r1", node="n2", start=T0 + 2))
    assert {d for _, d, _, _ in rows} == {"npu0-0", "npu1-0", HOST_DEVICE, "lm-rank2"}
    assert min(ts for ts, _, _, _ in rows) == T0 + 2
    assert sorted(v for ts, d, m, v in rows if d == "npu0-0" and m == "util_pct") == [20.0, 30.0]
    everything = list(store.load_trace("r1"))
    # the whole run: each chip with its node apart, the ranks as the steps name them
    assert {r[1:3] for r in everything if len(r) == 5} == {(n, d) for n in ("n1", "n2")
                                                          for d in ("npu0-0", "npu1-0", HOST_DEVICE)}
    assert {r[1] for r in everything if len(r) == 4} == {"lm-rank1", "lm-rank2"}
    assert store.devices("r1") == [(n, d) for n in ("n1", "n2") for d in sorted(["npu0-0", "npu1-0", HOST_DEVICE])]
    assert store.last_sample_ts("r1", node="n2") == T0 + 3 and store.last_sample_ts("r1", node="n3") is None


def test_a_version_4_store_gains_the_chip_buckets_table_in_place(store_url: str) -> None:
    if store_url == "sqlite://":
        pytest.skip("a memory database does not outlive its handle")
    from sqlalchemy import create_engine, inspect

    with Store.open(store_url) as first:
        _new_run(first)
    _downgrade(store_url, 4)
    engine = create_engine(store_url)
    assert not inspect(engine).has_table("chip_buckets")
    with Store.open(store_url) as upgraded:
        assert upgraded.get_run("r1") is not None
        upgraded.add_buckets("r1", "n1", [("npu0-0", "any", T0, None, 1, 5.0)])
        assert upgraded.bucket_mark("r1", "n1") == T0
    assert inspect(engine).has_table("chip_buckets")
    engine.dispose()


def test_a_version_6_store_gains_the_judging_lease_and_the_rendezvous_in_place(store_url: str) -> None:
    if store_url == "sqlite://":
        pytest.skip("a memory database does not outlive its handle")
    from sqlalchemy import create_engine, inspect

    with Store.open(store_url) as first:
        _new_run(first)
    _downgrade(store_url, 6)
    engine = create_engine(store_url)
    assert "leader" not in {c["name"] for c in inspect(engine).get_columns("runs")}
    with Store.open(store_url) as upgraded:
        run = upgraded.get_run("r1")
        assert run is not None and (run.leader, run.lease_until, run.rendezvous) == (None, None, None)
        upgraded.update_run("r1", rendezvous="10.0.0.2:29400")
        assert upgraded.get_run("r1").rendezvous == "10.0.0.2:29400"
    engine.dispose()


def test_a_version_5_store_has_its_node_device_strings_split_in_place(store_url: str) -> None:
    if store_url == "sqlite://":
        pytest.skip("a memory database does not outlive its handle")
    import json

    from sqlalchemy import create_engine, insert, select, text
    from sqlalchemy.exc import IntegrityError

    # A version-5 store as soak wrote it: today's other tables (less what later versions added) and the old
    # sample_series, with a cluster run's devices named node/device and a single-node run's plain.
    engine = create_engine(store_url)
    md = MetaData()
    old_series = _version_5_sample_series(md)
    with engine.begin() as conn:
        S.metadata.create_all(conn, tables=[t for t in S.metadata.sorted_tables if t.name != "sample_series"])
        old_series.create(conn)
        for v in (v for v in sorted(S.MIGRATIONS) if v > 5):  # what later versions added to the other tables
            for ddl in S.MIGRATIONS[v]:
                conn.execute(text(f"ALTER TABLE {ddl.split()[2]} DROP COLUMN {ddl.split()[5]}"))
        conn.execute(insert(S.meta).values(key="schema_version", value="5"))
        for run_id, nodes in (("c1", 2), ("s1", 1)):
            conn.execute(insert(S.runs).values(id=run_id, host="n1", plan="{}", started_ts=T0, status="finished",
                                               time_scale=1.0, restarts=0, nodes=nodes, generation=0))
        ids = [conn.execute(insert(old_series).values(run_id=run_id, device=device)).inserted_primary_key[0]
               for run_id, device in (("c1", "n1/npu0-0"), ("c1", "n1/host"), ("c1", "n2/npu0-0"), ("s1", "npu0-0"))]
        assert ids == [1, 2, 3, 4]
        conn.execute(insert(S.samples), [{"series_id": sid, "ts": T0 + i, "util_pct": 10.0 * sid + i, "up": True}
                                         for sid in ids for i in range(3)])
        # a finding of the cluster judged from its samples (node/chip, its node filled in by the
        # store), and a node agent's (plain device, the node also in the detail)
        conn.execute(insert(S.findings), [
            {"run_id": "c1", "kind": "outlier", "device": "n2/npu0-0", "metric": "temp_c", "severity": "warn",
             "summary": "hot", "detail": json.dumps({"node": None, "baseline": 40.0}), "node": "n2"},
            {"run_id": "c1", "kind": "thermal", "device": "npu0-0", "metric": "temp_c", "severity": "warn",
             "summary": "warm", "detail": json.dumps({"node": "n1", "peak_c": 91.0}), "node": "n1"},
            {"run_id": "s1", "kind": "thermal", "device": "npu0-0", "metric": "temp_c", "severity": "warn",
             "summary": "warm", "detail": json.dumps({"peak_c": 90.0}), "node": None}])

    with Store.open(store_url) as upgraded:
        assert upgraded.devices("c1") == [("n1", "host"), ("n1", "npu0-0"), ("n2", "npu0-0")]
        assert upgraded.devices("s1") == [(None, "npu0-0")]
        assert [(r[1], r[2], r[4]) for r in upgraded.load_trace("c1") if r[3] == "util_pct"][:4] == [
            ("n1", "npu0-0", 10.0), ("n1", "npu0-0", 11.0), ("n1", "npu0-0", 12.0), ("n1", "host", 20.0)]
        assert [r[1] for r in upgraded.load_trace("c1", node="n2")] == ["npu0-0"] * 3
        assert list(upgraded.load_trace("s1")) == [(T0 + i, "npu0-0", "util_pct", 40.0 + i) for i in range(3)]
        got = {(f.node, f.device, f.kind): f.detail for f in upgraded.load_findings("c1")}
        assert got == {("n2", "npu0-0", "outlier"): {"baseline": 40.0}, ("n1", "npu0-0", "thermal"): {"peak_c": 91.0}}
        (single,) = upgraded.load_findings("s1")
        assert (single.node, single.device, single.detail) == (None, "npu0-0", {"peak_c": 90.0})
        # written on after the upgrade: the same series go on, a new node's are new
        upgraded.add_sample_rows([{"run_id": "c1", "ts": T0 + 9, "node": "n2", "device": "npu0-0", "up": True},
                                  {"run_id": "c1", "ts": T0 + 9, "node": "n3", "device": "npu0-0", "up": True},
                                  {"run_id": "s1", "ts": T0 + 9, "device": "npu0-0", "up": True}])
        assert [sid for sid, _, _ in upgraded.run_series("c1")] == [1, 2, 3, 5]
        assert upgraded.last_sample_ts("c1", node="n2") == T0 + 9 and upgraded.count_samples("s1") == 4
        assert upgraded.devices("s1") == [(None, "npu0-0")]
    with engine.begin() as conn:
        assert conn.execute(select(S.meta.c.value).where(S.meta.c.key == "schema_version")).scalar() == str(S.SCHEMA_VERSION)
    # one series per (run, node, device), a NULL node included
    for node in (None, "n1"):
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(insert(S.sample_series).values(run_id="s1" if node is None else "c1", node=node,
                                                        device="npu0-0"))
    engine.dispose()
