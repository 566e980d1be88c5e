"""What every subcommand of ``fgrpo-theory`` and ``fgrpo-llm`` shares: the parser, the runner that
turns bad input into one line and exit status 2, and the list / KEY=VALUE parsers of the flags.
"""

from __future__ import annotations

import argparse
import importlib
import sys


class OneLineArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line on stderr and exit status 2
    (argparse's default prints the whole usage block first)."""

    def error(self, message: str):  # noqa: D102 - argparse API
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_command_parser(prog: str, description: str, modules: list[str]) -> argparse.ArgumentParser:
    """A parser with one subcommand per module in ``modules`` (each exposes ``register``).

    Shared by ``fgrpo-theory`` and ``fgrpo-llm``.
    """
    parser = OneLineArgumentParser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineArgumentParser)
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


def run_command(parser: argparse.ArgumentParser, argv: list[str] | None, *,
                errors: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError),
                interrupted: str = "interrupted") -> int:
    """Parse ``argv`` and run the chosen subcommand; ``errors`` become one stderr line and
    exit status 2, never a traceback."""
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except errors as err:
        print(f"{parser.prog} {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{parser.prog}: {interrupted}", file=sys.stderr)
        return 130
