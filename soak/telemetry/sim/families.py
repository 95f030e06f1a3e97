"""Per-family constants of the simulated fleet: names, versions, memory sizes, bus ids.

Values are taken from recorded tables (910B3 node with 64 GB HBM, 910_93 A3 with two chips per
NPU id, 310P3 Pro with 21525 MB DDR); power and temperature envelopes are typical of each part
under training load.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Family:
    key: str
    layout: str  # table layout: a2, a3, 310p
    name: str  # the table's Name column
    chip_name: str  # -m and -t board -c
    version: str
    chips_per_npu: int
    mem_total_mb: int  # HBM on 910 parts, DDR on 310P
    idle_mem_mb: int  # what the driver holds with no process
    work_mem_mb: int  # what a training process holds, before the sawtooth
    saw_mb: int  # allocator sawtooth amplitude
    idle_power_w: float | None
    power_per_util_w: float
    idle_temp_c: float
    bus_ids: tuple[int, ...]
    mcu_rows: bool  # -m lists an Mcu row per NPU id
    pci_device_id: str
    board_id: str


_A2_BUS = (0xC1, 0xC2, 0x81, 0x82, 0x01, 0x02, 0x41, 0x42,
           0xC3, 0xC4, 0x83, 0x84, 0x03, 0x04, 0x43, 0x44)
_A3_BUS = (0x9C, 0x9E, 0x37, 0x39, 0x1B, 0x1D, 0x5A, 0x5C,
           0xBA, 0xBC, 0xD6, 0xD8, 0x78, 0x7A, 0x02, 0x04)
_310P_BUS = (0x81, 0x85, 0x01, 0x05, 0xC1, 0xC5, 0x41, 0x45)

FAMILY_SPECS: dict[str, Family] = {
    "910b": Family("910b", "a2", "910B3", "910B3", "25.3.rc1", 1, 65536, 2829, 53760, 1536,
                   88.0, 2.7, 34.0, _A2_BUS, True, "0xD802", "0x60"),
    "910_93": Family("910_93", "a3", "Ascend910", "910_9392", "25.2.0", 2, 65536, 2876, 53760, 1536,
                     160.0, 2.9, 36.0, _A3_BUS, False, "0xD803", "0x91"),
    "310p": Family("310p", "310p", "310P3", "310P3", "25.5.1", 1, 21525, 1848, 12800, 512,
                   None, 0.0, 37.0, _310P_BUS, True, "0xD500", "0x64"),
}


def bus_id(family: Family, index: int) -> str:
    """PCIe address of chip ``index``; beyond the recorded ones, made up in the same style."""
    ids = family.bus_ids
    base = ids[index % len(ids)] + 0x10 * (index // len(ids))
    return f"0000:{base % 256:02X}:00.0"
