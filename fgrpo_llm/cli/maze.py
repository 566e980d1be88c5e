"""``fgrpo-llm maze``: the Maze single-solution experiment and study (paper Section 5.2, Table 4).

    fgrpo-llm maze --preset reduced --out runs/maze                         # one seed
    fgrpo-llm maze --preset reduced --seeds 0,1,2 --workers 2 --out runs/maze_study
    fgrpo-llm maze --preset full --out runs/maze_full        # the paper's protocol, for a GPU
    fgrpo-llm maze --preset reduced --group-size 4,8 --rl-steps 100 --out runs/maze_b
    fgrpo-llm maze --from-units docs/data/maze_study_units.csv     # the verdicts from the data

One SFT model (``--seed``), then every (method, N) RL run once per RL seed (``--seeds``; default:
the one seed ``--seed``): GRPO, F-GRPO at each positive gamma, and the lr-matched control (GRPO
at lr * m_gamma, ``--lr-matched-gammas``). Settings: the preset, then the ``--config`` file (YAML
or JSON mapping of MazeConfig fields), then the flags given here. ``--workers`` processes train
the RL runs; the numbers do not depend on it (``--threads``, which they do depend on, is a
setting). Rerunning with the same --out continues an interrupted study stage by stage (SFT, the
SFT evaluations, each RL run, a killed run from its last checkpoint); adding N, gamma or seed
values to a finished study only runs the new ones. Writes OUT/config.json, OUT/results.json,
OUT/table.{csv,md}, OUT/report.{md,json} (intervals, paired differences, verdicts),
OUT/units.csv (every run's numbers the claims read, ``maze.units``), OUT/maze_*.png and
OUT/timings.json (wall and CPU seconds, kept out of every other file). ``--from-units CSV`` judges
the claims again from a units.csv alone and trains nothing.
``--group-sizes`` and ``--gammas`` are deprecated spellings of ``--group-size`` and ``--gamma``.
"""

from __future__ import annotations

import argparse
import os

from fgrpo_common.cli import (
    MAX_WORKERS,
    add_deprecated_alias,
    add_json_flag,
    check_int_flag,
    check_int_list,
    check_path_flag,
    json_result,
)
from fgrpo_common.files import directory_lock
from fgrpo_llm.config import read_config_file
from fgrpo_llm.experiments.maze.bases import run_maze_bases
from fgrpo_llm.experiments.maze.config import FLAGS, make_config
from fgrpo_llm.experiments.maze.report import verdict_lines
from fgrpo_llm.experiments.maze.units import study_from_units

#: MazeConfig field -> (type, help); the flag names are ``fgrpo_llm.experiments.maze.config.FLAGS``.
_HELP = {
    "grid_size": (int, "odd grid side, 2 * cells + 1 (reduced 7, full 17)"),
    "num_train": (int, "distinct training mazes"),
    "num_test": (int, "held-out mazes for pass@k (full: 256)"),
    "seed": (int, "seed of the mazes, the model initialisation and SFT (one SFT model)"),
    "hidden_size": (int, "transformer width"),
    "num_layers": (int, "transformer blocks"),
    "num_heads": (int, "attention heads"),
    "sft_steps": (int, "SFT steps (full: 1500)"),
    "sft_batch_size": (int, "SFT mazes per step (full: 32)"),
    "sft_lr": (float, "SFT learning rate (full: 5e-4)"),
    "rl_steps": (int, "RL steps per run (full: 20000)"),
    "rl_prompts_per_step": (int, "mazes per RL step (full: 256)"),
    "rl_lr": (float, "RL learning rate (full: 1e-4)"),
    "rl_warmup_steps": (int, "RL learning-rate warm-up steps"),
    "eval_every": (int, "held-out evaluation every k RL steps"),
    "eval_k_max": (int, "samples per held-out maze = largest k of pass@k (full: 2048)"),
    "sample_batch_size": (int, "sequences decoded at once"),
    "threads": (int, "torch threads per run and stage (default 1; the numbers depend on it)"),
    "device": (str, "auto, cpu or cuda"),
}


def _list(kind, what):
    def parse(text: str):
        try:
            return tuple(kind(x) for x in text.split(",") if x.strip())
        except ValueError as err:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated {what}, got {text!r}"
            ) from err

    return parse


_LISTS = {
    "group_sizes": (_list(int, "integers"), "the N list, e.g. 4,8,16"),
    "gammas": (_list(float, "numbers"), "focal exponents, 0 = GRPO, e.g. 0,0.5,1"),
    "lr_matched_gammas": (
        _list(float, "numbers"),
        "gammas whose lr-matched control (GRPO at lr * m_gamma) is trained "
        "(default: every positive gamma; ',' for none)",
    ),
    "rl_seeds": (_list(int, "integers"), "RL seeds, e.g. 0,1,2 (default: --seed alone)"),
}


#: the deprecated spellings of the flags renamed to the names both commands use
_OLD_FLAGS = {"group_sizes": "--group-sizes", "gammas": "--gammas"}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "maze",
        help="the Maze single-solution experiment (Table 4)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--out",
        default=None,
        help="output directory (rerun with the same --out to continue); needed unless --from-units",
    )
    p.add_argument("--preset", default="reduced", help="reduced (CPU) or full (the paper's, GPU)")
    p.add_argument("--config", help="YAML or JSON file with MazeConfig fields")
    for dest, (typ, text) in {**_HELP, **_LISTS}.items():
        action = p.add_argument(FLAGS[dest], dest=dest, type=typ, default=None, help=text)
        if dest in _OLD_FLAGS:
            add_deprecated_alias(p, _OLD_FLAGS[dest], action)
    p.add_argument(
        "--workers",
        type=int,
        default=2,
        help="processes training the RL runs (default 2; changes no number)",
    )
    p.add_argument(
        "--bases",
        type=_list(int, "integers"),
        default=None,
        help="run the experiment once per SFT seed (base), e.g. 0,1,2,3, half under each CPU "
        "kernel family, and pool them with the base as the unit (replaces --seed)",
    )
    p.add_argument(
        "--families",
        type=_list(str, "names"),
        default=None,
        help="kernel family per base, default or other (default: alternating, from default)",
    )
    p.add_argument(
        "--from-units",
        default=None,
        metavar="CSV",
        help="judge every claim again from a Maze study's units.csv alone and print the "
        "verdicts (trains nothing; takes no --out)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide progress bars and stage lines")
    add_json_flag(p, "the results (runs, table, report)")
    p.set_defaults(func=run)


def _check_bases(args) -> None:
    """--bases names at least one base when given; --families needs it, --seed excludes it."""
    if args.bases is not None and not args.bases:  # --bases "": not "no --bases"
        raise ValueError("--bases must name at least one base, e.g. --bases 0,1,2,3; got none")
    if args.families and not args.bases:
        raise ValueError("--families needs --bases (one kernel family per base)")
    if args.bases and args.seed is not None:
        raise ValueError("--seed and --bases exclude each other: base b is SFT seed b")


def _from_units(args) -> int:
    """The claims judged again from a units.csv alone (``maze.units.study_from_units``)."""
    if args.out is not None:
        raise ValueError("--from-units judges a units.csv and writes nothing: drop --out")
    report = study_from_units(args.from_units)
    if args.json:
        return json_result(args, {"units": args.from_units, "claims": report["claims"]})
    print("\n".join(verdict_lines(report)).rstrip())
    return 0


def run(args) -> int:
    if args.from_units is not None:
        return _from_units(args)
    from fgrpo_llm.experiments.maze.pipeline import run_experiment  # lazy: torch

    if args.out is None:
        raise ValueError("--out is required (or --from-units CSV: judge a units.csv)")
    check_path_flag("--out", args.out)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(f"--out must be a directory, but {args.out} is a file")
    check_int_flag("--workers", args.workers, minimum=1, maximum=MAX_WORKERS)
    if args.bases:  # base b is SFT seed b: a seed, each once
        check_int_list("--bases", args.bases, minimum=0, maximum=2**63 - 1)
    values = read_config_file(args.config) if args.config else {}
    values.update(
        {
            dest: getattr(args, dest)
            for dest in {**_HELP, **_LISTS}
            if getattr(args, dest) is not None
        }
    )
    values.pop("preset", None)
    cfg = make_config(args.preset, **values)
    from fgrpo_llm.model import resolve_device  # lazy: torch, transformers

    resolve_device(cfg.device)  # a bad device fails before any file is written

    _check_bases(args)
    with directory_lock(args.out, what="fgrpo-llm maze"):  # one process per output directory
        if args.bases:
            results = run_maze_bases(
                cfg,
                args.out,
                bases=args.bases,
                families=args.families,
                workers=args.workers,
                progress=not args.no_progress,
            )
        else:
            results = run_experiment(
                cfg, args.out, workers=args.workers, progress=not args.no_progress
            )
    if args.json:
        return json_result(args, results)
    for name in ("table.md", "report.md"):
        path = os.path.join(args.out, name)
        if os.path.isfile(path):
            with open(path) as fh:
                print(fh.read())
    if "timings" not in results:  # pooled over bases: each base's timings.json has its own
        print(f"maze study over bases in {args.out}: {len(results['runs'])} RL runs")
        return 0
    call = results["timings"]["calls"][-1]
    print(
        f"maze experiment in {args.out}: {len(results['runs'])} RL runs; this call "
        f"{call['wall_s']:.0f} s wall, {call['cpu_s']:.0f} s CPU on {args.workers} worker(s) "
        f"({os.path.join(args.out, 'timings.json')})"
    )
    return 0
