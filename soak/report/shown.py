"""The one way a data string reaches the app's Markdown: :func:`shown`.

Streamlit renders ``st.markdown``, ``st.caption``, alerts, expander labels and every cell of
``st.table`` as Markdown (with GitHub's extensions, Streamlit's ``:color[...]`` directives and
``$...$`` maths). A chip's fault text (``npu-smi``'s ``Error Information``), a node name, an
event's message or a trace's operator name are data from the node, not Markdown: a link or an
external image in one was rendered (the image fetched from wherever it named). Every such string
passes through :func:`shown`, which backslash-escapes each character that would start markup
(CommonMark shows an escaped character as itself) and makes line breaks spaces, so the text reads
as it was and nothing in it is markup. ``st.dataframe`` shows cells as plain text and needs
nothing.
"""

from __future__ import annotations

import re
from typing import Any

# What starts Markdown in Streamlit: emphasis, code, headings, tables, strikethrough, maths, HTML
# and entities, links and images (``[``), e-mail autolinks; line breaks become spaces, so no
# line of the text starts a list, quote or heading of its own.
_MARKUP = re.compile(r"([\\`*_\[\]<>#|~$&@])")
_BREAKS = re.compile(r"[\r\n\u2028\u2029]+")
# a bare URL (``http://``, ``www.``) is made a link by GitHub's autolink extension
_AUTOLINK = re.compile(r"(?i)(?<=[a-z])(:)(?=//)|(?<=\bwww)(\.)")


def shown(text: Any) -> str:
    """``text`` as itself in Markdown: every character that would start markup escaped."""
    out = _MARKUP.sub(r"\\\1", _BREAKS.sub(" ", str(text)))
    return _AUTOLINK.sub(lambda m: "\\" + m.group(0), out)


def shown_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` for a static table (``st.table``): every string key and cell through ``shown``."""
    return [{shown(k): shown(v) if isinstance(v, str) else v for k, v in row.items()} for row in rows]
