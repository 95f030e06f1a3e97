"""Small helpers shared by subcommands: output formats."""

from __future__ import annotations

import argparse
import json
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
    json.dump(obj, sys.stdout, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


def fmt(value: Any, unit: str = "") -> str:
    """Render a value for people: None is "N/A", never 0."""
    if value is None:
        return "N/A"
    if isinstance(value, float):
        return f"{value:.1f}{unit}"
    return f"{value}{unit}"
