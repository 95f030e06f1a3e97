"""The charts' series as drawn: a gap in the readings or a rank's crash breaks the line, and
the legend names each series for what it is (rank 0, other ranks, other chips)."""

from __future__ import annotations

import math

from soak.report.charts import broken, chart_lines, others_label
from soak.report.model import Series

T0 = 1_790_000_000.0


def _nan_at(ys) -> list[int]:
    return [i for i, y in enumerate(ys) if math.isnan(y)]


def test_a_crash_gap_in_step_times_breaks_the_line_of_the_rank() -> None:
    # step times every 60 s, then nothing for 90 min (crashed, restarting), then again
    ts = [T0 + 60 * i for i in range(5)] + [T0 + 5400 + 60 * i for i in range(5)]
    s = Series("lm-rank0", "step_time_s", tuple(ts), tuple([0.05] * 10))
    (line,) = chart_lines([s], set(), "step_time_s", "en")
    assert line.label == "rank 0"
    assert _nan_at(line.ys) == [5]  # one break, between the last step before and the first after
    assert line.xs[4] < line.xs[5] < line.xs[6] and len(line.xs) == 11


def test_a_crash_between_two_close_readings_breaks_a_rank_but_not_a_chip() -> None:
    ts = tuple(T0 + 60 * i for i in range(6))
    crash = T0 + 150  # between the 3rd and 4th reading: no gap in time, yet another process after it
    rank = Series("lm-rank0", "step_time_s", ts, (0.05,) * 6)
    chip = Series("npu0-0", "util_pct", ts, (95.0,) * 6)
    assert _nan_at(chart_lines([rank], set(), "step_time_s", crashes=[crash])[0].ys) == [3]
    assert _nan_at(chart_lines([chip], set(), "util_pct", crashes=[crash])[0].ys) == []


def test_a_collection_gap_of_a_few_intervals_breaks_the_line_a_late_reading_does_not() -> None:
    ts = [T0 + 10 * i for i in range(10)]
    late = [*ts[:5], ts[5] + 15, *ts[6:]]  # one reading 15 s late: a line still
    gap = [*ts[:5], *(x + 600 for x in ts[5:])]  # ten minutes without a reading
    assert _nan_at(broken(late, [1.0] * 10)[1]) == []
    assert _nan_at(broken(gap, [1.0] * 10)[1]) == [5]
    assert _nan_at(broken(ts, [1.0, None, *[1.0] * 8])[1]) == [1]  # a missing value is no value


def test_the_legend_names_rank_zero_and_the_other_ranks_or_chips() -> None:
    ts = (T0, T0 + 60)
    ranks = [Series(f"lm-rank{r}", "step_time_s", ts, (0.1, 0.1)) for r in (2, 0, 1)]
    lines = chart_lines(ranks, set(), "step_time_s", "en")
    assert [(ln.device, ln.label) for ln in lines] == [("lm-rank0", "rank 0"), ("lm-rank1", None), ("lm-rank2", None)]
    assert others_label(lines, "step_time_s", "en") == "other ranks"
    assert others_label(chart_lines(ranks, set(), "step_time_s", "zh"), "step_time_s", "zh") == "其他进程（rank）"
    # one rank alone: it is named, and there are no others to speak of
    assert others_label(chart_lines(ranks[1:2], set(), "step_time_s"), "step_time_s") is None
    chips = [Series(f"npu{i}-0", "hbm_used_bytes", ts, (1.0, 2.0)) for i in range(3)]
    lines = chart_lines(chips, {"npu1-0"}, "hbm_used_bytes", "en")
    assert [ln.label for ln in lines] == [None, "npu1-0", None]
    assert others_label(lines, "hbm_used_bytes", "en") == "other chips"


def test_every_colour_the_charts_draw_is_named_in_their_legend(recorded, monkeypatch) -> None:
    # a chart of 16 chips with a leak on one and a crash: each line in a colour of its own is
    # in the legend by its name, every grey one is what the legend's "other chips" (or "other
    # ranks") says, and each legend entry is drawn
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from soak.report.charts import metric_chart_png
    from soak.report.fonts import try_register_cjk_font
    from soak.report.loader import load_report_data
    from soak.store import Store

    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: (figures.append(fig), close(fig)))
    with Store.open(recorded["db"], create=False) as store:
        data = load_report_data(store, recorded["run_id"])
    grey = "#7f7f7f"
    checked = set()
    for lang in ("en", "zh"):
        for metric in ("hbm_used_bytes", "step_time_s", "util_pct"):
            figures.clear()
            assert metric_chart_png(data, metric, lang=lang, font=try_register_cjk_font()) is not None
            (ax,) = figures[-1].axes
            legend = ax.get_legend()
            named = {text.get_text(): to_hex(handle.get_color()) for text, handle
                     in zip(legend.get_texts(), legend.legend_handles, strict=True) if hasattr(handle, "get_color")}
            drawn = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 1]
            for ln in drawn:
                colour = to_hex(ln.get_color())
                if colour == grey or ln.get_label().startswith("_"):  # the rest, or a mark (an event's)
                    assert colour in named.values(), (metric, colour, named)
                else:
                    assert named.get(ln.get_label()) == colour, (metric, ln.get_label(), colour, named)
                checked.add((metric, colour == grey))
            for label, colour in named.items():  # no entry for a series or mark the chart does not draw
                assert any(to_hex(ln.get_color()) == colour for ln in drawn), (metric, label)
    # the leak's chip in colour on the HBM chart, rank 0 on the step-time chart, the rest grey
    assert {("hbm_used_bytes", False), ("hbm_used_bytes", True), ("step_time_s", False)} <= checked, checked
