"""The ``npu-smi info`` table: a parser written from its header lines.

npu-smi has printed at least five table layouts (widths 80 to 116 columns, with or without
Hugepages, HBM, ``Chip Phy-ID`` / ``Chip Device``, an extra container-pid column). None of
them is parsed by column position. Instead:

1. Lines are grouped: ``|`` lines between ``+---``/``+===`` borders form one group.
2. The chip header group (the one naming ``NPU`` and ``Health``/``Bus-Id``) gives, per line
   and per ``|`` cell, the field names; fields inside one cell are separated by two or more
   spaces (``Chip  Phy-ID``, ``Power(W)    Temp(C)``).
3. Each following group holds one chip per N lines, N being the number of header lines;
   line i of a chip is read against header line i, cell by cell. Inside a cell, values are
   taken in order, with ``used / total`` pairs kept together (``60056/ 65536``).
4. The process header group (``Process id``) is read the same way.

Unknown columns are kept in ``extras`` and never break a reading, so a future layout with
a new column or a new order still parses. ``NA`` and ``-`` become None, never 0.

Command line equivalent: ``npu-smi info``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from soak.errors import InputError
from soak.telemetry.npu_values import CONVERT, to_int

_PAIR_OR_TOKEN = re.compile(r"(\S+?)\s*/\s*(\S+)|\S+")
_HEADER_SPLIT = re.compile(r"\s{2,}|\t")
_NO_PROCESS = re.compile(r"no running processes found", re.IGNORECASE)

CHIP_KEYS: tuple[str, ...] = (
    "npu_id",
    "chip_id",
    "phy_id",
    "device_id",
    "name",
    "health",
    "bus_id",
    "power_w",
    "temp_c",
    "aicore_util_pct",
    "hugepages_used",
    "hugepages_total",
    "memory_used_mb",
    "memory_total_mb",
    "hbm_used_mb",
    "hbm_total_mb",
)
PROCESS_KEYS: tuple[str, ...] = ("npu_id", "chip_id", "pid", "name", "memory_mb")


@dataclass(frozen=True, slots=True)
class ChipRow:
    """One chip of ``npu-smi info``. Units in the names; None = the layout lacks it or NA/-."""

    npu_id: int
    chip_id: int
    phy_id: int | None = None
    device_id: int | None = None
    name: str | None = None
    health: str | None = None
    bus_id: str | None = None
    power_w: float | None = None
    temp_c: int | float | None = None
    aicore_util_pct: int | float | None = None
    hugepages_used: int | None = None
    hugepages_total: int | None = None
    memory_used_mb: int | None = None
    memory_total_mb: int | None = None
    hbm_used_mb: int | None = None
    hbm_total_mb: int | None = None
    # columns this parser does not know, as (header, raw text): kept, not in the contract JSON
    extras: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in CHIP_KEYS}


@dataclass(frozen=True, slots=True)
class ProcessRow:
    """One row of the process section. ``memory_mb`` is device memory held by the process."""

    npu_id: int
    chip_id: int
    pid: int | None
    name: str | None = None
    memory_mb: int | None = None
    extras: tuple[tuple[str, str], ...] = ()  # e.g. ("process id in container", "1234")

    def to_json(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in PROCESS_KEYS}


@dataclass(frozen=True, slots=True)
class InfoTable:
    """A parsed ``npu-smi info`` table.

    ``has_process_section`` tells "no processes" (section printed, empty) from "not known"
    (old layouts and trimmed captures print no section at all).
    """

    version: str | None
    chips: tuple[ChipRow, ...]
    processes: tuple[ProcessRow, ...]
    has_process_section: bool = False
    has_hbm_column: bool = False

    def to_json(self) -> dict[str, object]:
        """The ``soak parse npu-smi`` contract: version, chips, processes (JSON-ready)."""
        return {
            "version": self.version,
            "chips": [c.to_json() for c in self.chips],
            "processes": [p.to_json() for p in self.processes],
        }


# ---------------------------------------------------------------------------- header words

# Normalised header word -> (field, kind). kind: int/float/str, or "pair" for "used / total"
# columns whose field is the prefix of <prefix>_used / <prefix>_total.
_CHIP_FIELDS: dict[str, tuple[str, str]] = {
    "npu": ("npu_id", "int"),
    "npuid": ("npu_id", "int"),
    "name": ("name", "str"),
    "health": ("health", "str"),
    "powerw": ("power_w", "float"),
    "power": ("power_w", "float"),
    "tempc": ("temp_c", "num"),
    "temp": ("temp_c", "num"),
    "hugepagesusagepage": ("hugepages", "pair"),
    "hugepagesusage": ("hugepages", "pair"),
    "chip": ("chip_id", "int"),
    "chipid": ("chip_id", "int"),
    "phyid": ("phy_id", "int"),
    "device": ("device_id", "int"),
    "busid": ("bus_id", "str"),
    "aicore": ("aicore_util_pct", "num"),
    "memoryusagemb": ("memory", "pair_mb"),
    "memoryusage": ("memory", "pair_mb"),
    "hbmusagemb": ("hbm", "pair_mb"),
    "hbmusage": ("hbm", "pair_mb"),
}
_PROC_FIELDS: dict[str, tuple[str, str]] = {
    "npu": ("npu_id", "int"),
    "chip": ("chip_id", "int"),
    "processid": ("pid", "int"),
    "pid": ("pid", "int"),
    "processname": ("name", "str"),
    "processmemorymb": ("memory_mb", "int"),
    "processmemory": ("memory_mb", "int"),
}


def _norm(word: str) -> str:
    return re.sub(r"[^a-z0-9]", "", word.lower())


# ---------------------------------------------------------------------------- line handling


def _cells(line: str) -> list[str]:
    """The ``|`` cells of one table line (without the outer bars)."""
    body = line.strip()
    parts = body.split("|")
    parts = parts[1:]  # text before the first bar (indentation) is not a cell
    if parts and parts[-1].strip() == "":
        parts = parts[:-1]
    return parts


def _groups(lines: Iterable[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Runs of ``|`` lines; any ``+`` border (or other text) ends a run."""
    groups: list[list[tuple[int, str]]] = []
    current: list[tuple[int, str]] = []
    for lineno, line in lines:
        if line.startswith("|"):
            current.append((lineno, line))
        else:
            if current:
                groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def _header_fields(cell: str) -> list[str]:
    return [w for w, _ in _header_words(cell)]


def _header_words(cell: str) -> tuple[tuple[str, int], ...]:
    """Field names of one header cell with their offsets in the cell; fields are separated by
    two or more spaces (or a tab), a single space stays inside a name (``Process id``)."""
    out = []
    pos = 0
    for piece in _HEADER_SPLIT.split(cell):
        start = cell.find(piece, pos) if piece else pos
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            out.append((piece.strip(), start + lead))
        pos = start + len(piece)
    return tuple(out)


Word = tuple[str, int]  # a header field name and its offset inside its cell


@dataclass(frozen=True, slots=True)
class _Header:
    lines: tuple[tuple[tuple[Word, ...], ...], ...]  # per header line, per cell, fields

    @property
    def height(self) -> int:
        return len(self.lines)


def _read_header(group: list[tuple[int, str]]) -> _Header:
    return _Header(tuple(tuple(_header_words(c) for c in _cells(line)) for _, line in group))


def _split_cell(cell: str, headers: tuple[Word, ...], text_fields: set[str]) -> list[str]:
    """Assign a cell's text to its header fields.

    One field: the whole cell (a process name may hold spaces or be blank). Several fields:
    whitespace tokens with ``a / b`` kept whole, in order; surplus tokens join the text field
    (a name with a space). With fewer tokens than fields (a value printed as blanks), each
    token goes to the field whose name starts at or just before it, because npu-smi
    left-aligns a value under its header.
    """
    if not headers:
        return []  # a blank header cell (a spacer of a multi-line header) names nothing
    if len(headers) == 1:
        return [cell.strip()]
    toks = [(m.group(0), m.start()) for m in _PAIR_OR_TOKEN.finditer(cell)]
    if len(toks) >= len(headers):
        values = [t for t, _ in toks]
        if len(values) > len(headers):
            names = [_norm(w) for w, _ in headers]
            text_idx = next((i for i, n in enumerate(names) if n in text_fields), len(names) - 1)
            surplus = len(values) - len(headers)
            values = (
                values[:text_idx]
                + [" ".join(values[text_idx : text_idx + surplus + 1])]
                + values[text_idx + surplus + 1 :]
            )
        return values
    slots: list[list[str]] = [[] for _ in headers]
    for text, offset in toks:
        idx = max((i for i, (_, h) in enumerate(headers) if h <= offset + 1), default=0)
        slots[idx].append(text)
    return [" ".join(slot) for slot in slots]


def _expand(words: tuple[Word, ...], known: dict[str, tuple[str, str]]) -> tuple[Word, ...]:
    """Split a header field printed with single spaces (``Chip Phy-ID``) when every part is a
    known field on its own; ``Process id`` stays one field."""
    out: list[Word] = []
    for word, offset in words:
        parts = [(m.group(0), offset + m.start()) for m in re.finditer(r"\S+", word)]
        if _norm(word) not in known and len(parts) > 1 and all(_norm(p) in known for p, _ in parts):
            out.extend(parts)
        else:
            out.append((word, offset))
    return tuple(out)


def _pair(text: str) -> tuple[int | None, int | None]:
    m = re.fullmatch(r"\s*(\S*?)\s*/\s*(\S*)\s*", text)
    if not m:
        return to_int(text), None
    return to_int(m.group(1)), to_int(m.group(2))


def _fields_of_block(
    block: list[tuple[int, str]],
    header: _Header,
    known: dict[str, tuple[str, str]],
    source: str,
) -> tuple[dict[str, object], list[tuple[str, str]]]:
    """Read one chip (or process) block against the header: {field: value}, extras."""
    values: dict[str, object] = {}
    extras: list[tuple[str, str]] = []
    text_fields = {k for k, (_, kind) in known.items() if kind == "str"}
    for (lineno, line), header_cells in zip(block, header.lines, strict=True):
        cells = _cells(line)
        if len(cells) != len(header_cells):
            raise InputError(
                f"{source}: line {lineno}: {len(cells)} cells where the header has "
                f"{len(header_cells)}: {line.strip()[:80]!r}"
            )
        for cell, raw_words in zip(cells, header_cells, strict=True):
            words = _expand(raw_words, known)
            for (word, _), raw in zip(words, _split_cell(cell, words, text_fields), strict=True):
                spec = known.get(_norm(word))
                if spec is None:
                    extras.append((word, raw.strip()))
                    continue
                name, kind = spec
                if kind in ("pair", "pair_mb"):
                    used, total = _pair(raw)
                    suffix = "_mb" if kind == "pair_mb" else ""
                    values[f"{name}_used{suffix}"] = used
                    values[f"{name}_total{suffix}"] = total
                else:
                    values[name] = CONVERT[kind](raw)
    return values, extras


def _group_words(group: list[tuple[int, str]]) -> set[str]:
    return {_norm(w) for _, line in group for c in _cells(line) for w in _header_fields(c)}


def _is_chip_header(group: list[tuple[int, str]]) -> bool:
    # cheap test first: this runs on every group, and data rows never say "health"/"bus-id"
    if not group or not any(k in ln.lower() for _, ln in group for k in ("health", "bus-id")):
        return False
    first = [_norm(w) for c in _cells(group[0][1]) for w in _header_fields(c)]
    words = _group_words(group)
    return bool(first) and first[0] in ("npu", "npuid") and bool(words & {"health", "busid"})


def _is_process_header(group: list[tuple[int, str]]) -> bool:
    if not any("process" in ln.lower() or "pid" in ln.lower() for _, ln in group):
        return False
    words = _group_words(group)
    return bool(words & {"processid", "pid"}) and "health" not in words


def _check_text(text: str, source: str) -> list[tuple[int, str]]:
    if "\x00" in text:
        raise InputError(f"{source}: binary data, not npu-smi text")
    if text.count("\ufffd") > 8:
        raise InputError(f"{source}: not UTF-8 text")
    lines = [(n, ln.rstrip().lstrip()) for n, ln in enumerate(text.splitlines(), start=1)]
    if not any(ln for _, ln in lines):
        raise InputError(f"{source}: empty, no npu-smi table")
    return lines


_VERSION = re.compile(r"Version:\s*(\S+)")


def parse_info_table(text: str, *, source: str = "npu-smi output") -> InfoTable:
    """Parse the text ``npu-smi info`` printed. ``source`` names the input in errors.

    Raises InputError when there is no table (empty, binary, an error message instead).
    """
    lines = _check_text(text, source)
    version = None
    for _, line in lines:
        if line.startswith("|") and (m := _VERSION.search(line)):
            version = m.group(1)  # no break: with two tables pasted together the last one counts
    groups = _groups(lines)
    chip_header: _Header | None = None
    proc_header: _Header | None = None
    chips: list[ChipRow] = []
    procs: list[ProcessRow] = []
    has_hbm = False
    for group in groups:
        if len(group) == 1 and len(_cells(group[0][1])) == 1 and _VERSION.search(group[0][1]):
            continue  # the banner; read above
        if _is_chip_header(group):
            # a second table (two captures pasted together): the last one is the freshest
            chips, procs = [], []
            chip_header = _read_header(group)
            proc_header = None
            has_hbm = any(
                _norm(w).startswith("hbmusage")
                for ln in chip_header.lines
                for c in ln
                for w, _ in c
            )
            continue
        if _is_process_header(group):
            proc_header = _read_header(group)
            continue
        if proc_header is not None:
            procs.extend(_read_processes(group, proc_header, source))
        elif chip_header is not None:
            chips.extend(_read_chips(group, chip_header, source))
    if chip_header is None:
        first = next((ln for _, ln in lines if ln), "")
        raise InputError(f"{source}: no npu-smi info table found (starts with {first[:60]!r})")
    return InfoTable(
        version=version,
        chips=tuple(chips),
        processes=tuple(procs),
        has_process_section=proc_header is not None,
        has_hbm_column=has_hbm,
    )


def _read_chips(group: list[tuple[int, str]], header: _Header, source: str) -> list[ChipRow]:
    if len(group) % header.height:
        lineno = group[0][0]
        raise InputError(
            f"{source}: line {lineno}: a chip block of {len(group)} lines, "
            f"the header has {header.height}"
        )
    rows = []
    for i in range(0, len(group), header.height):
        block = group[i : i + header.height]
        values, extras = _fields_of_block(block, header, _CHIP_FIELDS, source)
        if values.get("npu_id") is None or values.get("chip_id") is None:
            raise InputError(f"{source}: line {block[0][0]}: a chip row without NPU or chip id")
        rows.append(ChipRow(**values, extras=tuple(extras)))  # type: ignore[arg-type]
    return rows


def _read_processes(group: list[tuple[int, str]], header: _Header, source: str) -> list[ProcessRow]:
    rows = []
    i = 0
    while i < len(group):
        lineno, line = group[i]
        if _NO_PROCESS.search(line):
            i += 1
            continue
        block = group[i : i + header.height]
        if len(block) < header.height:
            raise InputError(f"{source}: line {lineno}: an incomplete process row")
        values, extras = _fields_of_block(block, header, _PROC_FIELDS, source)
        if values.get("npu_id") is None or values.get("chip_id") is None:
            raise InputError(f"{source}: line {lineno}: a process row without NPU or chip id")
        values.setdefault("pid", None)
        rows.append(ProcessRow(**values, extras=tuple(extras)))  # type: ignore[arg-type]
        i += header.height
    return rows
