"""``fgrpo-llm maze``: the Maze single-solution experiment (paper Section 5.2, Table 4).

    fgrpo-llm maze --preset reduced --out runs/maze          # ~10 min on 2 shared CPU cores
    fgrpo-llm maze --preset full --out runs/maze_full        # the paper's protocol, for a GPU
    fgrpo-llm maze --preset reduced --group-sizes 4,8 --rl-steps 100 --out runs/maze_b

Settings: the preset, then the ``--config`` file (YAML or JSON mapping of MazeConfig fields), then
the flags given here. Rerunning with the same --out continues an interrupted run stage by stage
(SFT, the SFT evaluation, each RL run); adding N or gamma values to a finished run only runs the
new ones. Writes OUT/config.json, OUT/results.json, OUT/table.csv, OUT/table.md, OUT/maze_*.png.
"""

from __future__ import annotations

import argparse
import os

#: flag -> (MazeConfig field, type, help)
_FLAGS = {
    "--grid-size": ("grid_size", int, "odd grid side, 2 * cells + 1 (reduced 9, full 17)"),
    "--num-train": ("num_train", int, "distinct training mazes"),
    "--num-test": ("num_test", int, "held-out mazes for pass@k (full: 256)"),
    "--seed": ("seed", int, "seed of mazes, model, sampling and evaluation"),
    "--hidden-size": ("hidden_size", int, "transformer width"),
    "--num-layers": ("num_layers", int, "transformer blocks"),
    "--num-heads": ("num_heads", int, "attention heads"),
    "--sft-steps": ("sft_steps", int, "SFT steps (full: 1500)"),
    "--sft-batch-size": ("sft_batch_size", int, "SFT mazes per step (full: 32)"),
    "--sft-lr": ("sft_lr", float, "SFT learning rate (full: 5e-4)"),
    "--rl-steps": ("rl_steps", int, "RL steps per run (full: 20000)"),
    "--prompts-per-step": ("rl_prompts_per_step", int, "mazes per RL step (full: 256)"),
    "--rl-lr": ("rl_lr", float, "RL learning rate (full: 1e-4)"),
    "--rl-warmup-steps": ("rl_warmup_steps", int, "RL learning-rate warm-up steps"),
    "--eval-every": ("eval_every", int, "held-out evaluation every k RL steps"),
    "--k-max": ("eval_k_max", int, "samples per held-out maze = largest k of pass@k (full: 2048)"),
    "--sample-batch-size": ("sample_batch_size", int, "sequences decoded at once"),
    "--device": ("device", str, "auto, cpu or cuda"),
}


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from err


def _float_list(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from err


def register(subparsers) -> None:
    p = subparsers.add_parser("maze", help="the Maze single-solution experiment (Table 4)", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output directory (rerun with the same --out to continue)")
    p.add_argument("--preset", default="reduced", help="reduced (CPU, < 20 min) or full (the paper's, GPU)")
    p.add_argument("--config", help="YAML or JSON file with MazeConfig fields")
    for flag, (dest, typ, text) in _FLAGS.items():
        p.add_argument(flag, dest=dest, type=typ, default=None, help=text)
    p.add_argument("--group-sizes", type=_int_list, default=None, help="the N list, e.g. 4,8,16")
    p.add_argument("--gammas", type=_float_list, default=None, help="focal exponents, 0 = GRPO, e.g. 0,0.5,1")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars and stage lines")
    p.set_defaults(func=run)


def run(args) -> int:
    from fgrpo_llm.config import read_config_file
    from fgrpo_llm.experiments.maze import make_config, run_experiment

    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(f"--out must be a directory, but {args.out} is a file")
    values = read_config_file(args.config) if args.config else {}
    values.update({dest: getattr(args, dest) for dest, *_ in _FLAGS.values() if getattr(args, dest) is not None})
    for name in ("group_sizes", "gammas"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    values.pop("preset", None)
    cfg = make_config(args.preset, **values)
    results = run_experiment(cfg, args.out, progress=not args.no_progress)
    print(open(os.path.join(args.out, "table.md")).read(), end="")
    print(f"maze experiment in {args.out}: {len(results['runs'])} RL runs, "
          f"{results['seconds_this_call']:.0f} s this call")
    return 0
