"""``fgrpo-theory demo --out DIR [--fast]``: the theory part of ``make demo``.

Calls ``fgrpo_theory.demo.run_theory_demo`` (tail-miss figures and tables, under
``DIR/theory/``) and ``fgrpo_theory.demo.regime_sweep_demo`` (a reduced categorical
M_ret regime sweep, under ``DIR/regimes/``). ``fgrpo-llm demo`` runs this and then the
LLM part.
"""

from __future__ import annotations


def run_demo(args) -> int:
    from pathlib import Path

    from fgrpo_theory.demo import regime_sweep_demo, run_theory_demo  # lazy: scipy

    if not args.out.strip():
        raise ValueError(f"--out must name a directory, got --out={args.out!r}")
    run_theory_demo(args.out, fast=args.fast)
    regime_sweep_demo(Path(args.out) / "regimes", fast=args.fast)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="tail-miss figures and tables (DIR/theory/) and a "
        "reduced M_ret regime sweep (DIR/regimes/)",
    )
    p.add_argument("--out", required=True, help="output directory, e.g. runs/demo")
    p.add_argument("--fast", action="store_true", help="small grids (seconds)")
    p.set_defaults(func=run_demo)
