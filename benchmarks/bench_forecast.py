"""CPU time of one forecast cell against its budget: 1% of the LLM run it predicts.

    OMP_NUM_THREADS=1 python benchmarks/bench_forecast.py [--prompts 5985] [--eval 512]
        [--steps 150] [--batch 32] [--group-size 8] [--replicates 1] [--budget 1.65]

Builds a synthetic Countdown-like base (``fgrpo_theory.forecast.synthetic``: up to 54 answers a
prompt, one token per character as the project's tokenizer), replays a run of ``--steps`` x
``--batch`` prompts with N = ``--group-size`` under AdamW (the LLM trainer's betas, eps, decay
and warm-up), and prints the process CPU time of: the base's forest (once per base, shared by
every cell), one cell (gather the run's steps, train, evaluate) for GRPO and F-GRPO (gamma = 1),
and the per-cell time against the budget (default 1.65 s = 1% of the ~165 s LLM run).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from fgrpo_theory.forecast import ForecastBase, Optimizer, RunSchedule, forecast  # noqa: E402
from fgrpo_theory.forecast.synthetic import countdown_like  # noqa: E402
from fgrpo_theory.forecast.train import gathered_steps  # noqa: E402
from fgrpo_theory.weighting import parse_weighting  # noqa: E402


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return v


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = 0.0
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return v


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=_positive, default=5985, help="train prompts")
    ap.add_argument("--eval", type=_positive, default=512, help="eval prompts")
    ap.add_argument("--rare", type=_positive, default=256, help="rare trajectories")
    ap.add_argument("--steps", type=_positive, default=150)
    ap.add_argument("--batch", type=_positive, default=32, help="prompts per step")
    ap.add_argument("--group-size", type=_positive, default=8)
    ap.add_argument("--replicates", type=_positive, default=1)
    ap.add_argument("--budget", type=_seconds, default=1.65, help="CPU seconds per cell")
    args = ap.parse_args(argv)
    if args.rare > args.prompts:
        ap.error(f"--rare must be <= --prompts (got {args.rare} and {args.prompts})")

    rng = np.random.default_rng(0)
    train = countdown_like(args.prompts, rng, chars=True)
    ev = countdown_like(args.eval, rng, prefix="e", chars=True)
    rare = []
    for pa in train[: args.rare]:
        c = np.flatnonzero(pa.correct)
        rare.append((pa.prompt_id, pa.answers[int(c[np.argmin(pa.logp[c])])]))
    t0 = time.process_time()
    base = ForecastBase(train, ev, rare)
    t_base = time.process_time() - t0
    f = base.forest
    visits = args.steps * args.batch
    order = np.concatenate(
        [rng.permutation(args.prompts) for _ in range(-(-visits // args.prompts))]
    )
    order = order[:visits].reshape(args.steps, args.batch)
    order = [[train[i].prompt_id for i in row] for row in order]
    opt = Optimizer("adam", betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, warmup_steps=15)
    print(
        f"base: {f.num_prompts} prompts, {f.base_logp.size} outcomes, {f.num_edges} edges, "
        f"{f.num_shared} shared keys; forest built in {t_base:.2f} s CPU (once per base)"
    )
    worst = 0.0
    for w in ("none", "focal:1"):
        run = RunSchedule(
            order=order,
            group_size=args.group_size,
            weighting=parse_weighting(w),
            lr=1e-4,
            optimizer=opt,
        )
        t0 = time.process_time()
        steps = gathered_steps(base, run)
        out = forecast(
            base,
            run,
            lr_theta_scale=1e3,
            lr_phi_scale=1e2,
            seed=0,
            replicates=args.replicates,
            steps=steps,
        )
        t_cell = time.process_time() - t0
        worst = max(worst, t_cell)
        print(
            f"{w:>8}: cell {t_cell:.3f} s CPU (R = {args.replicates}; {t_cell / args.budget:.0%} "
            f"of the {args.budget:g} s budget); Delta NLL_rare {out.delta_nll_rare:+.4f}, "
            f"pass@1 {out.pass_at[1]:.4f}, pass@64 {out.pass_at[64]:.4f}"
        )
    verdict = "within" if worst <= args.budget else "OVER"
    print(f"per cell: {worst:.3f} s CPU, {verdict} the budget of {args.budget:g} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
