"""A duration and its share read back to each other: the share is of the duration as written."""

from __future__ import annotations

from soak.report.reliability_text import part_rows
from soak.report.units import dur_share, written_share

EIGHT_H = 8 * 3600.0


def test_a_share_is_of_the_duration_as_written() -> None:
    # 1 h 36 min 59 s is written "1 h 36 min": its share of 8 h is 20.0 %, not the 20.2 % that
    # a reader multiplies back to 1 h 37 min
    assert dur_share(5819.0, EIGHT_H) == "1 h 36 min (20.0 %)"
    assert dur_share(5760.0, EIGHT_H) == "1 h 36 min (20.0 %)"
    assert dur_share(42.9, 600.0) == "42 s (7.0 %)"  # seconds only below a minute
    assert written_share(None, EIGHT_H) == "N/A" and written_share(60.0, 0.0) == "N/A"


def test_the_reliability_parts_say_shares_of_their_written_durations() -> None:
    rel = {"planned_s": EIGHT_H, "productive_s": 16_779.0, "injected_s": 5819.0, "lost_s": {"startup": 3599.0}}
    rows = {name: (d, share) for name, d, share in part_rows(rel)}
    assert rows["injected canaries"] == ("1 h 36 min", "20.0 %")
    assert rows["start-up"] == ("59 min", "12.2 %")  # 59 of 480 min, not the 12.4 % of 3599 s


def test_the_chinese_pdf_writes_durations_as_its_figures_do() -> None:
    from soak.report.pdf_style import zh_durations

    # a sentence's number-and-unit durations take the figures' units; "per hour" and a
    # node-hour count are words, not durations
    assert zh_durations("持续 1.5 小时，断开 ≤ 60 秒，每 20 分钟一次") == "持续 1.5 h，断开 ≤ 60 s，每 20 min 一次"
    assert zh_durations("每小时增长 417.7 MB；12 节点小时；自开始起的小时数") == "每小时增长 417.7 MB；12 节点小时；自开始起的小时数"
    assert zh_durations("8 h 00 min") == "8 h 00 min"
