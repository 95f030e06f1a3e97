#!/usr/bin/env python3
"""Render a PNG preview of the fleet-overview or the cluster dashboard from a live Prometheus.

Grafana is not needed: the panels' own PromQL (from fleet-overview.json or cluster.json,
template variables set to match everything) is run through Prometheus' HTTP API and drawn
with matplotlib in a dark, Grafana-like layout, with the dashboard's units and thresholds. The
image is titled as a preview, since it is not a Grafana screenshot.

    python dashboards/preview.py --prometheus-url http://127.0.0.1:9090 --minutes 5 \
        --out docs/images/dashboard.png
    python dashboards/preview.py --board cluster --prometheus-url http://127.0.0.1:9090 \
        --minutes 10 --end 1764630000 --out docs/images/cluster.png
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime
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


@dataclass(frozen=True)
class Board:
    """A dashboard's panels by title and the time range its preview draws: each panel's own
    query is run through Prometheus at ``end`` (instant) or over the range (every ``step``)."""

    base: str
    panels: dict[str, dict[str, Any]]
    start: float
    end: float
    step: float
    variables: dict[str, str]

    @classmethod
    def load(cls, base: str, file: str, minutes: float, end: float | None, min_step: float,
             points: int) -> Board:
        board = json.loads((HERE / file).read_text(encoding="utf-8"))
        end = time.time() if end is None else end
        return cls(base, {p["title"]: p for p in panels_of(board)}, end - minutes * 60, end,
                   max(min_step, minutes * 60 / points), {"__range": f"{int(minutes * 60)}s"})

    def expr(self, title: str, ref: int = 0) -> str:
        return substitute(self.panels[title]["targets"][ref]["expr"], self.variables)

    def instant(self, title: str, ref: int = 0) -> list[dict[str, Any]]:
        return query(self.base, "query", {"query": self.expr(title, ref), "time": self.end})

    def ranged(self, title: str, ref: int = 0) -> list[dict[str, Any]]:
        return query(self.base, "query_range", {"query": self.expr(title, ref), "start": self.start,
                                                "end": self.end, "step": self.step})

    def defaults(self, title: str) -> dict[str, Any]:
        return self.panels[title]["fieldConfig"]["defaults"]

    def color(self, title: str, value: float) -> str:
        return color_for(value, self.defaults(title)["thresholds"])


def _figure(size: tuple[float, float], title: str, title_y: float) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=size, facecolor=BG)
    fig.suptitle(title, color=TEXT, fontsize=13, x=0.01, ha="left", y=title_y)
    return fig


def _save(fig: Any, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, facecolor=BG)
    print(f"wrote {out}")


def _style(ax: Any, title: str) -> None:
    ax.set_facecolor(PANEL)
    ax.set_title(title, color=TEXT, fontsize=10, loc="left")
    ax.tick_params(colors=TEXT, labelsize=8)
    for spine in ax.spines.values():
        spine.set_color(GRID)


def _stat(ax: Any, board: Board, title: str, y: float, fontsize: float) -> None:
    """A stat panel: its value now on the colour of its threshold (N/A on the panel colour)."""
    res = board.instant(title)
    value = float(res[0]["value"][1]) if res else float("nan")
    ax.set_facecolor(PANEL if math.isnan(value) else board.color(title, value))
    ax.text(0.5, y, fmt(value, board.defaults(title)["unit"]), ha="center", va="center", fontsize=fontsize,
            color="white", weight="bold", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _threshold_lines(ax: Any, board: Board, title: str, scale: float = 1) -> None:
    """A timeseries panel's thresholds as dashed lines, in their colours."""
    for st in board.defaults(title)["thresholds"]["steps"][1:]:
        ax.axhline(st["value"] * scale, color=COLORS.get(st["color"], st["color"]), lw=0.8, ls="--")


def render(base: str, minutes: float, out: Path, title_note: str, end: float | None = None) -> None:
    import matplotlib.dates as mdates

    board = Board.load(base, "fleet-overview.json", minutes, end, 2.0, 300)
    fig = _figure((16, 9.6), f"Preview of the soak fleet-overview panels  —  {title_note}", 0.985)
    grid = fig.add_gridspec(4, 2 * len(STATS), height_ratios=[0.55, 1.6, 1.6, 1.6],
                            left=0.04, right=0.99, top=0.93, bottom=0.04, hspace=0.45,
                            wspace=0.6)
    for i, name in enumerate(STATS):
        ax = fig.add_subplot(grid[0, 2 * i:2 * i + 2])
        _stat(ax, board, name, 0.42, 20)
        ax.set_title(name, color=TEXT, fontsize=9, loc="left")
    for k, name in enumerate(SERIES):
        half = len(STATS)
        ax = fig.add_subplot(grid[1 + k // 2, (k % 2) * half:(k % 2 + 1) * half])
        defaults = board.defaults(name)
        unit = defaults["unit"]
        suffix = {"percentunit": " (%)", "celsius": " (°C)", "watt": " (W)", "s": " (s)"}
        _style(ax, name + suffix.get(unit, ""))
        scale = 100 if unit == "percentunit" else 1
        for ref, tgt in enumerate(board.panels[name]["targets"]):
            for s in sorted(board.ranged(name, ref), key=lambda r: legend(r["metric"], tgt["legendFormat"])):
                xs = [datetime.fromtimestamp(float(t)) for t, _ in s["values"]]
                ys = [float(v) * scale for _, v in s["values"]]
                # one node in the preview: the chip (or reader, source) names the line
                label = legend(s["metric"], tgt["legendFormat"].replace("{{node}} ", ""))
                ax.plot(xs, ys, lw=1.1, label=label)
        if defaults.get("custom", {}).get("thresholdsStyle", {}).get("mode") == "line":
            _threshold_lines(ax, board, name, scale)
        ax.grid(color=GRID, lw=0.6)
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M" if minutes > 30 else "%H:%M:%S"))
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="best", ncol=4, frameon=True, facecolor=PANEL,
                      edgecolor=GRID, framealpha=0.8, labelcolor=TEXT)
    _save(fig, out)


def _node_lines(ax: Any, board: Board, title: str, thresholds: bool = False) -> None:
    """A timeseries panel with one line a node, over the board's range."""
    import matplotlib.dates as mdates

    for r in sorted(board.ranged(title), key=lambda r: r["metric"].get("node", "")):
        ax.plot([datetime.fromtimestamp(float(t)) for t, _ in r["values"]], [float(v) for _, v in r["values"]],
                lw=1.2, label=r["metric"].get("node"))
    if thresholds:
        _threshold_lines(ax, board, title)
    ax.grid(color=GRID, lw=0.6)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
    ax.legend(fontsize=7, facecolor=PANEL, edgecolor=GRID, labelcolor=TEXT)


def _cell_text(ax: Any, rows: list[list[str]], colors: list[list[str]] | None = None) -> None:
    """A small table drawn as text: the first row is the header."""
    ax.set_xticks([])
    ax.set_yticks([])
    n, m = len(rows), max(len(r) for r in rows)
    for i, row in enumerate(rows):
        for j, cell in enumerate(row):
            y = 1 - (i + 0.7) / max(n, 6)
            color = colors[i][j] if colors and colors[i][j] else (TEXT if i else "#8e8e8e")
            ax.text((j + 0.05) / m, y, cell, color=color, fontsize=8, transform=ax.transAxes,
                    weight="bold" if color not in (TEXT, "#8e8e8e") else "normal")


def render_cluster(base: str, minutes: float, out: Path, title_note: str, end: float | None = None) -> None:
    """The cluster dashboard's panels, each from its own query in cluster.json."""
    board = Board.load(base, "cluster.json", minutes, end, 5.0, 200)
    fig = _figure((16, 13), f"Preview of the soak cluster panels  —  {title_note}", 0.99)
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.colors import BoundaryNorm, ListedColormap

    start, end, step = board.start, board.end, board.step
    instant, ranged, tcolor = board.instant, board.ranged, board.color
    grid = fig.add_gridspec(4, 12, height_ratios=[0.9, 1.7, 1.4, 1.3], left=0.08, right=0.99, top=0.94,
                            bottom=0.04, hspace=0.55, wspace=0.9)
    # the verdict so far: one box per judged criterion
    ax = fig.add_subplot(grid[0, 0:6])
    crit = sorted(instant("Criteria so far"), key=lambda r: r["metric"].get("criterion", ""))
    _style(ax, "Criteria so far (judging node)")
    ax.set_xticks([])
    ax.set_yticks([])
    per_row = max(1, math.ceil(len(crit) / 3))  # three rows of boxes, as a wide stat panel wraps
    for i, r in enumerate(crit):
        met = float(r["value"][1]) >= 1
        x, y = (i % per_row) / per_row, 1 - (i // per_row + 1) / 3
        ax.add_patch(plt.Rectangle((x + 0.004, y + 0.02), 1 / per_row - 0.008, 1 / 3 - 0.04,
                                   color=COLORS["green" if met else "red"], transform=ax.transAxes))
        ax.text(x + 0.5 / per_row, y + 1 / 6, f"{r['metric']['criterion']}: {'met' if met else 'MISSED'}",
                ha="center", va="center", color="white", fontsize=7, transform=ax.transAxes)
    # nodes by status
    ax = fig.add_subplot(grid[0, 6:9])
    _style(ax, "Nodes by status")
    st = sorted(instant("Nodes by status"), key=lambda r: r["metric"]["status"])
    ax.barh([r["metric"]["status"] for r in st], [float(r["value"][1]) for r in st],
            color=[COLORS["red"] if r["metric"]["status"] in ("lost", "failed") and float(r["value"][1]) else
                   COLORS["blue"] for r in st])
    ax.set_xlim(0, max([float(r["value"][1]) for r in st] + [1]) + 0.5)
    ax = fig.add_subplot(grid[0, 9:12])
    _style(ax, "Open findings")
    _stat(ax, board, "Open findings", 0.45, 22)
    # node x chip: temperature against the node's median, over time
    title = "Chip temperature against its node's median"
    ax = fig.add_subplot(grid[1, :])
    _style(ax, title + " (°C; red from 4.5 °C)")
    series = sorted(ranged(title), key=lambda r: (r["metric"].get("node", ""), r["metric"].get("device", "")))
    times = [start + i * step for i in range(int((end - start) / step) + 1)]
    rows = []
    for r in series:
        by_t = {round(float(t)): float(v) for t, v in r["values"]}
        rows.append([by_t.get(round(t), float("nan")) for t in times])
    th = board.defaults(title)["thresholds"]["steps"]
    bounds = [-100.0] + [st_["value"] for st_ in th[1:]] + [100.0]
    cmap = ListedColormap([COLORS.get(st_["color"], st_["color"]) for st_ in th])
    cmap.set_bad(PANEL)
    if rows:
        x0, x1 = mdates.date2num(datetime.fromtimestamp(start)), mdates.date2num(datetime.fromtimestamp(end))
        ax.imshow(rows, aspect="auto", cmap=cmap, norm=BoundaryNorm(bounds, cmap.N), interpolation="nearest",
                  extent=(x0, x1, len(rows) - 0.5, -0.5))
        ax.set_yticks(range(len(rows)), [f"{r['metric'].get('node')} {r['metric'].get('device')}" for r in series])
        ax.xaxis_date()
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
    # stragglers: nodes table, the ratio over time, the link matrix
    ax = fig.add_subplot(grid[2, 0:3])
    _style(ax, "Stragglers: nodes")
    comp = {r["metric"]["node"]: float(r["value"][1]) for r in instant("Stragglers: nodes", 0)}
    ratio = {r["metric"]["node"]: float(r["value"][1]) for r in instant("Stragglers: nodes", 1)}
    table = [["node", "compute (median)", "over median"]]
    colors: list[list[str]] = [["", "", ""]]
    for node in sorted(set(comp) | set(ratio)):
        table.append([node, f"{comp.get(node, float('nan')) * 1000:.1f} ms", f"{ratio.get(node, float('nan')):.2f}x"])
        colors.append(["", "", tcolor("Node compute time over the cluster median", ratio.get(node, 0.0))])
    _cell_text(ax, table, colors)
    title = "Node compute time over the cluster median"
    ax = fig.add_subplot(grid[2, 3:8])
    _style(ax, title + " (1 = median node)")
    _node_lines(ax, board, title, thresholds=True)
    title = "Link matrix: bus bandwidth over the test's median"
    ax = fig.add_subplot(grid[2, 8:12])
    _style(ax, "Link matrix: busbw / test median")
    cells = {(r["metric"]["node"], r["metric"]["peer"]): float(r["value"][1]) for r in instant(title)}
    nodes = sorted({n for pair in cells for n in pair})
    ax.set_xlim(-0.5, len(nodes) - 0.5)
    ax.set_ylim(len(nodes) - 0.5, -0.5)
    for i, a in enumerate(nodes):
        for j, b in enumerate(nodes):
            v = cells.get((a, b))
            if v is None:
                continue
            ax.add_patch(plt.Rectangle((j - 0.48, i - 0.48), 0.96, 0.96, color=tcolor(title, v)))
            ax.text(j, i, f"{v * 100:.0f}%", ha="center", va="center", color="white", fontsize=9, weight="bold")
    ax.set_xticks(range(len(nodes)), nodes)
    ax.set_yticks(range(len(nodes)), nodes)
    # findings and clock offsets
    ax = fig.add_subplot(grid[3, 0:8])
    _style(ax, "Findings (what the report will say)")
    found = sorted(instant("Findings"), key=lambda r: (r["metric"].get("node", ""), r["metric"].get("kind", "")))
    table = [["node", "chip", "kind", "severity", "metric", "code"]]
    colors = [[""] * 6]
    for r in found[:7]:
        m = r["metric"]
        table.append([m.get("node", ""), m.get("device", "-") or "-", m.get("kind", ""), m.get("severity", ""),
                      m.get("metric", ""), m.get("code", "")])
        colors.append(["", "", "", COLORS["red"] if m.get("severity") == "fail" else COLORS["orange"], "", ""])
    _cell_text(ax, table, colors)
    title = "Clock offset against the store"
    ax = fig.add_subplot(grid[3, 8:12])
    _style(ax, title + " (s)")
    _node_lines(ax, board, title)
    _save(fig, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prometheus-url", required=True)
    ap.add_argument("--board", choices=("fleet", "cluster"), default="fleet",
                    help="the fleet overview (default) or the cluster dashboard's panels")
    ap.add_argument("--minutes", type=float, default=5.0, help="time range drawn (default: 5)")
    ap.add_argument("--end", type=float, help="end of the range, unix seconds (default: now)")
    ap.add_argument("--out", type=Path, help="PNG to write (default: docs/images/dashboard.png or cluster.png)")
    ap.add_argument("--note", help="text after the title")
    args = ap.parse_args(argv)
    if args.board == "cluster":
        render_cluster(args.prometheus_url, args.minutes, args.out or HERE.parent / "docs" / "images" / "cluster.png",
                       args.note or "data: three soak run agents on loopback, simulated fleets", args.end)
    else:
        render(args.prometheus_url, args.minutes, args.out or HERE.parent / "docs" / "images" / "dashboard.png",
               args.note or "data: soak exporter, simulated 8-chip 910B node", args.end)
    return 0


if __name__ == "__main__":
    sys.exit(main())
