"""The judgement's figures as a reader finds them on each page: label -> the values written
beside it, in English and Chinese, so a test can ask that each figure reads the same on every
page and in the app.

A figure is found by the words around it (the criterion's cell, the accounting's row, the
reliability sentence), whatever format wrote it: an old "7h 13m" and a "7 h 14 min" of the same
figure are two values, which is what the check is there to catch. Text is pdftotext's ``-raw``
output (or the app's text): a cell whose value wraps is read as one line.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# a duration in any format soak ever wrote ("4 h 00 min", "7h 13m", "0h 02m 03s", "2m 0s",
# "45 s", "1d 2h 3m"), a share ("98.9 %", "98.54%"), a count
_UNIT = r"(?:d|h|min|m|s)(?![A-Za-z0-9])"
DUR = rf"\d+ ?{_UNIT}(?: \d+ ?{_UNIT})*"
PCT = r"\d+(?:\.\d+)? ?%"
_CHIP = r"[a-z]+\d[\w-]*"

# a sentence of the final analysis, not the online estimate the timeline keeps (marked so
# within its sentence, a few words on)
_FINAL = r"(?!.{0,200}?(?:online estimate|运行中的在线估计))"

# label -> patterns whose groups are the figure (en and zh: one label for both languages; a
# figure of several numbers, a rate and its interval, is its groups joined)
PATTERNS: dict[str, tuple[str, ...]] = {
    "planned": (
        rf"Planned duration ({DUR})", rf"Planned soak ({DUR})", rf"\bran {DUR} of ({DUR})",
        rf"trained {DUR} of (?:the )?({DUR}) planned", rf">= ({DUR}) planned",
        rf"计划时长 ({DUR})", rf"计划拷机时长 ({DUR})", rf"（计划 ({DUR})）", rf"计划 ({DUR}) 中训练",
        rf"计划 ({DUR})，有效训练", rf"≥ 计划的 ({DUR})",
    ),
    # one run duration: the cover's and the app's "Duration" is the accounting's "ran"
    "ran": (rf"\bran ({DUR}) of", rf"\bRan ({DUR})", rf"运行 ({DUR})（计划", rf"实际运行 ({DUR})",
            rf"\bDuration ({DUR})", rf"(?<!计划)(?<!运行)(?<!拷机)(?<!可见)时长 (?:运行时间线 )?({DUR})"),
    "training": (
        rf"(?<!productive )(?<!uninterrupted )training ({DUR})", rf"trained ({DUR}) of (?!the )", rf"Training \(share of planned\) ({DUR})",
        rf"中训练 ({DUR})", rf"训练时间（占计划） ({DUR})",
    ),
    "training share of planned": (
        rf"Training \(share of planned\) {DUR} \(({PCT})\)", rf"planned \(({PCT})\)",
        rf"训练时间（占计划） {DUR} \(({PCT})\)", rf"中训练 {DUR}（({PCT})）",
    ),
    "productive": (rf"productive training ({DUR})", rf"trained ({DUR}) of the", rf"有效训练 ({DUR})"),
    "judged availability": (
        rf"({PCT}) judged", rf"({PCT}) of the time it ran", rf"Availability as judged \([^)]*\) ({PCT})",
        rf"运行时间的 ({PCT})",
        rf"判定 ({PCT})", rf"判定可用率（[^）]*） ({PCT})",
    ),
    "ETTR": (rf"\(ETTR\) ({PCT})",),
    "down unexpectedly": (
        rf"({DUR}) down unexpectedly", rf"Down for unexpected reasons ({DUR})", rf"意外停机 ({DUR})",
    ),
    "longest uninterrupted": (
        rf"Longest uninterrupted (?:training )?(?:reported |>= {DUR} )?({DUR})",
        rf"最长连续训练 (?:仅报告 |≥ {DUR} )?({DUR})",
    ),
    "injected": (rf"less ({DUR}) of \d+ injected", rf"注入故障的 ({DUR})"),
    "chips": (r"\bChips (\d+)", r"(\d+) chips x", r"芯片数 (\d+)", r"(\d+) 颗芯片 ×"),
    # a leak's time to exhaustion: the finding's sentence and its evidence table; an online
    # estimate the final analysis revised is marked so and is not this figure
    "time to exhaustion": (
        rf"runs out in ({DUR}) \((?:within|beyond) the required [^)]*\)(?! \(online estimate)",
        rf"Time to exhaustion ({DUR})",
        rf"按此速率 ({DUR}) 后耗尽（[^）]*）(?!（运行中的在线估计)", rf"预计耗尽时间 ({DUR})",
    ),
    # a leak's rate and its interval, and its growth over the fit: the finding's sentence and
    # its evidence table ("840 MB/h (90 % CI 833–859)" beside "839.9 MB/h" was two figures);
    # an online estimate the final analysis revised is not this figure
    "leak rate": (
        rf"creeps ([\d.]+) MB/h \(90% CI ([\d.]+)(?:\.\.|–)([\d.]+)\){_FINAL}",
        r"\bRate ([\d.]+) MB/h \(90% CI ([\d.]+)(?:\.\.|–)([\d.]+)\)",
        rf"每小时增长 ([\d.]+) MB（90% 置信区间 ([\d.]+)–([\d.]+)）{_FINAL}",
        r"增长速率 ([\d.]+) MB/h（90% 置信区间 ([\d.]+)–([\d.]+)）",
    ),
    "leak growth": (rf"\+(\d+) MB over the fit{_FINAL}", r"Growth over the fit (\d+(?:\.\d+)?) MB",
                    rf"拟合期内共增长 (\d+(?:\.\d+)?) MB{_FINAL}", r"拟合期内增长 (\d+(?:\.\d+)?) MB"),
    # the injected crash's downtime: the interruptions' table and every sentence about it
    "crash downtime": (
        rf"({DUR}) injected crash", rf"crash[^.;\n]{{0,40}}? for (?:about )?({DUR})",
        rf"({DUR}) 注入的崩溃",
    ),
}

# the least covered chip, on the criterion ("lowest 99.1 % (npu0-0 HBM in use)") and in the
# coverage table ("npu0-0 99.1 % (HBM in use) ...")
_LOWEST = (rf"lowest ({PCT}) \(({_CHIP}) ([^)]+)\)", rf"最低 ({PCT})（({_CHIP}) ([^）]+)）")
_COVERAGE_ROW = rf"(?:^|\n)({_CHIP}) ({PCT}) [(（]([^)）]+)[)）]"


def _flat(text: str) -> str:
    """One space for every run of blanks and line breaks: a wrapped cell reads as one line."""
    return re.sub(r"\s+", " ", text)


def figures(text_pages: Iterable[str]) -> list[dict[str, set[str]]]:
    """Per page (or any text: the app's), each figure label found -> the values written for it."""
    out = []
    for page in text_pages:
        flat = _flat(page)
        found: dict[str, set[str]] = {}
        for label, patterns in PATTERNS.items():
            for p in patterns:
                for m in re.finditer(p, flat):
                    found.setdefault(label, set()).add(" ".join(m.groups()))
        for p in _LOWEST:
            for m in re.finditer(p, flat):
                found.setdefault(f"coverage of {m.group(2)}", set()).add(f"{m.group(1)} {m.group(3)}")
        for m in re.finditer(_COVERAGE_ROW, page):
            found.setdefault(f"coverage of {m.group(1)}", set()).add(f"{m.group(2)} {m.group(3)}")
        out.append(found)
    return out


def conflicts(pages: Iterable[Mapping[str, set[str]]]) -> dict[str, list[str]]:
    """The labels written with more than one value across ``pages`` -> those values."""
    seen: dict[str, set[str]] = {}
    for page in pages:
        for label, values in page.items():
            seen.setdefault(label, set()).update(values)
    return {k: sorted(v) for k, v in sorted(seen.items()) if len(v) > 1}


def pdf_text(pdf: Path, *options: str) -> str:
    """The text of ``pdf`` as pdftotext lays it out on the page (``-layout``: a table's row on
    one line), its pages separated by form feeds; ``options`` are pdftotext's (``-f 1 -l 1``:
    the first page only)."""
    return subprocess.run(["pdftotext", *options, "-layout", str(pdf), "-"], check=True, capture_output=True,
                          text=True, timeout=60).stdout


def pdf_text_pages(pdf: Path) -> list[str]:
    """The text of each page of ``pdf`` as pdftotext reads it in content order (``-raw``)."""
    text = subprocess.run(["pdftotext", "-raw", str(pdf), "-"], check=True, capture_output=True, text=True).stdout
    return [p for p in text.split("\f") if p.strip()]


def app_text(at: Any) -> str:
    """The text a reader sees on an AppTest page: its Markdown, captions and metrics, and each
    table row as one line of its cells (Markdown escapes and colour marks taken off)."""
    lines = [m.value for m in at.markdown] + [c.value for c in at.caption]
    lines += [f"{m.label} {m.value}" for m in at.metric]
    lines += [s.value for s in at.subheader]
    for table in [*at.table, *at.dataframe]:
        df = table.value
        for index, row in df.iterrows():
            cells = ([] if isinstance(index, int) else [str(index)]) + [str(v) for v in row]
            lines.append(" ".join(cells))
    text = "\n".join(lines)
    return re.sub(r":(?:green|red|gray)\[([^\]]*)\]", r"\1", text).replace("\\", "")
