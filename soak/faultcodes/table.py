"""What a fault code a chip reports means, and what it means for the acceptance verdict.

Two built-in tables, each entry with its source (docs/faults.md):

* **Ascend**: every DCMI fault code of Huawei's MindCluster device plugin and its level,
  ``ascend_fault_codes.json``, a byte-exact copy of the plugin's ``build/faultCode.json``
  (``provenance.json`` names the commit and the licence). A code's meaning comes from the same
  repository (``ascend_meanings.json``) where it gives one; elsewhere it is ``None``.
* **NVIDIA**: every Xid of NVIDIA's Xid Catalog (``nvidia_xids.json``) with its description,
  the catalog's immediate and investigatory resolution buckets, and soak's class.

An operator's own file in the device plugin's ``faultCode.json`` format is laid over the
built-in Ascend table (``load_table``; the plan's ``faults.codes_file``): the operator's level
wins for each code it names, every other code keeps the built-in one.

Severity for the verdict (the criterion reads ``FaultCode.severity``, never the level):

* Ascend: ``SeparateNPU`` and ``PreSeparateNPU`` (the plugin takes the chip out) are
  ``fail``; ``RestartNPU``, ``RestartBusiness``, ``FreeRestartNPU``, ``SubHealthFault`` and
  an unknown code are ``warn``; ``NotHandleFault`` and ``RestartRequest`` are ``info``.
* NVIDIA: a hardware class (``hardware``, ``memory``, ``nvlink``: uncorrectable, contained or
  uncontained ECC errors, a row-remap failure, fallen off the bus, NVLink errors, GSP and
  micro-controller faults) is ``fail``; ``memory-corrected``, ``thermal-power``, ``driver``,
  ``other`` and an unknown Xid are ``warn``; ``application`` and ``test`` are ``info``.

``interrupts_training`` says which codes stopped the work (the reliability figures count them
as failures): the Ascend levels that restart the workload or the chip or take the chip out,
and the hardware-class Xids.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from soak.errors import ConfigError, InputError
from soak.tomlfile import read_regular_file

NOT_HANDLE = "NotHandleFault"
RESTART_REQUEST = "RestartRequest"
RESTART_BUSINESS = "RestartBusiness"
FREE_RESTART_NPU = "FreeRestartNPU"
RESTART_NPU = "RestartNPU"
PRE_SEPARATE_NPU = "PreSeparateNPU"
SEPARATE_NPU = "SeparateNPU"
SUB_HEALTH = "SubHealthFault"
UNKNOWN = "Unknown"

ASCEND_LEVELS = (SEPARATE_NPU, PRE_SEPARATE_NPU, RESTART_NPU, FREE_RESTART_NPU, RESTART_BUSINESS,
                 RESTART_REQUEST, SUB_HEALTH, NOT_HANDLE)
"""The device plugin's levels, most serious first: the order in which its
``GetFaultTypeByCode`` tries them, so a code listed under two levels takes the first."""

LEVEL_KEYS: Mapping[str, str] = MappingProxyType({
    "NotHandleFaultCodes": NOT_HANDLE,
    "RestartRequestCodes": RESTART_REQUEST,
    "RestartBusinessCodes": RESTART_BUSINESS,
    "RestartNPUCodes": RESTART_NPU,
    "FreeRestartNPUCodes": FREE_RESTART_NPU,
    "SeparateNPUCodes": SEPARATE_NPU,
    "PreSeparateNPUCodes": PRE_SEPARATE_NPU,
    "SubHealthFaultCodes": SUB_HEALTH,
    # The plugin applies these to the chip's network health instead of the chip's own; what a
    # code means for the chip's acceptance is the same level either way.
    "NotHandleFaultNetworkCodes": NOT_HANDLE,
    "PreSeparateNPUNetworkCodes": PRE_SEPARATE_NPU,
    "SeparateNPUNetworkCodes": SEPARATE_NPU,
    "SubHealthFaultNetworkCodes": SUB_HEALTH,
})
"""Every key of ``faultCode.json`` the device plugin reads (its ``faultFileInfo``), and its level."""

ASCEND_ACTIONS: Mapping[str, str] = MappingProxyType({
    NOT_HANDLE: "none: the device plugin does not handle it",
    RESTART_REQUEST: "re-execute the request (inference) or the training job",
    RESTART_BUSINESS: "re-execute the workload",
    FREE_RESTART_NPU: "reset the chip when it is idle, then re-execute the workload",
    RESTART_NPU: "stop the workload, reset the chip, re-execute the workload",
    SEPARATE_NPU: "isolate the chip",
    PRE_SEPARATE_NPU: "pre-isolate the chip: schedule no new jobs on it",
    SUB_HEALTH: "sub-health: handled by the job's subHealthyStrategy",
})
"""What an operator does at each level, as MindCluster's documentation of the levels says."""

ASCEND_SEVERITY: Mapping[str, str] = MappingProxyType({
    SEPARATE_NPU: "fail", PRE_SEPARATE_NPU: "fail",
    RESTART_NPU: "warn", RESTART_BUSINESS: "warn", FREE_RESTART_NPU: "warn", SUB_HEALTH: "warn",
    UNKNOWN: "warn",
    NOT_HANDLE: "info", RESTART_REQUEST: "info",
})

XID_SEVERITY: Mapping[str, str] = MappingProxyType({
    "hardware": "fail",          # the GPU itself: fallen off the bus, GSP, micro-controller halt, fatal timeouts
    "memory": "fail",            # uncorrectable, contained or uncontained memory errors; remap/retirement failure
    "nvlink": "fail",            # NVLink errors and link training failures
    "memory-corrected": "warn",  # corrected-memory bookkeeping: remapping events, high single-bit rate
    "thermal-power": "warn",     # power smoothing circuitry, auxiliary power
    "driver": "warn",            # driver, firmware or software faults
    "other": "warn",             # engine exceptions of unclear cause, unused numbers
    UNKNOWN: "warn",
    "application": "info",       # the application's own fault: the GPU stays healthy
    "test": "info",              # injected or test messages
})
HARDWARE_XID_CLASSES = frozenset({"hardware", "memory", "nvlink"})
INTERRUPTING_LEVELS = frozenset({RESTART_NPU, RESTART_BUSINESS, FREE_RESTART_NPU, SEPARATE_NPU, PRE_SEPARATE_NPU})

_CODE = re.compile(r"[0-9A-Fa-f]{8,9}")
_BUILTIN_ASCEND_SOURCE = "built-in: Ascend/mind-cluster faultCode.json @{commit}"
_BUILTIN_XID_SOURCE = "built-in: NVIDIA Xid catalog"
_UNKNOWN_SOURCE = "unknown code"


@dataclass(frozen=True)
class FaultCode:
    """One code as a table knows it (or does not: ``known`` False, level ``Unknown``)."""

    vendor: str
    """``ascend`` or ``nvidia``."""
    code: str
    """Ascend: the hex code as npu-smi prints it (8 upper-case digits; 9 for the device
    plugin's own hang and UB codes); NVIDIA: the Xid number in decimal."""
    level: str
    """Ascend: the device plugin's level (``SeparateNPU``…); NVIDIA: soak's Xid class;
    ``Unknown`` when no table has the code."""
    meaning: str | None
    action: str | None
    """What an operator does: Ascend, from the level; NVIDIA, the catalog's resolution buckets."""
    source: str
    known: bool
    severity: str
    """What the code means for the acceptance verdict: ``fail``, ``warn`` or ``info``."""

    def to_json(self) -> dict[str, Any]:
        return {"vendor": self.vendor, "code": self.code, "level": self.level, "severity": self.severity,
                "meaning": self.meaning, "action": self.action, "source": self.source, "known": self.known,
                "interrupts_training": interrupts_training(self)}


def interrupts_training(fc: FaultCode) -> bool:
    """True when the code stopped the work on the chip: a restart of the workload or the chip,
    or the chip taken out (Ascend), or a hardware-class Xid. The reliability figures count these
    as failures."""
    if fc.vendor == "nvidia":
        return fc.level in HARDWARE_XID_CLASSES
    return fc.level in INTERRUPTING_LEVELS


def is_hardware(fc: FaultCode) -> bool:
    """A hardware-class Xid (``hardware``, ``memory`` or ``nvlink``)."""
    return fc.vendor == "nvidia" and fc.level in HARDWARE_XID_CLASSES


def code_value(code: str) -> int | None:
    """The number of an Ascend code however it is written (``80e01801``, ``0x80E01801``);
    None when it is not a hex code."""
    text = code.strip()
    if text[:2] in ("0x", "0X"):
        text = text[2:]
    if not re.fullmatch(r"[0-9A-Fa-f]{1,16}", text):
        return None
    return int(text, 16)


class FaultTable:
    """Ascend codes by number, each with its level, and the NVIDIA Xids. Immutable."""

    __slots__ = ("_ascend", "_xids", "_meanings")

    def __init__(self, ascend: Mapping[int, FaultCode], xids: Mapping[int, FaultCode],
                 meanings: Mapping[int, str]) -> None:
        self._ascend = MappingProxyType(dict(ascend))
        self._xids = MappingProxyType(dict(xids))
        self._meanings = MappingProxyType(dict(meanings))

    def ascend(self, code: str) -> FaultCode:
        """The entry of ``code`` (any case, with or without ``0x``); an unknown code is level
        ``Unknown``, severity ``warn``, source ``unknown code``."""
        value = code_value(code)
        found = self._ascend.get(value) if value is not None else None
        if found is not None:
            return found
        text = code.strip().upper().removeprefix("0X")
        return FaultCode(vendor="ascend", code=text.zfill(8) if value is not None else text, level=UNKNOWN,
                         meaning=None, action=None, source=_UNKNOWN_SOURCE, known=False,
                         severity=ASCEND_SEVERITY[UNKNOWN])

    def xid(self, xid: int) -> FaultCode:
        """The catalog's entry of Xid ``xid``; one it lacks is class ``Unknown``, ``warn``."""
        found = self._xids.get(xid)
        if found is not None:
            return found
        return FaultCode(vendor="nvidia", code=str(xid), level=UNKNOWN, meaning=None, action=None,
                         source=_UNKNOWN_SOURCE, known=False, severity=XID_SEVERITY[UNKNOWN])

    def ascend_codes(self) -> tuple[FaultCode, ...]:
        """Every Ascend entry, by number."""
        return tuple(self._ascend[k] for k in sorted(self._ascend))

    def layered(self, levels: Mapping[int, tuple[str, str]], source: str) -> FaultTable:
        """This table with ``levels`` (number -> (code as written, level)) laid over it: each
        code named takes that level and ``source``; the meaning stays the built-in one."""
        ascend = dict(self._ascend)
        for value, (spelling, level) in levels.items():
            old = ascend.get(value)
            ascend[value] = _ascend_entry(old.code if old else spelling, level, self._meanings.get(value), source)
        return FaultTable(ascend, self._xids, self._meanings)


def _ascend_entry(code: str, level: str, meaning: str | None, source: str) -> FaultCode:
    return FaultCode(vendor="ascend", code=code.upper(), level=level, meaning=meaning,
                     action=ASCEND_ACTIONS[level], source=source, known=True, severity=ASCEND_SEVERITY[level])


def parse_levels(data: Any, label: str) -> dict[int, tuple[str, str]]:
    """The levels of a ``faultCode.json`` document: number -> (code as written, level). A code
    under two levels takes the more serious, as the device plugin does. ``label`` names the
    file in the one-line ``InputError`` of a key that is no level or a code that is not hex."""
    if not isinstance(data, dict):
        raise InputError(f"{label}: not a faultCode.json table (a JSON object of level keys)")
    # the plugin's JSON decoder matches keys regardless of case; so does this reader
    keys = {k.lower(): k for k in LEVEL_KEYS}
    rank = {level: i for i, level in enumerate(ASCEND_LEVELS)}
    out: dict[int, tuple[str, str]] = {}
    for key, codes in data.items():
        if key.lower() not in keys:
            raise InputError(f"{label}: {key!r} is not a level key (known: {', '.join(LEVEL_KEYS)})")
        level = LEVEL_KEYS[keys[key.lower()]]
        if codes is None:
            continue
        if not isinstance(codes, list):
            raise InputError(f"{label}: {key} must be a list of codes, got {type(codes).__name__}")
        for code in codes:
            if not isinstance(code, str) or not _CODE.fullmatch(code):
                raise InputError(f"{label}: {key}: {code!r} is not 8 hex digits (9 for the device plugin's "
                                 "own hang and UB codes)")
            value = int(code, 16)
            old = out.get(value)
            if old is None or rank[level] < rank[old[1]]:
                out[value] = (code.upper(), level)
    return out


def read_levels(path: str | Path) -> dict[int, tuple[str, str]]:
    """The levels of the ``faultCode.json``-format file ``path`` (``parse_levels``); a
    missing, unreadable or malformed file is one ``InputError`` line naming it."""
    label = f"fault codes file {path}"
    raw = read_regular_file(path, "fault codes file", InputError)
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{label}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise InputError(f"{label}: not JSON: nested too deeply") from None
    except ValueError as exc:  # a number of more digits than int() converts (4300): not a code
        raise InputError(f"{label}: not a fault codes file: {str(exc).splitlines()[0]}") from None
    return parse_levels(data, label)


def level_counts(levels: Mapping[int, tuple[str, str]]) -> dict[str, int]:
    """How many codes each level has, most serious level first (levels without codes left out)."""
    counts = Counter(level for _, level in levels.values())
    return {level: counts[level] for level in ASCEND_LEVELS if counts[level]}


def _data(name: str) -> Any:
    return json.loads(resources.files(__package__).joinpath(name).read_text(encoding="utf-8"))


def _xid_entries(rows: Mapping[str, Mapping[str, Any]]) -> dict[int, FaultCode]:
    out = {}
    for number, row in rows.items():
        now, then = row["immediate_action"], row["investigatory_action"]
        action = f"{now}; investigate: {then}" if now and then and then != now else now or then
        out[int(number)] = FaultCode(vendor="nvidia", code=str(int(number)), level=row["class"],
                                     meaning=f"{row['description']} ({row['mnemonic']})", action=action,
                                     source=_BUILTIN_XID_SOURCE, known=True, severity=XID_SEVERITY[row["class"]])
    return out


@cache
def builtin_table() -> FaultTable:
    """The built-in tables (read once)."""
    commit = _data("provenance.json")["ascend_fault_codes.json"]["commit"]
    meanings = {int(code, 16): entry["meaning"] for code, entry in _data("ascend_meanings.json")["codes"].items()}
    levels = parse_levels(_data("ascend_fault_codes.json"), "built-in ascend_fault_codes.json")
    source = _BUILTIN_ASCEND_SOURCE.format(commit=commit[:8])
    ascend = {value: _ascend_entry(code, level, meanings.get(value), source)
              for value, (code, level) in levels.items()}
    return FaultTable(ascend, _xid_entries(_data("nvidia_xids.json")["xids"]), meanings)


def load_table(codes_file: str | Path | None, *, key: str | None = None) -> FaultTable:
    """The built-in table with the operator's ``faultCode.json``-format file laid over it
    (the operator's level wins for each code it names); ``None`` or ``""``: the built-in one.

    A bad file is one ``InputError`` line naming the file and what is wrong; given ``key``
    (``faults.codes_file``), a ``ConfigError`` that names the plan key too."""
    if codes_file in (None, ""):
        return builtin_table()
    try:
        levels = read_levels(codes_file)
    except InputError as exc:
        if key is None:
            raise
        raise ConfigError(f"{key}: {exc}") from None
    return builtin_table().layered(levels, f"operator: {codes_file}")


def lookup(table: FaultTable, codes: Iterable[str], *, xid: bool = False) -> list[FaultCode]:
    """The entries of ``codes`` (Ascend hex codes, or Xid numbers with ``xid``); a code that is
    neither is a one-line ``InputError``."""
    out = []
    for code in codes:
        if xid:
            if not (code.strip().isascii() and code.strip().isdigit()):
                raise InputError(f"Xid {code!r}: not a number like 79")
            out.append(table.xid(int(code)))
        else:
            if code_value(code) is None:
                raise InputError(f"fault code {code!r}: not a hex code like 80E01801")
            out.append(table.ascend(code))
    return out
