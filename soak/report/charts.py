"""Static charts for the PDF (matplotlib, Agg backend, PNG bytes).

One chart per metric with every chip overlaid: on 16 chips a per-chip grid would be 80 tiny
panels, while an overlay shows the outlier at a glance. Chips named in a finding are drawn
thick, the finding's time span is shaded, and restarts/crashes are dashed vertical lines; a
legend names each kind of mark. Utilization is drawn on its whole 0-100 % range: an
autoscaled 92-98 % axis makes sampling noise look like a problem.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from soak.report.fonts import FontChoice, matplotlib_font_family
from soak.report.i18n import t
from soak.report.model import SERIES_METRICS, ReportData

_GIB = 1024**3
CHART_ASPECT = 2.3 / 7.2  # height / width of every chart (the PDF sizes its images with it)
# Metrics with a fixed range: shown whole, so noise looks like noise.
_FIXED_RANGE = {"util_pct": (0.0, 100.0)}
# Events worth a vertical line on every chart.
_MARKED_EVENTS = ("restart", "crash", "exit", "hang", "inject", "workload_exit", "workload_crash")


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
            cmap = plt.get_cmap("tab20")
            for i, s in enumerate(sorted(series, key=lambda s: s.device)):
                xs = [(x - t0) / 3600.0 for x in s.ts]
                ys = [float("nan") if v is None else v * scale for v in s.values]
                hot = s.device in flagged
                ax.plot(
                    xs,
                    ys,
                    lw=1.6 if hot else 0.6,
                    color="#d62728" if hot else cmap(i % 20),
                    alpha=1.0 if hot else 0.7,
                    label=s.device if hot else None,
                    zorder=3 if hot else 2,
                )
            for f in shown:
                if f.start is None or f.end is None:
                    continue
                ax.axvspan((f.start - t0) / 3600, (f.end - t0) / 3600, color="#ffbf00", alpha=0.15)
            spans = any(f.start is not None and f.end is not None for f in shown)
            marked = [e for e in data.events if any(k in e.kind for k in _MARKED_EVENTS)]
            for e in marked:
                ax.axvline((e.ts - t0) / 3600, color="#444444", lw=0.7, ls="--", zorder=1)
            ax.set_ylabel(t(metric, lang))
            ax.set_xlabel(t("run_time_h", lang))
            if metric in _FIXED_RANGE:
                ax.set_ylim(*_FIXED_RANGE[metric])
            ax.grid(True, lw=0.3, alpha=0.5)
            handles = _legend(ax, lang, others=any(s.device not in flagged for s in series),
                              spans=spans, events=bool(marked))
            if handles:
                ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=6,
                          frameon=False, borderaxespad=0.0)
            fig.tight_layout(pad=0.4)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=dpi)
        finally:
            plt.close(fig)
    return buf.getvalue()


def _legend(ax, lang: str, *, others: bool, spans: bool, events: bool) -> list:  # noqa: ANN001 - Axes
    """Legend handles: the flagged chips by name, then what the other marks mean."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = list(ax.get_legend_handles_labels()[0])
    if others:
        handles.append(Line2D([], [], color="#7f7f7f", lw=0.6, label=t("legend_others", lang)))
    if spans:
        handles.append(Patch(color="#ffbf00", alpha=0.3, label=t("legend_finding", lang)))
    if events:
        handles.append(Line2D([], [], color="#444444", lw=0.7, ls="--", label=t("legend_event", lang)))
    return handles


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
