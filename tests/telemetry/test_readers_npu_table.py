"""``npu-smi info`` tables: every recorded layout, exact values.

Fixtures are real outputs (see tests/fixtures/npu/INDEX.md); expected values were read off
the text by hand, not produced by the parser.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from soak.errors import InputError
from soak.telemetry.npu_table import CHIP_KEYS, PROCESS_KEYS, parse_info_table

NPU = Path(__file__).resolve().parents[1] / "fixtures" / "npu"


def load(name: str):
    return parse_info_table((NPU / name).read_text(), source=name)


def chip(npu, chip_id, name, health, bus, power, temp, ai, hp, mem, hbm, phy=None, dev=None):
    """Expected contract dict; hp/mem/hbm are (used, total) or None for a missing column."""
    hp = hp or (None, None)
    mem = mem or (None, None)
    hbm = hbm or (None, None)
    return {
        "npu_id": npu,
        "chip_id": chip_id,
        "phy_id": phy,
        "device_id": dev,
        "name": name,
        "health": health,
        "bus_id": bus,
        "power_w": power,
        "temp_c": temp,
        "aicore_util_pct": ai,
        "hugepages_used": hp[0],
        "hugepages_total": hp[1],
        "memory_used_mb": mem[0],
        "memory_total_mb": mem[1],
        "hbm_used_mb": hbm[0],
        "hbm_total_mb": hbm[1],
    }


def proc(npu, chip_id, pid, name, mb):
    return {"npu_id": npu, "chip_id": chip_id, "pid": pid, "name": name, "memory_mb": mb}


def chips_json(table):
    return table.to_json()["chips"]


# file -> (version, number of chips, number of processes, process section printed)
COUNTS = {
    "001_910B3_8card_procs.txt": ("25.3.rc1", 8, 8, True),
    "003_910B3_8card_mixed_idle.txt": ("25.2.0", 8, 1, True),
    "004_910ProB_8card_idle.txt": ("24.1.0", 8, 0, True),
    "006_910B2C_2card_proc_trailing_space.txt": ("23.0.2.1", 2, 1, True),
    "008_910_93_A3_2npu_4chip_partial_fixture.txt": ("25.2.0", 4, 1, True),
    "009_310B1_devkit.txt": ("23.0.rc3", 1, 0, False),
    "010_310B4_devkit.txt": ("23.0.rc3", 1, 0, False),
    "011_310P3_2card_npuid4_5.txt": ("25.5.1", 2, 0, False),
    "013_910A_4card_npusmi1.9.3_fw21.0.rc1.txt": ("21.0.rc1", 4, 0, False),
    "014_910x_1card_npusmi23.0.2_vllm_doc.txt": ("23.0.2", 1, 0, False),
    "015_910B4_8card_idle_24.1.rc3.txt": ("24.1.rc3", 8, 0, True),
    "016_910B4_4card_npuid4-7_procs_23.0.6.txt": ("23.0.6", 4, 4, True),
    "018_910B4_1card_npuid5_25.5.2_doc.txt": ("25.5.2", 1, 0, True),
    "019_310P3_2card_modelzoo_template.txt": (None, 2, 0, False),
    "020_310_2card_npuid112_128_EDITED_template.txt": (None, 2, 0, False),
    "022_310_atlas200dk_npusmi21.0.3.1.txt": ("21.0.3.1", 1, 0, False),
    "024_310P3_atlas300IDuo_1card_npuid1792_24.1.rc2.txt": ("24.1.rc2", 2, 0, True),
}


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_counts_version_and_keys_of_every_table(name):
    version, n_chips, n_procs, has_procs = COUNTS[name]
    table = load(name)
    assert table.version == version
    assert len(table.chips) == n_chips
    assert len(table.processes) == n_procs
    assert table.has_process_section is has_procs
    doc = table.to_json()
    assert list(doc) == ["version", "chips", "processes"]
    assert all(tuple(c) == CHIP_KEYS for c in doc["chips"])
    assert all(tuple(p) == PROCESS_KEYS for p in doc["processes"])


def test_every_table_fixture_is_covered():
    tables = {p.name for p in NPU.glob("0[0-2][0-9]_*.txt")}
    assert tables == set(COUNTS)


def test_910b3_with_processes_five_digit_hbm_touching_slash():
    t = load("001_910B3_8card_procs.txt")
    c = chips_json(t)
    assert c[0] == chip(
        0, 0, "910B3", "OK", "0000:C1:00.0", 96.7, 32, 0, (0, 0), (0, 0), (60056, 65536)
    )
    assert c[3] == chip(
        3, 0, "910B3", "OK", "0000:82:00.0", 89.0, 31, 0, (0, 0), (0, 0), (60051, 65536)
    )
    assert c[7] == chip(
        7, 0, "910B3", "OK", "0000:42:00.0", 86.4, 33, 0, (0, 0), (0, 0), (60051, 65536)
    )
    assert [p.pid for p in t.processes] == [
        3329455,
        3329456,
        3329457,
        3329458,
        3329459,
        3329460,
        3329461,
        3329465,
    ]
    assert t.to_json()["processes"][7] == proc(7, 0, 3329465, "VLLMWorker_TP", 56683)
    assert isinstance(c[0]["power_w"], float) and isinstance(c[0]["temp_c"], int)


def test_910b3_blank_process_name_is_null_and_idle_rows_skipped():
    t = load("003_910B3_8card_mixed_idle.txt")
    assert t.to_json()["processes"] == [proc(2, 0, 1333928, None, 37709)]
    c = chips_json(t)
    assert c[2] == chip(
        2, 0, "910B3", "OK", "0000:81:00.0", 92.3, 32, 0, (0, 0), (0, 0), (41052, 65536)
    )
    assert c[3]["hbm_used_mb"] == 3390


def test_910prob_ddr_and_hbm_both_populated():
    c = chips_json(load("004_910ProB_8card_idle.txt"))
    assert c[0] == chip(
        0, 0, "910ProB", "OK", "0000:C1:00.0", 78.0, 38, 0, (0, 0), (2387, 13553), (18, 32768)
    )
    assert c[6] == chip(
        6, 0, "910ProB", "OK", "0000:42:00.0", 83.0, 40, 0, (0, 0), (2143, 15665), (3, 32768)
    )


def test_trailing_space_lines_and_process_table_closed_by_dashes():
    t = load("006_910B2C_2card_proc_trailing_space.txt")
    c = chips_json(t)
    assert c[1] == chip(
        1, 0, "910B2C", "OK", "0000:19:00.0", 99.6, 50, 0, (0, 0), (0, 0), (20687, 65536)
    )
    assert t.to_json()["processes"] == [proc(0, 0, 124528, "python3.8", 17400)]


def test_a3_second_chip_power_dash():
    t = load("008_910_93_A3_2npu_4chip_partial_fixture.txt")
    c = chips_json(t)
    assert c[0] == chip(
        0, 0, "Ascend910", "OK", "0000:9C:00.0", 162.8, 37, 0, (0, 0), (0, 0), (3133, 65536), phy=0
    )
    assert c[1] == chip(
        0, 1, "Ascend910", "OK", "0000:9E:00.0", None, 37, 0, (0, 0), (0, 0), (2876, 65536), phy=1
    )
    assert c[2] == chip(
        1, 0, "Ascend910", "OK", "0000:37:00.0", 167.1, 38, 0, (0, 0), (0, 0), (3116, 65536), phy=2
    )
    assert c[3] == chip(
        1, 1, "Ascend910", "OK", "0000:39:00.0", None, 38, 0, (0, 0), (0, 0), (10568, 65536), phy=3
    )
    assert t.to_json()["processes"] == [proc(1, 1, 990711, "python", 7746)]


def test_310b_devkit_bus_id_na_and_hugepages_in_use():
    c = chips_json(load("009_310B1_devkit.txt"))
    assert c == [chip(0, 0, "310B1", "OK", None, 9.0, 57, 0, (15, 15), (7356, 11577), None, dev=0)]
    c = chips_json(load("010_310B4_devkit.txt"))
    assert c == [chip(0, 0, "310B4", "OK", None, 7.2, 37, 0, (15, 15), (1797, 3513), None, dev=0)]


def test_310p_power_na_and_ids_starting_at_4():
    c = chips_json(load("011_310P3_2card_npuid4_5.txt"))
    assert c == [
        chip(4, 0, "310P3", "OK", "0000:81:00.0", None, 37, 0, (0, 0), (1848, 21525), None, dev=0),
        chip(5, 0, "310P3", "OK", "0000:85:00.0", None, 40, 0, (0, 0), (1849, 21525), None, dev=1),
    ]


def test_old_910a_layout_without_hugepages():
    t = load("013_910A_4card_npusmi1.9.3_fw21.0.rc1.txt")
    c = chips_json(t)
    assert c[0] == chip(
        4, 0, "910A", "OK", "0000:C2:00.0", 67.2, 30, 0, None, (303, 15171), (0, 32768)
    )
    assert c[3] == chip(
        7, 0, "910A", "OK", "0000:02:00.0", 65.5, 30, 0, None, (2563, 15078), (0, 32768)
    )
    assert t.processes == ()


def test_910_narrow_first_column_with_hugepages():
    c = chips_json(load("014_910x_1card_npusmi23.0.2_vllm_doc.txt"))
    assert c == [
        chip(0, 0, "xxx", "OK", "0000:C1:00.0", 0.0, 40, 0, (0, 0), (882, 15169), (0, 32768))
    ]


def test_910b4_idle_all_no_running_processes():
    t = load("015_910B4_8card_idle_24.1.rc3.txt")
    c = chips_json(t)
    assert c[0] == chip(
        0, 0, "910B4", "OK", "0000:C1:00.0", 92.1, 52, 0, (0, 0), (0, 0), (2828, 32768)
    )
    assert c[7] == chip(
        7, 0, "910B4", "OK", "0000:42:00.0", 93.8, 54, 0, (0, 0), (0, 0), (2829, 32768)
    )
    assert t.processes == () and t.has_process_section


def test_container_ids_4_to_7_with_python_processes():
    t = load("016_910B4_4card_npuid4-7_procs_23.0.6.txt")
    assert [c.npu_id for c in t.chips] == [4, 5, 6, 7]
    assert chips_json(t)[1] == chip(
        5, 0, "910B4", "OK", "0000:41:00.0", 87.7, 40, 0, (0, 0), (0, 0), (29095, 32768)
    )
    assert t.to_json()["processes"] == [
        proc(4, 0, 498807, "python", 26323),
        proc(5, 0, 499212, "python", 26323),
        proc(6, 0, 499213, "python", 26323),
        proc(7, 0, 499214, "python", 26322),
    ]


def test_single_npu_id_5():
    c = chips_json(load("018_910B4_1card_npuid5_25.5.2_doc.txt"))
    assert c == [
        chip(5, 0, "910B4", "OK", "0000:41:00.0", 89.9, 39, 0, (0, 0), (0, 0), (2922, 32768))
    ]


def test_310p_narrow_template_without_banner():
    c = chips_json(load("019_310P3_2card_modelzoo_template.txt"))
    assert c[1] == chip(
        1, 0, "310P3", "OK", "0000:89:00.0", 15.4, 43, 0, (0, 0), (1070, 21534), None, dev=1
    )


def test_310_large_noncontiguous_ids():
    c = chips_json(load("020_310_2card_npuid112_128_EDITED_template.txt"))
    assert [(x["npu_id"], x["device_id"], x["memory_total_mb"]) for x in c] == [
        (112, 0, 8192),
        (128, 1, 8192),
    ]


def test_old_310_layout_no_hugepages_bus_id_na():
    c = chips_json(load("022_310_atlas200dk_npusmi21.0.3.1.txt"))
    assert c == [chip(0, 0, "310", "OK", None, 12.8, 58, 0, None, (5324, 8192), None, dev=0)]


def test_300i_duo_two_chips_share_npu_id_1792():
    t = load("024_310P3_atlas300IDuo_1card_npuid1792_24.1.rc2.txt")
    assert chips_json(t) == [
        chip(
            1792, 0, "310P3", "OK", "0000:07:00.0", None, 36, 0, (0, 0), (1821, 44280), None, dev=0
        ),
        chip(
            1792, 1, "310P3", "OK", "0000:07:00.0", None, 36, 0, (0, 0), (1041, 43693), None, dev=1
        ),
    ]
    assert t.processes == () and t.has_process_section


def test_crlf_and_indented_table_inside_other_text():
    text = (NPU / "016_910B4_4card_npuid4-7_procs_23.0.6.txt").read_text()
    wrapped = (
        "$ npu-smi info\r\n" + "".join("    " + ln + "\r\n" for ln in text.splitlines()) + "$ \r\n"
    )
    assert (
        parse_info_table(wrapped).to_json()
        == load("016_910B4_4card_npuid4-7_procs_23.0.6.txt").to_json()
    )


def test_doc_copy_with_ellipsis_rows_keeps_the_chips_it_shows():
    text = (NPU / "034_910_doc_ecc_board_usages_health_stat.txt").read_text()
    t = parse_info_table(text)
    assert t.version == "23.0.5"
    assert chips_json(t) == [
        chip(0, 0, "xxx", "OK", "0000:61:00.0", 73.1, 37, 0, (0, 0), (920, 13553), (0, 32768)),
        chip(7, 0, "xxx", "OK", "0000:3D:00.0", 67.0, 38, 0, (0, 0), (2346, 15567), (0, 32768)),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   \n\n", "empty"),
        ("dcmi module initialize failed. ret is -8005\n", "no npu-smi info table found"),
        ("\x7fELF\x02\x01\x01\x00\x00\x00", "binary"),
        ("| just | a | table | of | words |\n", "no npu-smi info table found"),
    ],
)
def test_unreadable_input_names_source_and_problem(text, message):
    with pytest.raises(InputError) as info:
        parse_info_table(text, source="capture.txt")
    assert str(info.value).startswith("capture.txt: ")
    assert message in str(info.value)


def test_chip_row_with_missing_cell_is_an_error_naming_the_line():
    text = (NPU / "018_910B4_1card_npuid5_25.5.2_doc.txt").read_text().splitlines()
    text[7] = "| 5     910B4               | OK            |"
    with pytest.raises(InputError) as info:
        parse_info_table("\n".join(text), source="cut.txt")
    assert "cut.txt: line 8: 2 cells where the header has 3" in str(info.value)


def test_tab_between_header_words():
    text = (NPU / "016_910B4_4card_npuid4-7_procs_23.0.6.txt").read_text()
    tabbed = text.replace("| NPU   Name ", "| NPU\tName  ")
    assert parse_info_table(tabbed).to_json() == parse_info_table(text).to_json()


def test_two_captures_pasted_together_keep_the_last_table():
    first = (NPU / "015_910B4_8card_idle_24.1.rc3.txt").read_text()
    last = (NPU / "016_910B4_4card_npuid4-7_procs_23.0.6.txt").read_text()
    t = parse_info_table(first + "\n$ npu-smi info\n" + last)
    assert t.to_json() == parse_info_table(last).to_json()
