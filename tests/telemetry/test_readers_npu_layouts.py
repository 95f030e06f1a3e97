"""Layouts no recorded sample shows, built from npu-smi's header conventions (CANN print
source): the parser must follow the header lines, not column positions."""

from __future__ import annotations

from soak.telemetry.npu_table import parse_info_table

# A future layout: a new Voltage column, Temp before Power, HBM before AICore in row 2,
# the 26.0-style "Process id in container" column, a process name with spaces, and a
# 6-digit HBM value touching the slash.
NEW_LAYOUT = """\
+------------------------------------------------------------------------------------------------------------------+
| npu-smi 27.0.rc1                 Version: 27.0.rc1                                                               |
+---------------------------+---------------+----------------------------------------------------------------------+
| NPU   Name                | Health        | Temp(C)     Power(W)    Voltage(V)   Hugepages-Usage(page)           |
| Chip  Phy-ID              | Bus-Id        | HBM-Usage(MB)        AICore(%)   Memory-Usage(MB)                    |
+===========================+===============+======================================================================+
| 0     Ascend950           | Warning       | 45          310.5       0.85         0    / 0                        |
| 0     0                   | 0000:9C:00.0  | 123456/ 131072       87          0    / 0                            |
+------------------------------------------------------------------------------------------------------------------+
| 0     Ascend950           | OK            | 44          -           NA           0    / 0                        |
| 1     1                   | 0000:9E:00.0  | NA  / 131072         -           0    / 0                            |
+===========================+===============+======================================================================+
+---------------------------+---------------+-------------------------+--------------------------+-----------------+
| NPU     Chip              | Process id    | Process id in container | Process name             | Process memory(MB) |
+===========================+===============+=========================+==========================+=================+
| 0       0                 | 4242          | 17                      | python train.py          | 120000          |
| 0       0                 | 4243          | 18                      |                          | 96              |
+===========================+===============+=========================+==========================+=================+
| No running processes found in NPU 0                                                                              |
+===========================+===============+=========================+==========================+=================+
"""


def test_new_layout_extra_column_and_different_order():
    t = parse_info_table(NEW_LAYOUT, source="new.txt")
    assert t.version == "27.0.rc1"
    c0, c1 = t.to_json()["chips"]
    assert c0 == {
        "npu_id": 0,
        "chip_id": 0,
        "phy_id": 0,
        "device_id": None,
        "name": "Ascend950",
        "health": "Warning",
        "bus_id": "0000:9C:00.0",
        "power_w": 310.5,
        "temp_c": 45,
        "aicore_util_pct": 87,
        "hugepages_used": 0,
        "hugepages_total": 0,
        "memory_used_mb": 0,
        "memory_total_mb": 0,
        "hbm_used_mb": 123456,
        "hbm_total_mb": 131072,
    }
    assert (c1["chip_id"], c1["phy_id"], c1["power_w"], c1["aicore_util_pct"]) == (1, 1, None, None)
    assert (c1["hbm_used_mb"], c1["hbm_total_mb"]) == (None, 131072)
    assert t.chips[0].extras == (("Voltage(V)", "0.85"),)
    assert t.chips[1].extras == (("Voltage(V)", "NA"),)
    assert t.to_json()["processes"] == [
        {"npu_id": 0, "chip_id": 0, "pid": 4242, "name": "python train.py", "memory_mb": 120000},
        {"npu_id": 0, "chip_id": 0, "pid": 4243, "name": None, "memory_mb": 96},
    ]
    assert t.processes[0].extras == (("Process id in container", "17"),)


# Three header lines: every chip then spans three lines, read line i against header line i.
THREE_LINE_HEADER = """\
| NPU     Name                  | Health          | Power(W)     Temp(C)           Hugepages-Usage(page) |
| Chip    Device                | Bus-Id          | AICore(%)    Memory-Usage(MB)                        |
|                               |                 | HBM-Usage(MB)                                        |
+===============================+=================+======================================================+
| 32768   310P3                 | OK              | NA           51                0     / 0             |
| 0       0                     | 0000:01:00.0    | 12           21534/ 21534                            |
|                               |                 | NA / NA                                              |
+===============================+=================+======================================================+
"""


def test_three_line_header_without_top_border_and_id_32768():
    t = parse_info_table(THREE_LINE_HEADER)
    assert t.version is None
    (c,) = t.to_json()["chips"]
    assert (c["npu_id"], c["device_id"], c["aicore_util_pct"]) == (32768, 0, 12)
    assert (c["memory_used_mb"], c["memory_total_mb"], c["hbm_used_mb"], c["hbm_total_mb"]) == (
        21534,
        21534,
        None,
        None,
    )


# Old 310 layout (width 80, no Hugepages): one card id repeated on each of its four chips.
OLD_310_FOUR_CHIPS = "\n".join(
    [
        "+------------------------------------------------------------------------------+",
        "| npu-smi 20.2.2                       Version: 20.2.2                         |",
        "+-------------------+-----------------+----------------------------------------+",
        "| NPU     Name      | Health          | Power(W)          Temp(C)              |",
        "| Chip    Device    | Bus-Id          | AICore(%)         Memory-Usage(MB)     |",
        "+===================+=================+========================================+",
    ]
    + [
        line
        for card in (2048, 2049)
        for chip in range(4)
        for line in (
            f"| {card:<7d} 310       | OK              | 12.8              {40 + chip:<21d}|",
            f"| {chip:<7d} {(card - 2048) * 4 + chip:<10d}| NA              | 0                 {1024 * chip:<4d} / 8192          |",
            "+-------------------+-----------------+----------------------------------------+",
        )
    ]
)


def test_old_310_card_id_repeated_on_four_chips():
    t = parse_info_table(OLD_310_FOUR_CHIPS)
    keys = [(c.npu_id, c.chip_id, c.device_id) for c in t.chips]
    assert keys == [(2048, i, i) for i in range(4)] + [(2049, i, 4 + i) for i in range(4)]
    assert [c.temp_c for c in t.chips[:4]] == [40, 41, 42, 43]
    assert t.chips[7].memory_used_mb == 3072 and t.chips[7].memory_total_mb == 8192
    assert all(c.hugepages_total is None and c.bus_id is None for c in t.chips)
    assert not t.has_process_section


def test_name_with_space_in_a_shared_cell():
    text = NEW_LAYOUT.replace(
        "| 0     Ascend950           | Warning", "| 0     Ascend 950          | Warning"
    )
    t = parse_info_table(text)
    assert t.chips[0].name == "Ascend 950" and t.chips[0].npu_id == 0


def test_blank_power_field_falls_back_to_header_positions():
    # A value printed as blanks (not NA): the remaining values still land under their headers.
    text = """\
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            |             32                0    / 0             |
| 0                         | 0000:C1:00.0  | 0                             60056/ 65536         |
+===========================+===============+====================================================+
"""
    (c,) = parse_info_table(text).to_json()["chips"]
    assert (c["power_w"], c["temp_c"], c["hugepages_used"], c["hugepages_total"]) == (
        None,
        32,
        0,
        0,
    )
    assert (c["aicore_util_pct"], c["memory_used_mb"], c["hbm_used_mb"], c["hbm_total_mb"]) == (
        0,
        None,
        60056,
        65536,
    )
