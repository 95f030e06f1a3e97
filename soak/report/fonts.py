"""Find and register a CJK TrueType font for the PDF and the charts.

reportlab embeds TrueType outlines only: OpenType/CFF fonts (the Noto CJK ``.ttc`` files most
distributions install) are rejected, so we look for TrueType CJK fonts in the usual system font
folders, try each one, and keep the first reportlab accepts. WenQuanYi Micro Hei
(``fonts-wqy-microhei`` on Debian/Ubuntu, ``wqy-microhei-fonts`` on Fedora) is the one we test
with. No font file ships with soak: a CJK font is 5-20 MB.

``--font PATH`` (or ``SOAK_REPORT_FONT``) names one explicitly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from soak.errors import FontNotFound

CJK_FONT_NAME = "SoakCJK"

# File names of TrueType CJK fonts, best first. Only TrueType outlines work with reportlab.
_CANDIDATES: tuple[str, ...] = (
    "wqy-microhei.ttc",
    "wqy-zenhei.ttc",
    "NotoSansSC-Regular.ttf",
    "NotoSansCJKsc-Regular.ttf",
    "SourceHanSansSC-Regular.ttf",
    "DroidSansFallbackFull.ttf",
    "DroidSansFallback.ttf",
    "uming.ttc",
    "ukai.ttc",
    "simhei.ttf",
    "msyh.ttc",
    "simsun.ttc",
    "PingFang.ttc",
    "Arial Unicode.ttf",
)

_FONT_DIRS: tuple[str, ...] = (
    "/usr/share/fonts",
    "/usr/local/share/fonts",
    "~/.local/share/fonts",
    "~/.fonts",
    "/Library/Fonts",
    "/System/Library/Fonts",
    "C:/Windows/Fonts",
)


@dataclass(frozen=True)
class FontChoice:
    path: Path
    subfont_index: int = 0


def _search_dirs() -> list[Path]:
    return [Path(os.path.expanduser(d)) for d in _FONT_DIRS if Path(os.path.expanduser(d)).is_dir()]


def candidate_paths() -> list[Path]:
    """Every candidate font file present on this machine, best first."""
    found: dict[str, list[Path]] = {}
    wanted = {name.lower(): name for name in _CANDIDATES}
    for root in _search_dirs():
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                key = f.lower()
                if key in wanted:
                    found.setdefault(wanted[key], []).append(Path(dirpath) / f)
    out: list[Path] = []
    for name in _CANDIDATES:
        out.extend(sorted(found.get(name, [])))
    return out


def _try_register(path: Path, name: str) -> bool:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFError, TTFont

    try:
        pdfmetrics.registerFont(TTFont(name, str(path), subfontIndex=0))
    except (TTFError, OSError, ValueError, KeyError):
        return False
    return True


@lru_cache(maxsize=8)
def register_cjk_font(explicit: str | None = None) -> FontChoice:
    """Register the CJK font under ``CJK_FONT_NAME`` with reportlab and return its path.

    Raises ``FontNotFound`` (a user error, one line) when none works.
    """
    explicit = explicit or os.environ.get("SOAK_REPORT_FONT") or None
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise FontNotFound(f"--font {explicit}: no such file")
        if not _try_register(path, CJK_FONT_NAME):
            raise FontNotFound(
                f"--font {explicit}: not a TrueType font reportlab can embed "
                "(OpenType/CFF fonts such as Noto CJK .ttc are not supported; use WenQuanYi Micro Hei)"
            )
        return FontChoice(path)
    for path in candidate_paths():
        if _try_register(path, CJK_FONT_NAME):
            return FontChoice(path)
    raise FontNotFound(
        "no CJK TrueType font found for the Chinese report: install fonts-wqy-microhei "
        "(apt) / wqy-microhei-fonts (dnf), or pass --font PATH.ttf|.ttc"
    )


def try_register_cjk_font(explicit: str | None = None) -> FontChoice | None:
    """Like ``register_cjk_font`` but None when there is none (English needs no CJK font)."""
    try:
        return register_cjk_font(explicit)
    except FontNotFound:
        if explicit:
            raise
        return None


def matplotlib_font_family(choice: FontChoice | None) -> list[str]:
    """Register the font with matplotlib too, so chart labels in Chinese render."""
    if choice is None:
        return ["DejaVu Sans"]
    from matplotlib import font_manager

    try:
        font_manager.fontManager.addfont(str(choice.path))
        name = font_manager.FontProperties(fname=str(choice.path)).get_name()
    except (RuntimeError, OSError, ValueError):
        return ["DejaVu Sans"]
    return ["DejaVu Sans", name]
