"""``fgrpo-trl``: ``trl grpo`` for F-GRPO. It takes TRL's recipe YAMLs and accelerate configs as
``trl grpo`` does and starts :mod:`fgrpo_llm.integrations.trl.grpo_script` (``FocalGRPOConfig``,
``FocalGRPOTrainer``: the focal weight of paper Eq. 13) under ``accelerate launch``.

    python -m fgrpo_llm.integrations.trl.launch --config examples/trl_qwen25_05b_gsm8k.yaml
    python -m fgrpo_llm.integrations.trl.launch --config RECIPE --accelerate_config zero2 \\
        --num_processes 4 --focal_gamma 0.5
    python -m fgrpo_llm.integrations.trl.launch --config RECIPE --dry_run true

As in ``trl grpo``: ``--config`` a recipe YAML (keys: the fields of the script's dataclasses;
an ``env`` mapping sets environment variables), flags over it, ``--accelerate_config`` a file
or one of TRL's presets (``zero1``, ``zero2``, ``zero3``, ``fsdp1``, ``fsdp2``, ``multi_gpu``,
...), and every other flag that is no field (``--num_processes``, ``--main_process_port``) goes
to ``accelerate launch``. ``--dry_run true`` checks the recipe (the config as its dataclasses
validate it, the reward functions, the task files, the rare set, which reward decides X) and
prints what would run as JSON, without a GPU and without loading the model: the config is
checked as on the GPU machine it is written for (bf16 is taken as available). A bad recipe is
one line on stderr and exit status 2.
"""

from __future__ import annotations

import contextlib
import json
import sys

from fgrpo_llm.evaluation.rare import load_rare_set
from fgrpo_llm.integrations.trl.grpo_script import load_task, make_parser, reward_functions
from fgrpo_llm.integrations.trl.trainer import correct_reward_columns

__all__ = ["main", "describe"]

MODULE = "fgrpo_llm.integrations.trl.grpo_script"
PROG = "fgrpo-trl"


def _subtract_subsequence(items: list[str], sub: list[str]) -> list[str]:
    """``items`` without the ordered subsequence ``sub`` (as ``trl``'s command line splits the
    flags of accelerate from those of the script)."""
    it = iter(sub)
    current = next(it, None)
    out = []
    for item in items:
        if current is not None and item == current:
            current = next(it, None)
        else:
            out.append(item)
    return out


@contextlib.contextmanager
def _as_on_a_gpu(enabled: bool):
    """For a dry run on a machine without a GPU: transformers' check that bf16 has a GPU is told
    it has (the recipe is checked for the machine it is written for)."""
    import torch

    if not enabled or torch.cuda.is_available():
        yield
        return
    import transformers.training_args as training_args

    real = training_args.is_torch_bf16_gpu_available
    training_args.is_torch_bf16_gpu_available = lambda: True
    try:
        yield
    finally:
        training_args.is_torch_bf16_gpu_available = real


def describe(script_args, training_args, model_args, command: list[str]) -> dict:
    """What a launch would run, after checking everything that can be checked without the model:
    the reward functions resolve, ``focal_correct_reward`` names one of them, the task files and
    the rare set load, pass@k has its problems."""
    from trl.trainer.utils import get_callable_name

    task = load_task(script_args)
    funcs = reward_functions(script_args, task)
    names = [f.split("/")[-1] if isinstance(f, str) else get_callable_name(f) for f in funcs]
    columns = correct_reward_columns(training_args.focal_correct_reward, names)
    if script_args.passk_n and (task is None or "test" not in task.splits):
        raise ValueError("passk_n needs task_test_file (pass@k's problems)")
    rare_size = None
    if script_args.rare_set:
        try:
            rare_size = len(load_rare_set(script_args.rare_set))
        except FileNotFoundError:
            raise ValueError(
                f"rare_set: no such file: {script_args.rare_set} (build it first: fgrpo-llm "
                "rare-set --base MODEL --task boxed_math ...)"
            ) from None
    settings = training_args.focal_settings()
    notes = []
    if settings.weight_is_one:
        notes.append(f"weighting {settings.w}: g = 1 for every group, so the run is plain GRPO")
    return {
        "command": command,
        "trainer": "FocalGRPOTrainer",
        "config": type(training_args).__name__,
        "model": model_args.model_name_or_path,
        "focal": {
            "gamma": settings.gamma,
            "weighting": str(settings.w),
            "reward_wrong": settings.reward_wrong,
            "reward_correct": settings.reward_correct,
            "threshold": settings.threshold,
            "strict_rewards": settings.strict_rewards,
            "algo": training_args.focal_algo,
            "correct_reward": [names[c] for c in columns],
        },
        "reward_funcs": names,
        "generation": {
            "use_vllm": bool(training_args.use_vllm),
            "vllm_mode": training_args.vllm_mode,
            "num_generations": training_args.num_generations,
            "max_completion_length": training_args.max_completion_length,
        },
        "data": None
        if task is None
        else {split: len(task.problems(split)) for split in task.splits},
        "callbacks": {
            "pass@k": {"n": script_args.passk_n, "ks": script_args.passk_ks}
            if script_args.passk_n
            else None,
            "delta_nll_rare": {"rare_set": script_args.rare_set, "size": rare_size}
            if script_args.rare_set
            else None,
        },
        "output_dir": training_args.output_dir,
        "records_dir": training_args.focal_records_dir(),
        "notes": notes,
    }


def main(argv: list[str] | None = None) -> int:
    """Parse as ``trl grpo`` does; a dry run prints :func:`describe`, else ``accelerate launch``
    starts the training script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    from importlib.util import find_spec

    if find_spec("trl") is None or find_spec("accelerate") is None:
        print(
            f"{PROG}: error: needs TRL and accelerate (pip install 'fgrpo[llm,trl]', or from the "
            'repository pip install -e ".[llm,trl]")',
            file=sys.stderr,
        )
        return 2
    dry = _dry_run_requested(argv)
    try:
        from trl.cli.accelerate_config import resolve_accelerate_config_argument

        with _as_on_a_gpu(dry):
            parsed = make_parser(prog=PROG).parse_args_and_config(
                argv, return_remaining_strings=True, separate_remaining_strings=True
            )
        script_args, training_args, model_args, _, config_rest, cli_rest = parsed
        launch_args = resolve_accelerate_config_argument(list(config_rest) + list(cli_rest))
        script_argv = _subtract_subsequence(argv, list(cli_rest))
        command = ["accelerate", "launch", *launch_args, "-m", MODULE, *script_argv]
        if script_args.dry_run:
            run = _without_dry_run(command)  # what the same line without --dry_run starts
            print(json.dumps(describe(script_args, training_args, model_args, run), indent=1))
            return 0
    except (ValueError, OSError) as err:
        print(f"{PROG}: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    from accelerate.commands.launch import launch_command, launch_command_parser

    launch_command(launch_command_parser().parse_args(command[2:]))
    return 0


def _without_dry_run(command: list[str]) -> list[str]:
    out, skip = [], False
    for i, a in enumerate(command):
        if skip:
            skip = False
            continue
        if a == "--dry_run":
            nxt = command[i + 1] if i + 1 < len(command) else ""
            skip = not nxt.startswith("--") and nxt != ""
            continue
        if a.startswith("--dry_run="):
            continue
        out.append(a)
    return out


def _dry_run_requested(argv: list[str]) -> bool:
    """Whether ``--dry_run`` is on the command line (before parsing: the parse itself is what
    the dry run checks). The recipe's own ``dry_run: true`` counts too."""
    for i, a in enumerate(argv):
        if a == "--dry_run":
            nxt = argv[i + 1] if i + 1 < len(argv) else "true"
            return nxt.lower() not in ("false", "0", "no")
        if a.startswith("--dry_run="):
            return a.split("=", 1)[1].lower() not in ("false", "0", "no")
    if "--config" in argv and argv.index("--config") + 1 < len(argv):
        import yaml

        try:
            with open(argv[argv.index("--config") + 1]) as fh:
                recipe = yaml.safe_load(fh)
        except (OSError, yaml.YAMLError):
            return False
        return isinstance(recipe, dict) and bool(recipe.get("dry_run"))
    return False


if __name__ == "__main__":
    sys.exit(main())
