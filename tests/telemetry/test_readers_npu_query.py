"""npu-smi key/value views (``-t usages/common/temp/power/health/ecc/board/memory``, ``-m``,
``-l``) and the reader methods, fed with recorded real output."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak.errors import InputError, ToolError
from soak.telemetry import npu_query as q
from soak.telemetry.npu_smi import NpuSmiReader, to_device_samples
from soak.telemetry.npu_table import parse_info_table
from soak.telemetry.runner import ReplayRunner

NPU = Path(__file__).resolve().parents[1] / "fixtures" / "npu"
F030 = "030_910A_detail_queries_and_hccn_tool_before.txt"
F031 = "031_910A_health_Alarm_multiline_and_errors_after.txt"
F032 = "032_910B4_info_m_Mcu_rows_and_info_l.txt"
F033 = "033_910B_usages_board_temp_power_list_telegraf_fixture.txt"
F034 = "034_910_doc_ecc_board_usages_health_stat.txt"
F035 = "035_910_t_common_doc.txt"
F036 = "036_gpustack_docstring_examples_m_common_usages_board_310P_910.txt"


def section(name: str, marker: str) -> str:
    """The output printed after the first line containing ``marker``, up to the next command."""
    lines = (NPU / name).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if marker in line) + 1
    out = []
    for line in lines[start:]:
        if line.strip().startswith(("$", "/", "##", "```", "lspci", "cat ", "pip ")):
            break
        out.append(line)
    return "\n".join(out)


# ----------------------------------------------------------------------------- usages


def test_usages_910a_tab_indented_byte_exact():
    (u,) = q.parse_usages(section(F030, "-i 0 -t usages"))
    assert u == q.UsageInfo(
        npu_id=0,
        chip_id=0,
        ddr_capacity_mb=13553,
        ddr_usage_pct=6.0,
        ddr_hugepages_total_pages=0,
        ddr_hugepages_usage_pct=0.0,
        hbm_capacity_mb=31129,
        hbm_usage_pct=0.0,
        aicore_usage_pct=0.0,
        aicpu_usage_pct=0.0,
        ctrlcpu_usage_pct=0.0,
        ddr_bandwidth_usage_pct=0.0,
        hbm_bandwidth_usage_pct=0.0,
    )


def test_usages_910b_25x_keys_aivector_npu_utilization_aicube():
    (u,) = q.parse_usages(section(F033, "-t usages"))
    assert (u.npu_id, u.chip_id, u.hbm_capacity_mb, u.hbm_usage_pct) == (0, 0, 65536, 5.0)
    assert (u.aivector_usage_pct, u.npu_utilization_pct, u.aicube_usage_pct) == (0.0, 0.0, 0.0)
    assert u.ctrlcpu_usage_pct == 6.0
    assert u.vectorcore_usage_pct is None and u.extras == ()


def test_usages_310p_vectorcore_and_dvpp_kept_as_extras():
    (u,) = q.parse_usages(section(F036, "-t usages -i 1"))
    assert (u.npu_id, u.ddr_capacity_mb, u.ddr_bandwidth_usage_pct) == (1, 21534, 51.0)
    assert u.vectorcore_usage_pct == 0.0 and u.hbm_capacity_mb is None
    assert [k for k, _ in u.extras] == [
        "DVPP VDEC Usage Rate(%)",
        "DVPP VPC Usage Rate(%)",
        "DVPP VENC Usage Rate(%)",
        "DVPP JPEGE Usage Rate(%)",
        "DVPP JPEGD Usage Rate(%)",
    ]


def test_usages_two_chips_chip_id_after_values_and_vnpu_rate_left_out():
    # A3 card: two chips, "Chip ID" after each chip's values; chip 1 in vNPU mode skips the
    # Aicore rate entirely (not printed as 0).
    text = (
        "\tNPU ID                         : 3\n\tChip Count                     : 2\n\n"
        "\tHBM Capacity(MB)               : 65536\n\tAicore Usage Rate(%)           : 87\n"
        "\tChip ID                        : 0\n\n"
        "\tHBM Capacity(MB)               : 65536\n\tAicpu Usage Rate(%)            : NA\n"
        "\tChip ID                        : 1\n"
    )
    a, b = q.parse_usages(text)
    assert (a.npu_id, a.chip_id, a.aicore_usage_pct) == (3, 0, 87.0)
    assert (b.npu_id, b.chip_id, b.aicore_usage_pct, b.aicpu_usage_pct) == (3, 1, None, None)


# ----------------------------------------------------------------------------- common/temp/power


def test_common_910_chip_id_before_values_without_blank_line():
    (c,) = q.parse_common(section(F035, "ColdFusion"))
    assert c == q.CommonInfo(
        npu_id=0,
        chip_id=0,
        memory_usage_pct=6.0,
        hbm_usage_pct=0.0,
        aicore_usage_pct=0.0,
        aicore_freq_mhz=900,
        aicore_cur_freq_mhz=900,
        aicore_count=30,
        temp_c=41.0,
        power_w=71.7,
    )


def test_common_310p_power_only_on_the_mcu_block():
    (c,) = q.parse_common(section(F036, "-t common -i 1"))
    assert (c.npu_id, c.chip_id, c.temp_c, c.aicore_cur_freq_mhz) == (1, 0, 43.0, 960)
    assert c.power_w is None
    assert (c.mcu_temp_c, c.mcu_power_w) == (41.0, 13.4)


def test_temp_space_before_unit_and_mcu_sensors_after_values():
    (t,) = q.parse_temp(section(F033, "-t temp"))
    assert t == q.TempInfo(0, 0, 39.0, sensors=(("LM75A_TE", 36.0), ("LM75B_TE", 36.0)))


def test_power_910b():
    assert q.parse_power(section(F033, "-t power")) == (q.PowerInfo(0, 0, 103.5),)


# ----------------------------------------------------------------------------- health


def test_health_alarm_with_three_codes_and_multiline_information():
    h = q.parse_health(section(F031, "-c 0 -t health"), npu_id=0, chip_id=0)
    assert h.health == "Alarm" and h.healthy is False
    assert h.error_codes == ("A4025021", "8C03A000", "8C084E00")
    # the codes and their texts reach the sample: the device-faults criterion judges them
    assert h.sample_fields()["fault_codes"] == h.error_codes
    assert h.sample_fields()["fault_texts"] == h.error_info
    assert h.error_info == (
        "ascend_monitor adda heart beat lost error",
        "node type=process-manager, sensor type=General Software, event state=The process start failed or exit abnormally",
        "node type=adda, sensor type=Heartbeat Sensor, event state=Heartbeat Lost.",
    )


def test_health_ok_na_codes_and_leading_space_variant():
    ok = q.parse_health(section(F030, "-c 0 -t health"))
    assert (ok.health, ok.error_codes, ok.error_info, ok.healthy) == ("OK", (), (), True)
    # the doc copy prints one extra space before every key
    lines = (NPU / F034).read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("         Health Status"))
    spaced = q.parse_health("\n".join(lines[start : start + 3]), npu_id=1, chip_id=0)
    assert spaced == q.HealthInfo(1, 0, "OK", (), ())


def test_health_without_status_line_is_unreadable():
    with pytest.raises(InputError, match="no 'Health Status' line"):
        q.parse_health("\tError Code : NA\n", source="h.txt")


# ----------------------------------------------------------------------------- ecc / memory / board


def test_ecc_40_char_keys():
    (e,) = q.parse_ecc(section(F034, "-i 0 -t ecc"))
    assert (e.npu_id, e.chip_id) == (0, 0)
    assert e.hbm_single_bit_errors == 0 and e.ddr_double_bit_isolated_pages == 0
    assert e.extras == ()
    assert e.sample_fields() == {"ecc_single_bit_errors": 0, "ecc_double_bit_errors": 0,
                                 "ecc_single_bit_isolated_pages": 0, "ecc_double_bit_isolated_pages": 0}


def test_ecc_nonzero_counts_are_summed_for_the_sample():
    text = (
        "\tNPU ID                                   : 2\n\tChip Count                               : 1\n\n"
        "\tDDR Single Bit Error Count               : 1\n\tHBM Single Bit Error Count               : 4\n"
        "\tHBM Double Bit Error Count               : 1\n\tChip ID                                  : 0\n"
    )
    (e,) = q.parse_ecc(text)
    assert e.sample_fields() == {"ecc_single_bit_errors": 5, "ecc_double_bit_errors": 1}
    assert e.ddr_double_bit_errors is None  # not printed is unknown, not 0


def test_memory_view_built_from_the_printf_spec():
    # No capture of -t memory exists; keys and order follow the CANN print source (910B).
    text = (
        "\tNPU ID                         : 0\n\tChip Count                     : 1\n\n"
        "\tDDR Capacity(MB)               : 0\n\tDDR Clock Speed(MHz)           : 0\n"
        "\tHBM Capacity(MB)               : 65536\n\tHBM Clock Speed(MHz)           : 1600\n"
        "\tHBM Temperature(C)             : 38\n\tHBM Manufacturer ID            : 0x1\n"
        "\tChip ID                        : 0\n"
    )
    (m,) = q.parse_memory(text)
    assert (m.hbm_capacity_mb, m.hbm_clock_mhz, m.hbm_temp_c, m.hbm_manufacturer_id) == (
        65536,
        1600,
        38.0,
        "0x1",
    )
    assert (m.ddr_capacity_mb, m.chip_id, m.capacity_mb) == (0, 0, None)


def test_board_card_910b_with_serial_and_model_na():
    b = q.parse_board(section(F033, "-t board"))
    assert (b.npu_id, b.chip_id, b.product_name, b.model, b.serial_number) == (
        0,
        None,
        "IT21HMDC_Bin5",
        None,
        "1025C9048791",
    )
    assert (b.software_version, b.firmware_version, b.pci_device_id, b.chip_count) == (
        "25.5.1",
        "7.8.0.6.201",
        "0xD802",
        1,
    )
    assert b.sample_fields() == {"serial": "1025C9048791"}


def test_board_chip_910a_die_ids_and_pcb_na():
    b = q.parse_board(section(F030, "-c 0 -t board"))
    assert (b.npu_id, b.chip_id, b.chip_type, b.chip_name, b.chip_version) == (
        0,
        0,
        "Ascend",
        "910A",
        "V1",
    )
    assert b.pcb_id is None and b.board_id == "0x02"
    assert b.vdie_id == "42C711D4 20B03704 4A10C8D4 14CC040A D2102003"
    assert b.pcie_bus_info == "0000:61:00.0" and b.chip_position_id == 0


def test_board_chip_310p_single_die_id():
    b = q.parse_board(section(F036, "-t board -i 1 -c 0"))
    assert (b.board_id, b.die_id, b.vdie_id) == (
        "0x64",
        "409921D4 2140A100 E54BDDD4 07CC040A 9B00301F",
        None,
    )


# ----------------------------------------------------------------------------- -m / -l


def test_mapping_910b4_with_mcu_rows_and_trailing_spaces():
    rows = q.parse_mapping(section(F032, "info -m"))
    assert len(rows) == 16
    assert rows[0] == q.ChipMapping(0, 0, 0, "Ascend 910B4")
    assert rows[1] == q.ChipMapping(0, 1, None, "Mcu") and rows[1].is_mcu
    assert [r.logic_id for r in rows if not r.is_mcu] == list(range(8))


def test_mapping_910a_tabs():
    rows = q.parse_mapping(section(F030, "info -m"))
    assert rows[7] == q.ChipMapping(7, 0, 7, "Ascend 910A") and len(rows) == 8


def test_card_list_server_without_product_and_serial():
    cards = q.parse_card_list(section(F032, "info -l"))
    assert cards.total_count == 8 and len(cards.cards) == 8
    assert cards.cards[5] == q.CardEntry(npu_id=5, chip_count=1)


def test_card_list_310_card_count_with_serials():
    text = (
        "\tCard Count                     : 1\n\n\tNPU ID                         : 2048\n"
        "\tProduct Name                   : Atlas 300I Inference Card\n"
        "\tSerial Number                  : 033GJG10K8000032\n\tChip Count                     : 4\n"
    )
    cards = q.parse_card_list(text)
    assert cards.total_count == 1
    assert cards.cards == (q.CardEntry(2048, 4, "Atlas 300I Inference Card", "033GJG10K8000032"),)


@pytest.mark.parametrize(
    "parse", [q.parse_usages, q.parse_ecc, q.parse_board, q.parse_mapping, q.parse_card_list]
)
def test_key_value_parsers_reject_non_output(parse):
    with pytest.raises(InputError):
        parse("There is no NPU card on this server.", source="x")
    with pytest.raises(InputError):
        parse("", source="x")


# ----------------------------------------------------------------------------- reader


def _reader():
    table = (NPU / "015_910B4_8card_idle_24.1.rc3.txt").read_text()
    return ReplayRunner(
        {
            "info": table,
            "info -t usages -i 0": section(F033, "-t usages"),
            "info -t power -i 0": section(F033, "-t power"),
            "info -t temp -i 0": section(F033, "-t temp"),
            "info -t board -i 0": section(F033, "-t board"),
            "info -t health -i 0 -c 0": section(F031, "-c 0 -t health"),
            "info -t ecc -i 0": section(F034, "-i 0 -t ecc"),
            "info -t common -i 0": section(F035, "ColdFusion"),
            "info -t memory -i 0": "\tHBM Capacity(MB) : 65536\n\tChip ID : 0\n",
            "info -m": section(F032, "info -m"),
            "info -l": section(F032, "info -l"),
            "info -t board -i 1": section(F031, "-i 0 -t board"),
            "info -t usages -i 9": "garbage without keys",
        }
    )


def test_reader_methods_call_the_documented_command_lines():
    runner = _reader()
    r = NpuSmiReader("/usr/local/bin/npu-smi", runner=runner)
    assert len(r.info().chips) == 8
    assert r.usages(0)[0].hbm_usage_pct == 5.0
    assert r.power(0)[0].power_w == 103.5
    assert r.temp(0)[0].temp_c == 39.0
    assert r.board(0).serial_number == "1025C9048791"
    assert r.health(0, 0).error_codes == ("A4025021", "8C03A000", "8C084E00")
    assert r.health(0, 0).npu_id == 0
    assert r.ecc(0)[0].hbm_double_bit_errors == 0
    assert r.common(0)[0].aicore_freq_mhz == 900
    assert r.memory(0)[0].hbm_capacity_mb == 65536
    assert len(r.mapping()) == 16
    assert r.card_list().total_count == 8
    assert runner.calls[1] == ("/usr/local/bin/npu-smi", "info", "-t", "usages", "-i", "0")
    assert runner.calls[5] == (
        "/usr/local/bin/npu-smi",
        "info",
        "-t",
        "health",
        "-i",
        "0",
        "-c",
        "0",
    )


def test_reader_vanished_card_is_an_error_text():
    with pytest.raises(ToolError) as info:
        NpuSmiReader(runner=_reader()).board(1)
    assert info.value.kind == "error_text" and "Invalid card id." in str(info.value)


def test_reader_garbage_output_is_a_tool_error_not_a_user_error():
    with pytest.raises(ToolError) as info:
        NpuSmiReader(runner=_reader()).usages(9)
    assert info.value.kind == "garbage"


def test_reader_dcmi_failure_on_info():
    runner = ReplayRunner({"info": "dcmi module initialize failed. ret is -8005\n"})
    with pytest.raises(ToolError) as info:
        NpuSmiReader(runner=runner).info()
    assert info.value.kind == "error_text"


def test_query_details_fill_device_samples():
    r = NpuSmiReader(runner=_reader())
    table = parse_info_table((NPU / "015_910B4_8card_idle_24.1.rc3.txt").read_text())
    details = q.sample_fields(*r.usages(0), *r.ecc(0), r.health(0, 0))
    samples = to_device_samples(table, details)
    s0 = samples[0]
    assert (s0.aicpu_util_pct, s0.mem_bw_util_pct) == (0.0, 0.0)
    assert (s0.ecc_single_bit_errors, s0.ecc_double_bit_errors) == (0, 0)
    assert (s0.health, s0.healthy) == ("Alarm", False)  # the detailed view overrides the table
    assert samples[1].health == "OK" and samples[1].ecc_single_bit_errors is None


def test_only_hex_error_codes_are_kept():
    # the recorded alarm's block with its code line replaced by one that holds what is no code
    text = section(F031, "-c 0 -t health")
    line = next(ln for ln in text.splitlines() if "Error Code" in ln)
    hostile = text.replace(line, "\tError Code                     : A4025021 [click](http://evil.example) "
                                 "![x](http://evil.example/p.png) 8c03a000,0x80E01801 ZZZ 1234567890")
    h = q.parse_health(hostile, npu_id=0, chip_id=0)
    assert h.error_codes == ("A4025021", "8c03a000", "0x80E01801")
