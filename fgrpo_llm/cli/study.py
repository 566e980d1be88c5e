"""``fgrpo-llm study``: the demo's plan plus GRPO at N = 32 for several RL seeds, with intervals
and a verdict per claim.

    fgrpo-llm study --out runs/study --seeds 0,1,2,3,4            # the default plan, 2 workers
    fgrpo-llm study --out runs/study_fast --seeds 0,1 --fast      # tiny budgets (the tests' run)

Reruns resume: finished runs are kept and the report is rebuilt. Writes OUT/report.md,
OUT/study.json, OUT/seed_spread.json (the seed spread the demo quotes; ``--spread-file`` also
writes it elsewhere, e.g. the copy shipped with the package) and OUT/timings.md.
"""

from __future__ import annotations

import argparse
import shlex
import sys


def _study(args) -> int:
    from fgrpo_llm.experiments.plan import load_demo_config
    from fgrpo_llm.experiments.study import run_study
    from fgrpo_llm.model import resolve_device
    from fgrpo_theory.cli.common import parse_list

    seeds = parse_list("--seeds", args.seeds, int)
    bad = [s for s in seeds if not 0 <= s < 2**32]
    if bad:
        raise ValueError(f"--seeds must be integers in [0, 2^32), got {bad[0]}")
    resolve_device(args.device)  # a bad --device fails before any file is written
    cfg = load_demo_config(
        args.config, fast=args.fast, workers=args.workers, device=args.device, theory=False
    )
    command = (
        "fgrpo-llm study " + " ".join(shlex.quote(a) for a in sys.argv[2:])
        if len(sys.argv) > 2 and sys.argv[1] == "study"
        else f"fgrpo-llm study --seeds {args.seeds}" + (" --fast" if args.fast else "")
    )
    from fgrpo_llm.files import directory_lock

    with directory_lock(args.out, what="fgrpo-llm study"):  # one process per output directory
        result = run_study(
            args.out, cfg, seeds=seeds, command=command, spread_file=args.spread_file
        )
    for c in result["claims"]:
        print(f"claim {c['claim']}: {c['verdict']}: {c['text']}")
    print(f"report: {args.out}/report.md")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "study",
        help="the plan (the demo's and GRPO at N = 32) over several RL seeds: intervals, verdicts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", default="runs/study", help="output directory (default runs/study)")
    p.add_argument(
        "--seeds", default="0,1,2,3,4", help="RL seeds, comma-separated (default 0,1,2,3,4)"
    )
    p.add_argument("--fast", action="store_true", help="tiny budgets (the test suite's smoke run)")
    p.add_argument("--config", default=None, help="YAML/JSON file of plan (DemoConfig) fields")
    p.add_argument(
        "--workers", type=int, default=None, help="training runs in parallel processes (default 2)"
    )
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument(
        "--spread-file", default=None, help="also write the measured seed spread to this JSON file"
    )
    p.set_defaults(func=_study)
