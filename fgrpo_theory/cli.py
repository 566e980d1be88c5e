"""``fgrpo-theory``: command-line entry point of the theory package.

Each subcommand lives in its own module ``fgrpo_theory.cli_<name>`` that exposes
``register(subparsers)``; the parser it adds sets ``func`` to a callable taking the
parsed arguments and returning an exit status. A ``ValueError`` raised anywhere in a
command (bad input) becomes one line on stderr and exit status 2, never a traceback.

    fgrpo-theory tail-miss --mu 0.3 --rho 0.05,0.1,0.2 --n-max 128 --plot out.png
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: Subcommand modules, in the order they appear in ``--help``.
COMMAND_MODULES = [
    "fgrpo_theory.cli_closed_forms",  # tail-miss, peak, pass-at-k
    "fgrpo_theory.cli_simulate",  # simulate
    "fgrpo_theory.cli_demo",  # demo
]


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


def build_parser() -> argparse.ArgumentParser:
    return build_command_parser("fgrpo-theory", "F-GRPO theory: closed forms and simulations.", COMMAND_MODULES)


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
