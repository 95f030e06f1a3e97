"""Rendering helpers: N/A for missing values, complete en/zh strings, bucket choice."""

from __future__ import annotations

import math

from soak.report.i18n import STRINGS, t, verdict_label
from soak.report.loader import auto_bucket_s
from soak.report.model import flatten, fmt, fmt_bytes, fmt_duration, fmt_ts


def test_missing_values_render_na_never_zero():
    assert fmt(None) == "N/A" and fmt(float("nan")) == "N/A" and fmt_bytes(None) == "N/A"
    assert fmt_ts(None) == "N/A" and fmt_duration(None) == "N/A"
    assert fmt(0.0) == "0.0" and fmt_bytes(0) == "0 B"
    assert fmt_bytes(56.7 * 1024**3) == "56.7 GiB"
    assert fmt_duration(72 * 3600 + 61) == "72 h 01 min"
    assert fmt_ts(1_790_000_000.0) == "2026-09-21 14:13:20 UTC"


def test_flatten_nested_manifest_and_device_lists():
    rows = dict(flatten({"npu": {"cards": [{"npu_id": 0, "serial_number": None}]}, "python": "3.11", "x": []}))
    assert rows == {"npu.cards[0]": "npu_id=0, serial_number=N/A", "python": "3.11", "x": "N/A"}


def test_every_string_has_english_and_chinese():
    for key, (en, zh) in STRINGS.items():
        assert en.strip() and zh.strip(), key
    assert t("verdict", "zh") == "结论" and t("verdict") == "Verdict"
    assert verdict_label("fail", "zh") == "未通过" and verdict_label(None) == "NOT ANALYSED"
    assert t("no-such-key", "zh") == "no-such-key"


def test_auto_bucket_keeps_series_short():
    assert auto_bucket_s(0, 3600) is None  # 360 raw 10 s points: keep them
    b = auto_bucket_s(0, 72 * 3600)
    assert b == 600.0 and math.ceil(72 * 3600 / b) <= 600
    assert auto_bucket_s(None, 10) is None and auto_bucket_s(10, 5) is None
