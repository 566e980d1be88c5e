"""``fgrpo-theory``: command-line entry point of the theory package.

Each subcommand lives in its own module ``fgrpo_theory.cli.<name>`` that exposes
``register(subparsers)``; the parser it adds sets ``func`` to a callable taking the
parsed arguments and returning an exit status. A ``ValueError`` raised anywhere in a
command (bad input) becomes one line on stderr and exit status 2, never a traceback.

    fgrpo-theory tail-miss --mu 0.3 --rho 0.05,0.1,0.2 --max-group-size 128 --plot out.png
"""

from __future__ import annotations

import argparse

from fgrpo_common.cli import build_command_parser, run_command

#: Subcommand modules, in the order they appear in ``--help``.
COMMAND_MODULES = [
    "fgrpo_theory.cli.closed_forms",  # tail-miss, peak, pass-at-k
    "fgrpo_theory.cli.simulate",  # simulate
    "fgrpo_theory.cli.plan",  # plan
    "fgrpo_theory.cli.demo",  # demo
]


def build_parser() -> argparse.ArgumentParser:
    return build_command_parser(
        "fgrpo-theory", "F-GRPO theory: closed forms and simulations.", COMMAND_MODULES
    )


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser(), argv)
