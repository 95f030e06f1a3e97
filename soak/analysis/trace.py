"""Long-format traces: ``timestamp,[node,]device,metric,value`` rows turned into sorted series.

A cluster trace (with ``node``) keys each chip ``node/device`` (``device_key``): detectors
work on keys and never see the difference; :meth:`Trace.place` gives a key's (node, device)
back as it was read, and the analysis names both in its findings. A single-node trace has no
places and costs nothing.

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

from soak.analysis._csv import TIMESTAMP_MAX_S, TIMESTAMP_MIN_S, read_long_csv, timestamp_problem
from soak.device_names import device_key
from soak.errors import InputError


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

    def __init__(
        self,
        series: dict[tuple[str, str], Series],
        source: str = "<trace>",
        places: dict[str, tuple[str, str]] | None = None,
    ) -> None:
        self._series = dict(sorted(series.items()))
        self.source = source
        # device key -> (node, device) for a cluster trace; empty for one node
        keys = {d for d, _ in self._series}
        # a trace's series never change after this: the names are worked out once (the
        # detectors ask per chip, thousands of times on a big trace)
        self._devices = sorted(keys)
        self._metrics = sorted({m for _, m in self._series})
        self._places = {k: v for k, v in (places or {}).items() if k in keys}
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
        return list(self._devices)

    def place(self, key: str) -> tuple[str | None, str]:
        """(node, device) of a series key; node is None in a single-node trace."""
        return self._places.get(key, (None, key))

    @property
    def nodes(self) -> list[str]:
        """The nodes of a cluster trace (empty for a single-node trace)."""
        return sorted({n for n, _ in self._places.values()})

    @property
    def metrics(self) -> list[str]:
        return list(self._metrics)

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

    def placed(self, places: dict[str, tuple[str, str]]) -> Trace:
        """This trace with more series keys placed on nodes (``{key: (node, device)}``), e.g.
        a cluster run's ranks, whose keys do not carry their node."""
        if not places:
            return self
        return Trace(self._series, self.source, {**self._places, **places})

    def until(self, ts: float) -> Trace:
        """The trace as it stood at ``ts``: the readings up to it (what an online analysis
        then saw)."""
        out = {}
        for key, s in self._series.items():
            i = int(np.searchsorted(s.t, ts, side="right"))
            if i:
                out[key] = Series(s.device, s.metric, s.t[:i], s.v[:i])
        return Trace(out, self.source, self._places)

    def without(self, spans: dict[tuple[str, str], list[tuple[float, float]]]) -> Trace:
        """This trace without the readings of ``{(device, metric): [(start, end), ...]}``
        (inclusive): readings that are not evidence (``soak.analysis.stale``)."""
        out = dict(self._series)
        for key, cuts in spans.items():
            s = out.get(key)
            if s is None:
                continue
            keep = np.ones(s.t.size, dtype=bool)
            for a, b in cuts:
                keep &= (s.t < a) | (s.t > b)
            if keep.any():
                out[key] = Series(s.device, s.metric, s.t[keep], s.v[keep])
            else:
                del out[key]
        return Trace(out, self.source, self._places)

    # -- builders -----------------------------------------------------------------------
    @classmethod
    def from_rows(
        cls, rows: Iterable[tuple], source: str = "<rows>"
    ) -> Trace:
        """From (ts, device, metric, value) tuples, e.g. ``Store.load_trace(run_id)``, or
        (ts, node, device, metric, value) tuples of a cluster."""
        codes: dict[tuple[str, str], int] = {}
        places: dict[str, tuple[str, str]] = {}
        ts: list[float] = []
        keys: list[int] = []
        vals: list[float] = []
        for i, row in enumerate(rows, start=1):
            try:
                if len(row) == 5:
                    t, node, dev, met, val = row
                    key_dev = device_key(str(node), str(dev))
                    places[key_dev] = (str(node), str(dev))
                    dev = key_dev
                else:
                    t, dev, met, val = row
            except (TypeError, ValueError):
                raise InputError(
                    f"{source}: row {i}: expected (timestamp, [node,] device, metric, value)"
                ) from None
            try:
                tf = float(t)
                vf = float("nan") if val is None else float(val)
            except (TypeError, ValueError):
                raise InputError(
                    f"{source}: row {i}: non-numeric timestamp or value ({t!r}, {val!r})"
                ) from None
            problem = timestamp_problem(tf)
            if problem:
                raise InputError(f"{source}: row {i}: timestamp {t!r} {problem}")
            key = (str(dev), str(met))
            code = codes.setdefault(key, len(codes))
            ts.append(tf)
            keys.append(code)
            vals.append(vf)
        names = list(codes)
        return cls._build(
            {
                "t": np.asarray(ts, dtype=np.float64),
                "key": np.asarray(keys, dtype=np.int64),
                "v": np.asarray(vals, dtype=np.float64),
            },
            names,
            source,
            line_offset=1,
            line_word="row",
            places=places,
        )

    @classmethod
    def from_arrays(
        cls,
        series: dict[tuple, tuple[np.ndarray, np.ndarray]],
        source: str = "<arrays>",
    ) -> Trace:
        """From {(device, metric): (t, v)} arrays (the synthetic generator's output), or
        {(node, device, metric): (t, v)} for a cluster."""
        out: dict[tuple[str, str], Series] = {}
        places: dict[str, tuple[str, str]] = {}
        for name, (t, v) in series.items():
            if len(name) == 3:
                node, chip, met = name
                dev = device_key(node, chip)
                places[dev] = (node, chip)
            else:
                dev, met = name
            t = np.asarray(t, dtype=np.float64)
            v = np.asarray(v, dtype=np.float64)
            keep = ~np.isnan(v)
            t, v = t[keep], v[keep]
            if t.size and not np.all((t >= TIMESTAMP_MIN_S) & (t <= TIMESTAMP_MAX_S)):  # NaN too
                bad = float(t[~((t >= TIMESTAMP_MIN_S) & (t <= TIMESTAMP_MAX_S))][0])
                raise InputError(f"{source}: {dev}/{met}: timestamp {bad!r} {timestamp_problem(bad)}")
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
        return cls(out, source, places)

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str]) -> Trace:
        """Read a long-format CSV trace; bad input raises InputError naming file and line."""
        name = os.fspath(path)
        cols, names, places = read_long_csv(name)
        return cls._build(cols, names, name, line_offset=2, line_word="line", places=places)

    @classmethod
    def _build(
        cls,
        cols: dict[str, np.ndarray],
        names: list[tuple[str, str]],
        source: str,
        *,
        line_offset: int,
        line_word: str,
        places: dict[str, tuple[str, str]] | None = None,
    ) -> Trace:
        """Group rows by series, sort each by time, reject conflicting duplicates.

        ``cols`` holds ``t``, ``key`` (index into ``names``) and ``v``; they are popped so
        the unsorted copies are freed as soon as the sorted ones exist (a 33 M-row trace
        then peaks near 1 GB). ``line_offset`` turns a row index into the line number the
        user sees (2 for a CSV with a header).
        """
        keys = cols.pop("key")
        if keys.size == 0:
            return cls({}, source, places)
        n_keys = len(names)
        small = keys if keys.dtype == np.uint16 else keys.astype(
            np.uint16 if n_keys < 65_536 else np.int64)
        del keys
        counts = np.bincount(small, minlength=n_keys)
        if bool(np.all(small[1:] >= small[:-1])):
            # A file written series by series is already grouped: no sort, no copies (on
            # 33 M rows this saves a second of gathering and 0.8 GB); rows keep their index.
            order = None
            tsort, vsort = cols.pop("t"), cols.pop("v")
        else:
            # A stable sort on 16-bit keys is a radix sort in numpy: linear time on 33 M
            # rows, and it keeps each series' rows in file order (usually time order).
            order = np.argsort(small, kind="stable")
            tsort = cols.pop("t")[order]
            vsort = cols.pop("v")[order]
        del small
        ends = np.cumsum(counts)
        out: dict[tuple[str, str], Series] = {}
        present = np.flatnonzero(counts)
        # The usual file: every series in time order, no time twice, no gap. Its series are
        # the slices as they are (checked for all of them at once: thousands of series made a
        # loop of small NumPy calls cost more than the checks).
        d = np.diff(tsort)
        d[ends[present[:-1]] - 1] = 1.0  # a step from one series to the next says nothing
        if bool(np.all(d > 0)) and not bool(np.isnan(vsort).any()):
            for code in present.tolist():
                e = int(ends[code])
                dev, met = names[code]
                out[(dev, met)] = Series(dev, met, tsort[e - int(counts[code]) : e], vsort[e - int(counts[code]) : e])
            return cls(out, source, places)
        del d
        for code in present.tolist():
            e = int(ends[code])
            b = e - int(counts[code])
            t_g, v_g = tsort[b:e], vsort[b:e]
            o_g = np.arange(b, e) if order is None else order[b:e]
            d = np.diff(t_g)
            if np.any(d < 0):  # rows in any order are allowed
                sub = np.argsort(t_g, kind="stable")
                t_g[:] = t_g[sub]
                v_g[:] = v_g[sub]
                o_g[:] = o_g[sub]
                d = np.diff(t_g)
            valid = ~np.isnan(v_g)
            keep = valid
            dup = np.flatnonzero(d == 0)
            if dup.size:
                both = valid[dup] & valid[dup + 1]
                differ = dup[both & (v_g[dup] != v_g[dup + 1])]
                if differ.size:
                    i = int(differ[0])
                    r1, r2 = sorted((int(o_g[i]), int(o_g[i + 1])))
                    dev, met = names[code]
                    raise InputError(
                        f"{source}: {line_word} {r2 + line_offset}: duplicate timestamp {t_g[i]:g} "
                        f"for {dev}/{met} with a different value than {line_word} {r1 + line_offset}"
                    )
                # Of two rows at one time keep a valid one: drop the later if the earlier is.
                keep = valid.copy()
                keep[dup[valid[dup]] + 1] = False
            if not keep.all():
                t_g, v_g = t_g[keep], v_g[keep]
            if t_g.size:
                dev, met = names[code]
                out[(dev, met)] = Series(dev, met, t_g, v_g)
        return cls(out, source, places)
