r"""``fgrpo-llm validate``: the theory-vs-LLM cross-check on finished training runs.

    fgrpo-llm validate --rare-set runs/demo/rare_set.json \
        --run runs/demo/grpo_n8 --run runs/demo/fgrpo_n8 --out runs/demo/validate

Each run directory needs ``groups.jsonl`` (tail-miss check); ``metrics.jsonl`` with
``rare/delta_nll`` and ``eval/eval.json`` feed the sweep table. Writes OUT/report.md,
OUT/validation.json and the figures.

With ``--spread-file`` (the ``seed_spread.json`` that ``fgrpo-llm study`` writes for a
configuration; the demo's Countdown configuration ships one, ``SEED_SPREAD``, which ``fgrpo-llm
demo`` reads), a difference of one run from another is read against that run-to-run noise:
inside it an ordering is "not resolved by one run", and the report quotes the spread beside each
comparison. Without it every sign is read, and the report says that the spread was not measured
(another model or task has its own spread: the demo's is no measure of it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from fgrpo_common.cli import (
    add_json_flag,
    check_output_directory,
    json_result,
    output_directory,
)
from fgrpo_common.fields import SEED
from fgrpo_common.files import writable_directory
from fgrpo_llm.environment import (
    environment_differences,
    environment_section,
    segment_differences,
)
from fgrpo_llm.evaluation.runs import load_run
from fgrpo_llm.evaluation.sweep import difference_noise
from fgrpo_llm.experiments.countdown.cross_check import cross_check
from fgrpo_llm.experiments.countdown.pipeline import load_seed_spread
from fgrpo_llm.experiments.countdown.report import (
    lr_control_section,
    seed_spread_note,
    sweep_section,
    tail_miss_section,
    write_report,
)
from fgrpo_llm.experiments.paper import load_paper_results


def _warn_about(paths, runs) -> None:
    """One stderr line per run without training groups, per run resumed on another CPU family,
    and per difference between the runs' environments."""
    for r, run in zip(paths, runs, strict=True):  # the tail-miss check reads every group
        if not run.groups:
            print(
                f"fgrpo-llm validate: warning: --run {r} has no training groups (groups.jsonl "
                "missing or empty); the tail-miss check has nothing from it",
                file=sys.stderr,
            )
    for r, run in zip(paths, runs, strict=True):
        for line in segment_differences(run.segments):
            print(
                f"fgrpo-llm validate: warning: --run {r} was resumed on another CPU family "
                f"({line}); its numbers after the resume come from other kernels",
                file=sys.stderr,
            )
    for line in environment_differences({r.label: r.environment for r in runs}):
        print(
            f"fgrpo-llm validate: warning: the runs compared come from different environments "
            f"({line}); their differences include the kernels' rounding, not only the method",
            file=sys.stderr,
        )


def _validate(args) -> int:
    from fgrpo_llm.evaluation.rare import load_rare_set  # lazy: torch

    if not args.run:
        raise ValueError("give at least one --run directory")
    if args.label and len(args.label) != len(args.run):
        raise ValueError(f"--label given {len(args.label)} times but --run {len(args.run)} times")
    if args.early_steps < 1:
        raise ValueError(f"--early-steps must be >= 1, got --early-steps={args.early_steps}")
    check_output_directory("--out", args.out)  # made only once every input has been read
    seed = SEED("--seed", args.seed)
    labels = args.label or [None] * len(args.run)
    runs = [load_run(r, label=lab) for r, lab in zip(args.run, labels, strict=True)]
    _warn_about(args.run, runs)
    spread = None
    if args.spread_file is not None:
        path = Path(args.spread_file)
        if not path.is_file():
            raise ValueError(f"--spread-file not found: {path}")
        spread = load_seed_spread(path)
        if spread is None:
            raise ValueError(f"--spread-file {path} is not a seed_spread.json of fgrpo-llm study")
    note = seed_spread_note(spread)
    rare = load_rare_set(args.rare_set)
    paper = load_paper_results(args.paper_results)
    with output_directory(args.out):  # removed again if the cross-check fails
        writable_directory(args.out, what="--out")
        return _write(args, runs, rare, paper, spread, note, seed)


def _write(args, runs, rare, paper, spread, note, seed) -> int:
    """The cross-check's figures and report in --out, once every input has been read."""
    result = cross_check(
        runs,
        rare,
        args.out,
        early_steps=args.early_steps,
        paper=paper,
        rng=np.random.default_rng(seed),
        noise=difference_noise(spread),
    )
    figs = result["figures"]
    sections = [
        (
            "Tail-miss check (Lemma 3.1)",
            f"![tail miss]({figs['tail_miss']})\n\n" + tail_miss_section(result),
        ),
        (
            "Group-size sweep",
            (f"![Delta NLL_rare]({figs['delta_nll']})\n\n" if "delta_nll" in figs else "")
            + sweep_section(result)
            + "\n\n"
            + note,
        ),
    ]
    if result.get("lr_control"):
        sections.append(
            ("Learning-rate-matched control", lr_control_section(result) + "\n\n" + note)
        )
    sections.append(("Environments", environment_section({r.label: r.environment for r in runs})))
    path = write_report(Path(args.out) / "report.md", "Theory-vs-LLM cross-check", sections)
    if args.json:
        return json_result(
            args, {"report": str(path), "figures": figs, "orderings": result["orderings"]}
        )
    print(f"wrote {path}")
    for s in result["orderings"]:
        print(s)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "validate",
        help="tail-miss cross-check and group-size sweep table",
        description="Compare observed tail misses with Lemma 3.1 and the sweep with "
        "the paper's Table 2.",
    )
    p.add_argument("--rare-set", required=True, help="rare-correct set JSON (fgrpo-llm rare-set)")
    p.add_argument("--run", action="append", default=[], help="training run directory (repeatable)")
    p.add_argument(
        "--label", action="append", default=[], help="row name per --run (default from its config)"
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--early-steps",
        type=int,
        default=50,
        help="steps of the early window of the tail-miss check",
    )
    p.add_argument(
        "--paper-results",
        default=None,
        help="paper_results.json (default: the copy shipped in fgrpo_llm/experiments/)",
    )
    p.add_argument(
        "--spread-file",
        default=None,
        help="seed_spread.json of fgrpo-llm study for the runs' configuration: the run-to-run "
        "noise within which a difference of one run from another is not read as an ordering "
        "(the demo's: fgrpo_llm/experiments/countdown/seed_spread.json; default: none, every "
        "sign is read)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap band")
    add_json_flag(p, "the report's path, the figures and the orderings")
    p.set_defaults(func=_validate)
