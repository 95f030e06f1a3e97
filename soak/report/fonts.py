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

reportlab embeds TrueType outlines only. A TrueType CJK font is registered as it is; an
OpenType/CFF one (the Noto CJK ``.ttc`` of ``fonts-noto-cjk``, its simplified-Chinese face) is
read for its characters, and each report embeds the glyphs it draws converted to TrueType
outlines (fontTools, a dependency of matplotlib). A CJK font is accepted only if it has every
character of the Chinese catalog that the first two fonts lack; the search takes the first such
font from the usual system folders, TrueType ones first. WenQuanYi Micro Hei
(``fonts-wqy-microhei`` on Debian/Ubuntu, ``wqy-microhei-fonts`` on Fedora), Droid Sans
Fallback (``fonts-droid-fallback``) and Noto Sans CJK (``fonts-noto-cjk``) are the ones tested.
No font file ships with soak: a CJK font is 5-20 MB.

``--font PATH`` (or ``SOAK_REPORT_FONT``) names the CJK font explicitly; ``SOAK_FONT_DIRS``
(folders separated by ``:``) replaces the system folders searched.
"""

from __future__ import annotations

import itertools
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

# File names of CJK fonts, best first: TrueType ones, then OpenType/CFF ones (converted).
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
    # OpenType/CFF: converted to TrueType outlines for what the report draws (``_cff_subset``)
    "NotoSansCJK-Regular.ttc",
    "NotoSansCJKsc-Regular.otf",
    "NotoSansSC-Regular.otf",
    "SourceHanSansSC-Regular.otf",
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
_INSTALL = "install fonts-wqy-microhei, fonts-droid-fallback or fonts-noto-cjk (apt) / wqy-microhei-fonts (dnf), or pass --font PATH.ttf|.ttc|.otf"


@dataclass(frozen=True)
class FontChoice:
    """A font file the PDF embeds: its path and the family name the file gives itself."""

    path: Path
    subfont_index: int = 0
    family: str | None = None
    font_name: str = CJK_FONT_NAME  # as registered with reportlab: one name per file
    cff: bool = False  # OpenType/CFF outlines: embedded as a TrueType subset (``FontSet.embed``)

    @property
    def label(self) -> str:
        """The font as the PDF's metadata and ``soak report pdf`` name it."""
        return f"{self.family or self.path.stem} ({self.path.name})"


FONT_DIRS_ENV = "SOAK_FONT_DIRS"


def _search_dirs() -> list[Path]:
    """The folders searched for a CJK font: ``SOAK_FONT_DIRS`` (folders separated by ``:``,
    ``;`` on Windows) instead of the system's when it is set, so a machine's fonts can be
    left out (a check of each font set alone: scripts/font-sets.sh)."""
    named = os.environ.get(FONT_DIRS_ENV)
    dirs = [d for d in named.split(os.pathsep) if d] if named else list(_FONT_DIRS)
    return [Path(os.path.expanduser(d)) for d in dirs if Path(os.path.expanduser(d)).is_dir()]


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
    """Whether Helvetica draws ``ch``: the PDF's standard fonts hold Windows-1252 (its 0xA0,
    the no-break space that keeps a figure's number and unit on one line, is a space there)."""
    if not (ch.isprintable() or ch in " \xa0"):
        return False
    try:
        ch.encode("cp1252")
    except UnicodeEncodeError:
        return False
    return True


def _load(path: Path, name: str) -> FontChoice | None:
    """``path`` as font ``name``: a TrueType font registered with reportlab, an OpenType/CFF
    one read for its characters (reportlab embeds TrueType outlines only: it gets the glyphs a
    report draws, converted); None when neither can be read."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFError, TTFont

    try:
        font = TTFont(name, str(path), subfontIndex=0)
    except (TTFError, OSError, ValueError, KeyError):
        return _load_cff(path, name)
    pdfmetrics.registerFont(font)
    family = font.face.familyName
    return FontChoice(path, 0, family.decode("utf-8", "replace") if isinstance(family, bytes) else family, name)


# the face of a CJK collection that has the simplified Chinese forms
_SC_FACE = re.compile(r"\b(SC|Simplified Chinese|GB)\b")
_CFF_CMAPS: dict[str, dict[int, str]] = {}  # font name -> its characters (a CFF font is not registered)


def _load_cff(path: Path, name: str) -> FontChoice | None:
    from fontTools.ttLib import TTCollection, TTFont, TTLibError

    try:
        if path.read_bytes()[:4] == b"ttcf":
            faces = TTCollection(str(path), lazy=True).fonts
            index = next((i for i, f in enumerate(faces) if _SC_FACE.search(f["name"].getDebugName(1) or "")), 0)
        else:
            index = 0
        font = TTFont(str(path), fontNumber=index, lazy=True)
        if "CFF " not in font:
            return None
        _CFF_CMAPS[name] = dict(font.getBestCmap())
        family = font["name"].getDebugName(1)
    except (TTLibError, OSError, ValueError, KeyError, AssertionError):
        return None
    return FontChoice(path, index, family, name, cff=True)


def _map_names(name: str) -> None:
    """A paragraph's markup names its fonts as it is made: ``name`` known to the markup before
    its outlines are (``FontSet.embed``, once the report's text is)."""
    from reportlab.lib.fonts import addMapping

    for bold in (0, 1):
        for italic in (0, 1):
            addMapping(name, bold, italic, name)


def _cff_subset(choice: FontChoice, chars: str, ps_name: str) -> bytes:
    """The glyphs of ``chars`` of the OpenType/CFF font ``choice`` as a TrueType font named
    ``ps_name``: its cubic outlines as quadratic ones (fontTools' cu2qu), which reportlab can
    embed."""
    import io

    from fontTools import subset
    from fontTools.pens.cu2quPen import Cu2QuPen
    from fontTools.pens.ttGlyphPen import TTGlyphPen
    from fontTools.ttLib import TTFont, newTable

    font = TTFont(str(choice.path), fontNumber=choice.subfont_index)
    options = subset.Options()
    options.layout_features, options.name_IDs, options.hinting, options.notdef_outline = [], ["*"], False, True
    sub = subset.Subsetter(options)
    sub.populate(unicodes=sorted({ord(c) for c in chars}))
    sub.subset(font)
    glyphs, order = font.getGlyphSet(), font.getGlyphOrder()
    glyf = newTable("glyf")
    glyf.glyphOrder, glyf.glyphs = order, {}
    for g in order:
        pen = TTGlyphPen(glyphs)
        glyphs[g].draw(Cu2QuPen(pen, 1.0, reverse_direction=True))  # 1 unit of 1000 per em
        glyf.glyphs[g] = pen.glyph()
    font["glyf"], font["loca"] = glyf, newTable("loca")
    for table in ("CFF ", "VORG"):
        if table in font:
            del font[table]
    maxp = font["maxp"]
    maxp.tableVersion = 0x00010000
    for attr in ("maxTwilightPoints", "maxStorage", "maxFunctionDefs", "maxInstructionDefs", "maxStackElements",
                 "maxSizeOfInstructions", "maxComponentElements", "maxComponentDepth"):
        setattr(maxp, attr, 0)
    maxp.maxZones = 1
    font["head"].glyphDataFormat = 0
    for rec in font["name"].names:  # its PostScript name: reportlab tells faces apart by it
        if rec.nameID == 6:
            rec.string = ps_name
    font["post"].formatType = 3.0
    font.sfntVersion = "\x00\x01\x00\x00"
    out = io.BytesIO()
    font.save(out)
    return out.getvalue()


def _cjk_name(path: Path) -> str:
    """The reportlab name of CJK font ``path``: its own, so that one process may render with
    several (each registered name keeps its file)."""
    import hashlib

    return f"{CJK_FONT_NAME}-{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]}"


def _cmap(name: str) -> dict[int, object]:
    """The characters of font ``name``: code point -> glyph (a true value where it has one)."""
    if name in _CFF_CMAPS:
        return _CFF_CMAPS[name]  # type: ignore[return-value]
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
            raise FontNotFound(f"--font {explicit}: not a TrueType or OpenType font")
        missing = _missing_of_catalog(choice.font_name)
        if missing is not None:
            raise FontNotFound(f"--font {explicit}: {choice.family or path.name} has no {_char(missing)}, "
                               "which the Chinese report draws; name a CJK font that has it")
        return choice
    refused: list[str] = []
    for path in candidate_paths():
        choice = _load(path, _cjk_name(path))
        if choice is None:
            refused.append(f"{path.name}: unreadable")
            continue
        missing = _missing_of_catalog(choice.font_name)
        if missing is None:
            return choice
        refused.append(f"{path.name}: no {_char(missing)}")
    tried = f" (tried {'; '.join(refused)})" if refused else ""
    raise FontNotFound(f"no CJK font found for the Chinese report{tried}: {_INSTALL}")


def try_register_cjk_font(explicit: str | None = None) -> FontChoice | None:
    """Like ``register_cjk_font`` but None when there is none (English needs no CJK font)."""
    try:
        return register_cjk_font(explicit)
    except FontNotFound:
        if explicit:
            raise
        return None


def stamp_face(choice: FontChoice, text: str) -> tuple[Path, int] | None:
    """(file, face) of ``choice`` for the signature's stamp, which pyhanko draws in one font:
    None when the font lacks a character of ``text`` or of printed ASCII (a CJK-only font, such
    as Droid Sans Fallback, has no Latin letter: the stamp stays in English then)."""
    cmap = _cmap(choice.font_name)
    needed = {ord(c) for c in text if not c.isspace()} | set(range(0x21, 0x7F))
    if any(not cmap.get(cp) for cp in needed):
        return None
    return choice.path, choice.subfont_index


def _char(c: str) -> str:
    return f"{c!r} (U+{ord(c):04X} {unicodedata.name(c, 'unnamed')})"


_SUBSETS = itertools.count(1)  # the serial of a CFF font's subset in this process

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
        # a CFF font's subset is this report's own: reportlab keeps the first font registered
        # under a name (and a face name), so each report's subset has names of its own
        self._cjk_font = None if cjk is None else cjk.font_name
        if cjk is not None and cjk.cff:
            self._cjk_font = f"{cjk.font_name}-{next(_SUBSETS)}"
            _map_names(self._cjk_font)
        self.used: set[str] = set()
        self.cjk_chars: set[str] = set()  # drawn in the CJK font: what a CFF font's subset holds
        self.stood_in: set[str] = set()  # drawn as their code points: no font has them

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
            assert self._cjk_font is not None
            self.used.add(CJK_FONT_NAME)
            self.cjk_chars.add(ch)
            return self._cjk_font
        fonts = ", ".join(self.labels(everything=True))
        hint = "pass --font PATH with a font that has it" if self.cjk else _INSTALL
        where = f" in {context[:60]!r}" if context else ""
        raise MissingGlyph(f"the report would draw {_char(ch)}{where}, which none of its fonts has ({fonts}): {hint}")

    def stand_in(self, ch: str) -> str:
        """``ch``, or where no font has it and it is a symbol, a mark or a control character
        (an emoji in a recorded error message, a tool's odd byte) its code point as
        ``[U+1F3D6]``: seen, never a blank. A letter or digit no font has is an error (a font
        that lacks a language's letters is the wrong font)."""
        if latin_has(ch) or ch in "\n\t " or self._symbol_map.get(ord(ch), 0) or self._cjk_map.get(ord(ch), 0):
            return ch
        if unicodedata.category(ch)[0] in "LN":
            return ch  # font_for names it
        self.stood_in.add(ch)
        return f"[U+{ord(ch):04X}]"

    def mark(self, markup: str, *, bold: bool = False) -> str:
        """Paragraph ``markup`` with each run the Latin font lacks wrapped in its own font."""
        out: list[str] = []
        run_font: str | None = None
        plain = _MARKUP.sub(" ", markup)
        pos = 0
        for m in [*_MARKUP.finditer(markup), None]:
            end = m.start() if m else len(markup)
            for ch in "".join(self.stand_in(c) for c in markup[pos:end]):
                font = self._space(run_font) if ch == " " else self.font_for(ch, bold=bold, context=plain)
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
        for ch in "".join(self.stand_in(c) for c in text):
            if ch == " ":
                font = self._space(out[-1][0] if out and out[-1][0] != latin else None) or latin
            else:
                font = self.font_for(ch, bold=bold, context=text) or latin
            if out and out[-1][0] == font:
                out[-1] = (font, out[-1][1] + ch)
            else:
                out.append((font, ch))
        return out

    def _space(self, run_font: str | None) -> str | None:
        """The font of a space after a run in ``run_font``: that font where it has a space
        (a run is not cut at each word), else the Latin one."""
        if run_font is None:
            return None
        cjk = run_font == self._cjk_font
        if (self._cjk_map if cjk else self._symbol_map).get(32, 0):
            if cjk:
                self.cjk_chars.add(" ")
            return run_font
        return None

    def embed(self) -> None:
        """Before the document is built: an OpenType/CFF CJK font registered with reportlab as
        TrueType outlines of what the report marks for it, and of the Chinese catalog (text a
        page draws as it is laid out, the unsigned-draft mark, is from there)."""
        if self.cjk is None or not self.cjk.cff or self._cjk_font is None:
            return
        import io

        from reportlab.pdfbase import pdfmetrics
        from reportlab.pdfbase.ttfonts import TTFont

        chars = "".join(sorted(self.cjk_chars | set(catalog_cjk())))
        font = TTFont(self._cjk_font, io.BytesIO(_cff_subset(self.cjk, chars, self._cjk_font)))
        lost = next((c for c in chars if not font.face.charToGlyph.get(ord(c), 0)), None)
        if lost is not None:  # the conversion dropped a glyph: a box is no better than a blank
            raise MissingGlyph(f"{self.cjk.label}: {_char(lost)} lost in its TrueType conversion")
        pdfmetrics.registerFont(font)

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
