"""The simulated npu-smi prints what the real tool prints, and the real parsers read it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from soak.telemetry.npu_smi import to_device_samples
from soak.telemetry.npu_table import parse_info_table
from soak.telemetry.sim import SimConfig, SimFleet
from soak.telemetry.sim.model import FleetModel
from soak.telemetry.sim.table import ProcRow, TableRow, render_info_table

SIM_FIXTURES = Path(__file__).parents[1] / "fixtures" / "sim"
MIB = 1024 * 1024


def _rows_from_recorded(text: str, layout: str) -> tuple[str, list[TableRow], list[ProcRow] | None]:
    """Values of a recorded table, read with a throwaway splitter (not the product parser),
    so the renderer is checked against the recording and not against itself."""
    lines = [ln for ln in text.split("\n") if ln.startswith("| ")]
    version = re.search(r"npu-smi (\S+)", lines[0]).group(1)
    cells = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines[3:]]
    rows: list[TableRow] = []
    procs: list[ProcRow] | None = None
    i = 0
    while i < len(cells):
        c1 = cells[i]
        if c1[0].startswith("NPU"):
            procs = []
            i += 1
            continue
        if procs is not None:
            if not c1[0].startswith("No running"):
                npu, chip = c1[0].split()
                procs.append(ProcRow(int(npu), int(chip), int(c1[1]), c1[2], int(c1[3])))
            i += 1
            continue
        c2 = cells[i + 1]
        i += 2
        npu, name = c1[0].split()
        ids = c2[0].split()
        right1 = c1[2].split()
        right2 = c2[2].replace("/", " / ").split()
        power = None if right1[0] in ("NA", "-") else float(right1[0])
        extra = {}
        if layout == "a3":
            extra["phy_id"] = int(ids[1])
        if layout == "310p":
            extra["device_id"] = int(ids[1])
        hbm = {}
        if layout != "310p":
            hbm = {"hbm_used_mb": int(right2[4]), "hbm_total_mb": int(right2[6])}
        rows.append(
            TableRow(
                npu_id=int(npu),
                chip_id=int(ids[0]),
                name=name,
                health=c1[1],
                bus_id=c2[1],
                power_w=power,
                temp_c=int(right1[1]),
                aicore_pct=int(right2[0]),
                mem_used_mb=int(right2[1]),
                mem_total_mb=int(right2[3]),
                hugepages_used=int(right1[2]),
                hugepages_total=int(right1[4]),
                **hbm,
                **extra,
            )
        )
    return version, rows, procs


@pytest.mark.parametrize(
    "name, layout",
    [
        ("001_910B3_8card_procs.txt", "a2"),
        ("015_910B4_8card_idle_24.1.rc3.txt", "a2"),
        ("008_910_93_A3_2npu_4chip_partial_fixture.txt", "a3"),
        ("011_310P3_2card_npuid4_5.txt", "310p"),
        ("024_310P3_atlas300IDuo_1card_npuid1792_24.1.rc2.txt", "310p"),
    ],
)
def test_table_renderer_reproduces_recorded_tables_byte_for_byte(name: str, layout: str) -> None:
    recorded = (SIM_FIXTURES / name).read_text(encoding="utf-8")
    version, rows, procs = _rows_from_recorded(recorded, layout)
    assert rows, "the recorded table has chips"
    assert render_info_table(layout, version, rows, procs) == recorded


def test_health_alarm_block_matches_recorded_layout() -> None:
    recorded = (SIM_FIXTURES / "031_910A_health_alarm.txt").read_text(encoding="utf-8")
    config = SimConfig.build(
        family="910b",
        chips=1,
        scenario="healthy,health_alarm:at_h=0,chips=0,codes=A4025021+8C03A000+8C084E00",
    )
    out, rc = SimFleet(config).render(["info", "-t", "health", "-i", "0", "-c", "0"], elapsed_s=60)
    assert rc == 0
    assert out == recorded


@pytest.mark.parametrize("family, chips", [("910b", 8), ("910_93", 8), ("310p", 4)])
def test_real_parser_reads_sim_table_with_predicted_values(family: str, chips: int) -> None:
    config = SimConfig.build(
        family=family, chips=chips, seed=7, scenario="healthy,health_alarm:at_h=1,chips=1"
    )
    t = 2 * 3600.0 + 17
    out, rc = SimFleet(config).render(["info"], elapsed_s=t)
    assert rc == 0
    widths = {len(line) for line in out.splitlines()}
    assert widths == ({106} if family == "310p" else {98})
    samples = to_device_samples(parse_info_table(out))
    expected = FleetModel(config).chips(t)
    assert [s.device for s in samples] == [f"npu{c.npu_id}-{c.chip_id}" for c in expected]
    for s, c in zip(samples, expected, strict=True):
        assert s.util_pct == c.util_pct
        assert s.temp_c == c.temp_c
        assert s.power_w == c.power_w
        assert s.health == c.health
        assert s.healthy is (c.index != 1)
        if family == "310p":
            assert s.hbm_used_bytes is None
            assert s.ddr_used_bytes == c.mem_used_mb * MIB
        else:
            assert s.hbm_used_bytes == c.mem_used_mb * MIB
            assert s.hbm_total_bytes == 65536 * MIB
        assert s.process_memory_bytes == c.process_mb * MIB
    if family == "910_93":
        # one power figure per NPU id, on chip 0; chip 1 prints "-" and reads as None
        assert [s.power_w is None for s in samples] == [False, True] * (chips // 2)
        assert [s.chip_id for s in samples] == [0, 1] * (chips // 2)


def test_real_query_parsers_read_sim_key_value_views() -> None:
    from soak.telemetry import npu_query as q

    config = SimConfig.build(
        family="910_93",
        chips=4,
        scenario="healthy,ecc_errors:single_per_h=3,chips=2,health_alarm:at_h=0,chips=3",
    )
    fleet = SimFleet(config)
    t = 3600.0 * 2
    usages, rc = fleet.render(["info", "-t", "usages", "-i", "1"], elapsed_s=t)
    assert rc == 0
    parsed = q.parse_usages(usages)
    state = FleetModel(config).chips(t)
    assert [u.chip_id for u in parsed] == [0, 1]
    assert [u.aicore_usage_pct for u in parsed] == [
        float(state[2].util_pct),
        float(state[3].util_pct),
    ]
    assert [u.hbm_capacity_mb for u in parsed] == [65536, 65536]
    ecc = q.parse_ecc(fleet.render(["info", "-t", "ecc", "-i", "1"], elapsed_s=t)[0])
    assert ecc[0].sample_fields()["ecc_single_bit_errors"] == 6
    health = q.parse_health(
        fleet.render(["info", "-t", "health", "-i", "1", "-c", "1"], elapsed_s=t)[0]
    )
    assert health.health == "Alarm"
    assert health.error_codes == ("A4025021", "8C03A000")
    mapping = q.parse_mapping(fleet.render(["info", "-m"], elapsed_s=t)[0])
    assert [(m.npu_id, m.chip_id) for m in mapping if not m.is_mcu] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    ]
    cards = q.parse_card_list(fleet.render(["info", "-l"], elapsed_s=t)[0])
    assert cards.total_count == 2
    board = q.parse_board(
        fleet.render(["info", "-t", "board", "-i", "0", "-c", "1"], elapsed_s=t)[0]
    )
    assert board is not None


def test_mapping_has_mcu_rows_with_trailing_spaces_like_the_tool() -> None:
    out, _ = SimFleet(SimConfig.build(family="910b", chips=2)).render(["info", "-m"], elapsed_s=0)
    lines = out.splitlines()
    assert lines[0] == "\t" + "NPU ID".ljust(30) + " " + "Chip ID".ljust(
        30
    ) + " " + "Chip Logic ID".ljust(30) + " " + "Chip Name".ljust(30)
    assert lines[1] == "\t" + "0".ljust(31) + "0".ljust(31) + "0".ljust(31) + "Ascend 910B3"
    assert lines[2] == "\t" + "0".ljust(31) + "1".ljust(31) + "-".ljust(31) + "Mcu".ljust(30)


@pytest.mark.parametrize(
    "argv, first_line",
    [
        (["info", "-t", "usages", "-i", "9"], "Invalid card id."),
        (["info", "-t", "health", "-i", "0", "-c", "3"], "Invalid chip id."),
        (["info", "-t", "bogus", "-i", "0"], "Invalid query type."),
        (["frobnicate"], "Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]"),
    ],
)
def test_bad_ids_get_the_tools_error_text_and_nonzero_exit(
    argv: list[str], first_line: str
) -> None:
    out, rc = SimFleet(SimConfig.build(chips=2)).render(argv, elapsed_s=0)
    assert rc != 0
    assert out.splitlines()[0] == first_line


def test_same_seed_and_time_give_the_same_bytes_different_seed_does_not() -> None:
    a = SimFleet(SimConfig.build(chips=4, seed=1)).render(["info"], elapsed_s=1234.0)
    b = SimFleet(SimConfig.build(chips=4, seed=1)).render(["info"], elapsed_s=1234.0)
    c = SimFleet(SimConfig.build(chips=4, seed=2)).render(["info"], elapsed_s=1234.0)
    assert a == b
    assert a != c


@pytest.mark.parametrize("family", ["910b", "910_93", "310p"])
def test_every_reader_view_parses_the_sim_through_the_executable(family: str, tmp_path: Path) -> None:
    from soak.telemetry.npu_smi import NpuSmiReader
    from soak.telemetry.runner import Runner
    from soak.telemetry.sim import install

    config = SimConfig.build(family=family, chips=4, fixed_elapsed_s=5 * 3600.0,
                             scenario="healthy,ecc_errors:single_per_h=2,chips=1")
    reader = NpuSmiReader(npu_smi=str(install(tmp_path, config)), runner=Runner(timeout_s=30))
    state = FleetModel(config).chips(5 * 3600.0)
    table = reader.info()
    chip1 = state[1]
    usages = reader.usages(chip1.npu_id)
    assert [u.chip_id for u in usages] == [c.chip_id for c in state if c.npu_id == chip1.npu_id]
    assert next(u for u in usages if u.chip_id == chip1.chip_id).aicore_usage_pct == chip1.util_pct
    assert reader.health(chip1.npu_id, chip1.chip_id).health == "OK"
    ecc = next(e for e in reader.ecc(chip1.npu_id) if e.chip_id == chip1.chip_id)
    assert ecc.sample_fields()["ecc_single_bit_errors"] == 10
    assert reader.temp(chip1.npu_id)[chip1.chip_id].sample_fields()["temp_c"] == chip1.temp_c
    assert reader.common(chip1.npu_id)
    assert reader.power(chip1.npu_id)
    assert reader.memory(chip1.npu_id)
    assert reader.board(chip1.npu_id) is not None and reader.board(chip1.npu_id, chip1.chip_id) is not None
    assert len([m for m in reader.mapping() if not m.is_mcu]) == 4
    assert reader.card_list().total_count == len({c.npu_id for c in state})
    assert len(table.chips) == 4
