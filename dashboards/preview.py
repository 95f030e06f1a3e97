#!/usr/bin/env python3
"""Render a PNG preview of the fleet-overview dashboard from a live Prometheus.

Grafana is not needed: the panels' own PromQL (from fleet-overview.json, template variables
set to match everything) is run through Prometheus' HTTP API and drawn with matplotlib in a
dark, Grafana-like layout, with the dashboard's units and thresholds. The image is titled as
a preview, since it is not a Grafana screenshot.

    python dashboards/preview.py --prometheus-url http://127.0.0.1:9090 --minutes 5 \
        --out docs/images/dashboard.png
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from soak.dashboards import panels_of, substitute  # noqa: E402

BG, PANEL, TEXT, GRID = "#111217", "#181b1f", "#ccccdc", "#2c3235"
COLORS = {"green": "#73bf69", "yellow": "#fade2a", "orange": "#ff9830", "red": "#f2495c",
          "blue": "#5794f2"}
STATS = ["Chips reporting", "Unhealthy chips", "Failed readings", "Mean utilization",
         "Hottest chip", "Fleet power", "Comm timeouts (range)"]
# Exporter snapshot age is left out: under the simulator's accelerated clock it is negative.
SERIES = ["Utilization", "Temperature", "HBM used", "Power", "Comm timeouts per 5 min",
          "Reader duration"]


def query(base: str, path: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    url = f"{base.rstrip('/')}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 (operator-given URL)
        answer = json.loads(resp.read())
    if answer.get("status") != "success":
        raise SystemExit(f"Prometheus rejected {params.get('query')!r}: {answer.get('error')}")
    return answer["data"]["result"]


def fmt(value: float, unit: str) -> str:
    if math.isnan(value):
        return "N/A"
    if unit == "percentunit":
        return f"{value * 100:.0f}%"
    if unit == "celsius":
        return f"{value:.0f} °C"
    if unit == "watt":
        return f"{value / 1000:.2f} kW" if value >= 1000 else f"{value:.0f} W"
    return f"{value:.0f}"


def color_for(value: float, thresholds: dict[str, Any]) -> str:
    chosen = thresholds["steps"][0]["color"]
    for step in thresholds["steps"][1:]:
        if value >= step["value"]:
            chosen = step["color"]
    return COLORS.get(chosen, chosen)


def legend(metric: dict[str, str], fmt_: str) -> str:
    out = fmt_
    for key, val in metric.items():
        out = out.replace("{{" + key + "}}", val)
    return out if "{{" not in out else ",".join(metric.values())


def render(base: str, minutes: float, out: Path, title_note: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from datetime import datetime

    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    board = json.loads((HERE / "fleet-overview.json").read_text(encoding="utf-8"))
    panels = {p["title"]: p for p in panels_of(board)}
    end = time.time()
    start = end - minutes * 60
    step = max(2.0, minutes * 60 / 300)
    variables = {"__range": f"{int(minutes * 60)}s"}

    fig = plt.figure(figsize=(16, 9.6), facecolor=BG)
    fig.suptitle(f"Preview of the soak fleet-overview panels  —  {title_note}",
                 color=TEXT, fontsize=13, x=0.01, ha="left", y=0.985)
    grid = fig.add_gridspec(4, 2 * len(STATS), height_ratios=[0.55, 1.6, 1.6, 1.6],
                            left=0.04, right=0.99, top=0.93, bottom=0.04, hspace=0.45,
                            wspace=0.6)
    for i, name in enumerate(STATS):
        p = panels[name]
        ax = fig.add_subplot(grid[0, 2 * i:2 * i + 2])
        res = query(base, "query", {"query": substitute(p["targets"][0]["expr"], variables),
                                    "time": end})
        value = float(res[0]["value"][1]) if res else float("nan")
        defaults = p["fieldConfig"]["defaults"]
        ax.set_facecolor(PANEL if math.isnan(value) else color_for(value, defaults["thresholds"]))
        ax.text(0.5, 0.42, fmt(value, defaults["unit"]), ha="center", va="center", fontsize=20,
                color="white", weight="bold", transform=ax.transAxes)
        ax.set_title(name, color=TEXT, fontsize=9, loc="left")
        ax.set_xticks([])
        ax.set_yticks([])
    for k, name in enumerate(SERIES):
        p = panels[name]
        half = len(STATS)
        ax = fig.add_subplot(grid[1 + k // 2, (k % 2) * half:(k % 2 + 1) * half])
        ax.set_facecolor(PANEL)
        defaults = p["fieldConfig"]["defaults"]
        unit = defaults["unit"]
        for tgt in p["targets"]:
            res = query(base, "query_range", {"query": substitute(tgt["expr"], variables),
                                              "start": start, "end": end, "step": step})
            for s in sorted(res, key=lambda r: legend(r["metric"], tgt["legendFormat"])):
                xs = [datetime.fromtimestamp(float(t)) for t, _ in s["values"]]
                ys = [float(v) * (100 if unit == "percentunit" else 1) for _, v in s["values"]]
                # one node in the preview: the chip (or reader, source) names the line
                label = legend(s["metric"], tgt["legendFormat"].replace("{{node}} ", ""))
                ax.plot(xs, ys, lw=1.1, label=label)
        if defaults.get("custom", {}).get("thresholdsStyle", {}).get("mode") == "line":
            for st in defaults["thresholds"]["steps"][1:]:
                y = st["value"] * (100 if unit == "percentunit" else 1)
                ax.axhline(y, color=COLORS.get(st["color"], st["color"]), lw=0.8, ls="--")
        suffix = {"percentunit": " (%)", "celsius": " (°C)", "watt": " (W)", "s": " (s)"}
        ax.set_title(name + suffix.get(unit, ""), color=TEXT, fontsize=10, loc="left")
        ax.tick_params(colors=TEXT, labelsize=8)
        ax.grid(color=GRID, lw=0.6)
        for spine in ax.spines.values():
            spine.set_color(GRID)
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M" if minutes > 30 else "%H:%M:%S"))
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="best", ncol=4, frameon=True, facecolor=PANEL,
                      edgecolor=GRID, framealpha=0.8, labelcolor=TEXT)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, facecolor=BG)
    print(f"wrote {out}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prometheus-url", required=True)
    ap.add_argument("--minutes", type=float, default=5.0, help="time range drawn (default: 5)")
    ap.add_argument("--out", type=Path, default=HERE.parent / "docs" / "images" / "dashboard.png")
    ap.add_argument("--note", default="data: soak exporter, simulated 8-chip 910B node",
                    help="text after the title")
    args = ap.parse_args(argv)
    render(args.prometheus_url, args.minutes, args.out, args.note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
