"""Named exceptions.

A ``UserError`` (and its subclasses) is a mistake in what the user gave us: a file, a flag,
a plan key. The CLI prints its message as one line and exits 2. Anything else escaping to
the CLI is a bug and keeps its traceback.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[redacted]"
# An Authorization header (with or without its scheme), a bare "Bearer ..."/"Basic ...", and
# Grafana service-account tokens: what a server that echoes the request puts in its error body.
_CREDENTIALS = re.compile(
    r"(?i)(?P<head>authorization[\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic|token)\s+)?(?!\[redacted\])[^\s\"',;}\]]+"
    r"|(?P<scheme>\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{8,}"
    r"|\bglsa_[A-Za-z0-9_]+"
)
MASK = "***"
# The password of a URL (``scheme://user:password@host``: SQLAlchemy's and libpq's form; a
# password may hold '/' or ':' but never a bare '@') and a ``password=`` query or libpq
# keyword; SQLAlchemy's own ``hide_password`` writes the same ``***``.
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@]*:)(?!\*\*\*@)[^\s@]*(?=@)")
_MASKED = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@]*):" + re.escape(MASK) + "@")
_KEYWORD_PASSWORD = re.compile(r"(?i)(?P<head>\bpassword=)(?!\*\*\*(?:[\s&'\"]|$))[^\s&'\"]+")


def mask_url(url: str) -> str:
    """``url`` with its password masked (``postgresql+psycopg://soak:***@db/soak``): the one
    form in which soak prints, logs or records a URL (the store's, Grafana's, Prometheus's).
    Also what ``redact`` does to any URL inside a text."""
    url = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, url)
    return _KEYWORD_PASSWORD.sub(lambda m: m.group("head") + MASK, url)


def masked(value: Any) -> Any:
    """``value`` (TOML/JSON-shaped data: a plan, a row's JSON) with ``mask_url`` applied to
    every string in it."""
    if isinstance(value, str):
        return mask_url(value)
    if isinstance(value, list):
        return [masked(v) for v in value]
    if isinstance(value, dict):
        return {k: masked(v) for k, v in value.items()}
    return value


def unmasked_url(url: str) -> str:
    """``url`` as ``mask_url`` recorded it, without the mask where its password was: a URL
    copied back from a record connects with the password from elsewhere (libpq's
    ``PGPASSWORD`` or password file), never with ``***``."""
    return _MASKED.sub(lambda m: m.group("head") + "@", url, count=1)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` without ``secrets`` and without anything that reads as a credential."""
    text = mask_url(_CREDENTIALS.sub(lambda m: (m.group("head") or m.group("scheme") or "") + REDACTED, text))
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


class SoakError(Exception):
    """Base of every error soak raises on purpose."""


class UserError(SoakError):
    """Bad input from the user: printed as one line, exit status 2."""

    exit_code = 2


class InputError(UserError):
    """An input file or value is unreadable or invalid. The message names the input."""


class ConfigError(UserError):
    """A run-plan key is unknown or has a bad value. The message names the dotted key."""


class UnknownRun(InputError):
    """A run id that the store or the folder of run folders the user pointed at does not hold.
    The message says where soak looked and which ``soak runs list`` shows the runs there."""

    def __init__(self, problem: str, *, db: str | None = None, data_dir: object = None) -> None:
        where = f"--db {db}" if db is not None else f"--data-dir {data_dir}"
        super().__init__(f"{problem} (soak runs list {where} lists the runs there)")

    @classmethod
    def not_in_store(cls, run_id: str, url: str) -> UnknownRun:
        """``run_id`` is not in the store at ``url`` (a URL fit for messages: no password)."""
        return cls(f"run {run_id}: not in the store {url}", db=url)


class StoreError(UserError):
    """The store cannot be opened or written (bad URL, unwritable path, disk full, locked)."""


class KeyFileError(InputError):
    """A signing key or certificate cannot be used (missing, unreadable, too open)."""


class ClusterError(UserError):
    """A cluster run cannot go on: a node missing, a version differs (one line, exit 2)."""


class PlanCopyFailed(InputError):
    """A host could not be reached or written: one line, and ssh's own exit status."""

    exit_code = 255  # what ssh itself returns when it cannot connect


class FontNotFound(InputError):
    """No usable CJK font: the message says how to install or name one."""


class MissingGlyph(InputError):
    """A character the report would draw is in none of its fonts: the message names the
    character and the fonts (a blank in the customer's document would hide it)."""


class CheckpointError(SoakError):
    """A checkpoint file holds something other than what soak saves (tensors, numbers,
    strings and their containers): it is not loaded, so nothing in it runs."""


class ToolError(SoakError):
    """A vendor tool (npu-smi, hccn_tool, NVML) failed: missing, timed out, or reported an error.

    Readers turn this into a marked gap plus an error count; it never ends a sweep.
    """

    def __init__(self, tool: str, message: str, *, kind: str = "failed") -> None:
        super().__init__(f"{tool}: {message}")
        self.tool = tool
        self.kind = kind  # "missing" | "timeout" | "output_limit" | "exit" | "error_text" | "garbage" | "failed"


class DeviceUnavailable(UserError):
    """The requested device backend cannot be used on this host (message says what to do)."""
