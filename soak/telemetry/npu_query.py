"""The key/value views of npu-smi: ``info -t usages|common|temp|power|health|ecc|board|memory``,
``info -m`` and ``info -l``.

Every line is ``<TAB>key : value`` (the ECC view pads keys to 40 characters, docs show
spaces instead of the TAB). Between versions the keys differ (``Aivector`` and
``NPU Utilization(%)`` only on 910B/A3, ``Vectorcore`` and ``DVPP`` only on 310P), rates
can be left out entirely in vNPU mode, and ``Chip ID`` comes *after* a chip's values in
``usages``/``temp``/``power`` but *before* them in ``common``. So the parsers here:

* split each line on its first ``:`` and compare keys case- and space-insensitively;
* find which side of its values ``Chip ID`` sits on from the text itself;
* map known keys to fields with the unit in the name, keep unknown keys in ``extras``,
  and turn ``NA``/``-``/``Failed`` into None (a left-out key is None too, never 0).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields

from soak.errors import InputError
from soak.telemetry.npu_values import CONVERT, to_float, to_int, to_str

Pairs = list[tuple[str, str]]


def _key(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


def kv_lines(text: str) -> list[tuple[str, str] | None]:
    """``(key, value)`` per key/value line, None for a blank line; other lines are dropped.

    A continuation line (blank key: ``<TAB><31 spaces>: more text``) comes back with key "".
    """
    out: list[tuple[str, str] | None] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            out.append(None)
            continue
        if ":" not in line or line.startswith(("$", "#", "/")):
            continue
        key, _, value = line.partition(":")
        out.append((key.strip(), value.strip()))
    return out


def _require(text: str, source: str, what: str) -> list[tuple[str, str] | None]:
    if "\x00" in text:
        raise InputError(f"{source}: binary data, not npu-smi text")
    lines = kv_lines(text)
    if not any(item for item in lines):
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        raise InputError(f"{source}: no {what} key/value lines (starts with {first[:60]!r})")
    return lines


@dataclass(frozen=True, slots=True)
class _Split:
    card: dict[str, str]  # NPU ID, Chip Count, and card-level keys
    chips: list[tuple[int | None, Pairs]]  # chip id, its key/value pairs in order
    mcu: Pairs | None  # the trailing MCU sub-block, if printed


_CARD_KEYS = {"npu id", "chip count"}


def split_chips(lines: Sequence[tuple[str, str] | None]) -> _Split:
    """Group key/value lines into card keys, per-chip pairs and the MCU block.

    ``Chip ID`` closes a chip when the first chip value comes before the first ``Chip ID``
    (``usages``, ``temp``, ``power``, ``ecc``) and opens one otherwise (``common``).
    ``Chip Name : mcu`` marks the MCU block: it opens it in ``common`` and closes it in
    ``temp``, where the sensor values come first.
    """
    items = [i for i in lines if i is not None and i[0]]
    first_value = next(
        (
            n
            for n, (k, _) in enumerate(items)
            if _key(k) not in _CARD_KEYS | {"chip id", "chip name"}
        ),
        None,
    )
    first_chip = next((n for n, (k, _) in enumerate(items) if _key(k) == "chip id"), None)
    after = first_value is not None and (first_chip is None or first_value < first_chip)
    card: dict[str, str] = {}
    chips: list[tuple[int | None, Pairs]] = []
    mcu: Pairs | None = None
    pending: Pairs = []
    in_mcu = False
    for key, value in items:
        k = _key(key)
        if k in _CARD_KEYS and not pending and not in_mcu:
            card[k] = value
            continue
        if k == "chip id":
            if after:
                chips.append((to_int(value), pending))
                pending = []
            else:
                if pending and chips:
                    chips[-1][1].extend(pending)
                pending = []
                chips.append((to_int(value), []))
                in_mcu = False
            continue
        if k == "chip name" and value.strip().lower() == "mcu":
            if after:
                mcu, pending = pending, []
            else:
                in_mcu, mcu = True, []
            continue
        if in_mcu and mcu is not None:
            mcu.append((key, value))
        elif not after and chips:
            chips[-1][1].append((key, value))
        else:
            pending.append((key, value))
    if pending:
        if after or not chips:
            chips.append((None, pending))  # values without a Chip ID line: one chip, id unknown
        else:
            chips[-1][1].extend(pending)
    return _Split(card, chips, mcu)


def _lookup(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {_key(k): v for k, v in pairs}


def _build(cls, spec: Mapping[str, tuple[str, str]], pairs: Pairs, **ids):
    """Fill ``cls`` from pairs using ``spec``: normalised key -> (field, kind)."""
    values: dict[str, object] = dict(ids)
    extras: list[tuple[str, str]] = []
    for key, raw in pairs:
        target = spec.get(_key(key))
        if target is None:
            extras.append((key.strip(), raw))
        else:
            name, kind = target
            values[name] = CONVERT[kind](raw)
    return cls(**values, extras=tuple(extras))


def sample_fields(*records: object) -> dict[tuple[int, int], dict[str, object]]:
    """Merge the DeviceSample fields of query records, keyed by ``(npu_id, chip_id)``.

    The result is the ``details`` argument of ``npu_smi.to_device_samples``.
    """
    merged: dict[tuple[int, int], dict[str, object]] = {}
    for rec in records:
        npu_id, chip_id = getattr(rec, "npu_id", None), getattr(rec, "chip_id", None)
        to_fields = getattr(rec, "sample_fields", None)
        if npu_id is None or chip_id is None or to_fields is None:
            continue
        merged.setdefault((npu_id, chip_id), {}).update(to_fields())
    return merged


def _not_none(d: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in d.items() if v is not None}


# ------------------------------------------------------------------------------- -t usages


@dataclass(frozen=True, slots=True)
class UsageInfo:
    """One chip of ``npu-smi info -t usages -i N``. Rates in percent; None = not printed/NA."""

    npu_id: int | None
    chip_id: int | None
    ddr_capacity_mb: int | None = None
    ddr_usage_pct: float | None = None
    ddr_hugepages_total_pages: int | None = None
    ddr_hugepages_usage_pct: float | None = None
    hbm_capacity_mb: int | None = None
    hbm_usage_pct: float | None = None
    aicore_usage_pct: float | None = None
    aivector_usage_pct: float | None = None
    aicpu_usage_pct: float | None = None
    ctrlcpu_usage_pct: float | None = None
    vectorcore_usage_pct: float | None = None
    memory_bandwidth_usage_pct: float | None = None
    ddr_bandwidth_usage_pct: float | None = None
    hbm_bandwidth_usage_pct: float | None = None
    npu_utilization_pct: float | None = None
    aicube_usage_pct: float | None = None
    extras: tuple[tuple[str, str], ...] = ()  # DVPP rates and keys of newer versions

    def sample_fields(self) -> dict[str, object]:
        bw = self.hbm_bandwidth_usage_pct
        if bw is None:
            bw = self.ddr_bandwidth_usage_pct
        if bw is None:
            bw = self.memory_bandwidth_usage_pct
        return _not_none({"aicpu_util_pct": self.aicpu_usage_pct, "mem_bw_util_pct": bw})


_USAGE_SPEC = {
    "ddr capacity(mb)": ("ddr_capacity_mb", "int"),
    "ddr usage rate(%)": ("ddr_usage_pct", "float"),
    "ddr hugepages total(page)": ("ddr_hugepages_total_pages", "int"),
    "ddr hugepages usage rate(%)": ("ddr_hugepages_usage_pct", "float"),
    "hbm capacity(mb)": ("hbm_capacity_mb", "int"),
    "hbm usage rate(%)": ("hbm_usage_pct", "float"),
    "aicore usage rate(%)": ("aicore_usage_pct", "float"),
    "aivector usage rate(%)": ("aivector_usage_pct", "float"),
    "aicpu usage rate(%)": ("aicpu_usage_pct", "float"),
    "ctrlcpu usage rate(%)": ("ctrlcpu_usage_pct", "float"),
    "vectorcore usage rate(%)": ("vectorcore_usage_pct", "float"),
    "memory bandwidth usage rate(%)": ("memory_bandwidth_usage_pct", "float"),
    "ddr bandwidth usage rate(%)": ("ddr_bandwidth_usage_pct", "float"),
    "hbm bandwidth usage rate(%)": ("hbm_bandwidth_usage_pct", "float"),
    "npu utilization(%)": ("npu_utilization_pct", "float"),
    "aicube usage rate(%)": ("aicube_usage_pct", "float"),
}


def _per_chip(cls, spec, text: str, source: str, what: str) -> tuple:
    split = split_chips(_require(text, source, what))
    npu_id = to_int(split.card.get("npu id"))
    return tuple(_build(cls, spec, pairs, npu_id=npu_id, chip_id=cid) for cid, pairs in split.chips)


def parse_usages(text: str, *, source: str = "npu-smi info -t usages") -> tuple[UsageInfo, ...]:
    """Command line equivalent: ``npu-smi info -t usages -i N``. One record per chip."""
    return _per_chip(UsageInfo, _USAGE_SPEC, text, source, "usages")


# ------------------------------------------------------------------------------- -t common


@dataclass(frozen=True, slots=True)
class CommonInfo:
    """One chip of ``npu-smi info -t common -i N``, plus the MCU sub-block when printed.

    On 310P the chip has no power reading; the board's power is on the MCU (``mcu_power_w``).
    """

    npu_id: int | None
    chip_id: int | None
    memory_usage_pct: float | None = None
    hbm_usage_pct: float | None = None
    aicore_usage_pct: float | None = None
    aicore_freq_mhz: int | None = None
    aicore_cur_freq_mhz: int | None = None
    aicore_count: int | None = None
    temp_c: float | None = None
    power_w: float | None = None
    rated_power_w: float | None = None
    mcu_temp_c: float | None = None
    mcu_power_w: float | None = None
    extras: tuple[tuple[str, str], ...] = ()

    def sample_fields(self) -> dict[str, object]:
        return _not_none({"temp_c": self.temp_c, "power_w": self.power_w})


_COMMON_SPEC = {
    "memory usage rate(%)": ("memory_usage_pct", "float"),
    "hbm usage rate(%)": ("hbm_usage_pct", "float"),
    "aicore usage rate(%)": ("aicore_usage_pct", "float"),
    "aicore freq(mhz)": ("aicore_freq_mhz", "int"),
    "aicore curfreq(mhz)": ("aicore_cur_freq_mhz", "int"),
    "aicore count": ("aicore_count", "int"),
    "temperature(c)": ("temp_c", "float"),
    "npu real-time power(w)": ("power_w", "float"),
    "rated power dissipation(w)": ("rated_power_w", "float"),
}


def parse_common(text: str, *, source: str = "npu-smi info -t common") -> tuple[CommonInfo, ...]:
    """Command line equivalent: ``npu-smi info -t common -i N``."""
    split = split_chips(_require(text, source, "common"))
    npu_id = to_int(split.card.get("npu id"))
    mcu = _lookup(split.mcu or [])
    mcu_power = mcu.get("npu real-time power(w)", mcu.get("power dissipation(w)"))
    out = []
    for cid, pairs in split.chips:
        rec = _build(CommonInfo, _COMMON_SPEC, pairs, npu_id=npu_id, chip_id=cid)
        if split.mcu is not None:
            rec = _replace(
                rec, mcu_temp_c=to_float(mcu.get("temperature(c)")), mcu_power_w=to_float(mcu_power)
            )
        out.append(rec)
    return tuple(out)


def _replace(rec, **changes):
    values = {f.name: getattr(rec, f.name) for f in fields(rec)}
    values.update(changes)
    return type(rec)(**values)


# ------------------------------------------------------------------------------- -t temp / power


@dataclass(frozen=True, slots=True)
class TempInfo:
    """One chip of ``npu-smi info -t temp -i N``; ``sensors`` are the MCU's board sensors."""

    npu_id: int | None
    chip_id: int | None
    temp_c: float | None = None
    sensors: tuple[tuple[str, float | None], ...] = ()  # (name, temp_c), e.g. ("LM75A_TE", 36.0)
    extras: tuple[tuple[str, str], ...] = ()

    def sample_fields(self) -> dict[str, object]:
        return _not_none({"temp_c": self.temp_c})


_TEMP_SPEC = {
    "npu temperature (c)": ("temp_c", "float"),
    "temperature (c)": ("temp_c", "float"),
    "npu temperature(c)": ("temp_c", "float"),
    "temperature(c)": ("temp_c", "float"),
}


def parse_temp(text: str, *, source: str = "npu-smi info -t temp") -> tuple[TempInfo, ...]:
    """Command line equivalent: ``npu-smi info -t temp -i N``."""
    split = split_chips(_require(text, source, "temp"))
    npu_id = to_int(split.card.get("npu id"))
    sensors = tuple(
        (re.sub(r"\s*\(C\)\s*$", "", k.strip(), flags=re.IGNORECASE), to_float(v))
        for k, v in (split.mcu or [])
    )
    return tuple(
        _replace(_build(TempInfo, _TEMP_SPEC, pairs, npu_id=npu_id, chip_id=cid), sensors=sensors)
        for cid, pairs in split.chips
    )


@dataclass(frozen=True, slots=True)
class PowerInfo:
    """One chip of ``npu-smi info -t power -i N``."""

    npu_id: int | None
    chip_id: int | None
    power_w: float | None = None
    extras: tuple[tuple[str, str], ...] = ()

    def sample_fields(self) -> dict[str, object]:
        return _not_none({"power_w": self.power_w})


_POWER_SPEC = {
    "npu real-time power(w)": ("power_w", "float"),
    "power dissipation(w)": ("power_w", "float"),
    "rated power dissipation(w)": ("power_w", "float"),
}


def parse_power(text: str, *, source: str = "npu-smi info -t power") -> tuple[PowerInfo, ...]:
    """Command line equivalent: ``npu-smi info -t power -i N``."""
    return _per_chip(PowerInfo, _POWER_SPEC, text, source, "power")


# ------------------------------------------------------------------------------- -t health


@dataclass(frozen=True, slots=True)
class HealthInfo:
    """``npu-smi info -t health -i N -c M``: the tool's health word, error codes, descriptions.

    ``error_codes`` are the hex codes as printed (``A4025021``); ``error_info`` holds one text
    per line of the multi-line ``Error Information``.
    """

    npu_id: int | None
    chip_id: int | None
    health: str | None
    error_codes: tuple[str, ...] = ()
    error_info: tuple[str, ...] = ()

    @property
    def healthy(self) -> bool | None:
        """OK -> True; Warning/Alarm/Critical -> False; NA or UNKNOWN -> None."""
        if self.health is None or self.health.upper() == "UNKNOWN":
            return None
        return self.health == "OK"

    def sample_fields(self) -> dict[str, object]:
        return _not_none({"health": self.health, "healthy": self.healthy})


def parse_health(
    text: str,
    *,
    npu_id: int | None = None,
    chip_id: int | None = None,
    source: str = "npu-smi info -t health",
) -> HealthInfo:
    """Command line equivalent: ``npu-smi info -t health -i N -c M``."""
    lines = _require(text, source, "health")
    health: str | None = None
    codes: list[str] = []
    info: list[str] = []
    last = ""
    for item in lines:
        if item is None:
            continue
        key, value = item
        k = _key(key) or last
        if k == "health status":
            health = to_str(value)
        elif k == "error code":
            codes.extend(c for c in value.split() if to_str(c) is not None)
        elif k == "error information":
            if to_str(value) is not None:
                info.append(value)
        elif k == "npu id" and npu_id is None:
            npu_id = to_int(value)
        elif k == "chip id" and chip_id is None:
            chip_id = to_int(value)
        if key:
            last = k
    if health is None and not any(_key(i[0]) == "health status" for i in lines if i):
        raise InputError(f"{source}: no 'Health Status' line")
    return HealthInfo(npu_id, chip_id, health, tuple(codes), tuple(info))


# ------------------------------------------------------------------------------- -t ecc


@dataclass(frozen=True, slots=True)
class EccInfo:
    """One chip of ``npu-smi info -t ecc -i N``. Counts; None where the chip has no such memory."""

    npu_id: int | None
    chip_id: int | None
    hbm_single_bit_errors: int | None = None
    hbm_double_bit_errors: int | None = None
    hbm_single_bit_aggregate_total: int | None = None
    hbm_double_bit_aggregate_total: int | None = None
    hbm_single_bit_isolated_pages: int | None = None
    hbm_double_bit_isolated_pages: int | None = None
    ddr_single_bit_errors: int | None = None
    ddr_double_bit_errors: int | None = None
    ddr_single_bit_aggregate_total: int | None = None
    ddr_double_bit_aggregate_total: int | None = None
    ddr_single_bit_isolated_pages: int | None = None
    ddr_double_bit_isolated_pages: int | None = None
    extras: tuple[tuple[str, str], ...] = ()

    def sample_fields(self) -> dict[str, object]:
        """Current error counts, HBM and DDR summed where both are printed."""

        def total(*values: int | None) -> int | None:
            present = [v for v in values if v is not None]
            return sum(present) if present else None

        return _not_none(
            {
                "ecc_single_bit_errors": total(
                    self.hbm_single_bit_errors, self.ddr_single_bit_errors
                ),
                "ecc_double_bit_errors": total(
                    self.hbm_double_bit_errors, self.ddr_double_bit_errors
                ),
            }
        )


def _ecc_spec() -> dict[str, tuple[str, str]]:
    spec = {}
    for mem in ("hbm", "ddr"):
        for bit in ("single", "double"):
            spec[f"{mem} {bit} bit error count"] = (f"{mem}_{bit}_bit_errors", "int")
            spec[f"{mem} {bit} bit aggregate total err cnt"] = (
                f"{mem}_{bit}_bit_aggregate_total",
                "int",
            )
            spec[f"{mem} {bit} bit isolated pages count"] = (
                f"{mem}_{bit}_bit_isolated_pages",
                "int",
            )
    return spec


_ECC_SPEC = _ecc_spec()


def parse_ecc(text: str, *, source: str = "npu-smi info -t ecc") -> tuple[EccInfo, ...]:
    """Command line equivalent: ``npu-smi info -t ecc -i N``."""
    return _per_chip(EccInfo, _ECC_SPEC, text, source, "ecc")


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
    return _per_chip(MemoryInfo, _MEMORY_SPEC, text, source, "memory")


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
        return _not_none({"serial": self.serial_number})


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
    lines = _require(text, source, "board")
    pairs = [i for i in lines if i is not None and i[0]]
    return _build(BoardInfo, _BOARD_SPEC, pairs, npu_id=None)


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
        if _key(line).startswith("npu id") and "logic" in line.lower():
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
    lines = _require(text, source, "card list")
    total: int | None = None
    cards: list[Pairs] = []
    for item in lines:
        if item is None or not item[0]:
            continue
        k = _key(item[0])
        if k in ("total count", "card count"):
            total = to_int(item[1])
        elif k == "npu id":
            cards.append([item])
        elif cards:
            cards[-1].append(item)
    entries = tuple(_build(CardEntry, _CARD_SPEC, pairs, npu_id=None) for pairs in cards)
    return CardList(total, entries)


# ------------------------------------------------------------------------------- one chip


def read_chip_details(reader, npu_id: int, chip_id: int) -> dict[str, object]:
    """DeviceSample fields for one chip from the slow views: usages, ECC and health.

    ``reader`` is an ``NpuSmiReader``. Card-level views (``usages``, ``ecc``) are asked for
    the whole card and filtered to ``chip_id``, because older npu-smi versions refuse ``-c``
    there. A timeout or missing tool is raised at once (the caller stops its pass); other
    failures of one view leave that view's fields out, and only if every view failed is the
    first failure raised.
    """
    from soak.errors import ToolError

    fields: dict[str, object] = {}
    errors: list[ToolError] = []
    views = (
        lambda: reader.usages(npu_id),
        lambda: reader.ecc(npu_id),
        lambda: (reader.health(npu_id, chip_id),),
    )
    for view in views:
        try:
            records = view()
        except ToolError as exc:
            if exc.kind in ("timeout", "missing"):
                raise
            errors.append(exc)
            continue
        for rec in records:
            if rec.chip_id in (chip_id, None):
                fields.update(rec.sample_fields())
    if errors and len(errors) == len(views):
        raise errors[0]
    return fields
