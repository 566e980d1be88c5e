"""What the ``fgrpo-llm`` subcommands share: the model / task flags, the completion limit and
the demo's configurations by name (``--config gpu_full``).

The parser, the runner (bad input -> one line, exit status 2) and the list / KEY=VALUE parsers
are ``fgrpo_common.cli``'s, shared with ``fgrpo-theory``.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fgrpo_common.cli import parse_key_values
from fgrpo_common.fields import SEED, Integer, Real
from fgrpo_llm.tasks.for_model import task_for_model

__all__ = [
    "add_model_task_args",
    "add_workers_device_args",
    "task_from_args",
    "max_new_tokens_for",
    "config_presets",
    "resolve_config",
    "check_sampling_flags",
    "check_recorded_sampling",
]

_POSITIVE = Integer(1, 2**63 - 1)
#: Flags whose names differ from their destinations (eval's ``--samples`` keeps ``n``).
_FLAG_OF = {"n": "--samples"}

#: The sampling settings a run records (run.json's "sampling") and the rule of each: an integer
#: setting given as 2.7 is refused, never truncated to 2.
SAMPLING_RULES = {
    "max_new_tokens": _POSITIVE,
    "temperature": Real(0, open_low=True),
    "top_p": Real(0, 1, open_low=True),
    "top_k": Integer(0, 2**63 - 1),
}


def config_presets() -> dict[str, Path]:
    """The shipped configurations of ``fgrpo-llm demo`` / ``study`` (package data of
    ``fgrpo_llm.experiments.countdown``), name -> file: ``demo_cpu`` (what ``make demo`` runs)
    and ``gpu_full`` (the paper's protocol on one GPU)."""
    folder = files("fgrpo_llm.experiments.countdown") / "presets"
    return {Path(p.name).stem: Path(str(p)) for p in folder.iterdir() if p.name.endswith(".yaml")}


def resolve_config(text: str | None, flag: str = "--config") -> str | None:
    """``--config``: an existing file, else the name of a shipped preset (``gpu_full`` or
    ``gpu_full.yaml``); a ValueError naming the flag and the presets otherwise."""
    if text is None or Path(text).exists():
        return text
    presets = config_presets()
    name = text[: -len(".yaml")] if text.endswith(".yaml") else text
    if name in presets:
        return str(presets[name])
    raise ValueError(
        f"{flag} {text!r} is neither a file nor a preset (presets: {', '.join(sorted(presets))})"
    )


def add_model_task_args(parser) -> None:
    """``--task``, ``--task-arg``, ``--device``, ``--seed``, ``--max-new-tokens``,
    ``--batch-size``."""
    parser.add_argument(
        "--task", default="countdown", help="task name (countdown, boxed_math, maze)"
    )
    parser.add_argument(
        "--task-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keyword argument of the task constructor (repeatable), e.g. seed=0",
    )
    parser.add_argument(
        "--device", default=None, help="cpu, cuda, ... (default: cuda when available)"
    )
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="completion token limit (default: the task's, else 32)",
    )
    parser.add_argument("--batch-size", type=int, default=1024, help="sequences decoded at once")


def add_workers_device_args(parser) -> None:
    """``--workers`` and ``--device`` of the commands that train the plan's runs (``demo``,
    ``study``)."""
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="training runs in parallel processes (default 2; 1 with --fast)",
    )
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")


def task_from_args(args, model_dir, tokenizer=None):
    """The task named by ``--task`` / ``--task-arg`` for the checkpoint ``model_dir`` (whose
    ``tokenizer`` formats the prompts of tasks that use one, e.g. boxed math's chat template)."""
    return task_for_model(
        args.task,
        parse_key_values(args.task_arg, "--task-arg"),
        model_dir=model_dir,
        tokenizer=tokenizer,
    )


def check_sampling_flags(args) -> None:
    """The integer flags of ``add_model_task_args`` (and ``--n``, ``--max-problems`` where the
    command has them) in range, before a model loads: a ValueError naming the flag."""
    SEED("--seed", args.seed)
    for dest in ("n", "max_new_tokens", "max_problems", "batch_size"):
        value = getattr(args, dest, None)
        if value is not None:
            _POSITIVE(_FLAG_OF.get(dest, f"--{dest.replace('_', '-')}"), value)


def check_recorded_sampling(sampling, where: str) -> dict:
    """A run's recorded sampling settings (``{"max_new_tokens", "temperature", "top_p",
    "top_k"}``, each optional), each checked by ``SAMPLING_RULES``: a ValueError naming
    ``where`` and the setting, before a model loads."""
    if not isinstance(sampling, dict):
        raise ValueError(f"{where}: sampling must be a mapping, got {type(sampling).__name__}")
    out = {}
    for key, value in sampling.items():
        rule = SAMPLING_RULES.get(key)
        if rule is None:
            continue
        try:
            out[key] = rule(key, value)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}: {err}") from None
    return out


def max_new_tokens_for(task, value: int | None) -> int:
    if value is not None:
        if value < 1:
            raise ValueError(f"--max-new-tokens must be >= 1, got {value}")
        return value
    return int(getattr(task, "max_new_tokens", 32))
