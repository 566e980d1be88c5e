"""``fgrpo-llm train``: GRPO / DAPO / CISPO (optionally focal) on a base model.

    fgrpo-llm train --base runs/base --algo grpo --gamma 0.5 --group-size 8 --steps 200 --out runs/x
    fgrpo-llm train --config my.yaml --out runs/y            # any TrainConfig field in YAML or JSON
    fgrpo-llm train --out runs/x --resume --steps 300        # continue a stopped (or finished) run

Settings: the :class:`~fgrpo_llm.config.TrainConfig` defaults, then the ``--config`` file, then the
flags given here (``--set KEY=VALUE`` reaches any other field). With ``--resume`` the run's saved
config.json is the starting point, then the ``--config`` file and the flags: the fields a resumed
run may change (steps, eval/checkpoint cadence, device, progress) take effect, any other difference
is refused with one line naming it. For the built-in Countdown base, the task settings it was
pretrained with (its pretrain_config.json) are used unless ``--task-arg`` overrides them, and the
completion limit defaults to the task's; a base made for another task than ``--task`` is refused.
Writes OUT/config.json, OUT/metrics.jsonl, OUT/groups.jsonl, OUT/checkpoints/ and OUT/model/.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fgrpo_common.cli import add_json_flag, json_result, parse_key_values
from fgrpo_llm.config import TrainConfig, read_config_file, refuse_a_model_directory
from fgrpo_llm.tasks import get_task
from fgrpo_llm.tasks.for_model import check_base_task, model_task_kwargs
from fgrpo_llm.trackers import REPORT_TO, require_tracker

#: flag destination -> TrainConfig field, for flags whose names differ from the field.
_FLAGS = {
    "base": ("--base", str, "base model directory (any local Hugging Face causal-LM checkpoint)"),
    "out": ("--out", str, "run directory (required, here or in the --config file)"),
    "algo": ("--algo", str, "grpo, dapo or cispo (default grpo)"),
    "gamma": ("--gamma", float, "focal exponent; 0 = the base method (default 0)"),
    "weighting": (
        "--weighting",
        str,
        "focal (default; with --gamma), focal:GAMMA, maxrl (MaxRL's advantage) or none",
    ),
    "group_size": ("--group-size", int, "N, completions per prompt (default 8)"),
    "steps": ("--steps", int, "training steps (default 200)"),
    "prompts_per_step": ("--prompts-per-step", int, "B, prompts per step (default 32)"),
    "num_mini_batches": ("--mini-batches", int, "optimizer steps per PPO epoch (default 1)"),
    "ppo_epochs": ("--ppo-epochs", int, "passes over each step's rollouts (default 1)"),
    "lr": ("--lr", float, "AdamW learning rate (default 1e-4)"),
    "lr_multiplier": ("--lr-multiplier", float, "multiplies --lr (default 1)"),
    "lr_match_gamma": (
        "--lr-match-gamma",
        float,
        "also multiply lr by m_gamma (the paper's low-LR control)",
    ),
    "warmup_steps": ("--warmup-steps", int, "linear warm-up steps, then constant lr (default 15)"),
    "max_new_tokens": (
        "--max-new-tokens",
        int,
        "completion token limit (default: the task's, else 32)",
    ),
    "temperature": ("--temperature", float, "sampling temperature (default 1)"),
    "top_p": ("--top-p", float, "nucleus sampling mass (default 1 = off)"),
    "top_k": ("--top-k", int, "top-k sampling (default 0 = off)"),
    "entropy_coef": ("--entropy-coef", float, "entropy bonus coefficient (default 0)"),
    "kl_coef": ("--kl-coef", float, "k3 KL penalty to the base (default 0)"),
    "task": ("--task", str, "task name (default countdown)"),
    "seed": ("--seed", int, "seed of every random stream (default 0)"),
    "checkpoint_every": ("--checkpoint-every", int, "checkpoint every k steps (default 50)"),
    "eval_every": (
        "--eval-every",
        int,
        "run the evaluation hooks every k steps (default 0 = never)",
    ),
    "device": ("--device", str, "cpu, cuda, ... (default: cuda when available)"),
    "dtype": ("--dtype", str, "autocast dtype: auto, float32, bfloat16, float16"),
}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train",
        help="RL training: GRPO / DAPO / CISPO with the focal weight",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for dest, (flag, typ, text) in _FLAGS.items():
        p.add_argument(flag, dest=dest, type=typ, default=None, help=text)
    p.add_argument("--config", help="YAML or JSON file with TrainConfig fields")
    p.add_argument(
        "--resume", action="store_true", help="continue the run in --out from its latest checkpoint"
    )
    p.add_argument(
        "--dynamic-sampling",
        dest="dynamic_sampling",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="drop X=0 / X=N groups and refill (default: on for dapo only)",
    )
    p.add_argument(
        "--task-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keyword argument of the task constructor (repeatable), e.g. path=data.jsonl",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="set_fields",
        help="any other TrainConfig field (repeatable), e.g. --set micro_batch_size=64",
    )
    p.add_argument(
        "--rare-set",
        help="rare-correct set file (fgrpo-llm rare-set): log Delta NLL_rare at --eval-every",
    )
    p.add_argument(
        "--report-to",
        choices=REPORT_TO,
        default=None,
        help="also report the metrics to a tracker (metrics.jsonl is always written): none "
        "(default), tensorboard (OUT/tensorboard; fgrpo[tensorboard]) or trackio (a local "
        "tracker, `trackio show` to view; fgrpo[trackio])",
    )
    p.add_argument(
        "--tensorboard",
        action="store_true",
        default=None,
        help="deprecated: --report-to tensorboard",
    )
    p.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        default=None,
        help="hide the progress bar",
    )
    add_json_flag(p, "the last step's metrics")
    p.set_defaults(func=run)


def resolve_config(args):
    """The TrainConfig of this command line (defaults < --config / saved config < flags)."""
    file_values = read_config_file(args.config) if args.config else {}
    out = args.out or file_values.get("out")
    if not out:
        raise ValueError("--out is required (the run directory), or set out in --config")
    flags = {
        dest: getattr(args, dest)
        for dest in [*_FLAGS, "dynamic_sampling", "tensorboard", "report_to", "progress"]
        if getattr(args, dest) is not None
    }
    flags.update(parse_key_values(args.set_fields, "--set"))
    task_args = parse_key_values(args.task_arg, "--task-arg")
    if args.resume:
        # the stopped run's settings, then the file and the flags: fields a resumed run may change
        # (RESUMABLE_FIELDS) take effect, any other difference is refused by the trainer, naming it
        saved = Path(str(out)) / "config.json"
        refuse_a_model_directory(out)
        if not saved.is_file():
            raise FileNotFoundError(f"--resume: no run to resume in {out} (missing {saved})")
        data = read_config_file(saved)
    else:
        data = {}
        if "base" not in file_values and "base" not in flags:
            raise ValueError(
                "--base is required (the base model directory), or set base in --config"
            )
    data.update(file_values)
    data.update(flags)
    if task_args:
        data["task_kwargs"] = {**data.get("task_kwargs", {}), **task_args}
    if not args.resume:
        data = _task_defaults(data)
    return TrainConfig.from_dict(data)


def _task_defaults(data: dict) -> dict:
    """For the built-in Countdown base: the task settings it was pretrained with; the task's token
    limit. A base made for another task than ``--task`` is refused first."""
    task = data.get("task", "countdown")
    if not isinstance(data["base"], str) or not data["base"]:
        raise ValueError(f"base must be a directory path, got base={data['base']!r}")
    check_base_task(data["base"], task)
    if not data.get("task_kwargs"):
        data["task_kwargs"] = model_task_kwargs(data["base"], task)
    if "max_new_tokens" not in data:
        limit = getattr(get_task(task, **data["task_kwargs"]), "max_new_tokens", None)
        if limit is not None:
            data["max_new_tokens"] = int(limit)
    return data


def _vocab_size(base) -> int | None:
    """The vocabulary size in the base's config.json (None where it cannot be read: loading
    the base then says what is wrong)."""
    try:
        data = json.loads((Path(base) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    size = data.get("vocab_size") if isinstance(data, dict) else None
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


def run(args) -> int:
    from fgrpo_llm.trainer import train  # lazy: torch, transformers

    cfg = resolve_config(args)
    require_tracker(cfg.report_to)  # a missing package is refused up front, before any work
    evaluators = []
    if args.rare_set:
        from fgrpo_llm.evaluation.rare import load_rare_set, make_rare_evaluator  # lazy: torch

        rare = load_rare_set(args.rare_set, vocab_size=_vocab_size(cfg.base))
        evaluators.append(make_rare_evaluator(rare))
        if not cfg.eval_every:
            raise ValueError(
                "--rare-set needs --eval-every K > 0 (how often to measure Delta NLL_rare)"
            )
    last = train(cfg, resume=args.resume, evaluators=evaluators)
    if args.json:
        return json_result(
            args,
            {
                "algo": cfg.algo,
                "gamma": cfg.gamma,
                "steps": cfg.steps,
                "out": cfg.out,
                "last": last,
            },
        )
    shown = ", ".join(
        f"{k}={last[k]:.4g}"
        for k in ("reward", "groups/active_frac", "focal/weight_mean")
        if isinstance(last.get(k), float)
    )
    print(
        f"trained {cfg.algo} (gamma={cfg.gamma}) for {cfg.steps} steps; last step: {shown}; "
        f"outputs in {cfg.out}"
    )
    return 0
