"""What /metrics says for a given snapshot: contract names, None left out, stale dropped."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily

from exporters.collector import NPU_EXPORTER_LABELS, SoakCollector, make_registry
from soak.telemetry.records import DeviceSample, HostSample, ReaderStatus, Snapshot
from soak.telemetry.sampler import ReaderTotals

FIXTURES = Path(__file__).parents[1] / "fixtures" / "exporter"
GIB = 2**30

CHIP0 = DeviceSample(
    device="npu0-0", backend="npu", model="910B3", npu_id=0, chip_id=0, bus_id="0000:C1:00.0",
    health="OK", healthy=True, util_pct=95.0, temp_c=48.0, power_w=341.5,
    hbm_used_bytes=56 * GIB, hbm_total_bytes=64 * GIB, ecc_single_bit_errors=3, ecc_double_bit_errors=0,
    link_up=True, process_memory_bytes=53 * GIB,
)
# A3 chip 1: the tool prints "-" for power, so power_w is None and must be left out.
CHIP1 = DeviceSample(
    device="npu0-1", backend="npu", model="Ascend910", npu_id=0, chip_id=1, bus_id="0000:9E:00.0",
    health="Alarm", healthy=False, util_pct=0.0, temp_c=37.0, power_w=None,
    hbm_used_bytes=2876 * 2**20, hbm_total_bytes=64 * GIB,
)
GONE = DeviceSample(device="npu3-0", backend="npu", up=False, model="910B3", npu_id=3, chip_id=0,
                    bus_id="0000:82:00.0", error="vanished: missing from npu-smi info")

SNAP = Snapshot(
    ts=1_800_000_000.0, host="node1", devices=(CHIP0, CHIP1, GONE),
    host_sample=HostSample(mem_used_bytes=10 * GIB, mem_total_bytes=64 * GIB, workload_rss_bytes=3 * GIB),
    comm_timeouts={"hccl_plog:socket_timeout": 2, "torch_watchdog:collective": 1},
    readers=(ReaderStatus("npu-smi", True, 0.25), ReaderStatus("npu-smi-detail", False, 0.5, "timeout: x"),
             ReaderStatus("npu-smi-detail", True, 0.25)),
)
TOTALS = {"npu-smi": ReaderTotals("npu-smi", 10, 1, 0.25, 1_799_999_990.0, None),
          "hccn_tool": ReaderTotals("hccn_tool", 3, 3, 0.1, None, "missing")}


def scrape(collector: SoakCollector) -> str:
    return generate_latest(make_registry(collector)).decode()


def fresh(snap: Snapshot = SNAP, **kw: object) -> SoakCollector:
    return SoakCollector(lambda: snap, age_s=lambda: 1.0, reader_totals=lambda: TOTALS, **kw)  # type: ignore[arg-type]


LBL0 = 'bus_id="0000:C1:00.0",chip_id="0",device="npu0-0",model="910B3",npu_id="0"'
LBL1 = 'bus_id="0000:9E:00.0",chip_id="1",device="npu0-1",model="Ascend910",npu_id="0"'


def test_contract_series_for_a_fresh_snapshot() -> None:
    text = scrape(fresh())
    assert f"soak_device_utilization_ratio{{{LBL0}}} 0.95\n" in text
    assert f"soak_device_power_watts{{{LBL0}}} 341.5\n" in text
    assert ('soak_device_memory_used_bytes{bus_id="0000:C1:00.0",chip_id="0",device="npu0-0",kind="hbm",'
            'model="910B3",npu_id="0"} 6.0129542144e+10\n') in text
    assert f"soak_device_healthy{{{LBL0}}} 1.0\n" in text
    assert f"soak_device_healthy{{{LBL1}}} 0.0\n" in text
    assert f"soak_device_up{{{LBL0}}} 1.0\n" in text
    assert 'soak_device_up{bus_id="0000:82:00.0",chip_id="0",device="npu3-0",model="910B3",npu_id="3"} 0.0\n' in text
    assert 'soak_device_ecc_errors_total{bus_id="0000:C1:00.0",chip_id="0",device="npu0-0",model="910B3",npu_id="0",type="single"} 3.0\n' in text
    assert f"soak_device_link_up{{{LBL0}}} 1.0\n" in text
    assert 'soak_comm_timeouts_total{kind="socket_timeout",source="hccl_plog"} 2.0\n' in text
    assert 'soak_comm_timeouts_total{kind="collective",source="torch_watchdog"} 1.0\n' in text
    assert "soak_host_memory_used_bytes 1.073741824e+10\n" in text
    assert "soak_workload_rss_bytes 3.221225472e+09\n" in text
    assert "soak_exporter_snapshot_timestamp_seconds 1.8e+09\n" in text
    assert "soak_exporter_snapshot_stale 0.0\n" in text
    assert 'soak_reader_errors_total{reader="hccn_tool"} 3.0\n' in text
    assert 'soak_reader_duration_seconds{reader="npu-smi-detail"} 0.75\n' in text  # summed per tick
    assert 'soak_reader_last_success_timestamp_seconds{reader="npu-smi"} 1.79999999e+09\n' in text
    assert 'soak_reader_last_success_timestamp_seconds{reader="hccn_tool"}' not in text  # never succeeded


def test_none_values_are_left_out_never_nan_or_zero() -> None:
    text = scrape(fresh())
    assert f"soak_device_power_watts{{{LBL1}}}" not in text  # A3 chip 1 power "-"
    assert "NaN" not in text
    # a vanished chip keeps soak_device_up 0 and its identity, and nothing measured
    gone = [ln for ln in text.splitlines() if 'device="npu3-0"' in ln]
    assert {ln.split("{")[0] for ln in gone} == {"soak_device_up", "soak_device_info"}
    assert "soak_device_throttle_reasons" not in text  # no device has a value: no family


def test_stale_snapshot_drops_device_series_and_says_stale() -> None:
    stale = SoakCollector(lambda: SNAP, age_s=lambda: 120.0, reader_totals=lambda: TOTALS, stale_after_s=30.0)
    text = scrape(stale)
    assert "soak_exporter_snapshot_stale 1.0\n" in text
    assert "soak_exporter_snapshot_age_seconds 120.0\n" in text
    assert "soak_device_" not in text and "soak_host_" not in text and "soak_comm_" not in text
    assert 'soak_reader_errors_total{reader="npu-smi"} 1.0\n' in text  # self-metrics still say why
    nothing = scrape(SoakCollector(lambda: None))
    assert nothing.strip().splitlines()[-1] == "soak_exporter_snapshot_stale 1.0"


def test_age_from_a_scaled_clock_when_no_age_callable() -> None:
    collector = SoakCollector(lambda: SNAP, clock=lambda: SNAP.ts + 5.0, stale_after_s=30.0)
    assert "soak_exporter_snapshot_stale 0.0\n" in scrape(collector)
    collector = SoakCollector(lambda: SNAP, clock=lambda: SNAP.ts + 500.0, stale_after_s=30.0)
    assert "soak_exporter_snapshot_stale 1.0\n" in scrape(collector)


def test_npu_exporter_compat_names_and_labels_match_huawei_exposition() -> None:
    sample = (FIXTURES / "npu_exporter_exposition_sample.txt").read_text(encoding="utf-8")
    line = next(ln for ln in sample.splitlines() if ln.startswith("npu_chip_info_aicore_current_freq{"))
    huawei_labels = tuple(re.findall(r'(\w+)="', line))
    assert huawei_labels == NPU_EXPORTER_LABELS
    text = scrape(fresh(compat=("npu-exporter",)))
    lbl = 'container_name="",id="0",model_name="910B3-Ascend-V1",namespace="",pcie_bus_info="0000:C1:00.0",pod_name="",vdie_id=""'
    assert f"npu_chip_info_utilization{{{lbl}}} 95.0\n" in text
    assert f"npu_chip_info_hbm_used_memory{{{lbl}}} 57344.0\n" in text
    assert f"npu_chip_info_temperature{{{lbl}}} 48.0\n" in text
    assert f"npu_chip_info_power{{{lbl}}} 341.5\n" in text
    assert f"npu_chip_info_health_status{{{lbl}}} 1.0\n" in text
    assert 'npu_chip_info_health_status{container_name="",id="1"' in text
    assert "npu_chip_info_" not in scrape(fresh())  # only on request


def test_extra_collectors_are_appended() -> None:
    class RunMetrics:
        def collect(self):
            g = GaugeMetricFamily("soak_run_elapsed_seconds", "Run time so far", labels=["run_id"])
            g.add_metric(["r1"], 42.0)
            yield g

    text = scrape(fresh(extra_collectors=[RunMetrics()]))
    assert 'soak_run_elapsed_seconds{run_id="r1"} 42.0\n' in text


def test_unknown_compat_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown compat"):
        SoakCollector(lambda: None, compat=("dcgm",))


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_exposition_passes_promtool_check_metrics() -> None:
    text = scrape(fresh(compat=("npu-exporter",)))
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "" and out.stderr.strip() == ""


def test_exposition_is_byte_identical_to_the_reviewed_golden_text() -> None:
    golden = (FIXTURES / "golden_exposition.txt").read_text(encoding="utf-8")
    assert scrape(fresh(compat=("npu-exporter",))) == golden
