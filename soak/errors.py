"""Named exceptions.

A ``UserError`` (and its subclasses) is a mistake in what the user gave us: a file, a flag,
a plan key. The CLI prints its message as one line and exits 2. Anything else escaping to
the CLI is a bug and keeps its traceback.
"""

from __future__ import annotations


class SoakError(Exception):
    """Base of every error soak raises on purpose."""


class UserError(SoakError):
    """Bad input from the user: printed as one line, exit status 2."""

    exit_code = 2


class InputError(UserError):
    """An input file or value is unreadable or invalid. The message names the input."""


class ConfigError(UserError):
    """A run-plan key is unknown or has a bad value. The message names the dotted key."""


class StoreError(UserError):
    """The store cannot be opened or written (bad URL, unwritable path, disk full, locked)."""


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
