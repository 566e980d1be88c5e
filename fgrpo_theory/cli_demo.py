"""``fgrpo-theory demo --out DIR [--fast]``: the theory figures and tables of ``make demo``.

Calls ``fgrpo_theory.demo.run_theory_demo``; outputs land under ``DIR/theory/``.
"""

from __future__ import annotations


def run_demo(args) -> int:
    from fgrpo_theory.demo import run_theory_demo

    run_theory_demo(args.out, fast=args.fast)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("demo", help="reproduce the closed-form figures and tables under DIR/theory/")
    p.add_argument("--out", required=True, help="output directory, e.g. runs/demo")
    p.add_argument("--fast", action="store_true", help="small grids (seconds)")
    p.set_defaults(func=run_demo)
