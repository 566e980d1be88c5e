"""``fgrpo-llm demo``: the whole story at CPU scale (see
``fgrpo_llm.experiments.countdown.pipeline``).

    fgrpo-llm demo --out runs/demo                     # under 20 minutes on 2 CPU cores
    fgrpo-llm demo --out runs/demo --fast              # tiny budgets, about a minute
    fgrpo-llm demo --out runs/gpu --config gpu_full          # a shipped preset, for one GPU
"""  # fmt: skip

from __future__ import annotations

from fgrpo_common.cli import (
    MAX_WORKERS,
    add_json_flag,
    add_progress_flag,
    check_int_flag,
    check_path_flag,
    json_result,
)
from fgrpo_common.files import directory_lock
from fgrpo_llm.cli.common import add_workers_device_args, config_presets, resolve_config
from fgrpo_llm.experiments.countdown import pipeline
from fgrpo_llm.experiments.countdown.config import load_demo_config


def _demo(args) -> int:
    from fgrpo_llm.model import resolve_device  # lazy: torch, transformers

    check_path_flag("--out", args.out)
    if args.workers is not None:
        check_int_flag("--workers", args.workers, minimum=1, maximum=MAX_WORKERS)
    resolve_device(args.device)  # a bad --device fails before any file is written
    cfg = load_demo_config(
        resolve_config(args.config),
        fast=args.fast,
        for_demo=True,
        workers=args.workers,
        device=args.device,
        lr_matched_control=False if args.no_lr_control else None,
    )

    with directory_lock(args.out, what="fgrpo-llm demo"):  # one process per output directory
        summary = pipeline.run_demo(args.out, cfg)
    if args.json:
        return json_result(args, summary)
    print(f"report: {summary['report']} ({summary['total_seconds'] / 60:.1f} min)")
    for name, res in summary["evals"].items():
        line = "; ".join(
            f"{split} pass@1={vals.get('pass@1', float('nan')):.3f}" for split, vals in res.items()
        )
        print(f"  {name}: {line}")
    for label, run in summary["runs"].items():
        d = run["delta_nll_rare"]
        print(f"  {label}: Delta NLL_rare = {'n/a' if d is None else f'{d:+.3f}'}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="run the whole story at CPU scale and write OUT/report.md",
        description="Theory figures, base model, rare-correct set, GRPO vs F-GRPO, "
        "pass@k and the theory-vs-LLM cross-check. Reruns resume; a rerun with other settings "
        "into the same --out is refused.",
    )
    p.add_argument("--out", default="runs/demo", help="output directory (default runs/demo)")
    p.add_argument("--fast", action="store_true", help="tiny budgets (the test suite's smoke run)")
    p.add_argument(
        "--config",
        default=None,
        help="YAML/JSON file of DemoConfig fields, or a shipped preset: "
        f"{', '.join(sorted(config_presets()))} (e.g. --config gpu_full, the paper's protocol "
        "on one GPU)",
    )
    add_workers_device_args(p)
    p.add_argument(
        "--no-lr-control",
        action="store_true",
        help="skip the learning-rate-matched control (GRPO at lr * m_gamma, paper Table 3)",
    )
    add_progress_flag(p)
    add_json_flag(p, "the summary (report path, evaluations, runs)")
    p.set_defaults(func=_demo)
