"""Fast, strict reader of long-format CSV traces (``timestamp,device,metric,value``).

pyarrow parses the file in batches on all cores; each batch becomes three numpy arrays
(time, series code, value). Device and metric names are dictionary-encoded by pyarrow, so
no Python string is created per row. On a conversion error we re-read the offending
column as text to name the first bad line: pyarrow's own message does not always carry it.
"""

from __future__ import annotations

import os

import numpy as np

from soak.analysis.trace import NULL_VALUES, REQUIRED_COLUMNS
from soak.errors import InputError

_BLOCK_BYTES = 8 << 20


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
    """Name the first line whose ``column`` is not a number (slow path, errors only)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    reader = pacsv.open_csv(
        path,
        read_options=pacsv.ReadOptions(block_size=_BLOCK_BYTES),
        convert_options=pacsv.ConvertOptions(
            include_columns=[column], column_types={column: pa.string()}, strings_can_be_null=False
        ),
    )
    offset = 0
    nulls = set(NULL_VALUES)
    for batch in reader:
        texts = batch.column(0).to_pylist()
        for i, text in enumerate(texts):
            if text.strip() in nulls:
                if not allow_null:
                    return f"line {offset + i + 2}: {column} is empty"
                continue
            try:
                float(text)
            except ValueError:
                return f"line {offset + i + 2}: {column} {text!r} is not a number"
        offset += len(texts)
    return f"{column} has a value that is not a number"


def read_long_csv(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[str, str]]]:
    """Return (timestamps, series codes, values, [(device, metric) per code]).

    Rows with a missing value are dropped; a missing timestamp, device or metric is an error.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    _check_file(path)
    dict_t = pa.dictionary(pa.int32(), pa.string())
    convert = pacsv.ConvertOptions(
        include_columns=list(REQUIRED_COLUMNS),
        column_types={
            "timestamp": pa.float64(),
            "device": dict_t,
            "metric": dict_t,
            "value": pa.float64(),
        },
        null_values=list(NULL_VALUES),
        strings_can_be_null=True,
    )
    ts_parts: list[np.ndarray] = []
    key_parts: list[np.ndarray] = []
    val_parts: list[np.ndarray] = []
    codes: dict[tuple[str, str], int] = {}
    row0 = 0
    try:
        reader = pacsv.open_csv(
            path, read_options=pacsv.ReadOptions(block_size=_BLOCK_BYTES), convert_options=convert
        )
        for batch in reader:
            n = batch.num_rows
            if n == 0:
                continue
            tcol, dcol, mcol, vcol = (batch.column(c) for c in REQUIRED_COLUMNS)
            for name, col in (("timestamp", tcol), ("device", dcol), ("metric", mcol)):
                if col.null_count:
                    i = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
                    raise InputError(f"{path}: line {row0 + i + 2}: {name} is empty")
            t = tcol.to_numpy(zero_copy_only=False)
            v = vcol.to_numpy(zero_copy_only=False)  # nulls become NaN
            if not np.all(np.isfinite(t)):
                i = int(np.flatnonzero(~np.isfinite(t))[0])
                raise InputError(f"{path}: line {row0 + i + 2}: timestamp {t[i]} is not finite")
            if np.any(np.isinf(v)):
                i = int(np.flatnonzero(np.isinf(v))[0])
                raise InputError(f"{path}: line {row0 + i + 2}: value {v[i]} is not finite")
            # Map this batch's (device index, metric index) pairs to global series codes.
            dn = dcol.dictionary.to_pylist()
            mn = mcol.dictionary.to_pylist()
            di = dcol.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            mi = mcol.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            pair = di * len(mn) + mi
            present = np.unique(pair)
            lut = np.zeros(len(dn) * len(mn), dtype=np.int64)
            for p in present.tolist():
                key = (dn[p // len(mn)].strip(), mn[p % len(mn)].strip())
                lut[p] = codes.setdefault(key, len(codes))
            # Missing readings stay as NaN so row numbers stay true; Trace drops them.
            ts_parts.append(t.astype(np.float64, copy=False))
            key_parts.append(lut[pair].astype(np.int32))
            val_parts.append(v)
            row0 += n
    except pa.ArrowInvalid as exc:
        msg = str(exc)
        column = "value"
        for c in ("timestamp", "value"):
            if f"'{c}'" in msg or f"column #{REQUIRED_COLUMNS.index(c)}" in msg:
                column = c
        if "conversion error" in msg.lower() or "invalid value" in msg.lower():
            where = _first_bad_line(path, column, allow_null=column == "value")
            raise InputError(f"{path}: {where}") from None
        first_line = msg.strip().splitlines()[0] if msg.strip() else "unreadable CSV"
        raise InputError(f"{path}: malformed CSV: {first_line}") from None
    if row0 == 0:
        raise InputError(f"{path}: no data rows after the header")
    names = [k for k, _ in sorted(codes.items(), key=lambda kv: kv[1])]
    ts = np.concatenate(ts_parts) if ts_parts else np.empty(0)
    keys = np.concatenate(key_parts) if key_parts else np.empty(0, np.int32)
    vals = np.concatenate(val_parts) if val_parts else np.empty(0)
    return ts, keys, vals, names
