"""``fgrpo-llm study``: the plan over K base models (half under each CPU kernel family) and S RL
seeds per base, with intervals over bases, variance components and a verdict per claim.

    fgrpo-llm study --out runs/study                                  # 6 bases x 2 seeds, 2 workers
    fgrpo-llm study --out runs/study --bases 0,1,2,3 --seeds 0 --sweep-bases 0
    fgrpo-llm study --out runs/fast --bases 0,1 --seeds 0,1 --fast    # tiny budgets (the tests')
    fgrpo-llm study --out runs/study --cells fit,published            # before the forecast
    fgrpo-llm study --out runs/study --cells blind --forecast docs/data/forecast.json
    fgrpo-llm study --from-units docs/data/countdown_study_units.csv  # the verdicts from the data

Base b is pretrained with seed b; bases alternate between this CPU's default kernels and the other
family (``--families`` to choose). Every base trains GRPO and F-GRPO at N = 8 and the lr-matched
control for every RL seed; the ``--sweep-bases`` also train the GRPO group-size sweep
(``--sweep-sizes``) at the first seed, the ``--extended-bases`` the extended plan (MaxRL, GRPO +
entropy, GRPO + KL, F-GRPO at gamma 0.5 and 2), with the entropy and KL coefficients first tuned
on ``--tune-base``. Reruns resume: prepared bases and finished runs are kept and
the report is rebuilt (a base or run made with other plan settings is refused, naming them).
Writes OUT/report.md, OUT/study.json, OUT/seed_spread.json (the spread the
demo quotes; ``--spread-file`` also writes it elsewhere, e.g. the copy shipped with the package) and
OUT/timings.json (wall and CPU seconds per invocation).
"""

from __future__ import annotations

import argparse
import shlex
import sys

from fgrpo_common.cli import (
    MAX_WORKERS,
    add_json_flag,
    add_progress_flag,
    check_int_flag,
    check_int_list,
    check_path_flag,
    json_result,
    parse_list,
)
from fgrpo_common.files import directory_lock, writable_file
from fgrpo_llm.cli.common import add_workers_device_args, config_presets, resolve_config
from fgrpo_llm.experiments.countdown.config import load_demo_config
from fgrpo_llm.experiments.countdown.study import StudyDesign, run_study
from fgrpo_llm.experiments.countdown.study_cells import parse_cells
from fgrpo_llm.experiments.countdown.study_units import judge_units
from fgrpo_llm.tracking import MAX_GROUP_SIZE


def _from_units(args) -> int:
    """The claims judged again from a units.csv alone (``study_units.judge_units``)."""
    import json
    from pathlib import Path

    prediction = None
    if args.prediction:
        prediction = json.loads(Path(args.prediction).read_text())
    claims = judge_units(args.from_units, prediction)
    if args.json:
        return json_result(args, {"units": args.from_units, "claims": claims})
    for c in claims:
        print(f"claim {c['claim']}: {c['verdict']}: {c['text']}\n  {c['evidence']}")
    return 0


def _design(args) -> StudyDesign:
    """The StudyDesign the flags name (--bases, --seeds, --sweep-bases, --extended-bases,
    --families, --tune-base), each checked."""
    lists = {}
    for flag in ("bases", "seeds", "sweep_bases", "extended_bases"):
        value = getattr(args, flag)
        if value is None:  # --sweep-bases / --extended-bases not given: the design's default
            lists[flag] = None
            continue
        lists[flag] = parse_list(f"--{flag.replace('_', '-')}", value, int) if value else []
        bad = [s for s in lists[flag] if not 0 <= s < 2**32]
        if bad:
            name = flag.replace("_", "-")
            raise ValueError(f"--{name} must be integers in [0, 2^32), got {bad[0]}")
    families = parse_list("--families", args.families, str) if args.families else []
    tune_base = None
    if args.tune_base is not None:
        try:
            tune_base = int(args.tune_base)
        except ValueError:
            raise ValueError(
                f"--tune-base must be a base (an integer), got {args.tune_base!r}"
            ) from None
    return StudyDesign(
        lists["bases"],
        lists["seeds"],
        lists["sweep_bases"],
        families,
        lists["extended_bases"] or (),
        tune_base,
    )


def _study(args) -> int:
    if args.from_units:
        return _from_units(args)
    from fgrpo_llm.model import resolve_device  # lazy: torch, transformers

    check_path_flag("--out", args.out)
    if args.spread_file is not None:
        check_path_flag("--spread-file", args.spread_file)
    if args.workers is not None:
        check_int_flag("--workers", args.workers, minimum=1, maximum=MAX_WORKERS)
    design = _design(args)
    resolve_device(args.device)  # a bad --device fails before any file is written
    extra = {}
    if args.sweep_sizes:
        sizes = parse_list("--sweep-sizes", args.sweep_sizes, int)
        extra["sweep_group_sizes"] = check_int_list(
            "--sweep-sizes", sizes, minimum=2, maximum=MAX_GROUP_SIZE
        )
    cfg = load_demo_config(
        resolve_config(args.config),
        fast=args.fast,
        workers=args.workers,
        device=args.device,
        theory=False,
        **extra,
    )
    command = (
        "fgrpo-llm study " + " ".join(shlex.quote(a) for a in sys.argv[2:])
        if len(sys.argv) > 2 and sys.argv[1] == "study"
        else f"fgrpo-llm study --bases {args.bases} --seeds {args.seeds}"
        + (" --fast" if args.fast else "")
    )
    if args.spread_file:  # checked before the long study, not at its end (and after the rest)
        writable_file(args.spread_file, what="--spread-file")

    cells = parse_cells(args.cells)
    with directory_lock(args.out, what="fgrpo-llm study"):  # one process per output directory
        result = run_study(
            args.out,
            cfg,
            design,
            command=command,
            spread_file=args.spread_file,
            cells=cells,
            forecast=args.forecast,
        )
    if args.json:
        return json_result(args, {"report": f"{args.out}/report.md", "claims": result["claims"]})
    for c in result["claims"]:
        print(f"claim {c['claim']}: {c['verdict']}: {c['text']}")
    print(f"report: {args.out}/report.md")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "study",
        help="the plan over several bases (both kernel families) and RL seeds: intervals over "
        "bases, variance components, verdicts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", default="runs/study", help="output directory (default runs/study)")
    p.add_argument(
        "--bases",
        default="0,1,2,3,4,5",
        help="pretraining seeds, one base each (default 0,1,2,3,4,5)",
    )
    p.add_argument("--seeds", default="0,1", help="RL seeds on every base (default 0,1)")
    p.add_argument(
        "--sweep-bases",
        default=None,
        help="bases that also train the GRPO group-size sweep, at the first seed (default: the "
        "first two bases, one per kernel family; empty: none)",
    )
    p.add_argument(
        "--extended-bases",
        default=None,
        help="bases that also train the extended plan at the first seed: MaxRL, GRPO + entropy, "
        "GRPO + KL, F-GRPO at the other gammas (default: none)",
    )
    p.add_argument(
        "--tune-base",
        default=None,
        help="a base (not among --extended-bases) on which GRPO + entropy and GRPO + KL are first "
        "trained over the plan's grids (paper Table 3's: {1e-4, 1e-3} and {1e-3, 1e-2}); the "
        "extended plan then trains with the chosen coefficients (default: no tuning, 1e-3 each)",
    )
    p.add_argument(
        "--sweep-sizes",
        default=None,
        help="group sizes of the sweep besides N = 8 (default: the plan's, 2,4,16,32)",
    )
    p.add_argument(
        "--families",
        default=None,
        help="kernel family per base, default or other (default: alternating, from default)",
    )
    p.add_argument("--fast", action="store_true", help="tiny budgets (the test suite's smoke run)")
    p.add_argument(
        "--config",
        default=None,
        help="YAML/JSON file of plan (DemoConfig) fields, or a shipped preset: "
        f"{', '.join(sorted(config_presets()))}",
    )
    add_workers_device_args(p)
    p.add_argument(
        "--spread-file", default=None, help="also write the measured seed spread to this JSON file"
    )
    p.add_argument(
        "--cells",
        default="all",
        help="which cells to train: fit (GRPO N = 8, lr x 1, first seed, every base), published "
        "(the rest of the plan before the forecast), blind (the lr frontier, the sweep on every "
        "base, the other gammas, the revisit arm), comma-separated, or all (default all)",
    )
    p.add_argument(
        "--forecast",
        default=None,
        help="the forecast file, committed in git, that the blind cells are trained after "
        "(needed to train a blind run; recorded in OUT/forecast_record.json)",
    )
    p.add_argument(
        "--from-units",
        default=None,
        metavar="CSV",
        help="judge every claim again from a study's units.csv alone and print the verdicts "
        "(trains nothing)",
    )
    p.add_argument(
        "--prediction",
        default=None,
        help="with --from-units: the study's simulator_prediction.json (claim 10)",
    )
    add_progress_flag(p)
    add_json_flag(p, "the verdict per claim and the report's path")
    p.set_defaults(func=_study)
