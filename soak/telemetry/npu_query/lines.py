"""Key/value lines of npu-smi's ``info -t ...`` views, grouped by chip and turned into records.

Every line is ``<TAB>key : value`` (the ECC view pads keys to 40 characters, docs show
spaces instead of the TAB). ``Chip ID`` comes *after* a chip's values in
``usages``/``temp``/``power`` but *before* them in ``common``. So the helpers here:

* split each line on its first ``:`` and compare keys case- and space-insensitively;
* find which side of its values ``Chip ID`` sits on from the text itself;
* fill a record from a spec of known keys (field name with the unit, kind), keeping
  unknown keys in ``extras`` and turning ``NA``/``-``/``Failed`` into None.

The views themselves are in ``readings`` and ``inventory``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from soak.errors import InputError
from soak.telemetry.npu_values import CONVERT, to_int

Pairs = list[tuple[str, str]]


def norm_key(text: str) -> str:
    """A key compared case- and space-insensitively: lower case, runs of spaces as one."""
    return re.sub(r"\s+", " ", text.strip().lower())


def kv_lines(text: str) -> list[tuple[str, str] | None]:
    """``(key, value)`` per key/value line, None for a blank line; other lines are dropped.

    A continuation line (blank key: ``<TAB><31 spaces>: more text``) comes back with key "".
    """
    out: list[tuple[str, str] | None] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            out.append(None)
            continue
        if ":" not in line or line.startswith(("$", "#", "/")):
            continue
        key, _, value = line.partition(":")
        out.append((key.strip(), value.strip()))
    return out


def require_kv_lines(text: str, source: str, what: str) -> list[tuple[str, str] | None]:
    """``kv_lines(text)``; InputError naming ``source`` if it is binary or has no key/value line."""
    if "\x00" in text:
        raise InputError(f"{source}: binary data, not npu-smi text")
    lines = kv_lines(text)
    if not any(item for item in lines):
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        raise InputError(f"{source}: no {what} key/value lines (starts with {first[:60]!r})")
    return lines


@dataclass(frozen=True, slots=True)
class ChipSplit:
    """A view's lines grouped by ``split_chips``."""

    card: dict[str, str]  # NPU ID, Chip Count, and card-level keys
    chips: list[tuple[int | None, Pairs]]  # chip id, its key/value pairs in order
    mcu: Pairs | None  # the trailing MCU sub-block, if printed


_CARD_KEYS = {"npu id", "chip count"}


def split_chips(lines: Sequence[tuple[str, str] | None]) -> ChipSplit:
    """Group key/value lines into card keys, per-chip pairs and the MCU block.

    ``Chip ID`` closes a chip when the first chip value comes before the first ``Chip ID``
    (``usages``, ``temp``, ``power``, ``ecc``) and opens one otherwise (``common``).
    ``Chip Name : mcu`` marks the MCU block: it opens it in ``common`` and closes it in
    ``temp``, where the sensor values come first.
    """
    items = [i for i in lines if i is not None and i[0]]
    first_value = next(
        (
            n
            for n, (k, _) in enumerate(items)
            if norm_key(k) not in _CARD_KEYS | {"chip id", "chip name"}
        ),
        None,
    )
    first_chip = next((n for n, (k, _) in enumerate(items) if norm_key(k) == "chip id"), None)
    after = first_value is not None and (first_chip is None or first_value < first_chip)
    card: dict[str, str] = {}
    chips: list[tuple[int | None, Pairs]] = []
    mcu: Pairs | None = None
    pending: Pairs = []
    in_mcu = False
    for key, value in items:
        k = norm_key(key)
        if k in _CARD_KEYS and not pending and not in_mcu:
            card[k] = value
            continue
        if k == "chip id":
            if after:
                chips.append((to_int(value), pending))
                pending = []
            else:
                if pending and chips:
                    chips[-1][1].extend(pending)
                pending = []
                chips.append((to_int(value), []))
                in_mcu = False
            continue
        if k == "chip name" and value.strip().lower() == "mcu":
            if after:
                mcu, pending = pending, []
            else:
                in_mcu, mcu = True, []
            continue
        if in_mcu and mcu is not None:
            mcu.append((key, value))
        elif not after and chips:
            chips[-1][1].append((key, value))
        else:
            pending.append((key, value))
    if pending:
        if after or not chips:
            chips.append((None, pending))  # values without a Chip ID line: one chip, id unknown
        else:
            chips[-1][1].extend(pending)
    return ChipSplit(card, chips, mcu)


def lookup(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Pairs as a dict keyed by ``norm_key``."""
    return {norm_key(k): v for k, v in pairs}


def build_record(cls, spec: Mapping[str, tuple[str, str]], pairs: Pairs, **ids):
    """Fill ``cls`` from pairs using ``spec``: normalised key -> (field, kind)."""
    values: dict[str, object] = dict(ids)
    extras: list[tuple[str, str]] = []
    for key, raw in pairs:
        target = spec.get(norm_key(key))
        if target is None:
            extras.append((key.strip(), raw))
        else:
            name, kind = target
            values[name] = CONVERT[kind](raw)
    return cls(**values, extras=tuple(extras))


def per_chip(cls, spec, text: str, source: str, what: str) -> tuple:
    """One ``cls`` per chip of a view whose card id is ``NPU ID``."""
    split = split_chips(require_kv_lines(text, source, what))
    npu_id = to_int(split.card.get("npu id"))
    return tuple(
        build_record(cls, spec, pairs, npu_id=npu_id, chip_id=cid) for cid, pairs in split.chips
    )


def not_none(d: dict[str, object]) -> dict[str, object]:
    """``d`` without its None values (a sample field not read is left out, not set to None)."""
    return {k: v for k, v in d.items() if v is not None}

