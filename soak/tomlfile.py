"""Reading a file the user names (a run plan, an acceptance profile, a fault-code table, a web
config, a host file, a password, passphrase or token file, a text to parse), and writing the
values soak writes back as TOML (``soak plan``'s dump, the report's profile).

One reader for all of them (``read_regular_file``, ``read_regular_text``), because each way a path can be wrong is a one-line error and not
a traceback or a hang: a device such as ``/dev/zero`` or a FIFO is refused before it is read
(reading it would never end), a regular file is read up to ``MAX_BYTES``, and nesting too
deep for the parser is refused like any other malformed TOML. TOML numbers include ``nan``,
``inf`` and integers of any length; ``finite`` tells the ones a checker can use.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from soak.errors import UserError

MAX_BYTES = 1 << 20
"""A plan or profile is a few kilobytes; a megabyte is certainly not one."""


def finite(value: float) -> bool:
    """A number a float holds: not NaN, not infinite, not a 400-digit integer."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def read_toml(path: str | os.PathLike[str], what: str, error: type[UserError] = UserError,
              max_bytes: int = MAX_BYTES) -> dict[str, Any]:
    """The tables of the TOML file ``path``; ``what`` names it in the one-line ``error``
    (``plan p.toml: no such file``)."""
    return read_toml_bytes(path, what, error, max_bytes)[1]


def read_toml_bytes(path: str | os.PathLike[str], what: str, error: type[UserError] = UserError,
                    max_bytes: int = MAX_BYTES) -> tuple[bytes, dict[str, Any]]:
    """``read_toml`` that also returns the file's bytes, for a caller that passes the file on
    as it was (``soak cluster launch`` sends the plan to every node)."""
    raw = read_regular_file(path, what, error, max_bytes)
    label = f"{what} {Path(path)}"
    try:
        return raw, tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise error(f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{label}: not valid TOML: {exc}") from None
    except RecursionError:
        raise error(f"{label}: not valid TOML: arrays or tables nested too deeply") from None


def read_regular_file(path: str | os.PathLike[str], what: str, error: type[UserError] = UserError,
                      max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes``; ``what`` names it in the
    one-line ``error`` (``plan p.toml: no such file``)."""
    p = Path(path)
    label = f"{what} {p}" if what else str(p)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; regular files ignore it
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{label}: no such file") from None
    except OSError as exc:
        raise error(f"{label}: cannot read: {exc.strerror or exc}") from None
    except ValueError:  # a TOML string may hold "\u0000"; no path can
        raise error(f"{label}: not a file name (it holds a NUL character)") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise error(f"{label}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise error(f"{label}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(raw) > max_bytes:
        size = f"{max_bytes >> 20} MiB" if max_bytes >= 1 << 20 else f"{max_bytes >> 10} KiB"
        raise error(f"{label}: larger than {size}, more than such a file holds")
    return raw


def read_regular_text(path: str | os.PathLike[str], what: str, error: type[UserError] = UserError,
                      max_bytes: int = MAX_BYTES) -> str:
    """``read_regular_file`` as UTF-8 text (a byte-order mark dropped); text that is not UTF-8
    is the same one-line ``error``."""
    raw = read_regular_file(path, what, error, max_bytes)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{(what + ' ') if what else ''}{Path(path)}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def toml_value(v: Any) -> str:
    """``v`` as a TOML value that ``tomllib`` reads back equal (an inline table for a mapping).

    Strings take JSON's escapes, which are TOML's (``\\n``, ``\\"``, ``\\u0001``): a newline or
    a control character in a name stays valid TOML."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    return json.dumps(str(v), ensure_ascii=False).replace("\x7f", "\\u007f")  # TOML refuses a raw DEL


def toml_key(k: str) -> str:
    """A bare key where TOML allows one, else a quoted one."""
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else toml_value(k)
