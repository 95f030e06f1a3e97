"""Long-format traces: ``timestamp,device,metric,value`` rows turned into sorted series.

A trace is a set of series, one per (device, metric), each a pair of float64 numpy arrays
sorted by time. Rows may arrive in any order and with gaps; a missing value (empty, ``NA``,
``-``, ``nan``) is dropped, never read as 0. Two rows with the same (device, metric,
timestamp) and *different* values are an error: we cannot tell which reading is true.
Exact repeats are dropped.

CSV reading streams through ``pyarrow.csv`` in batches so a 72 h x 16 chip x 8 metric trace
(about 33 M rows) is read in seconds, holding only numpy arrays (24 bytes a row) rather
than millions of Python strings.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from soak.errors import InputError

REQUIRED_COLUMNS = ("timestamp", "device", "metric", "value")
NULL_VALUES = ("", "NA", "N/A", "na", "n/a", "-", "nan", "NaN", "None", "null", "NULL")


@dataclass(frozen=True)
class Series:
    """One (device, metric) series: ``t`` unix seconds ascending, ``v`` values (float64)."""

    device: str
    metric: str
    t: np.ndarray
    v: np.ndarray

    def __len__(self) -> int:
        return int(self.t.size)

    @property
    def start(self) -> float:
        return float(self.t[0])

    @property
    def end(self) -> float:
        return float(self.t[-1])

    def median_dt_s(self) -> float | None:
        """Typical sampling interval, or None with fewer than two points."""
        if self.t.size < 2:
            return None
        return float(np.median(np.diff(self.t[: min(self.t.size, 100_000)])))


class Trace:
    """All series of one run. Build with :meth:`from_csv`, :meth:`from_rows` or :meth:`from_arrays`."""

    def __init__(self, series: dict[tuple[str, str], Series], source: str = "<trace>") -> None:
        self._series = dict(sorted(series.items()))
        self.source = source
        if self._series:
            self.start: float | None = min(s.start for s in self._series.values())
            self.end: float | None = max(s.end for s in self._series.values())
        else:
            self.start = self.end = None

    # -- access -------------------------------------------------------------------------
    def get(self, device: str, metric: str) -> Series | None:
        return self._series.get((device, metric))

    def series(self, metric: str | None = None) -> Iterator[Series]:
        """Every series, or those of one metric, in (device, metric) order."""
        for (_, m), s in self._series.items():
            if metric is None or m == metric:
                yield s

    @property
    def devices(self) -> list[str]:
        return sorted({d for d, _ in self._series})

    @property
    def metrics(self) -> list[str]:
        return sorted({m for _, m in self._series})

    @property
    def n_rows(self) -> int:
        return sum(len(s) for s in self._series.values())

    @property
    def duration_s(self) -> float:
        return 0.0 if self.start is None else float(self.end - self.start)

    def __len__(self) -> int:
        return len(self._series)

    def __repr__(self) -> str:
        return f"Trace({self.source!r}, series={len(self)}, rows={self.n_rows})"

    # -- builders -----------------------------------------------------------------------
    @classmethod
    def from_rows(
        cls, rows: Iterable[tuple[float, str, str, float | None]], source: str = "<rows>"
    ) -> Trace:
        """From (ts, device, metric, value) tuples, e.g. ``Store.load_trace(run_id)``."""
        codes: dict[tuple[str, str], int] = {}
        ts: list[float] = []
        keys: list[int] = []
        vals: list[float] = []
        for i, row in enumerate(rows, start=1):
            try:
                t, dev, met, val = row
            except (TypeError, ValueError):
                raise InputError(f"{source}: row {i}: expected (timestamp, device, metric, value)") from None
            try:
                tf = float(t)
                vf = float("nan") if val is None else float(val)
            except (TypeError, ValueError):
                raise InputError(
                    f"{source}: row {i}: non-numeric timestamp or value ({t!r}, {val!r})"
                ) from None
            if not np.isfinite(tf):
                raise InputError(f"{source}: row {i}: timestamp {t!r} is not a finite number")
            key = (str(dev), str(met))
            code = codes.setdefault(key, len(codes))
            ts.append(tf)
            keys.append(code)
            vals.append(vf)
        names = list(codes)
        return cls._build(
            np.asarray(ts, dtype=np.float64),
            np.asarray(keys, dtype=np.int64),
            np.asarray(vals, dtype=np.float64),
            names,
            source,
            line_offset=1,
            line_word="row",
        )

    @classmethod
    def from_arrays(
        cls,
        series: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]],
        source: str = "<arrays>",
    ) -> Trace:
        """From {(device, metric): (t, v)} arrays (the synthetic generator's output)."""
        out: dict[tuple[str, str], Series] = {}
        for (dev, met), (t, v) in series.items():
            t = np.asarray(t, dtype=np.float64)
            v = np.asarray(v, dtype=np.float64)
            keep = ~np.isnan(v)
            t, v = t[keep], v[keep]
            if t.size and np.any(np.diff(t) <= 0):
                order = np.argsort(t, kind="stable")
                t, v = t[order], v[order]
                dup = np.flatnonzero(np.diff(t) == 0)
                if dup.size and np.any(v[dup] != v[dup + 1]):
                    raise InputError(
                        f"{source}: {dev}/{met}: duplicate timestamp {t[dup[0]]} with different values"
                    )
                if dup.size:
                    mask = np.ones(t.size, bool)
                    mask[dup + 1] = False
                    t, v = t[mask], v[mask]
            if t.size:
                out[(dev, met)] = Series(dev, met, t, v)
        return cls(out, source)

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str]) -> Trace:
        """Read a long-format CSV trace; bad input raises InputError naming file and line."""
        from soak.analysis._csv import read_long_csv

        name = os.fspath(path)
        ts, keys, vals, names = read_long_csv(name)
        return cls._build(ts, keys, vals, names, name, line_offset=2, line_word="line")

    @classmethod
    def _build(
        cls,
        ts: np.ndarray,
        keys: np.ndarray,
        vals: np.ndarray,
        names: list[tuple[str, str]],
        source: str,
        *,
        line_offset: int,
        line_word: str,
    ) -> Trace:
        """Group rows by key, sort each group by time, reject conflicting duplicates.

        ``keys[i]`` indexes ``names``; ``line_offset`` turns a row index into the line
        number the user sees (2 for a CSV with a header).
        """
        if ts.size == 0:
            return cls({}, source)
        n_keys = len(names)
        small = keys.astype(np.uint16 if n_keys < 65_536 else np.int64, copy=False)
        # A stable sort on 16-bit keys is a radix sort in numpy: linear time on 33 M rows.
        order = np.argsort(small, kind="stable")
        del small
        ks = keys[order]
        tsort = ts[order]
        bounds = np.flatnonzero(np.diff(ks)) + 1
        starts = np.concatenate(([0], bounds))
        ends = np.concatenate((bounds, [ks.size]))
        del ks
        d = np.diff(tsort)
        inside = np.ones(d.size, dtype=bool)
        inside[bounds - 1] = False  # differences across group boundaries do not count
        if np.any((d < 0) & inside):
            # Rows in any order are allowed: sort only the groups that need it.
            for s, e in zip(starts, ends, strict=True):
                seg = tsort[s:e]
                if seg.size > 1 and np.any(np.diff(seg) < 0):
                    sub = np.argsort(seg, kind="stable")
                    order[s:e] = order[s:e][sub]
                    tsort[s:e] = seg[sub]
            d = np.diff(tsort)
        vsort = vals[order]
        valid = ~np.isnan(vsort)
        dup = np.flatnonzero((d == 0) & inside)
        keep = valid
        if dup.size:
            both = valid[dup] & valid[dup + 1]
            differ = dup[both & (vsort[dup] != vsort[dup + 1])]
            if differ.size:
                i = int(differ[0])
                a, b = sorted((int(order[i]), int(order[i + 1])))
                dev, met = names[int(keys[order[i]])]
                raise InputError(
                    f"{source}: {line_word} {b + line_offset}: duplicate timestamp {tsort[i]:g} for "
                    f"{dev}/{met} with a different value than {line_word} {a + line_offset}"
                )
            # Of two rows at one time keep a valid one: drop the later if the earlier is valid.
            keep = valid.copy()
            drop = dup[valid[dup]]
            keep[drop + 1] = False
        out: dict[tuple[str, str], Series] = {}
        for s, e in zip(starts, ends, strict=True):
            code = int(keys[order[s]])
            t_g, v_g = tsort[s:e], vsort[s:e]
            k = keep[s:e]
            if not k.all():
                t_g, v_g = t_g[k], v_g[k]
            if t_g.size:
                dev, met = names[code]
                out[(dev, met)] = Series(dev, met, t_g, v_g)
        return cls(out, source)
