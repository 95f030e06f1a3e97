"""Fast, strict reader of long-format CSV traces (``timestamp,[node,]device,metric,value``).

The ``node`` column is optional: a cluster trace names the machine of each chip. Its series
are keyed ``node/device`` (``soak.device_names.device_key``) and placed on their node. A
four-column trace is read without a per-row cost for the column it does not have; where its
device names read ``node/device`` (``soak`` exports a cluster run so) they are placed the same
way, once per name.

pyarrow parses the file on all cores; each record batch is copied into three preallocated
numpy arrays (time, series code, value: 18 bytes a row) and the Arrow table is freed. Device and metric names are dictionary-encoded by pyarrow, so
no Python string is created per row. On a conversion error we re-read the offending
column as text to name the first bad line: pyarrow's own message does not always carry it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from soak.device_names import device_key
from soak.errors import InputError

REQUIRED_COLUMNS = ("timestamp", "device", "metric", "value")
NODE_COLUMN = "node"
NULL_VALUES = ("", "NA", "N/A", "na", "n/a", "-", "nan", "NaN", "None", "null", "NULL")

_BLOCK_BYTES = 8 << 20
# A timestamp is unix seconds of a year Python's datetime can show (1 to 9999): outside that it
# is no time at all, and the detectors' block numbers ((t - t0) / width as int64) overflow.
TIMESTAMP_MIN_S = -62_135_596_800.0  # 0001-01-01 00:00:00 UTC
TIMESTAMP_MAX_S = 253_402_300_799.0  # 9999-12-31 23:59:59 UTC
_TIMESTAMP_HINT = "unix seconds, e.g. 1795941789.5"


def timestamp_problem(t: float) -> str | None:
    """Why ``t`` cannot be a trace timestamp (the end of a sentence about it), or None."""
    if not np.isfinite(t):
        return f"is not a finite number ({_TIMESTAMP_HINT})"
    if not TIMESTAMP_MIN_S <= t <= TIMESTAMP_MAX_S:
        return f"is out of range (years 1 to 9999 in {_TIMESTAMP_HINT})"
    return None


def _release_freed_memory() -> None:
    """Give freed heap memory back to the OS (glibc keeps it otherwise)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def _values(col: Any) -> np.ndarray:
    """A numeric Arrow array (float64, or dictionary indices) as NumPy: a view of its data,
    or a copy with NaN where a float is null. Arrow's ``to_numpy`` imports pandas to look
    for it (0.3 to 0.5 s of every ``soak analyze``), which this read does not need."""
    import pyarrow as pa

    dtype = np.dtype({pa.float64(): np.float64, pa.int32(): np.int32, pa.int64(): np.int64, pa.int16(): np.int16,
                      pa.int8(): np.int8}[col.type])
    bufs = col.buffers()
    n = len(col)
    vals = np.frombuffer(bufs[1], dtype=dtype, count=n, offset=col.offset * dtype.itemsize) if n else np.empty(0, dtype)
    if col.null_count == 0:
        return vals
    valid = np.unpackbits(np.frombuffer(bufs[0], dtype=np.uint8), count=col.offset + n, bitorder="little")
    return np.where(valid[col.offset :].astype(bool), vals, np.nan)


def _fresh(n: int, dtype: type) -> np.ndarray:
    """An uninitialised array in its own anonymous mapping, for the big per-row columns.

    numpy asks the kernel for huge pages on large arrays (madvise); where transparent huge
    pages are defragmented on demand, the first write then compacts memory: 3 s of CPU per
    1.6 GB on our test machine against 1 s with ordinary pages, a third of the time this
    reader spends beyond parsing. The columns are written once, in order: huge pages buy
    nothing here. The mapping is freed with the last array that views it.
    """
    import mmap

    dt = np.dtype(dtype)
    return np.frombuffer(mmap.mmap(-1, max(1, n * dt.itemsize)), dtype=dt, count=n)


def _check_file(path: str) -> list[str]:
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory, expected a CSV trace")
    try:
        with open(path, "rb") as fh:
            first = fh.readline()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    if not first.strip():
        raise InputError(f"{path}: empty file, expected header {','.join(REQUIRED_COLUMNS)}")
    try:
        header = [c.strip().strip('"') for c in first.decode("utf-8-sig").strip().split(",")]
    except UnicodeDecodeError:
        raise InputError(f"{path}: line 1: not UTF-8 text") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InputError(
            f"{path}: line 1: missing column(s) {', '.join(missing)}; "
            f"expected header {','.join(REQUIRED_COLUMNS)}, got {','.join(header)}"
        )
    return header


def _first_bad_line(path: str, column: str, allow_null: bool) -> str:
    """Name the first line whose ``column`` is not UTF-8 text, or (timestamp, value) not a
    number, or timestamp not a time (slow path, errors only)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    numeric = column in ("timestamp", "value")
    nulls = set(NULL_VALUES)
    offset = 0
    try:
        reader = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=_BLOCK_BYTES),
            convert_options=pacsv.ConvertOptions(
                include_columns=[column], column_types={column: pa.binary()}, strings_can_be_null=False
            ),
        )
        for batch in reader:
            raws = batch.column(0).to_pylist()
            for i, raw in enumerate(raws):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    return f"line {offset + i + 2}: {column} is not UTF-8 text"
                if not numeric:
                    continue
                cell = text.strip()
                if cell in nulls and allow_null:
                    continue
                if not cell:
                    return f"line {offset + i + 2}: {column} is empty"
                try:
                    number = float(text)
                except ValueError:  # 'NA' too: a gap where a value may be missing, not here
                    hint = f" ({_TIMESTAMP_HINT})" if column == "timestamp" else ""
                    return f"line {offset + i + 2}: {column} {text[:80]!r} is not a number{hint}"
                problem = timestamp_problem(number) if column == "timestamp" else None
                if problem:
                    return f"line {offset + i + 2}: {column} {cell[:80]!r} {problem}"
            offset += len(raws)
    except pa.ArrowInvalid as exc:  # the file is malformed before the bad cell is reached
        return f"malformed CSV: {(str(exc).strip().splitlines() or ['unreadable CSV'])[0]}"
    return f"{column} has a value that is not {'a number' if numeric else 'UTF-8 text'}"


def read_long_csv(
    path: str,
) -> tuple[dict[str, np.ndarray], list[tuple[str, str]], dict[str, tuple[str, str]]]:
    """Return ({"t": timestamps, "key": series codes, "v": values}, [(device, metric) per
    code], {device key: (node, device)}).

    With a ``node`` column the device of each code is ``device_key(node, device)`` and the
    third value maps it back; without one, so is each device written ``node/device``. Rows
    with a missing value are dropped; a missing timestamp, node, device or metric is an error.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    header = _check_file(path)
    with_node = NODE_COLUMN in header
    columns = REQUIRED_COLUMNS[:1] + ((NODE_COLUMN,) if with_node else ()) + REQUIRED_COLUMNS[1:]
    dict_t = pa.dictionary(pa.int32(), pa.string())
    convert = pacsv.ConvertOptions(
        include_columns=list(columns),
        column_types={
            "timestamp": pa.float64(),
            NODE_COLUMN: dict_t,
            "device": dict_t,
            "metric": dict_t,
            "value": pa.float64(),
        },
        null_values=list(NULL_VALUES),
        strings_can_be_null=True,
    )
    codes: dict[tuple[str, str], int] = {}
    dev_no: dict[str, int] = {}
    met_no: dict[str, int] = {}
    series_of = np.full((0, 0), -1, dtype=np.int64)  # (device number, metric number) -> series code
    places: dict[str, tuple[str, str]] = {}
    row0 = 0
    try:
        # One multi-threaded read (the streaming reader parses on one core only), then
        # batch by batch into preallocated numpy arrays; the Arrow table is freed after.
        # The system allocator returns the table's memory to the OS when it is freed;
        # Arrow's default pool keeps it, which would add ~1 GB to the peak on 33 M rows.
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=_BLOCK_BYTES),
            convert_options=convert,
            memory_pool=pa.system_memory_pool(),
        )
        total = table.num_rows
        ts = _fresh(total, np.float64)
        vals = _fresh(total, np.float64)
        keys = _fresh(total, np.uint16)
        # each batch let go once copied: its buffers go back to the OS (the system pool) while
        # the arrays fill, so the peak is the table, not the table and the arrays
        batches = table.to_batches()
        del table
        for b in range(len(batches)):
            batch, batches[b] = batches[b], None
            if b % 16 == 15:
                _release_freed_memory()  # glibc keeps freed blocks in its heap until trimmed
            n = batch.num_rows
            if n == 0:
                continue
            tcol, dcol, mcol, vcol = (batch.column(c) for c in REQUIRED_COLUMNS)
            checked = [("timestamp", tcol), ("device", dcol), ("metric", mcol)]
            if with_node:
                ncol = batch.column(NODE_COLUMN)
                checked.append((NODE_COLUMN, ncol))
                dcol = _node_devices(ncol, dcol, places)
            for name, col in checked:
                if col.null_count:
                    if name == "timestamp":  # empty, or 'nan' read as a gap: name the cell
                        raise InputError(f"{path}: {_first_bad_line(path, name, allow_null=False)}")
                    i = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
                    raise InputError(f"{path}: line {row0 + i + 2}: {name} is empty")
            t = ts[row0 : row0 + n]
            t[:] = _values(tcol)
            v = vals[row0 : row0 + n]
            v[:] = _values(vcol)  # nulls become NaN: gaps, dropped later
            if not np.all((t >= TIMESTAMP_MIN_S) & (t <= TIMESTAMP_MAX_S)):  # NaN compares False
                raise InputError(f"{path}: {_first_bad_line(path, 'timestamp', allow_null=False)}")
            if np.any(np.isinf(v)):
                i = int(np.flatnonzero(np.isinf(v))[0])
                raise InputError(f"{path}: line {row0 + i + 2}: value {v[i]} is not finite")
            # Map this batch's (device index, metric index) pairs to global series codes: its
            # names to global device and metric numbers, a table of those to series codes (a
            # Python step per name, not per pair: 512 chips x 8 metrics were 4,096 a batch).
            dn = dcol.dictionary.to_pylist()
            mn = mcol.dictionary.to_pylist()
            gd = np.array([dev_no.setdefault(x.strip(), len(dev_no)) for x in dn], dtype=np.int64)
            gm = np.array([met_no.setdefault(x.strip(), len(met_no)) for x in mn], dtype=np.int64)
            if series_of.shape != (len(dev_no), len(met_no)):
                grown = np.full((len(dev_no), len(met_no)), -1, dtype=np.int64)
                grown[: series_of.shape[0], : series_of.shape[1]] = series_of
                series_of = grown
            di = _values(dcol.indices).astype(np.int64)
            mi = _values(mcol.indices)
            pair = di * len(mn) + mi
            present = np.flatnonzero(np.bincount(pair, minlength=len(dn) * len(mn)))
            pd, pm = gd[present // len(mn)], gm[present % len(mn)]
            new = np.flatnonzero(series_of[pd, pm] < 0)  # series not seen before
            if new.size:
                # numbered in the order their first rows come: a file written series by
                # series then has its codes in row order, and needs no sort (``Trace._build``)
                runs = np.concatenate(([0], np.flatnonzero(np.diff(pair)) + 1))
                _, first_run = np.unique(pair[runs], return_index=True)  # aligned with present
                new = new[np.argsort(runs[first_run][new], kind="stable")]
            for k in new.tolist():
                if series_of[pd[k], pm[k]] < 0:  # (two names of a batch may strip to one)
                    series_of[pd[k], pm[k]] = len(codes)
                    codes[(dn[present[k] // len(mn)].strip(), mn[present[k] % len(mn)].strip())] = len(codes)
            lut = np.zeros(len(dn) * len(mn), dtype=np.int64)
            lut[present] = series_of[pd, pm]
            if len(codes) > 65_535 and keys.dtype == np.uint16:
                keys = keys.astype(np.int64)
            keys[row0 : row0 + n] = lut[pair]
            row0 += n
        batch = tcol = dcol = mcol = vcol = ncol = None  # drop the last batch's references too
        del batches, batch, tcol, dcol, mcol, vcol, ncol
        _release_freed_memory()
    except pa.ArrowInvalid as exc:
        msg = str(exc)
        # Arrow numbers the file's columns, which need not be in the usual order
        m = re.search(r"column #(\d+)", msg)
        column = header[int(m.group(1))] if m and int(m.group(1)) < len(header) else "value"
        for c in REQUIRED_COLUMNS:
            if f"'{c}'" in msg:
                column = c
        if column in REQUIRED_COLUMNS and ("conversion error" in msg.lower() or "invalid value" in msg.lower()):
            where = _first_bad_line(path, column, allow_null=column == "value")
            raise InputError(f"{path}: {where}") from None
        first_line = msg.strip().splitlines()[0] if msg.strip() else "unreadable CSV"
        raise InputError(f"{path}: malformed CSV: {first_line}") from None
    if row0 == 0:
        raise InputError(f"{path}: no data rows after the header")
    names = [k for k, _ in sorted(codes.items(), key=lambda kv: kv[1])]
    if not with_node:
        places = _written_places(d for d, _ in names)
    return {"t": ts, "key": keys, "v": vals}, names, places


def _written_places(devices: Iterable[str]) -> dict[str, tuple[str, str]]:
    """The places of a four-column trace's devices written ``node/device``, as ``soak`` exports
    a cluster run: this file format's own way to name a chip's node (a node name holds no
    ``/``), read back into the node and the device apart."""
    out: dict[str, tuple[str, str]] = {}
    for key in devices:
        node, sep, device = key.partition("/")
        if sep and node and device:
            out[key] = (node, device)
    return out


def _node_devices(ncol: Any, dcol: Any, places: dict[str, tuple[str, str]]) -> Any:
    """Fold the node column into the device column: one dictionary entry per (node, device)
    pair present in the batch, so no Python string is made per row."""
    import pyarrow as pa

    if ncol.null_count or dcol.null_count:
        return dcol  # the caller names the empty cell's line
    nn = ncol.dictionary.to_pylist()
    dn = dcol.dictionary.to_pylist()
    pair = _values(ncol.indices).astype(np.int64) * len(dn) + _values(dcol.indices)
    present = np.flatnonzero(np.bincount(pair, minlength=len(nn) * len(dn)))
    lut = np.full(len(nn) * len(dn), -1, dtype=np.int32)
    lut[present] = np.arange(present.size, dtype=np.int32)
    names = []
    for p in present.tolist():
        node, dev = nn[p // len(dn)].strip(), dn[p % len(dn)].strip()
        key = device_key(node, dev)
        places[key] = (node, dev)
        names.append(key)
    return pa.DictionaryArray.from_arrays(pa.array(lut[pair], pa.int32()), pa.array(names, pa.string()))
