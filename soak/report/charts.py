"""Static charts for the PDF (matplotlib, Agg backend, PNG bytes).

One chart per metric with every chip overlaid: on 16 chips a per-chip grid would be 80 tiny
panels, while an overlay shows the outlier at a glance. Chips named in a finding are drawn
thick, the finding's time span is shaded, and restarts/crashes are dashed vertical lines; a
legend names each kind of mark. Utilization is drawn on its whole 0-100 % range: an
autoscaled 92-98 % axis makes sampling noise look like a problem.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from soak.report.fonts import FontChoice, matplotlib_font_family
from soak.report.i18n import t
from soak.report.model import SERIES_METRICS, ReportData, Series

_GIB = 1024**3
CHART_ASPECT = 2.3 / 7.2  # height / width of every chart (the PDF sizes its images with it)
# Metrics with a fixed range: shown whole, so noise looks like noise.
_FIXED_RANGE = {"util_pct": (0.0, 100.0)}
# Events worth a vertical line on every chart.
_MARKED_EVENTS = ("restart", "crash", "exit", "hang", "inject", "workload_exit", "workload_crash")
# Events after which a rank's step times are another process's: its line breaks there.
BREAKING_EVENTS = ("crash", "workload_crash", "hang", "restart")
GAP_INTERVALS = 3.0  # readings farther apart than this many typical intervals: a gap, not a line
_RANK = re.compile(r".*-rank(\d+)")  # a rank's series: ``soak.device_names.rank_device``


def _scale(metric: str) -> float:
    return 1.0 / _GIB if metric.endswith("_bytes") else 1.0


def metric_chart_png(
    data: ReportData,
    metric: str,
    *,
    lang: str = "en",
    font: FontChoice | None = None,
    width_in: float = 7.2,
    height_in: float = 7.2 * CHART_ASPECT,
    dpi: int = 110,
) -> bytes | None:
    """PNG of ``metric`` for every chip, or None when no chip has that series."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    series = [s for s in data.series if s.metric == metric and s.ts]
    if not series:
        return None
    t0 = data.run.started_at if data.run.started_at is not None else min(s.ts[0] for s in series)
    # expected, explained findings (severity info: a checkpoint's dip) flag nothing
    shown = [f for f in data.findings if f.severity != "info" and f.metric in (metric, None)]
    flagged = {f.device for f in shown}
    scale = _scale(metric)

    with plt.rc_context({"font.family": matplotlib_font_family(font), "font.size": 7}):
        fig, ax = plt.subplots(figsize=(width_in, height_in), dpi=dpi)
        try:
            marked = [e for e in data.events if any(k in e.kind for k in _MARKED_EVENTS)]
            crashes = [e.ts for e in data.events if e.kind in BREAKING_EVENTS]
            lines = chart_lines(series, flagged, metric, lang, crashes=crashes)
            # the chips a finding names in colour and in the legend, every other one grey, as the
            # legend's "other chips" says: a colour no legend names would say nothing
            for line in lines:
                hot = line.device in flagged
                ax.plot(
                    [(x - t0) / 3600.0 for x in line.xs],
                    [y * scale for y in line.ys],
                    lw=1.6 if hot else 1.0 if line.label else 0.6,
                    color="#d62728" if hot else "#1f4e79" if line.label else "#7f7f7f",
                    alpha=1.0 if hot or line.label else 0.5,
                    label=line.label,
                    zorder=3 if hot or line.label else 2,
                )
            for f in shown:
                if f.start is None or f.end is None:
                    continue
                ax.axvspan((f.start - t0) / 3600, (f.end - t0) / 3600, color="#ffbf00", alpha=0.15)
            spans = any(f.start is not None and f.end is not None for f in shown)
            for e in marked:
                ax.axvline((e.ts - t0) / 3600, color="#444444", lw=0.7, ls="--", zorder=1)
            ax.set_ylabel(t(metric, lang))
            ax.set_xlabel(t("run_time_h", lang))
            if metric in _FIXED_RANGE:
                ax.set_ylim(*_FIXED_RANGE[metric])
            ax.grid(True, lw=0.3, alpha=0.5)
            handles = _legend(ax, lang, others=others_label(lines, metric, lang), spans=spans, events=bool(marked))
            if handles:
                ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=6,
                          frameon=False, borderaxespad=0.0)
            fig.tight_layout(pad=0.4)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=dpi)
        finally:
            plt.close(fig)
    return buf.getvalue()


def _legend(ax, lang: str, *, others: str | None, spans: bool, events: bool) -> list:  # noqa: ANN001 - Axes
    """Legend handles: the series drawn by name, then the rest as what they are, then what
    the other marks mean."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = list(ax.get_legend_handles_labels()[0])
    if others:
        handles.append(Line2D([], [], color="#7f7f7f", lw=0.6, label=others))
    if spans:
        handles.append(Patch(color="#ffbf00", alpha=0.3, label=t("legend_finding", lang)))
    if events:
        handles.append(Line2D([], [], color="#444444", lw=0.7, ls="--", label=t("legend_event", lang)))
    return handles


@dataclass(frozen=True)
class Line:
    """One series as the chart draws it: NaN where the line breaks (a gap, a crash), and its
    legend label (None: one of the rest, named together)."""

    device: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    label: str | None


def _rank(device: str) -> int | None:
    m = _RANK.fullmatch(device)
    return None if m is None else int(m.group(1))


def broken(ts: Sequence[float], values: Sequence[float | None], *, crashes: Sequence[float] = ()) -> tuple[
        tuple[float, ...], tuple[float, ...]]:
    """The points of a series with a NaN between two readings where the line must not join
    them: farther apart than ``GAP_INTERVALS`` typical intervals (readings stopped: a crash, a
    daemon down, a collection gap), or either side of a crash (two processes, not one line).
    A missing value is NaN too."""
    xs: list[float] = []
    ys: list[float] = []
    steps = sorted(b - a for a, b in zip(ts, ts[1:], strict=False) if b > a)
    typical = steps[len(steps) // 2] if steps else None
    cuts = sorted(crashes)
    for i, (x, v) in enumerate(zip(ts, values, strict=True)):
        if i:
            prev = ts[i - 1]
            gap = typical is not None and x - prev > GAP_INTERVALS * typical
            crashed = any(prev < c <= x for c in cuts)
            if gap or crashed:
                xs.append((prev + x) / 2)
                ys.append(math.nan)
        xs.append(float(x))
        ys.append(math.nan if v is None else float(v))
    return tuple(xs), tuple(ys)


def chart_lines(series: Sequence[Series], flagged: set[str | None], metric: str, lang: str = "en", *,
                crashes: Sequence[float] = ()) -> list[Line]:
    """Each series of ``metric`` as drawn, in device order: a chip named in a finding by its
    name; on the step-time chart rank 0 as "rank 0" (the rest are other ranks). A crash breaks
    the line of a rank (its process died); a chip's readings go on through it, and break only
    where they stop."""
    out = []
    for s in sorted(series, key=lambda s: (_rank(s.device) is None, _rank(s.device) or 0, s.device)):
        rank = _rank(s.device)
        xs, ys = broken(s.ts, s.values, crashes=crashes if rank is not None else ())
        label = s.device if s.device in flagged else None
        if label is None and metric == "step_time_s" and rank == 0:
            label = t("legend_rank", lang).format(rank=0)
        out.append(Line(s.device, xs, ys, label))
    return out


def others_label(lines: Sequence[Line], metric: str, lang: str = "en") -> str | None:
    """What the legend calls the series it does not name: other ranks on the step-time chart
    (ranks they are), other chips elsewhere; None when every series is named."""
    rest = [ln for ln in lines if ln.label is None]
    if not rest:
        return None
    if metric == "step_time_s" and all(_rank(ln.device) is not None for ln in rest):
        return t("legend_other_ranks", lang)
    return t("legend_others", lang)


def all_chart_pngs(
    data: ReportData,
    *,
    lang: str = "en",
    font: FontChoice | None = None,
    metrics: Sequence[str] = SERIES_METRICS,
) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for metric in metrics:
        png = metric_chart_png(data, metric, lang=lang, font=font)
        if png is not None:
            out.append((metric, png))
    return out
