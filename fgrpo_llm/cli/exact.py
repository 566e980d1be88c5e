"""``fgrpo-llm exact``: the exact evaluation of a Countdown policy (``exact_eval.json``).

Every well-formed answer of every problem of the in-domain "test" and "ood" splits is scored
under the policy's sampling settings (a trained run's own, else temperature 1), giving exact
pass@k and the malformed mass per split, and every trajectory of a rare-correct set (paper
App. M.2) gets its exact log-probability (``fgrpo_llm.evaluation.exact_eval``). No sampling, no
seed.

    fgrpo-llm exact runs/demo/grpo_n8/model --rare-set runs/demo/rare_set.json \
        --out runs/demo/grpo_n8/exact [--max-problems 100] [--json] [--no-progress]
"""  # fmt: skip

from __future__ import annotations

import dataclasses
from pathlib import Path

from fgrpo_common.cli import (
    add_json_flag,
    add_progress_flag,
    json_result,
    parse_key_values,
    parse_list,
)
from fgrpo_common.files import writable_directory
from fgrpo_llm.config import run_sampling
from fgrpo_llm.environment import environment
from fgrpo_llm.tasks.for_model import check_base_task, task_for_model
from fgrpo_llm.tracking import model_step


def exact_summary(results: dict, path) -> dict:
    """What the command prints: per split its problems, pass@k and malformed mass; the rare
    set's size and mean log-probability; the file written."""
    import numpy as np

    logp = np.array([-np.inf if v is None else v for v in results["rare"]["logp"]], dtype=float)
    return {
        "path": str(path),
        "splits": {
            s: {k: e[k] for k in ("problems", "pass@k", "malformed_mass")}
            for s, e in results["splits"].items()
        },
        "rare": {
            "trajectories": results["rare"]["trajectories"],
            "mean_logp": float(np.mean(logp)) if logp.size else None,
        },
    }


def _exact(args) -> int:
    from fgrpo_llm.evaluation.answers import supports_answer_enumeration  # lazy: torch
    from fgrpo_llm.evaluation.exact_eval import evaluate_exact, write_exact_eval  # lazy: torch
    from fgrpo_llm.evaluation.rare import load_rare_set  # lazy: torch

    # lazy: torch, transformers
    from fgrpo_llm.model import load_model_and_tokenizer, resolve_autocast_dtype
    from fgrpo_llm.rollout import SamplingParams  # lazy: transformers

    model_dir = Path(args.model)
    if not model_dir.is_dir():
        raise FileNotFoundError(f"model directory not found: {model_dir}")
    if args.max_problems is not None and args.max_problems < 1:
        raise ValueError(f"--max-problems must be >= 1, got {args.max_problems}")
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {args.batch_size}")
    ks = parse_list("--k", args.k, int)
    if min(ks) < 1:
        raise ValueError(f"every --k must be >= 1, got {args.k!r}")
    check_base_task(model_dir, "countdown")  # before the model loads
    out = writable_directory(args.out, what="--out")
    model, tok = load_model_and_tokenizer(model_dir, device=args.device)
    rare = load_rare_set(args.rare_set, vocab_size=len(tok))
    task = task_for_model(
        "countdown", parse_key_values(args.task_arg, "--task-arg"), model_dir=model_dir
    )
    if not supports_answer_enumeration(task):  # pragma: no cover - countdown always can
        raise ValueError("the task cannot list its answers: use fgrpo-llm eval")
    device = next(model.parameters()).device
    sampling = run_sampling(model_dir) or SamplingParams(max_new_tokens=task.max_new_tokens)
    if args.max_new_tokens is not None:
        sampling = dataclasses.replace(sampling, max_new_tokens=args.max_new_tokens)
    sampling = dataclasses.replace(
        sampling, batch_size=args.batch_size, autocast_dtype=resolve_autocast_dtype(device)
    )
    splits = [s for s in args.splits.split(",") if s] if args.splits else None
    results = evaluate_exact(
        model,
        tok,
        task,
        sampling=sampling,
        rare_set=rare,
        splits=splits,
        ks=ks,
        max_problems=args.max_problems,
        progress=not args.no_progress,
    )
    results.update(
        {"model": str(model_dir), "step": model_step(model_dir), "rare_set": str(args.rare_set)}
    )
    results["environment"] = environment(device)
    path = write_exact_eval(results, out)
    summary = exact_summary(results, path)
    if args.json:
        return json_result(args, summary)
    for split, e in summary["splits"].items():
        shown = ", ".join(f"pass@{k}={v:.4f}" for k, v in e["pass@k"].items())
        print(f"{split} ({e['problems']} problems): {shown}, malformed {e['malformed_mass']:.4f}")
    r = summary["rare"]
    print(f"rare set: {r['trajectories']} trajectories, mean log pi(y | x) {r['mean_logp']:.4f}")
    print(f"wrote {path}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "exact",
        help="exact pass@k, malformed mass and rare-trajectory log-probabilities (Countdown)",
        description="Score every well-formed answer of every evaluation problem and every "
        "rare-correct trajectory under the policy's sampling settings; writes "
        "OUT/exact_eval.json.",
    )
    p.add_argument("model", help="model directory (a base, or a run's model/)")
    p.add_argument("--rare-set", required=True, help="rare_set.json of the base (App. M.2)")
    p.add_argument("--out", required=True, help="output directory (gets exact_eval.json)")
    p.add_argument("--splits", default=None, help="comma-separated splits (default: test,ood)")
    p.add_argument(
        "--max-problems", type=int, default=None, help="first problems per split (default all)"
    )
    p.add_argument("--k", default="1,2,4,8,16,32,64,128,256", help="k of pass@k (exact: any)")
    p.add_argument(
        "--task-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Countdown setting (default: the base's recorded ones)",
    )
    p.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda when available)")
    p.add_argument(
        "--max-new-tokens", type=int, default=None, help="completion limit (default: the run's)"
    )
    p.add_argument("--batch-size", type=int, default=512, help="rows scored at once")
    add_progress_flag(p)
    add_json_flag(p, "the per-split summary and the file written")
    p.set_defaults(func=_exact)
