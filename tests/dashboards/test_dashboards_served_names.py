"""The dashboards and alert rules name only metrics a scrape of soak actually holds.

The names come from the collectors (``exporters.collector.METRIC_NAMES``, the run collector's
``METRIC_NAMES``); here a real /metrics server is scraped with every field of a device, the
host and a run filled in, and the served names are compared with those lists and with every
name the dashboards and rules read.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from exporters.collector import METRIC_NAMES, SoakCollector, make_registry
from exporters.readings import ReadingTracker
from exporters.server import serve
from soak import dashboards as d
from soak.analysis.numerics import NumericCounts
from soak.daemon import metrics as run_metrics
from soak.daemon.metrics import RunCollector
from soak.daemon.status import LinkTest, OpenFinding, RankStatus, ReliabilitySoFar, RunStatus
from soak.telemetry.records import DeviceSample, HostSample, ReaderStatus, Snapshot

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"

EVERY_FIELD = DeviceSample(
    device="npu0-0", backend="npu", up=True, model="910B3", npu_id=0, chip_id=0, bus_id="0000:C1:00.0",
    serial="S0", health="OK", healthy=True, util_pct=50.0, temp_c=40.0, power_w=90.0,
    hbm_used_bytes=1, hbm_total_bytes=2, ddr_used_bytes=1, ddr_total_bytes=2, ecc_single_bit_errors=0,
    ecc_double_bit_errors=0, link_up=True, throttle_reasons=0, process_memory_bytes=1, xid_errors=0,
    ecc_single_bit_isolated_pages=0, ecc_double_bit_isolated_pages=0, link_up_count=2, fault_codes=("80E3A201",),
    fault_texts=("",), row_remap_pending=False, row_remap_failed=False, retired_pages_pending=False, xid_last=79,
)
SNAPSHOT = Snapshot(
    ts=1.0, host="node", devices=(EVERY_FIELD,),
    host_sample=HostSample(mem_used_bytes=1, mem_total_bytes=2, workload_rss_bytes=1, disk_free_bytes=1),
    comm_timeouts={"hccl_plog:socket_timeout": 1}, readers=(ReaderStatus("npu-smi", True, 0.01),),
)
RUN = RunStatus(run_id="r", workload="lm", verdict="running", elapsed_s=1.0, remaining_s=1.0, restarts=0,
                ranks=(RankStatus("lm", 0, 10, 0.1, 100.0, 1.0, 0.05),), findings={("hang", "critical"): 1},
                passing=True, clock_offset_s=0.1,  # the judging node of a cluster run: every run family served
                open_findings=(OpenFinding("hang", "fail", None, "npu0-0", "util_pct", "hang.stuck"),),
                criteria={"coverage": True}, link_test=LinkTest(1.0, {"node-1": 10.0}),
                nodes_by_status={"running": 3},
                reliability=ReliabilitySoFar(0.97, {"checkpoint": 1.0}, {"crash": 0}, 1.0, 0.43),
                numeric=NumericCounts({(None, "npu0-0"): 12}, {(None, "npu0-0", "gemm"): 1}))


class _Totals:
    errors = 0
    last_success_ts = 1.0


def served_samples(snapshot: Snapshot, run: RunStatus, **collector: object) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample a real /metrics serves for ``snapshot`` and ``run``."""
    c = SoakCollector(lambda: snapshot, age_s=lambda: 0.0, extra_collectors=[RunCollector(lambda: run)],
                      **collector)  # type: ignore[arg-type]
    server = serve(make_registry(c), "127.0.0.1:0")
    try:
        with urllib.request.urlopen(server.url, timeout=10) as resp:
            text = resp.read().decode()
    finally:
        server.stop()
    return [(s.name, dict(s.labels), s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]


def _served_names() -> set[str]:
    tracker = ReadingTracker()  # as the pipeline wires it: fed every tick
    tracker(SNAPSHOT)
    return {name for name, _, _ in served_samples(SNAPSHOT, RUN, reader_totals=lambda: {"npu-smi": _Totals()},
                                                  tracker=tracker)}


def test_declared_names_are_the_names_served() -> None:
    assert _served_names() == METRIC_NAMES | run_metrics.METRIC_NAMES
    assert d.DEVICE_METRICS == METRIC_NAMES and d.RUN_METRICS == run_metrics.METRIC_NAMES


def test_dashboards_and_alert_rules_read_only_served_names() -> None:
    assert d.lint(DASHBOARDS, known=_served_names() | d.PROMETHEUS_METRICS) == []
