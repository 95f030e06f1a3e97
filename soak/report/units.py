"""Numbers, times and durations as a report prints them, in the run's own time zone.

Every reader of the report (the PDF, the app, the cluster pages) formats a moment, a duration,
a share or a value of any shape through these, so "N/A", rounding and units read the same
everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any

from soak.analysis.messages import hm
from soak.analysis.messages import pct as share_text

# -- time ------------------------------------------------------------------------------------


def run_zone(name: str | None = None, utc_offset_s: float | None = None) -> tzinfo:
    """The run's time zone: its IANA name when the host had one, else its UTC offset, else UTC."""
    if name:
        try:
            from zoneinfo import ZoneInfo

            return ZoneInfo(name)
        except (KeyError, ValueError, OSError, ImportError):
            pass
    if utc_offset_s is not None:
        return timezone(timedelta(seconds=int(utc_offset_s)))
    return UTC


def zone_label(tz: tzinfo, at: float | None = None) -> str:
    """"Asia/Shanghai (UTC+08:00)", or "UTC"."""
    moment = datetime.fromtimestamp(at or 0.0, tz=tz)
    off = moment.utcoffset() or timedelta(0)
    if off == timedelta(0) and str(tz) in ("UTC", "UTC+00:00", "Etc/UTC"):
        return "UTC"
    total = int(off.total_seconds())
    sign = "+" if total >= 0 else "-"
    hh, mm = divmod(abs(total) // 60, 60)
    offset = f"UTC{sign}{hh:02d}:{mm:02d}"
    key = getattr(tz, "key", None)
    return f"{key} ({offset})" if key else offset


def when(ts: float | None, tz: tzinfo = UTC, *, seconds: bool = False) -> str:
    """A moment as a date and time in ``tz`` ("2026-11-30 22:33"); None is "N/A"."""
    if ts is None or (isinstance(ts, float) and not math.isfinite(ts)):
        return "N/A"
    return datetime.fromtimestamp(ts, tz=tz).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def span(a: float | None, b: float | None, tz: tzinfo = UTC) -> str:
    """"2026-11-30 22:33 – 23:10" (the date once when both ends share it)."""
    if a is None or b is None:
        return f"{when(a, tz)} – {when(b, tz)}"
    left, right = when(a, tz), when(b, tz)
    if left[:10] == right[:10]:
        right = right[11:]
    return f"{left} – {right}"


def dur(seconds: float | None) -> str:
    """A duration, as every figure of the report writes one (``soak.analysis.messages.hm``)."""
    return hm(seconds)


def written_share(seconds: float | None, total_s: float | None) -> str:
    """The share of ``total_s`` that a duration *as written* is (``dur``: whole minutes from a
    minute on): 1 h 36 min 59 s of 8 h is "20.0 %", never "20.2 %", which a reader multiplies
    back to 1 h 37 min."""
    if seconds is None or not total_s or total_s <= 0 or not math.isfinite(float(seconds)):
        return pct(None)
    s = math.floor(float(seconds) + 1e-6)
    return pct((s if s < 60 else s // 60 * 60) / total_s)


def dur_share(seconds: float | None, total_s: float | None) -> str:
    """A duration and its share of ``total_s``, the share of the duration as written."""
    return f"{dur(seconds)} ({written_share(seconds, total_s)})"


def num(x: float | None, digits: int = 3) -> str:
    """A number with ``digits`` significant digits, no exponent for everyday sizes."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "N/A"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    ax = abs(x)
    if ax == 0:
        return "0"
    if ax >= 10 ** digits:
        return f"{x:.0f}"
    if ax < 1e-3:
        return f"{x:.1e}"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(ax))))
    return f"{x:.{decimals}f}"


def pct(share: float | None) -> str:
    """A share, as every figure of the report writes one (``soak.analysis.messages.pct``)."""
    return share_text(share)



def plain(v: Any) -> str:
    """Any value without JSON or Python syntax: lists joined, records as "key value" pairs."""
    if v is None:
        return "N/A"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float):
        return num(v) if isinstance(v, float) else str(v)
    if isinstance(v, Mapping):
        return ", ".join(f"{k} {plain(x)}" for k, x in v.items())
    if isinstance(v, Sequence) and not isinstance(v, str | bytes):
        if v and all(isinstance(x, Mapping) for x in v):
            return "; ".join(plain(x) for x in v)
        return ", ".join(plain(x) for x in v) or "N/A"
    return str(v)
