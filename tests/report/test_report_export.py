"""The report's fast export equals ``Store.export_csv`` byte for byte, on every backend, and
the statistics/series computed from its arrays equal the SQL ones."""

from __future__ import annotations

import hashlib
import os
import uuid
from urllib.parse import quote

import pytest

from soak.report.export import export_run
from soak.report.loader import (
    auto_bucket_s,
    chip_stats,
    device_series,
    series_from_arrays,
    stats_from_arrays,
)
from soak.store import Store
from tests.conftest import skip_unless_ci
from tests.report.synth import write_run

PG_URL = os.environ.get("SOAK_TEST_PG_URL")


@pytest.fixture(params=["sqlite_file", "sqlite_memory", pytest.param("postgresql", marks=pytest.mark.pg)])
def store(request, tmp_path):
    if request.param == "sqlite_file":
        s = Store.open(tmp_path / "soak.db")
        yield s
        s.close()
    elif request.param == "sqlite_memory":
        s = Store.open("sqlite://")
        yield s
        s.close()
    else:
        if not PG_URL:
            skip_unless_ci("SOAK_TEST_PG_URL is not set")
        from sqlalchemy import create_engine, text

        schema = f"soak_r_{uuid.uuid4().hex[:12]}"
        admin = create_engine(PG_URL)
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        sep = "&" if "?" in PG_URL else "?"
        s = Store.open(f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}")
        try:
            yield s
        finally:
            s.close()
            with admin.begin() as conn:
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
            admin.dispose()


def test_fast_export_is_byte_identical_to_the_store_export(store, tmp_path):
    write_run(store, "r-x", chips=4, hours=1.5, interval_s=10.0)
    # A sample with gaps (None) and a negative zero must keep the store's exact formatting.
    store.add_sample_rows([{"run_id": "r-x", "ts": 1_790_999_999.5, "device": "npu0-0", "up": False,
                            "util_pct": -0.0, "temp_c": None, "power_w": 123.456789012345}])
    n = store.export_csv("r-x", tmp_path / "ref.csv")
    ref = (tmp_path / "ref.csv").read_bytes()
    exp = export_run(store, "r-x")
    assert exp.rows == n
    assert hashlib.sha256(exp.csv).hexdigest() == hashlib.sha256(ref).hexdigest()
    t, v = exp.arrays[("npu0-0", "util_pct")]
    assert t[-1] == 1_790_999_999.5 and v[-1] == 0.0  # SQLite may store -0.0 as 0.0; PG keeps it
    assert ("npu0-0", "temp_c") in exp.arrays and len(exp.arrays[("npu0-0", "temp_c")][0]) == len(t) - 1
    assert ("lm-rank0", "step_time_s") in exp.arrays


def test_a_cluster_runs_fast_export_keeps_each_chip_on_its_node(store, tmp_path):
    from tests.report.synth import write_cluster_run

    shape = write_cluster_run(store, "c-x", nodes=2, chips=2, hours=0.05)
    n = store.export_csv("c-x", tmp_path / "ref.csv")
    exp = export_run(store, "c-x")
    assert exp.rows == n and exp.csv == (tmp_path / "ref.csv").read_bytes()
    assert b"\r\n1790000000.0,node-01/npu0-1,util_pct," in exp.csv
    assert {k[:2] for k in exp.arrays if len(k) == 3} == {(n, d) for n in ("node-00", "node-01")
                                                          for d in ("host", "npu0-0", "npu0-1")}
    assert {k[0] for k in exp.arrays if len(k) == 2} == {"lm-rank0", "lm-rank1"}
    sql, mine = chip_stats(store, "c-x"), stats_from_arrays(exp.arrays)
    assert set(sql) == set(mine) == {(n, d) for n in ("node-00", "node-01") for d in ("npu0-0", "npu0-1")}
    assert {s.device for s in device_series(store, "c-x", None)} == set(shape.devices)


def test_stats_and_series_from_arrays_match_sql(tmp_path):
    with Store.open(tmp_path / "soak.db") as store:
        shape = write_run(store, "r-y", chips=4, hours=2.0, interval_s=10.0)
        exp = export_run(store, "r-y")
        sql = chip_stats(store, "r-y")
        mine = stats_from_arrays(exp.arrays)
        assert set(sql) == set(mine) == {(None, d) for d in shape.devices}
        for dev in sql:
            for key, value in sql[dev].items():
                assert mine[dev][key] == pytest.approx(value, rel=1e-9), (dev, key)
        bucket = auto_bucket_s(shape.start, shape.end, 100)
        assert bucket == 120.0
        by_sql = {(s.device, s.metric): s for s in device_series(store, "r-y", bucket)}
        by_np = {(s.device, s.metric): s for s in series_from_arrays(exp.arrays, bucket) if s.metric != "step_time_s"}
        assert set(by_sql) == set(by_np)
        for key, s in by_sql.items():
            assert s.ts == by_np[key].ts
            assert by_np[key].values == pytest.approx(s.values, rel=1e-9)
