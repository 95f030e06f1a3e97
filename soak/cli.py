"""The ``soak`` command.

Each subcommand lives in its own module under ``soak.commands`` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` (called with the parsed
namespace, returning an exit status). Keeping one module per command lets each part of the
product own its CLI without a central switchboard.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import NoReturn

from soak import __version__
from soak.errors import UserError, redact

# argparse's errors for an argument that is not there: the usage says what was expected
_MISSING = ("the following arguments are required", "expected one argument", "expected at least one argument")


class Parser(argparse.ArgumentParser):
    """argparse with the CLI's errors: a bad value (an invalid choice, a number that is not
    one) is one line naming the flag and the value, exit 2; the usage is printed for ``--help``
    and for an argument left out, where it shows what was expected. Subcommands' parsers are
    of this class too (``add_subparsers`` makes its parsers of the parent's class)."""

    def error(self, message: str) -> NoReturn:
        if message.startswith(_MISSING) or message.startswith("unrecognized arguments"):
            super().error(message)
        self.exit(2, f"soak: error: {self.prog}: {one_line(message)}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="soak",
        description="Stability soak tests for AI training clusters (Ascend NPU, NVIDIA GPU, CPU).",
    )
    parser.add_argument("--version", action="version", version=f"soak {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    import soak.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"soak.commands.{info.name}")
        module.register(sub)
    return parser


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped: an error message
    quotes what the user gave (a CSV cell, a TOML key), which may hold any of them."""
    return "".join(c if c.isprintable() or c == " " else ascii(c)[1:-1] for c in text)


def _innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)subcommand that ``args`` were parsed by."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, subs[0].dest, None) if subs else None
        if name is None or name not in subs[0].choices:
            return parser
        parser = subs[0].choices[name]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # argparse reports a subcommand's unknown flag with the top-level usage; show the
        # usage of the subcommand the flag was meant for (exits 2).
        _innermost(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"soak: error: {one_line(redact(str(exc)))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("soak: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
