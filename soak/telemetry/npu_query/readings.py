"""The reading views of npu-smi: ``info -t usages|common|temp|power|health|ecc``.

One record per chip with the unit in each field name; every record's ``sample_fields()``
gives the DeviceSample fields it fills. Between versions the keys differ (``Aivector``
and ``NPU Utilization(%)`` only on 910B/A3, ``Vectorcore`` and ``DVPP`` only on 310P) and
rates can be left out entirely in vNPU mode: a left-out key is None, never 0, and an
unknown key is kept in ``extras``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from soak.errors import InputError
from soak.telemetry.npu_query.lines import (
    build_record,
    lookup,
    norm_key,
    not_none,
    per_chip,
    require_kv_lines,
    split_chips,
)
from soak.telemetry.npu_values import healthy_of, to_float, to_int, to_str

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
        return not_none({"aicpu_util_pct": self.aicpu_usage_pct, "mem_bw_util_pct": bw})


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


def parse_usages(text: str, *, source: str = "npu-smi info -t usages") -> tuple[UsageInfo, ...]:
    """Command line equivalent: ``npu-smi info -t usages -i N``. One record per chip."""
    return per_chip(UsageInfo, _USAGE_SPEC, text, source, "usages")


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
        return not_none({"temp_c": self.temp_c, "power_w": self.power_w})


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
    split = split_chips(require_kv_lines(text, source, "common"))
    npu_id = to_int(split.card.get("npu id"))
    mcu = lookup(split.mcu or [])
    mcu_power = mcu.get("npu real-time power(w)", mcu.get("power dissipation(w)"))
    out = []
    for cid, pairs in split.chips:
        rec = build_record(CommonInfo, _COMMON_SPEC, pairs, npu_id=npu_id, chip_id=cid)
        if split.mcu is not None:
            rec = replace(
                rec, mcu_temp_c=to_float(mcu.get("temperature(c)")), mcu_power_w=to_float(mcu_power)
            )
        out.append(rec)
    return tuple(out)


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
        return not_none({"temp_c": self.temp_c})


_TEMP_SPEC = {
    "npu temperature (c)": ("temp_c", "float"),
    "temperature (c)": ("temp_c", "float"),
    "npu temperature(c)": ("temp_c", "float"),
    "temperature(c)": ("temp_c", "float"),
}


def parse_temp(text: str, *, source: str = "npu-smi info -t temp") -> tuple[TempInfo, ...]:
    """Command line equivalent: ``npu-smi info -t temp -i N``."""
    split = split_chips(require_kv_lines(text, source, "temp"))
    npu_id = to_int(split.card.get("npu id"))
    sensors = tuple(
        (re.sub(r"\s*\(C\)\s*$", "", k.strip(), flags=re.IGNORECASE), to_float(v))
        for k, v in (split.mcu or [])
    )
    return tuple(
        replace(
            build_record(TempInfo, _TEMP_SPEC, pairs, npu_id=npu_id, chip_id=cid), sensors=sensors
        )
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
        return not_none({"power_w": self.power_w})


_POWER_SPEC = {
    "npu real-time power(w)": ("power_w", "float"),
    "power dissipation(w)": ("power_w", "float"),
    "rated power dissipation(w)": ("power_w", "float"),
}


def parse_power(text: str, *, source: str = "npu-smi info -t power") -> tuple[PowerInfo, ...]:
    """Command line equivalent: ``npu-smi info -t power -i N``."""
    return per_chip(PowerInfo, _POWER_SPEC, text, source, "power")


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
        return healthy_of(self.health)

    def sample_fields(self) -> dict[str, object]:
        # the codes are always set once the view answered: () says "read, none", so a code
        # that clears is seen to clear instead of lingering from an older reading
        return {**not_none({"health": self.health, "healthy": self.healthy}),
                "fault_codes": tuple(self.error_codes), "fault_texts": tuple(self.error_info)}


_HEX_CODE = re.compile(r"(?:0[xX])?[0-9A-Fa-f]{1,9}")


def parse_health(
    text: str,
    *,
    npu_id: int | None = None,
    chip_id: int | None = None,
    source: str = "npu-smi info -t health",
) -> HealthInfo:
    """Command line equivalent: ``npu-smi info -t health -i N -c M``."""
    lines = require_kv_lines(text, source, "health")
    health: str | None = None
    codes: list[str] = []
    info: list[str] = []
    last = ""
    for item in lines:
        if item is None:
            continue
        key, value = item
        k = norm_key(key) or last
        if k == "health status":
            health = to_str(value)
        elif k == "error code":
            # a code is hex (A4025021; the device plugin's own have 9 digits): anything else on
            # the line is no code, and would reach the report and the app as one
            codes.extend(c for c in value.replace(",", " ").split() if _HEX_CODE.fullmatch(c))
        elif k == "error information":
            if to_str(value) is not None:
                info.append(value)
        elif k == "npu id" and npu_id is None:
            npu_id = to_int(value)
        elif k == "chip id" and chip_id is None:
            chip_id = to_int(value)
        if key:
            last = k
    if health is None and not any(norm_key(i[0]) == "health status" for i in lines if i):
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

        return not_none(
            {
                "ecc_single_bit_errors": total(
                    self.hbm_single_bit_errors, self.ddr_single_bit_errors
                ),
                "ecc_double_bit_errors": total(
                    self.hbm_double_bit_errors, self.ddr_double_bit_errors
                ),
                "ecc_single_bit_isolated_pages": total(
                    self.hbm_single_bit_isolated_pages, self.ddr_single_bit_isolated_pages
                ),
                "ecc_double_bit_isolated_pages": total(
                    self.hbm_double_bit_isolated_pages, self.ddr_double_bit_isolated_pages
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
    return per_chip(EccInfo, _ECC_SPEC, text, source, "ecc")

