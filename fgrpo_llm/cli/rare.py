r"""``fgrpo-llm rare-set``: build the rare-correct set of a base model (paper App. M.2).

    fgrpo-llm rare-set --base runs/base --out runs/rare_set.json --prompts 256 --rollouts 800 \
        --top 0.01
"""  # fmt: skip

from __future__ import annotations

from fgrpo_common.cli import add_json_flag, add_progress_flag, check_path_flag, json_result
from fgrpo_common.fields import SEED
from fgrpo_common.files import writable_file
from fgrpo_llm.cli.common import (
    add_model_task_args,
    check_sampling_flags,
    max_new_tokens_for,
    task_from_args,
)
from fgrpo_llm.experiments.countdown.report import fmt
from fgrpo_llm.experiments.countdown.stages import record_exact_mu_tau
from fgrpo_llm.tasks.for_model import check_base_task


def _rare_set(args) -> int:
    import torch

    from fgrpo_llm.evaluation.rare import build_rare_set, save_rare_set  # lazy: torch

    # lazy: torch, transformers
    from fgrpo_llm.model import load_model_and_tokenizer, resolve_autocast_dtype
    from fgrpo_llm.rollout import SamplingParams  # lazy: torch, transformers

    if args.prompts < 1:
        raise ValueError(f"--prompts must be >= 1, got {args.prompts}")
    if args.rollouts < 1:
        raise ValueError(f"--rollouts must be >= 1, got {args.rollouts}")
    check_sampling_flags(args)  # every flag, before the model loads
    check_path_flag("--out", args.out)
    check_base_task(args.base, args.task)  # before the model loads
    writable_file(args.out, what="--out")
    model, tokenizer = load_model_and_tokenizer(args.base, device=args.device)
    task = task_from_args(args, args.base, tokenizer)
    problems = task.problems(args.split)[: args.prompts]
    device = next(model.parameters()).device
    rare = build_rare_set(
        model,
        tokenizer,
        task,
        problems,
        num_rollouts=args.rollouts,
        top_fraction=args.top,
        sampling=SamplingParams(
            max_new_tokens=max_new_tokens_for(task, args.max_new_tokens),
            batch_size=args.batch_size,
            autocast_dtype=resolve_autocast_dtype(device),
        ),
        generator=torch.Generator(device=device).manual_seed(SEED("--seed", args.seed)),
        progress=not args.no_progress,
    )
    rare.meta.update({"base": str(args.base), "split": args.split, "seed": args.seed})
    path = save_rare_set(rare, args.out)  # the sampling's result, kept whatever follows

    # exact base (mu, tau) where enumerable
    if record_exact_mu_tau(model, tokenizer, task, problems, rare) is not None:
        path = save_rare_set(rare, args.out)
    with_event = sum(1 for p in rare.prompts.values() if p["rare_forms"])
    if args.json:
        return json_result(
            args,
            {
                "file": str(path),
                "trajectories": len(rare),
                "correct_pool": rare.meta["num_correct_pool"],
                "prompts": len(problems),
                "rollouts": args.rollouts,
                "nll_threshold": rare.meta["nll_threshold"],
                "mean_base_nll": rare.mean_base_nll,
                "prompts_with_rare_event": with_event,
            },
        )
    print(
        f"{len(rare)} rare-correct trajectories from {rare.meta['num_correct_pool']} correct "
        f"rollouts ({len(problems)} prompts x {args.rollouts}), those with a base NLL of at "
        f"least {fmt(rare.meta['nll_threshold'])}, mean {fmt(rare.mean_base_nll)}; {with_event} "
        f"prompts with a rare event; wrote {path}"
    )
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "rare-set",
        help="build the rare-correct set of a base model (App. M.2)",
        description="P prompts x M base rollouts; keep the top q correct ones by "
        "length-normalised NLL; per-prompt (mu, tau) estimates.",
    )
    p.add_argument("--base", required=True, help="base checkpoint directory")
    p.add_argument("--out", required=True, help="output JSON file")
    p.add_argument("--split", default="train", help="split the prompts come from")
    p.add_argument("--prompts", type=int, default=256, help="number of prompts P (paper: 256)")
    p.add_argument("--rollouts", type=int, default=800, help="rollouts per prompt M (paper: 800)")
    p.add_argument(
        "--top", type=float, default=0.01, help="fraction q kept by highest NLL (paper: 0.01)"
    )
    add_model_task_args(p)
    add_progress_flag(p)
    add_json_flag(p, "the rare-correct set's summary")
    p.set_defaults(func=_rare_set)
