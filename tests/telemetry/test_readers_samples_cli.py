"""Table -> DeviceSample mapping, and the ``soak parse npu-smi`` command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from soak.cli import main
from soak.telemetry.npu_smi import MIB, to_device_samples
from soak.telemetry.npu_table import parse_info_table

NPU = Path(__file__).resolve().parents[1] / "fixtures" / "npu"


def samples(name: str):
    return {s.device: s for s in to_device_samples(parse_info_table((NPU / name).read_text()))}


def test_910b3_hbm_bytes_processes_and_no_ddr():
    s = samples("001_910B3_8card_procs.txt")["npu0-0"]
    assert (s.backend, s.model, s.npu_id, s.chip_id, s.bus_id) == (
        "npu",
        "910B3",
        0,
        0,
        "0000:C1:00.0",
    )
    assert (s.hbm_used_bytes, s.hbm_total_bytes) == (60056 * MIB, 65536 * MIB)
    assert (s.ddr_used_bytes, s.ddr_total_bytes) == (None, None)  # 910B prints a hard 0 / 0
    assert s.process_memory_bytes == 56683 * MIB
    assert (s.util_pct, s.temp_c, s.power_w, s.health, s.healthy) == (0.0, 32.0, 96.7, "OK", True)


def test_910prob_memory_column_is_ddr_next_to_hbm():
    s = samples("004_910ProB_8card_idle.txt")["npu0-0"]
    assert (s.ddr_used_bytes, s.ddr_total_bytes) == (2387 * MIB, 13553 * MIB)
    assert (s.hbm_used_bytes, s.hbm_total_bytes) == (18 * MIB, 32768 * MIB)
    assert s.process_memory_bytes == 0  # section printed, no processes


def test_a3_keys_and_process_memory_per_chip():
    by = samples("008_910_93_A3_2npu_4chip_partial_fixture.txt")
    assert sorted(by) == ["npu0-0", "npu0-1", "npu1-0", "npu1-1"]
    assert by["npu0-1"].power_w is None
    assert by["npu1-1"].process_memory_bytes == 7746 * MIB
    assert by["npu1-0"].process_memory_bytes == 0


def test_310p_without_hbm_or_process_section():
    s = samples("011_310P3_2card_npuid4_5.txt")["npu5-0"]
    assert (s.hbm_used_bytes, s.hbm_total_bytes) == (None, None)
    assert (s.ddr_used_bytes, s.ddr_total_bytes) == (1849 * MIB, 21525 * MIB)
    assert s.power_w is None and s.process_memory_bytes is None


def test_alarm_health_is_unhealthy_and_details_override():
    text = (NPU / "018_910B4_1card_npuid5_25.5.2_doc.txt").read_text().replace("| OK  ", "| Alarm")
    table = parse_info_table(text)
    (s,) = to_device_samples(table, {(5, 0): {"ecc_double_bit_errors": 2, "serial": "X1"}})
    assert (s.device, s.health, s.healthy) == ("npu5-0", "Alarm", False)
    assert (s.ecc_double_bit_errors, s.serial) == (2, "X1")


# ----------------------------------------------------------------------------- CLI


def test_parse_npu_smi_json_contract(capsys):
    assert (
        main(["parse", "npu-smi", str(NPU / "024_310P3_atlas300IDuo_1card_npuid1792_24.1.rc2.txt")])
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == "24.1.rc2" and doc["processes"] == []
    assert doc["chips"][1] == {
        "npu_id": 1792,
        "chip_id": 1,
        "phy_id": None,
        "device_id": 1,
        "name": "310P3",
        "health": "OK",
        "bus_id": "0000:07:00.0",
        "power_w": None,
        "temp_c": 36,
        "aicore_util_pct": 0,
        "hugepages_used": 0,
        "hugepages_total": 0,
        "memory_used_mb": 1041,
        "memory_total_mb": 43693,
        "hbm_used_mb": None,
        "hbm_total_mb": None,
    }


def test_parse_npu_smi_table_format_prints_na(capsys):
    assert (
        main(
            [
                "parse",
                "npu-smi",
                "--format",
                "table",
                str(NPU / "008_910_93_A3_2npu_4chip_partial_fixture.txt"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "N/A" in out and "10568/65536" in out and "990711" in out


def test_parse_npu_smi_reads_stdin():
    text = (NPU / "016_910B4_4card_npuid4-7_procs_23.0.6.txt").read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "soak", "parse", "npu-smi", "-"],
        input=text,
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert [c["npu_id"] for c in json.loads(proc.stdout)["chips"]] == [4, 5, 6, 7]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.txt", "missing.txt: no such file"),
        (lambda d: d, "is a directory"),
        (
            lambda d: _write(d / "garbage.bin", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"),
            "binary data",
        ),
        (lambda d: _write(d / "latin1.txt", "Temp\xe9rature".encode("latin-1")), "not UTF-8 text"),
        (
            lambda d: _write(d / "err.txt", b"dcmi module initialize failed. ret is -8005\n"),
            "no npu-smi info table found",
        ),
        (lambda d: _write(d / "empty.txt", b""), "empty"),
    ],
)
def test_unreadable_input_exits_2_with_one_line(tmp_path, capsys, make, message):
    path = make(tmp_path)
    assert main(["parse", "npu-smi", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("soak: error: ")


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_parse_query_view_health(tmp_path, capsys):
    path = _write(
        tmp_path / "health.txt",
        b"\tHealth Status                  : Alarm\n\tError Code                     : A4025021\n"
        b"\tError Information              : ascend_monitor adda heart beat lost error\n",
    )
    assert main(["parse", "npu-smi-query", "--view", "health", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["health"] == "Alarm" and doc["error_codes"] == ["A4025021"]


def test_parse_query_view_mapping(capsys):
    path = NPU / "030_910A_detail_queries_and_hccn_tool_before.txt"
    assert main(["parse", "npu-smi-query", "--view", "mapping", str(path)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[3] == {"npu_id": 3, "chip_id": 0, "logic_id": 3, "chip_name": "Ascend 910A"}


@pytest.mark.parametrize(
    ("word", "healthy"), [("OK", True), ("Warning", False), ("Critical", False), ("UNKNOWN", None)]
)
def test_health_words_map_to_healthy(word, healthy):
    text = (
        (NPU / "018_910B4_1card_npuid5_25.5.2_doc.txt")
        .read_text()
        .replace("| OK      ", f"| {word:<8}")
    )
    table = parse_info_table(text)
    assert table.chips[0].health == word
    assert to_device_samples(table)[0].healthy is healthy
