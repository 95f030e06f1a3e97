"""What a person checks on a page, as code: text inside the page, no text over other text, not
empty, no raw JSON or machine values. Used on PDF pages (poppler's word boxes) and on the app's
pages (the browser's text boxes)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from html import unescape
from pathlib import Path

# What a reader must never see: JSON objects, Python reprs, epoch seconds, exponent floats of
# timestamps, the analysis' raw keys of a finding's details.
RAW = [
    (re.compile(r'\{\s*"|":\s|\[\[|\{\'|\'\w+\':'), "JSON or a Python repr"),
    (re.compile(r"\b1[6-9]\d{8}(\.\d+)?\b"), "epoch seconds"),
    (re.compile(r"\b\d\.\d+e\+0?9\b"), "an epoch float"),
    (re.compile(r"\bdetails="), "a details= dump"),
]


def raw_values(text: str) -> list[str]:
    """Every raw machine value in ``text``, as "what: excerpt"."""
    out = []
    for pattern, what in RAW:
        for m in pattern.finditer(text):
            out.append(f"{what}: {text[max(0, m.start() - 30):m.end() + 30]!r}")
    return out


@dataclass(frozen=True)
class Box:
    text: str
    x0: float
    y0: float
    x1: float
    y1: float

    def overlap(self, other: Box) -> float:
        """Overlapping area as a share of the smaller box."""
        w = min(self.x1, other.x1) - max(self.x0, other.x0)
        h = min(self.y1, other.y1) - max(self.y0, other.y0)
        if w <= 0 or h <= 0:
            return 0.0
        small = min((self.x1 - self.x0) * (self.y1 - self.y0), (other.x1 - other.x0) * (other.y1 - other.y0))
        return w * h / small if small > 0 else 0.0


@dataclass(frozen=True)
class Page:
    number: int
    width: float
    height: float
    words: tuple[Box, ...]
    images: int = 0  # pictures (charts) on the page

    @property
    def text(self) -> str:
        return " ".join(w.text for w in self.words)


def pdf_pages(path: Path) -> list[Page]:
    """Every page's size and word boxes (``pdftotext -bbox``)."""
    html = subprocess.run(["pdftotext", "-bbox", str(path), "-"], capture_output=True, text=True, check=True,
                          timeout=120).stdout
    listing = subprocess.run(["pdfimages", "-list", str(path)], capture_output=True, text=True, check=True,
                             timeout=120).stdout.splitlines()[2:]
    images: dict[int, int] = {}
    for line in listing:
        n = int(line.split()[0])
        images[n] = images.get(n, 0) + 1
    pages = []
    for i, m in enumerate(re.finditer(r'<page width="([\d.]+)" height="([\d.]+)">(.*?)</page>', html, re.S), 1):
        words = tuple(
            Box(unescape(w[4]), float(w[0]), float(w[1]), float(w[2]), float(w[3]))
            for w in re.findall(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">(.*?)</word>',
                                m.group(3))
        )
        pages.append(Page(i, float(m.group(1)), float(m.group(2)), words, images.get(i, 0)))
    return pages


def layout_problems(boxes: list[Box] | tuple[Box, ...], width: float, height: float | None = None,
                    min_words: int = 20, images: int = 0) -> list[str]:
    """Text outside the page, text over text, an (almost) empty page (no pictures either)."""
    out = []
    if len(boxes) < min_words and not images:
        out.append(f"only {len(boxes)} words: {' '.join(b.text for b in boxes)[:200]!r}")
    for b in boxes:
        if b.x0 < -0.5 or b.x1 > width + 0.5 or (height is not None and (b.y0 < -0.5 or b.y1 > height + 0.5)):
            out.append(f"outside the page: {b.text!r} at ({b.x0:.0f},{b.y0:.0f})-({b.x1:.0f},{b.y1:.0f})")
    ordered = sorted(boxes, key=lambda b: b.y0)
    for i, a in enumerate(ordered):
        for b in ordered[i + 1:]:
            if b.y0 >= a.y1:
                break
            if a.overlap(b) > 0.25:
                out.append(f"overlapping: {a.text!r} and {b.text!r} at ({a.x0:.0f},{a.y0:.0f})")
    return out


def chip_figures(text: str) -> dict[str, int]:
    """The chip count each page states: the cover's "Chips", the evidence criterion's and the
    cluster view's counts line."""
    cover = re.search(r"Chips\s+(\d+)(?: of (\d+) read)?", text)
    assert cover is not None, text[:3000]
    crit = re.search(r"evidence coverage.*?(\d+) (?:of (\d+) )?chips", text, re.S | re.I)
    counts = re.search(r"(\d+) nodes, (\d+) chips:", text)
    assert crit is not None and counts is not None
    return {"cover": int(cover.group(2) or cover.group(1)), "criterion": int(crit.group(2) or crit.group(1)),
            "cluster": int(counts.group(2))}


def _english_phrases() -> set[str]:
    """Every run of three or more English words (three letters or more) that a template of the
    judgement's English table writes itself, not from its values: what a Chinese page must
    not show. The chip figures' sources are data quoted as written (in English), so phrases
    they hold are left out."""
    from soak.analysis.messages import ENGLISH
    from soak.analysis.profile import DEFAULT_CHIPS

    quoted = " ".join(" ".join(str(x) for x in vars(c).values()) for c in DEFAULT_CHIPS.values())

    out: set[str] = set()
    for template in ENGLISH.values():
        text = re.sub(r"\[\[!?\w+\|", "\x00", template).replace("]]", "\x00")
        text = re.sub(r"\{[^{}]*\}", "\x00", text)
        for chunk in re.split(r"[\x00():;,.\[\]]", text):
            run: list[str] = []
            for w in [*chunk.split(), ""]:
                if re.fullmatch(r"[a-z][a-z'-]{2,}", w):
                    run.append(w)
                    continue
                # three words or more: a shorter run ("other node") is as likely an event's own
                # English (events are not the judgement's sentences)
                if len(run) >= 3 and " ".join(run) not in quoted:
                    out.add(" ".join(run))
                run = []
    return out


ENGLISH_PHRASES = _english_phrases()


def english_left(text: str) -> list[str]:
    """The judgement's English phrases found in ``text`` (a Chinese page); empty when none."""
    flat = " ".join(text.split())
    return sorted(p for p in ENGLISH_PHRASES if p in flat)
