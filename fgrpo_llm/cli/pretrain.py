"""``fgrpo-llm pretrain``: build the built-in Countdown base model (our CPU-scale setting).

    fgrpo-llm pretrain --out runs/base [--config FILE] [--steps 600] [--seed 0] [--seconds CAP]

Settings come from the :class:`~fgrpo_llm.experiments.countdown.base.PretrainConfig` defaults, then
the ``--config`` file (YAML or JSON mapping of its fields), then the flags given here.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

from fgrpo_common.cli import add_json_flag, json_result
from fgrpo_common.files import check_not_working_directory, directory_lock
from fgrpo_llm.config import read_config_file


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "pretrain",
        help="supervised pretraining of the Countdown base model",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", required=True, help="output checkpoint directory (e.g. runs/base)")
    p.add_argument("--config", help="YAML or JSON file with PretrainConfig fields")
    p.add_argument(
        "--steps", type=int, dest="max_steps", help="the step budget: optimizer steps (default 600)"
    )
    p.add_argument(
        "--seconds",
        type=float,
        help="optional wall-clock cap in seconds (default none; a run stopped by it says so)",
    )
    p.add_argument(
        "--seed", type=int, help="seed of initialisation, data and evaluation (default 0)"
    )
    p.add_argument("--device", help="auto, cpu or cuda (default auto)")
    p.add_argument("--dtype", help="auto, float32, bfloat16 or float16 (default auto)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_json_flag(p, "the pretraining summary")
    p.set_defaults(func=run)


def run(args) -> int:
    from fgrpo_llm.experiments.countdown.base import PretrainConfig, pretrain  # lazy: torch

    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(f"--out must be a directory, but {args.out} is a file")
    check_not_working_directory(args.out, "--out")  # before its lock file is made there
    values = read_config_file(args.config) if args.config else {}
    cfg = PretrainConfig.from_dict(values)
    overrides = {
        k: getattr(args, k)
        for k in ("seconds", "max_steps", "seed", "device", "dtype")
        if getattr(args, k) is not None
    }
    cfg = dataclasses.replace(cfg, **overrides)
    with directory_lock(args.out, what="fgrpo-llm pretrain"):  # one process per base directory
        summary = pretrain(cfg, args.out, progress=not args.no_progress)
    if args.json:
        return json_result(args, {"out": str(args.out), **summary})
    shown = ", ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items()
    )
    print(f"pretrained base model saved to {args.out}: {shown}")
    return 0
