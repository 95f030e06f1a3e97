"""The inventory views of npu-smi: ``info -t memory|board``, ``info -m`` and ``info -l``.

What hardware is there: capacities and clocks, identifiers as printed (``0x02``,
``0000:61:00.0``), the NPU/chip/logic-id mapping and the card list. NA is None; an unknown
key is kept in ``extras``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from soak.errors import InputError
from soak.telemetry.npu_query.lines import (
    Pairs,
    build_record,
    norm_key,
    not_none,
    per_chip,
    require_kv_lines,
)
from soak.telemetry.npu_values import to_int

# ------------------------------------------------------------------------------- -t memory


@dataclass(frozen=True, slots=True)
class MemoryInfo:
    """One chip of ``npu-smi info -t memory -i N``. 310/310B print plain ``Capacity(MB)``."""

    npu_id: int | None
    chip_id: int | None
    ddr_capacity_mb: int | None = None
    ddr_clock_mhz: int | None = None
    total_ddr_capacity_mb: int | None = None
    hbm_capacity_mb: int | None = None
    hbm_clock_mhz: int | None = None
    hbm_temp_c: float | None = None
    hbm_manufacturer_id: str | None = None
    capacity_mb: int | None = None
    clock_mhz: int | None = None
    extras: tuple[tuple[str, str], ...] = ()


_MEMORY_SPEC = {
    "ddr capacity(mb)": ("ddr_capacity_mb", "int"),
    "ddr clock speed(mhz)": ("ddr_clock_mhz", "int"),
    "total ddr capacity(mb)": ("total_ddr_capacity_mb", "int"),
    "hbm capacity(mb)": ("hbm_capacity_mb", "int"),
    "hbm clock speed(mhz)": ("hbm_clock_mhz", "int"),
    "hbm temperature(c)": ("hbm_temp_c", "float"),
    "hbm manufacturer id": ("hbm_manufacturer_id", "str"),
    "capacity(mb)": ("capacity_mb", "int"),
    "clock speed(mhz)": ("clock_mhz", "int"),
}


def parse_memory(text: str, *, source: str = "npu-smi info -t memory") -> tuple[MemoryInfo, ...]:
    """Command line equivalent: ``npu-smi info -t memory -i N``."""
    return per_chip(MemoryInfo, _MEMORY_SPEC, text, source, "memory")


# ------------------------------------------------------------------------------- -t board


@dataclass(frozen=True, slots=True)
class BoardInfo:
    """``npu-smi info -t board -i N`` (card: ``chip_id`` None) or ``... -c M`` (chip).

    Identifiers stay strings as printed (``0x02``, ``0000:61:00.0``); NA is None.
    """

    npu_id: int | None
    chip_id: int | None = None
    product_name: str | None = None
    model: str | None = None
    manufacturer: str | None = None
    serial_number: str | None = None
    software_version: str | None = None
    firmware_version: str | None = None
    compatibility: str | None = None
    board_id: str | None = None
    main_board_id: str | None = None
    pcb_id: str | None = None
    bom_id: str | None = None
    pcie_bus_info: str | None = None
    slot_id: int | None = None
    class_id: str | None = None
    pci_vendor_id: str | None = None
    pci_device_id: str | None = None
    subsystem_vendor_id: str | None = None
    subsystem_device_id: str | None = None
    chip_count: int | None = None
    npu_name: str | None = None
    chip_type: str | None = None
    chip_name: str | None = None
    chip_version: str | None = None
    vdie_id: str | None = None
    ndie_id: str | None = None
    die_id: str | None = None
    chip_position_id: int | None = None
    extras: tuple[tuple[str, str], ...] = ()

    def sample_fields(self) -> dict[str, object]:
        return not_none({"serial": self.serial_number})


_BOARD_SPEC = {
    "npu id": ("npu_id", "int"),
    "chip id": ("chip_id", "int"),
    "product name": ("product_name", "str"),
    "model": ("model", "str"),
    "manufacturer": ("manufacturer", "str"),
    "serial number": ("serial_number", "str"),
    "software version": ("software_version", "str"),
    "firmware version": ("firmware_version", "str"),
    "compatibility": ("compatibility", "str"),
    "board id": ("board_id", "str"),
    "main board id": ("main_board_id", "str"),
    "pcb id": ("pcb_id", "str"),
    "bom id": ("bom_id", "str"),
    "pcie bus info": ("pcie_bus_info", "str"),
    "slot id": ("slot_id", "int"),
    "class id": ("class_id", "str"),
    "pci vendor id": ("pci_vendor_id", "str"),
    "pci device id": ("pci_device_id", "str"),
    "subsystem vendor id": ("subsystem_vendor_id", "str"),
    "subsystem device id": ("subsystem_device_id", "str"),
    "chip count": ("chip_count", "int"),
    "npu name": ("npu_name", "str"),
    "chip type": ("chip_type", "str"),
    "chip name": ("chip_name", "str"),
    "chip version": ("chip_version", "str"),
    "vdie id": ("vdie_id", "str"),
    "ndie id": ("ndie_id", "str"),
    "die id": ("die_id", "str"),
    "chip position id": ("chip_position_id", "int"),
}


def parse_board(text: str, *, source: str = "npu-smi info -t board") -> BoardInfo:
    """Command line equivalent: ``npu-smi info -t board -i N [-c M]``."""
    lines = require_kv_lines(text, source, "board")
    pairs = [i for i in lines if i is not None and i[0]]
    return build_record(BoardInfo, _BOARD_SPEC, pairs, npu_id=None)


# ------------------------------------------------------------------------------- -m / -l


@dataclass(frozen=True, slots=True)
class ChipMapping:
    """One row of ``npu-smi info -m``: NPU id, chip index, logic id (None for Mcu rows), name."""

    npu_id: int
    chip_id: int
    logic_id: int | None
    chip_name: str

    @property
    def is_mcu(self) -> bool:
        """MCU (and 3559 CPU) rows have no logic id: they are not compute chips."""
        return self.logic_id is None


_MAPPING_ROW = re.compile(r"^(\d+)\s+(\d+)\s+(\d+|-)\s+(.+?)\s*$")


def parse_mapping(text: str, *, source: str = "npu-smi info -m") -> tuple[ChipMapping, ...]:
    """Command line equivalent: ``npu-smi info -m``."""
    if "\x00" in text:
        raise InputError(f"{source}: binary data, not npu-smi text")
    rows = []
    header = False
    for raw in text.splitlines():
        line = raw.strip()
        if norm_key(line).startswith("npu id") and "logic" in line.lower():
            header = True
            continue
        m = _MAPPING_ROW.match(line)
        if m:
            logic = None if m.group(3) == "-" else int(m.group(3))
            rows.append(ChipMapping(int(m.group(1)), int(m.group(2)), logic, m.group(4)))
    if not header and not rows:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        raise InputError(f"{source}: no chip mapping table (starts with {first[:60]!r})")
    return tuple(rows)


@dataclass(frozen=True, slots=True)
class CardEntry:
    """One card of ``npu-smi info -l``. Servers leave out product name and serial number."""

    npu_id: int | None
    chip_count: int | None = None
    product_name: str | None = None
    serial_number: str | None = None
    extras: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class CardList:
    """``npu-smi info -l``: ``Total Count`` (``Card Count`` on 310) and the cards."""

    total_count: int | None
    cards: tuple[CardEntry, ...]


_CARD_SPEC = {
    "npu id": ("npu_id", "int"),
    "chip count": ("chip_count", "int"),
    "product name": ("product_name", "str"),
    "serial number": ("serial_number", "str"),
}


def parse_card_list(text: str, *, source: str = "npu-smi info -l") -> CardList:
    """Command line equivalent: ``npu-smi info -l``. A new card starts at each ``NPU ID``."""
    lines = require_kv_lines(text, source, "card list")
    total: int | None = None
    cards: list[Pairs] = []
    for item in lines:
        if item is None or not item[0]:
            continue
        k = norm_key(item[0])
        if k in ("total count", "card count"):
            total = to_int(item[1])
        elif k == "npu id":
            cards.append([item])
        elif cards:
            cards[-1].append(item)
    entries = tuple(build_record(CardEntry, _CARD_SPEC, pairs, npu_id=None) for pairs in cards)
    return CardList(total, entries)

