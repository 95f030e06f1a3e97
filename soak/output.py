"""The CLI's output formats, shared by every subcommand wherever it lives.

``--format table|json``, standard JSON (no NaN) and values for people ("N/A", never 0). The
subcommands in ``soak.commands`` and ``soak.cluster.status`` both print through these.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any


def add_format(parser: argparse.ArgumentParser, default: str = "table") -> None:
    parser.add_argument(
        "--format",
        choices=("table", "json"),
        default=default,
        help=f"output format (default: {default}); json is stable for machines",
    )


def print_json(obj: Any) -> None:
    """``obj`` as standard JSON: a NaN or infinite number (which ``json`` would write as the
    non-standard ``NaN``/``Infinity``) is written as null, like any value that has no meaning."""
    json.dump(_no_nan(obj), sys.stdout, indent=2, ensure_ascii=False, default=str, allow_nan=False)
    sys.stdout.write("\n")


def _no_nan(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _no_nan(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_no_nan(v) for v in obj]
    return obj


def fmt(value: Any, unit: str = "") -> str:
    """Render a value for people: None is "N/A", never 0."""
    if value is None:
        return "N/A"
    if isinstance(value, float):
        return f"{value:.1f}{unit}"
    return f"{value}{unit}"
