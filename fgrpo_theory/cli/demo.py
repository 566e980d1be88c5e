"""``fgrpo-theory demo --out DIR [--fast]``: the theory part of ``make demo``.

Calls ``fgrpo_theory.demo.run_theory_demo`` (tail-miss figures and tables, under
``DIR/theory/``) and ``fgrpo_theory.demo.regime_sweep_demo`` (a reduced categorical
M_ret regime sweep, under ``DIR/regimes/``). ``fgrpo-llm demo`` runs this and then the
LLM part. Prints one line per stage; ``--json``: what was written and the peaks and final
M_ret, as JSON.
"""

from __future__ import annotations

from fgrpo_common.cli import add_json_flag, add_progress_flag, json_result
from fgrpo_theory.demo import regime_sweep_demo, run_theory_demo


def run_demo(args) -> int:
    from pathlib import Path

    if not args.out.strip():
        raise ValueError(f"--out must name a directory, got --out={args.out!r}")
    theory = run_theory_demo(args.out, fast=args.fast)
    regimes = regime_sweep_demo(Path(args.out) / "regimes", fast=args.fast)
    if args.json:
        return json_result(args, {"theory": theory, "regimes": regimes})
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="tail-miss figures and tables (DIR/theory/) and a "
        "reduced M_ret regime sweep (DIR/regimes/)",
    )
    p.add_argument("--out", required=True, help="output directory, e.g. runs/demo")
    p.add_argument("--fast", action="store_true", help="small grids (seconds)")
    add_progress_flag(p)
    add_json_flag(p, "the files written, the peaks and the final M_ret")
    p.set_defaults(func=run_demo)
