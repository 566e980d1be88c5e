"""``fgrpo-theory simulate``: the categorical policy simulation of Section 5.1 / Appendix J (Fig. 2).

    fgrpo-theory simulate --preset paper-fig2 --out results/fig2
    fgrpo-theory simulate --actions 12800 --correct 1000 --group-sizes 2,64,4096 --steps 300 \\
        --lr 0.03 --csv results/small.csv

With ``--out`` it writes ``fig2.png`` (Q_pos and M_ret against step; final Q_pos and M_ret
against N), ``metrics.jsonl`` (one line per step, seed means), ``fig2.csv`` (one row per (N, gamma, seed): N, gamma, seed, q_pos, m_ret, entropy),
the records ``simulation.npz`` and the resolved config ``simulation_config.json`` (a rerun with
the same config reuses them). ``--csv PATH`` writes the CSV there instead.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _parse_list(flag: str, text: str, kind):
    """'2,4,8' -> (2, 4, 8); a ValueError naming the flag otherwise (one line, exit 2)."""
    try:
        values = tuple(kind(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ValueError(f"{flag} must be comma-separated {kind.__name__}s, got {text!r}") from None
    if not values:
        raise ValueError(f"{flag} must not be empty, got {text!r}")
    return values


def register(subparsers) -> None:
    from fgrpo_theory.simulate import ADVANTAGES, OPTIMIZERS, PRESETS, SURROGATES

    p = subparsers.add_parser("simulate", help="categorical policy simulation (Fig. 2: Q_pos, M_ret vs N)",
                              description="Multi-step softmax-policy simulation; writes a CSV of final "
                                          "Q_pos, M_ret and entropy per (N, gamma, seed) and the Fig. 2 panels.")
    p.add_argument("--preset", choices=sorted(PRESETS), help="start from a preset (flags below override it)")
    p.add_argument("--out", help="directory for fig2.png, fig2.csv and the cached records")
    p.add_argument("--csv", help="write the CSV here (default: OUT/fig2.csv)")
    p.add_argument("--actions", type=int, help="K, number of actions")
    p.add_argument("--correct", type=int, help="number of correct actions")
    p.add_argument("--group-sizes", help="N values, e.g. 2,4,8")
    p.add_argument("--gammas", help="focal exponents, e.g. 0,1")
    p.add_argument("--seeds", help="seeds, e.g. 0,1,2,3")
    p.add_argument("--steps", type=int, help="optimisation steps")
    p.add_argument("--lr", type=float, help="learning rate")
    p.add_argument("--optimizer", choices=OPTIMIZERS)
    p.add_argument("--surrogate", choices=SURROGATES)
    p.add_argument("--advantage", choices=ADVANTAGES)
    p.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                   help="worker processes (default: min(2, CPUs))")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_simulate)


def run_simulate(args) -> int:
    from fgrpo_theory.simulate import PRESETS, SimConfig, run_cached, run_sweep

    overrides = {k: getattr(args, k) for k in ("actions", "correct", "group_sizes", "gammas", "seeds",
                                               "steps", "lr", "optimizer", "surrogate", "advantage")}
    overrides = {k: v for k, v in overrides.items() if v is not None}
    for key, kind in (("group_sizes", int), ("gammas", float), ("seeds", int)):
        if key in overrides:
            overrides[key] = _parse_list("--" + key.replace("_", "-"), overrides[key], kind)
    if args.preset:
        from dataclasses import replace
        cfg = replace(PRESETS[args.preset], **overrides)
    else:
        cfg = SimConfig(**overrides)
    if not args.out and not args.csv:
        raise ValueError("give --out DIR and/or --csv PATH")
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    progress = not args.no_progress
    if args.out:
        out = Path(args.out)
        res = run_cached(cfg, out, workers=args.workers, progress=progress)
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from fgrpo_theory.plots_categorical import plot_fig2

        fig = plot_fig2(res)
        fig.savefig(out / "fig2.png", dpi=100)
        plt.close(fig)
        res.write_jsonl(out / "metrics.jsonl")
        print(f"wrote {out / 'fig2.png'} and {out / 'metrics.jsonl'}", file=sys.stderr)
    else:
        res = run_sweep(cfg, workers=args.workers, progress=progress)
    csv = res.write_csv(args.csv or Path(args.out) / "fig2.csv")
    print(f"wrote {csv}", file=sys.stderr)
    _print_summary(res)
    return 0


def _print_summary(res) -> None:
    """Seed-mean final Q_pos and M_ret per (N, gamma) on stdout."""
    cfg = res.config
    q = res.records["q_pos"][..., -1].mean(axis=2)
    m = res.records["m_ret"][..., -1].mean(axis=2)
    head = "N".rjust(7) + "".join(f"  Q_pos(g={g:g})  M_ret(g={g:g})" for g in cfg.gammas)
    print(head)
    for i, N in enumerate(cfg.group_sizes):
        print(f"{N:7d}" + "".join(f"  {q[i, j]:11.4f}  {m[i, j]:11.4f}" for j in range(len(cfg.gammas))))
