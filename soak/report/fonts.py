"""The PDF's fonts: which font draws each character, and the CJK font found or named.

Every character is drawn in the first of three fonts that has it:

1. Helvetica (bold: Helvetica-Bold), the PDF's standard Latin font: Latin letters, digits and
   the Windows-1252 punctuation (``— … • · ×``), in both languages;
2. DejaVu Sans (matplotlib's copy, which the charts use too): the symbols Helvetica lacks
   (``≥ ≤ → ∞ χ``);
3. the CJK font (registered as ``SoakCJK-<digest of its path>``): the Chinese.

So a CJK-only font (Droid Sans Fallback has no Latin letter and no digit) never draws a Latin
run, and a Latin font never draws a CJK one: ``FontSet.mark`` wraps each run of a paragraph in
its font, ``FontSet.runs`` splits a line the canvas draws. A character none of them has is a
``MissingGlyph`` error naming it and the fonts, never a blank in the customer's document.

reportlab embeds TrueType outlines only: OpenType/CFF fonts (the Noto CJK ``.ttc`` files most
distributions install) are refused. A CJK font is accepted only if it has every character of
the Chinese catalog that the first two fonts lack; the search takes the first such font from
the usual system folders. WenQuanYi Micro Hei (``fonts-wqy-microhei`` on Debian/Ubuntu,
``wqy-microhei-fonts`` on Fedora) and Droid Sans Fallback (``fonts-droid-fallback``) are the
ones tested. No font file ships with soak: a CJK font is 5-20 MB.

``--font PATH`` (or ``SOAK_REPORT_FONT``) names the CJK font explicitly.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from soak.errors import FontNotFound, MissingGlyph

LATIN_FONT = "Helvetica"
LATIN_BOLD = "Helvetica-Bold"
SYMBOL_FONT_NAME = "SoakSymbols"
SYMBOL_BOLD = "SoakSymbols-Bold"
CJK_FONT_NAME = "SoakCJK"
_SYMBOL_FILES = {SYMBOL_FONT_NAME: "DejaVuSans.ttf", SYMBOL_BOLD: "DejaVuSans-Bold.ttf"}

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
_INSTALL = "install fonts-wqy-microhei or fonts-droid-fallback (apt) / wqy-microhei-fonts (dnf), or pass --font PATH.ttf|.ttc"


@dataclass(frozen=True)
class FontChoice:
    """A font file the PDF embeds: its path and the family name the file gives itself."""

    path: Path
    subfont_index: int = 0
    family: str | None = None
    font_name: str = CJK_FONT_NAME  # as registered with reportlab: one name per file

    @property
    def label(self) -> str:
        """The font as the PDF's metadata and ``soak report pdf`` name it."""
        return f"{self.family or self.path.stem} ({self.path.name})"


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


def latin_has(ch: str) -> bool:
    """Whether Helvetica draws ``ch``: the PDF's standard fonts hold Windows-1252."""
    if not (ch.isprintable() or ch == " "):
        return False
    try:
        ch.encode("cp1252")
    except UnicodeEncodeError:
        return False
    return True


def _load(path: Path, name: str) -> FontChoice | None:
    """``path`` registered with reportlab as ``name``; None when reportlab cannot embed it."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFError, TTFont

    try:
        font = TTFont(name, str(path), subfontIndex=0)
    except (TTFError, OSError, ValueError, KeyError):
        return None
    pdfmetrics.registerFont(font)
    family = font.face.familyName
    return FontChoice(path, 0, family.decode("utf-8", "replace") if isinstance(family, bytes) else family, name)


def _cjk_name(path: Path) -> str:
    """The reportlab name of CJK font ``path``: its own, so that one process may render with
    several (each registered name keeps its file)."""
    import hashlib

    return f"{CJK_FONT_NAME}-{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]}"


def _cmap(name: str) -> dict[int, int]:
    from reportlab.pdfbase import pdfmetrics

    return pdfmetrics.getFont(name).face.charToGlyph


@lru_cache(maxsize=1)
def register_symbol_fonts() -> FontChoice:
    """DejaVu Sans and its bold, from matplotlib's own fonts (always installed with it)."""
    import matplotlib
    from reportlab.lib.fonts import addMapping

    folder = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    choice = None
    for name, file in _SYMBOL_FILES.items():
        loaded = _load(folder / file, name)
        if loaded is None:
            raise FontNotFound(f"{folder / file}: matplotlib's DejaVu Sans cannot be read; reinstall matplotlib")
        choice = choice or loaded
    # <b> inside a symbol run takes the bold file
    addMapping(SYMBOL_FONT_NAME, 0, 0, SYMBOL_FONT_NAME)
    addMapping(SYMBOL_FONT_NAME, 1, 0, SYMBOL_BOLD)
    addMapping(SYMBOL_FONT_NAME, 0, 1, SYMBOL_FONT_NAME)
    addMapping(SYMBOL_FONT_NAME, 1, 1, SYMBOL_BOLD)
    assert choice is not None
    return choice


def catalog_cjk() -> str:
    """The characters of the Chinese report's own words that only the CJK font can draw."""
    from soak.report.i18n import chinese_text

    register_symbol_fonts()
    symbols = _cmap(SYMBOL_FONT_NAME)
    return "".join(sorted({c for c in chinese_text() if not latin_has(c) and ord(c) not in symbols
                           and not c.isspace()}))


def _missing_of_catalog(name: str) -> str | None:
    cmap = _cmap(name)
    return next((c for c in catalog_cjk() if cmap.get(ord(c), 0) == 0), None)


@lru_cache(maxsize=8)
def register_cjk_font(explicit: str | None = None) -> FontChoice:
    """Register the CJK font under ``CJK_FONT_NAME`` with reportlab and return it: ``explicit``
    (or ``SOAK_REPORT_FONT``), else the first font found that has the whole Chinese catalog.

    Raises ``FontNotFound`` (a user error, one line) when none works."""
    register_symbol_fonts()
    explicit = explicit or os.environ.get("SOAK_REPORT_FONT") or None
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise FontNotFound(f"--font {explicit}: no such file")
        choice = _load(path, _cjk_name(path))
        if choice is None:
            raise FontNotFound(
                f"--font {explicit}: not a TrueType font reportlab can embed "
                "(OpenType/CFF fonts such as Noto CJK .ttc are not supported; use WenQuanYi Micro Hei)"
            )
        missing = _missing_of_catalog(choice.font_name)
        if missing is not None:
            raise FontNotFound(f"--font {explicit}: {choice.family or path.name} has no {_char(missing)}, "
                               "which the Chinese report draws; name a CJK font that has it")
        return choice
    refused: list[str] = []
    for path in candidate_paths():
        choice = _load(path, _cjk_name(path))
        if choice is None:
            refused.append(f"{path.name}: not TrueType")
            continue
        missing = _missing_of_catalog(choice.font_name)
        if missing is None:
            return choice
        refused.append(f"{path.name}: no {_char(missing)}")
    tried = f" (tried {'; '.join(refused)})" if refused else ""
    raise FontNotFound(f"no CJK TrueType font found for the Chinese report{tried}: {_INSTALL}")


def try_register_cjk_font(explicit: str | None = None) -> FontChoice | None:
    """Like ``register_cjk_font`` but None when there is none (English needs no CJK font)."""
    try:
        return register_cjk_font(explicit)
    except FontNotFound:
        if explicit:
            raise
        return None


def _char(c: str) -> str:
    return f"{c!r} (U+{ord(c):04X} {unicodedata.name(c, 'unnamed')})"


# a tag or an entity of paragraph markup: kept as it is, outside any run
_MARKUP = re.compile(r"<[^>]*>|&(?:#\d+|#x[0-9a-fA-F]+|\w+);")


class FontSet:
    """The report's fonts (Latin, symbols, the CJK font when there is one) and, as it renders,
    the ones it drew with: the PDF names those."""

    def __init__(self, cjk: FontChoice | None) -> None:
        self.symbols = register_symbol_fonts()
        self.cjk = cjk
        self._symbol_map = _cmap(SYMBOL_FONT_NAME)
        self._cjk_map = _cmap(cjk.font_name) if cjk is not None else {}
        self.used: set[str] = set()

    def font_for(self, ch: str, *, bold: bool = False, context: str = "") -> str | None:
        """The font that draws ``ch``: None for the Latin font (the style's own), else the
        symbol or CJK font's name; ``MissingGlyph`` when none has it."""
        if latin_has(ch) or ch in "\n\t":
            self.used.add(LATIN_FONT)
            return None
        if self._symbol_map.get(ord(ch), 0):
            self.used.add(SYMBOL_FONT_NAME)
            return SYMBOL_BOLD if bold else SYMBOL_FONT_NAME
        if self._cjk_map.get(ord(ch), 0):
            assert self.cjk is not None
            self.used.add(CJK_FONT_NAME)
            return self.cjk.font_name
        fonts = ", ".join(self.labels(everything=True))
        hint = "pass --font PATH with a font that has it" if self.cjk else _INSTALL
        where = f" in {context[:60]!r}" if context else ""
        raise MissingGlyph(f"the report would draw {_char(ch)}{where}, which none of its fonts has ({fonts}): {hint}")

    def mark(self, markup: str, *, bold: bool = False) -> str:
        """Paragraph ``markup`` with each run the Latin font lacks wrapped in its own font."""
        out: list[str] = []
        run_font: str | None = None
        plain = _MARKUP.sub(" ", markup)
        pos = 0
        for m in [*_MARKUP.finditer(markup), None]:
            end = m.start() if m else len(markup)
            for ch in markup[pos:end]:
                font = run_font if ch == " " else self.font_for(ch, bold=bold, context=plain)
                if font != run_font:
                    if run_font is not None:
                        out.append("</font>")
                    if font is not None:
                        out.append(f'<font name="{font}">')
                    run_font = font
                out.append(ch)
            if m is None:
                break
            if run_font is not None:  # a tag or an entity closes the run: it may open another font
                out.append("</font>")
                run_font = None
            out.append(m.group(0))
            pos = m.end()
        if run_font is not None:
            out.append("</font>")
        return "".join(out)

    def runs(self, text: str, latin: str) -> list[tuple[str, str]]:
        """``text`` as (font name, part) runs, the Latin parts in ``latin``: for the canvas."""
        bold = latin == LATIN_BOLD
        out: list[tuple[str, str]] = []
        for ch in text:
            font = (out[-1][0] if out else latin) if ch == " " else (
                self.font_for(ch, bold=bold, context=text) or latin)
            if out and out[-1][0] == font:
                out[-1] = (font, out[-1][1] + ch)
            else:
                out.append((font, ch))
        return out

    def labels(self, *, everything: bool = False) -> list[str]:
        """The fonts drawn with (or all of them), as the metadata names them."""
        named = [(LATIN_FONT, "Helvetica (PDF standard font)"), (SYMBOL_FONT_NAME, self.symbols.label)]
        if self.cjk is not None:
            named.append((CJK_FONT_NAME, self.cjk.label))
        return [label for key, label in named if everything or key in self.used]


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
