"""``fgrpo-llm``: command-line entry point of the LLM trainer.

Each subcommand lives in its own module ``fgrpo_llm.cli_<name>`` that exposes
``register(subparsers)``; the parser it adds sets ``func`` to a callable taking the
parsed arguments and returning an exit status. Bad input (``ValueError``), a missing
checkpoint or dataset (``FileNotFoundError``) becomes one line on stderr and exit
status 2, never a traceback.

    fgrpo-llm pretrain --out runs/base
    fgrpo-llm train --base runs/base --algo grpo --gamma 0.5 --group-size 8 --steps 200 --out runs/x
"""

from __future__ import annotations

import argparse
import importlib
import sys

from fgrpo_theory.cli import OneLineArgumentParser

#: Subcommand modules, in the order they appear in ``--help``.
COMMAND_MODULES = [
    "fgrpo_llm.cli_pretrain",  # pretrain
    "fgrpo_llm.cli_train",  # train
    "fgrpo_llm.cli_eval",  # eval, compare
    "fgrpo_llm.cli_rare",  # rare-set
    "fgrpo_llm.cli_validate",  # validate
    "fgrpo_llm.cli_maze",  # maze
    "fgrpo_llm.cli_demo",  # demo
]


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog="fgrpo-llm", description="Focal-weighted GRPO / DAPO / CISPO trainer.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineArgumentParser)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:  # a command module not written yet
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, NotADirectoryError) as err:
        print(f"fgrpo-llm {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fgrpo-llm: interrupted (checkpoints written so far are kept; rerun with --resume)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
