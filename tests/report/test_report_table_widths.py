"""A report table keeps each word and each figure whole: a column narrower than its widest word
takes room from the columns with room to spare ("Finding s", "48.2 Gi B" were the symptoms)."""

from __future__ import annotations

import pytest

from soak.report.pdf_style import Styles, keep_words_whole, table, whole_figures

MM = 72 / 25.4


@pytest.mark.parametrize(("text", "whole"), [
    ("3 h 56 min", "3\xa0h\xa056\xa0min"),
    ("trained 3 h 56 min of 4 h 00 min (98.9 %)", "trained 3\xa0h\xa056\xa0min of 4\xa0h\xa000\xa0min (98.9\xa0%)"),
    ("48.2 GiB, 358.3 W, 72.0 °C, 42 s", "48.2\xa0GiB, 358.3\xa0W, 72.0\xa0°C, 42\xa0s"),
    ("0 / 15", "0\xa0/\xa015"),
    ("3 steps in 2 days, 16 chips x 4 h", "3 steps in 2 days, 16 chips x 4\xa0h"),  # no unit, no join
])
def test_a_figure_is_joined_by_no_break_spaces_and_nothing_else(text, whole):
    assert whole_figures(text) == whole


def test_a_narrow_column_takes_room_from_the_spare_ones_and_the_width_stays():
    widths = [40.0, 30.0, 100.0, 20.0]
    least = [30.0, 45.0, 50.0, 25.0]
    out = keep_words_whole(widths, least)
    assert out[1] == pytest.approx(45.0) and out[3] == pytest.approx(25.0)
    assert sum(out) == pytest.approx(sum(widths))
    assert out[0] >= 30.0 and out[2] >= 50.0
    # the spare room is taken in proportion to what each has spare (10 and 50 of 60, for 20)
    assert out[0] == pytest.approx(40.0 - 20.0 * 10 / 60) and out[2] == pytest.approx(100.0 - 20.0 * 50 / 60)
    assert keep_words_whole(widths, [10.0, 10.0, 10.0, 10.0]) == widths  # nothing to do


def test_short_of_room_each_narrow_column_gets_its_share():
    out = keep_words_whole([30.0, 30.0, 60.0], [50.0, 40.0, 50.0])  # 30 needed, 10 spare
    assert out == pytest.approx([30.0 + 20.0 / 3, 30.0 + 10.0 / 3, 50.0])


def _lines(tbl, total: float) -> list[list[str]]:
    """The lines each cell of the table wraps to, as reportlab lays them out."""
    tbl.wrap(total, 1000)
    out = []
    for row in tbl._cellvalues:
        for cell, w in zip(row, tbl._colWidths, strict=True):
            p = cell[0] if isinstance(cell, tuple) else cell
            p.wrap(w - 12, 1000)
            out.append([" ".join(line[1]) if isinstance(line, tuple) else "".join(f.text for f in line.words)
                        for line in p.blPara.lines])
    return out


def test_the_per_chip_header_and_figures_wrap_at_whole_words_only():
    st = Styles("en", None)
    header = ["Device", "Model", "Serial", "Util mean %", "HBM peak", "Findings", "ECC uncorr. / corr.", "Link"]
    row = ["npu0-0", "Ascend910B3", "032100000000", "94.2", "48.2 GiB", "1", "0 / 15", "up"]
    widths = [17 * MM, 12 * MM, 23 * MM, 30 * MM, 13 * MM, 14 * MM, 14 * MM, 30 * MM]  # the old per-chip widths
    tbl = table(st, header, [row], widths)
    words = {w for cell in header + row for w in cell.split()}
    for lines in _lines(tbl, sum(widths)):
        for line in lines:
            assert all(w in words for w in line.replace("\xa0", " ").split()), lines
    assert sum(tbl._colWidths) == pytest.approx(sum(widths))
