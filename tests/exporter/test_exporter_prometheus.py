"""A real Prometheus scrapes `soak exporter` (simulated fleet) and answers queries with its values."""

from __future__ import annotations

import json
import shutil
import urllib.parse
from pathlib import Path

import pytest
from exporter_helpers import free_port, http_get, soak_exporter_argv, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="Debian prometheus not installed"),
]


def query(base: str, expr: str) -> list[dict]:
    body = json.loads(http_get(f"{base}/api/v1/query?query={urllib.parse.quote(expr)}"))
    assert body["status"] == "success"
    return body["data"]["result"]


def test_prometheus_reads_the_simulated_fleet_through_soak_exporter(tmp_path: Path, spawn) -> None:
    exporter_port, prom_port = free_port(), free_port()
    spawn(soak_exporter_argv(
        exporter_port, "--backend", "sim", "--sim-chips", "4", "--sim-family", "910_93",
        "--sim-scenario", "healthy,health_alarm:at_h=0,chips=3,comm_timeouts:rate_per_h=36000",
        "--interval", "0.5", "--detail-interval", "0",
    ))
    wait_for(lambda: http_get(f"http://127.0.0.1:{exporter_port}/metrics"), 30, "exporter up")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: soak\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{exporter_port}']\n",
        encoding="utf-8",
    )
    spawn(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
           f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"])
    base = f"http://127.0.0.1:{prom_port}"

    up = wait_for(lambda: len(query(base, "soak_device_up == 1")) == 4 and query(base, "soak_device_up"),
                  30, "four chips up in Prometheus")
    assert {r["metric"]["device"] for r in up} == {"npu0-0", "npu0-1", "npu1-0", "npu1-1"}
    assert {r["metric"]["job"] for r in up} == {"soak"}

    totals = query(base, 'soak_device_memory_total_bytes{kind="hbm"}')
    assert {float(r["value"][1]) for r in totals} == {64 * 2**30}
    util = query(base, "soak_device_utilization_ratio")
    assert len(util) == 4 and all(0.9 <= float(r["value"][1]) <= 0.98 for r in util)
    # A3: power only on chip 0 of each NPU id (chip 1 prints "-": no series at all)
    power = query(base, "soak_device_power_watts")
    assert sorted(r["metric"]["device"] for r in power) == ["npu0-0", "npu1-0"]
    healthy = {r["metric"]["device"]: float(r["value"][1]) for r in query(base, "soak_device_healthy")}
    assert healthy == {"npu0-0": 1.0, "npu0-1": 1.0, "npu1-0": 1.0, "npu1-1": 0.0}
    comm = wait_for(lambda: query(base, 'sum(soak_comm_timeouts_total{source="hccl_plog"}) > 0'),
                    30, "plog timeouts counted")
    assert float(comm[0]["value"][1]) > 0
