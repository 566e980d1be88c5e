"""``fgrpo-llm``: command-line entry point of the LLM trainer.

Each subcommand lives in its own module ``fgrpo_llm.cli.<name>`` that exposes
``register(subparsers)``; the parser it adds sets ``func`` to a callable taking the
parsed arguments and returning an exit status. Bad input (``ValueError`` / ``TypeError``), a
missing or unwritable file (``OSError``) and a diverged run (``TrainingDiverged``, or a
supervised pretraining's ``FloatingPointError``) become one
line on stderr and exit status 2, never a traceback; a Python warning in the command's own
process is one stderr line too, ``fgrpo-llm: warning: ...`` (not Python's file, line number and
source line; worker processes keep Python's format).

    fgrpo-llm pretrain --out runs/base
    fgrpo-llm train --base runs/base --algo grpo --gamma 0.5 --group-size 8 --steps 200 --out runs/x
"""

from __future__ import annotations

import argparse
import sys
import warnings

from fgrpo_common.cli import build_command_parser, run_command

#: Subcommand modules, in the order they appear in ``--help``.
COMMAND_MODULES = [
    "fgrpo_llm.cli.pretrain",  # pretrain
    "fgrpo_llm.cli.train",  # train
    "fgrpo_llm.cli.eval",  # eval, compare
    "fgrpo_llm.cli.rare",  # rare-set
    "fgrpo_llm.cli.exact",  # exact
    "fgrpo_llm.cli.mechanism",  # mechanism
    "fgrpo_llm.cli.forecast",  # forecast
    "fgrpo_llm.cli.validate",  # validate
    "fgrpo_llm.cli.maze",  # maze
    "fgrpo_llm.cli.demo",  # demo
    "fgrpo_llm.cli.study",  # study
]


def build_parser() -> argparse.ArgumentParser:
    return build_command_parser(
        "fgrpo-llm", "Focal-weighted GRPO / DAPO / CISPO trainer.", COMMAND_MODULES
    )


def show_warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` of the command: ``fgrpo-llm: warning: MESSAGE`` as one line on
    stderr (``file`` when given)."""
    text = " ".join(str(message).split())
    print(f"fgrpo-llm: warning: {text}", file=sys.stderr if file is None else file)


def diverged() -> tuple[type[BaseException], ...]:
    """The errors of a diverged run: the trainer's ``TrainingDiverged`` (when the trainer was
    imported: nothing else raises it) and a diverged SFT's ``FloatingPointError``. Asked only
    when an error is caught, so that ``--help`` imports no torch."""
    trainer = sys.modules.get("fgrpo_llm.trainer")
    return (FloatingPointError,) + ((trainer.TrainingDiverged,) if trainer else ())


def main(argv: list[str] | None = None) -> int:
    with warnings.catch_warnings():  # the caller's warning display is restored afterwards
        warnings.showwarning = show_warning_line
        return run_command(
            build_parser(),
            argv,
            errors=diverged,
            interrupted="interrupted (checkpoints written so far are kept; rerun with --resume)",
        )
