"""``fgrpo-llm eval`` (pass@k per split) and ``fgrpo-llm compare`` (paired significance test).

    fgrpo-llm eval --model runs/base --samples 1024 --k 1,2,4,8,16,32,64,128,256 --out runs/eval
    fgrpo-llm compare runs/grpo/eval runs/fgrpo/eval --m 256 --iterations 50000

``eval`` writes eval.json (with the policy's training step, the sampling seed and the
environment), passk.csv, passk.png and the per-sample outcome matrices (outcomes_<split>.npy)
that ``compare`` needs (paper App. P and App. Q). ``--n`` is a deprecated spelling of
``--samples``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

from fgrpo_common.cli import (
    add_deprecated_alias,
    add_json_flag,
    add_progress_flag,
    check_output_directory,
    check_path_flag,
    json_result,
)
from fgrpo_common.fields import SEED
from fgrpo_common.files import atomic_write_text, strict_json, writable_directory, writable_file
from fgrpo_llm.cli.common import (
    add_model_task_args,
    check_recorded_sampling,
    check_sampling_flags,
    max_new_tokens_for,
    task_from_args,
)
from fgrpo_llm.config import run_sampling
from fgrpo_llm.environment import environment
from fgrpo_llm.tasks import check_split
from fgrpo_llm.tasks.for_model import check_base_task
from fgrpo_llm.tracking import model_step, read_run_info


def _eval(args) -> int:
    from fgrpo_llm.evaluation.passk import parse_ks  # lazy: torch
    from fgrpo_llm.model import load_model_and_tokenizer  # lazy: torch, transformers

    check_sampling_flags(args)  # every flag, before the model loads
    if args.out is not None:
        check_output_directory("--out", args.out)
    recorded = None
    if args.run is not None:  # checked before the model loads
        recorded = read_run_info(args.run).get("sampling")
        if recorded is None:
            raise ValueError(
                f"--run {args.run}: its run.json records no sampling settings (runs recorded "
                "before they were kept); pass the checkpoint alone to sample at temperature 1"
            )
        recorded = check_recorded_sampling(recorded, f"--run {args.run}'s run.json")
    args.recorded_sampling = recorded
    ks = parse_ks(args.k) if args.k else None
    if ks and max(ks) > args.n:
        raise ValueError(f"every k must be <= --samples={args.n}, got k={max(ks)}")
    model_dir = Path(args.model)
    check_base_task(model_dir, args.task)  # before the model loads
    args.model_step = model_step(model_dir)  # the training step of the policy (None: a base)
    model, tokenizer = load_model_and_tokenizer(model_dir, device=args.device)
    task = task_from_args(args, model_dir, tokenizer)
    splits = [s for s in args.splits.split(",") if s] if args.splits else None
    for split in splits or []:
        check_split(task, split)
    out_arg = Path(args.out if args.out else model_dir / "eval")
    created = not out_arg.exists()
    out = writable_directory(out_arg, what="--out")  # checked before the long sampling
    try:
        return _evaluate(args, model, tokenizer, task, splits, ks, model_dir, out)
    except BaseException:
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # an early error leaves no empty --out behind
        raise


def _evaluate(args, model, tokenizer, task, splits, ks, model_dir, out) -> int:
    import torch

    from fgrpo_llm.evaluation.passk import evaluate_model, write_eval_outputs  # lazy: torch
    from fgrpo_llm.model import resolve_autocast_dtype  # lazy: torch, transformers
    from fgrpo_llm.rollout import SamplingParams  # lazy: torch, transformers

    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(SEED("--seed", args.seed))
    # a trained run's policy is sampled as it was trained (completion length, temperature,
    # top-p, top-k); --max-new-tokens, when given, sets the length
    trained = run_sampling(model_dir)
    policy = {
        "max_new_tokens": max_new_tokens_for(task, args.max_new_tokens),
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 0,
    }
    if args.recorded_sampling is not None:  # an engine's run (verl, TRL): as its run.json says
        source, said = args.recorded_sampling, f"as {args.run} was sampled"
    elif trained is not None:
        source, said = trained.policy(), "as the run was trained"
    else:
        source = None
    if source is not None:
        keys = [k for k in policy if k != "max_new_tokens" or args.max_new_tokens is None]
        policy.update({k: type(policy[k])(source.get(k, policy[k])) for k in keys})
        print(f"sampling {said}: {policy}", file=sys.stderr)
    results, outcomes = evaluate_model(
        model,
        tokenizer,
        task,
        splits=splits,
        n=args.n,
        ks=ks,
        max_problems=args.max_problems,
        sampling=SamplingParams(
            **policy, batch_size=args.batch_size, autocast_dtype=resolve_autocast_dtype(device)
        ),
        generator=generator,
        progress=not args.no_progress,
    )
    results["model"] = str(model_dir)
    results["step"] = args.model_step
    results["seed"] = args.seed
    results["environment"] = environment(device)  # as a run's run.json and a base record it
    paths = write_eval_outputs(results, outcomes, out, label=model_dir.name)
    if args.json:
        return json_result(args, {**results, "files": paths})
    for split, entry in results["splits"].items():
        print(f"{split}: " + ", ".join(f"pass@{k}={entry[f'pass@{k}']:.4f}" for k in results["ks"]))
    print(f"wrote {paths['json']}, {paths['csv']}, {paths['plot']}")
    return 0


def _compare(args) -> int:
    from fgrpo_llm.evaluation.passk import (  # lazy: torch
        SplitNotCompared,
        compare_evals,
        parse_ks,
    )

    if args.iterations < 1:
        raise ValueError(f"--iterations must be >= 1, got {args.iterations}")
    SEED("--seed", args.seed)
    if args.out is not None:
        writable_file(check_path_flag("--out", args.out), what="--out")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SplitNotCompared)
        try:
            report = compare_evals(
                args.a,
                args.b,
                m=args.m,
                iterations=args.iterations,
                finite_population=args.finite_population,
                ks=parse_ks(args.k),
                rng=np.random.default_rng(SEED("--seed", args.seed)),
            )
        finally:  # (also before an error's line)
            for w in caught:
                if issubclass(w.category, SplitNotCompared):
                    print(f"fgrpo-llm compare: warning: {w.message}", file=sys.stderr)
                else:  # another library's: as Python would have shown it
                    warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    text = strict_json(report, indent=1)  # NaN / inf as null: every JSON parser reads it
    if args.out:
        atomic_write_text(args.out, text + "\n")
    if args.json:
        json_result(args, report)
    else:
        print(text)
    for split, tests in report.items():
        for name, r in tests.items():
            if not r.get("calibrated", True):
                print(
                    f"fgrpo-llm compare: warning: {split} {name}: {r['saturated']:.0%} of the "
                    f"subsamples give one difference (pass@k of m = {r['m']} samples saturates), "
                    "so its p-value is not calibrated and can be far too small; compare at a "
                    "smaller k or with a larger --m",
                    file=sys.stderr,
                )
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "eval",
        help="pass@k of a checkpoint on the task's evaluation splits",
        description="Draw n samples per problem and report unbiased pass@k per split. A "
        "trained run's checkpoint (or MODEL with --run) is sampled as the run sampled its "
        "policy: completion length (unless --max-new-tokens is given), temperature, top-p, "
        "top-k.",
    )
    p.add_argument("--model", required=True, help="checkpoint directory (Hugging Face format)")
    samples = p.add_argument(
        "--samples", dest="n", type=int, default=1024, help="samples per problem n (paper: 1024)"
    )
    add_deprecated_alias(p, "--n", samples)
    p.add_argument(
        "--k", default=None, help="comma-separated k values (default: 1,2,4,... up to min(n, 256))"
    )
    p.add_argument(
        "--splits", default=None, help="comma-separated splits (default: every non-train split)"
    )
    p.add_argument(
        "--max-problems",
        type=int,
        default=None,
        help="evaluate only the first problems of each split",
    )
    p.add_argument("--out", default=None, help="output directory (default: MODEL/eval)")
    p.add_argument(
        "--run",
        default=None,
        help="a run directory whose run.json records how its policy was sampled (a verl or TRL "
        "run's records): MODEL is sampled the same way (completion length unless "
        "--max-new-tokens is given, temperature, top-p, top-k)",
    )
    add_model_task_args(p)
    add_progress_flag(p)
    add_json_flag(p, "pass@k per split and the files written")
    p.set_defaults(func=_eval)

    c = subparsers.add_parser(
        "compare",
        help="paired m-out-of-n subsampling test between two eval outputs",
        description="Paired subsampling significance test (paper App. Q).",
    )
    c.add_argument("a", help="eval output directory of model A")
    c.add_argument("b", help="eval output directory of model B")
    c.add_argument(
        "--m",
        type=int,
        default=None,
        help="subsample size m, without replacement (default n // 4: 256 of n = 1024 as in the "
        "paper)",
    )
    c.add_argument("--iterations", type=int, default=50_000, help="subsampling iterations")
    c.add_argument(
        "--finite-population",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="scale the subsample differences by sqrt((n - 1) / (n - m)), the variance ratio of "
        "drawing without replacement (default); --no-finite-population gives the paper's "
        "sqrt(m) alone, which rejects a true null too often at m = n / 4 (8-10%% at alpha 0.05)",
    )
    c.add_argument("--k", default="1,256", help="k values to test (those <= m are used)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--out", default=None, help="also write the JSON result here")
    add_json_flag(c, "the test results (the text output is JSON too, indented)")
    c.set_defaults(func=_compare)


if __name__ == "__main__":  # pragma: no cover
    from fgrpo_llm.cli import main

    sys.exit(main(["eval", *sys.argv[1:]]))
