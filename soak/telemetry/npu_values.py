"""One value as npu-smi prints it, to a Python value: the table view (``npu_table``) and the
key/value views (``npu_query``) read numbers and "no value" words the same way.

``NA``, ``-``, ``Failed`` and the like are None, never 0; so is any other non-numeric text in
a numeric field (the tool had no number to give).
"""

from __future__ import annotations

from collections.abc import Callable

# The documented words npu-smi prints for "no value". "UNKNOWN" is not here: as a health
# word it is a reading of its own.
NA_WORDS = frozenset({"", "na", "n/a", "-", "--", "failed", "not supported"})


def is_na(text: str | None) -> bool:
    return text is None or text.strip().lower() in NA_WORDS


def healthy_of(health: str | None) -> bool | None:
    """A chip's health word as a judgement: OK is healthy; Warning, Alarm, Critical are not;
    no reading or UNKNOWN is None (the tool did not say)."""
    if health is None or health.upper() == "UNKNOWN":
        return None
    return health == "OK"


def to_number(text: str | None) -> int | float | None:
    """An int when the text is one, else a float, else None."""
    if is_na(text):
        return None
    t = text.strip()
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    return None


def to_int(text: str | None) -> int | None:
    """``"3"`` and ``"3.0"`` are 3; ``"3.5"`` is None rather than a rounded guess."""
    value = to_number(text)
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    return value


def to_float(text: str | None) -> float | None:
    value = to_number(text)
    return None if value is None else float(value)


def to_str(text: str | None) -> str | None:
    """The text as printed (stripped), None for a "no value" word."""
    return None if is_na(text) else text.strip()


CONVERT: dict[str, Callable[[str | None], object]] = {
    "int": to_int, "float": to_float, "num": to_number, "str": to_str,
}
"""A field's kind, as the parsers' key tables name it, to its converter."""
