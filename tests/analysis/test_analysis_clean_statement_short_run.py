"""A short run (minutes on a few chips) states its real chip-hours, not "0 chip-hours"."""

from __future__ import annotations

import math

from soak.analysis.verdict import clean_statement


def test_short_run_names_fractional_chip_hours():
    hours = 0.0639  # 2 minutes on 2 CPU "devices"
    text = clean_statement(hours, 0)
    assert "0 failures in 0.0639 chip-hours" in text
    assert f"{-math.log(0.05) / hours:.2e}" in text
    # MTBF bound = T / -ln(0.05) ≈ 0.0213 chip-hours, not "0".
    assert "above 0.0213 chip-hours" in text
    assert " 0 chip-hours" not in text


def test_short_run_with_failures_names_fractional_chip_hours():
    text = clean_statement(0.5, 1)
    assert text.startswith("1 failing finding(s) in 0.5 chip-hours")


def test_long_run_keeps_whole_chip_hours():
    text = clean_statement(1152.4, 0)
    assert "0 failures in 1152 chip-hours" in text
    assert "above 385 chip-hours" in text
