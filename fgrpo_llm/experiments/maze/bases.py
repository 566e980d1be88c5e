"""The Maze study over several SFT models: the base as a random factor, both kernel families.

A Maze experiment (``fgrpo_llm.experiments.maze``) trains one SFT model and every (method, N) RL
run from it for each RL seed. Its intervals over RL seeds hold for that one SFT model; another
seed, or the same seed on a CPU whose kernels round differently, gives another SFT model. So
``run_maze_bases`` runs the experiment once per base b (``OUT/base<b>/``: the mazes, the model
initialisation and SFT with seed b), half of the bases under this CPU's default kernels and half
under the other family (``fgrpo_llm.environment.kernel_family_env``, set for the base's
processes), then pools them: every run becomes a (base, seed) unit, intervals are over bases
(``fgrpo_llm.experiments.maze.study.unit_interval``), and OUT/report.md adds the variance
components (between bases, between RL seeds of a base) and the kernel family's effect; OUT/units.csv
holds every (base, seed) run's numbers (``maze.units``).

    fgrpo-llm maze --bases 0,1,2,3 --seeds 0 --workers 2 --out runs/maze_bases
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from fgrpo_common.files import write_json
from fgrpo_llm.environment import (
    KERNEL_FAMILIES,
    kernel_family_env,
    pin_kernel_family,
    write_environment,
)
from fgrpo_llm.evaluation.stats import (
    Interval,
    by_base,
    format_interval,
    informative,
    variance_components,
    welch_difference,
)
from fgrpo_llm.experiments.claims import family_verdict
from fgrpo_llm.experiments.maze.config import MazeConfig, command_for, method_name, methods
from fgrpo_llm.experiments.maze.plots import write_figures
from fgrpo_llm.experiments.maze.report import paper_table4, table_rows, write_report, write_table
from fgrpo_llm.experiments.maze.study import _per_seed, collect, study
from fgrpo_llm.experiments.maze.units import unit_rows, write_units
from fgrpo_llm.experiments.runner import Task, run_tasks
from fgrpo_llm.experiments.tables import cell, table_lines

__all__ = ["run_maze_bases", "merge_bases"]


def _families(bases, families) -> dict[int, str]:
    families = list(families or [])
    if families and len(families) != len(bases):
        raise ValueError(
            f"families must name one kernel family per base ({len(bases)}), got {families}"
        )
    for f in families:
        if f not in KERNEL_FAMILIES:
            raise ValueError(f"families must be among {KERNEL_FAMILIES}, got {f!r}")
    return {b: families[i] if families else KERNEL_FAMILIES[i % 2] for i, b in enumerate(bases)}


def _run_base(cfg: MazeConfig, out_b: Path, workers: int, progress: bool) -> None:
    """Task: one base's whole experiment, and the environment it ran in."""
    import torch

    from fgrpo_llm.experiments.maze.pipeline import run_experiment  # lazy: torch
    from fgrpo_llm.model import resolve_device  # lazy: transformers

    torch.set_num_threads(cfg.threads)
    run_experiment(cfg, out_b, workers=workers, progress=progress)
    write_environment(out_b, resolve_device(cfg.device))  # the device it ran on, not "auto"


def run_maze_bases(
    cfg: MazeConfig, out, *, bases, families=None, workers: int = 1, progress: bool = True
) -> dict:
    """Run (or continue) the experiment for every base, one base at a time (each on ``workers``
    processes, under its kernel family), then write the pooled OUT/results.json, report.md,
    table.md and figures. Returns the pooled results."""
    bases = [int(b) for b in bases]
    if not bases or len(set(bases)) != len(bases) or min(bases) < 0:
        raise ValueError(f"bases must be distinct integers >= 0, got bases={bases}")
    fams = _families(bases, families)
    out = Path(out)
    for b in bases:  # every base's family checked before anything is written
        pin_kernel_family(out / f"base{b}", fams[b], check_only=True)
    out.mkdir(parents=True, exist_ok=True)
    write_json(
        out / "bases.json",
        {"bases": bases, "families": {str(b): f for b, f in fams.items()}, "plan": cfg.to_dict()},
    )
    for b in bases:
        pin_kernel_family(out / f"base{b}", fams[b])
    tasks = [
        Task(
            f"base{b}",
            _run_base,
            (dataclasses.replace(cfg, seed=b), out / f"base{b}", workers, progress),
            kernel_family_env(fams[b]),
        )
        for b in bases
    ]
    for _ in run_tasks(tasks, workers=1):
        pass
    return merge_bases(cfg, out, bases, fams)


def _prefixed(results: dict, b: int) -> tuple[dict, dict]:
    runs = {f"base{b}/{k}": {**r, "base": b} for k, r in results["runs"].items()}
    sft = {f"{b}/{s}": e for s, e in results["sft"].items()}
    return runs, sft


def merge_bases(cfg: MazeConfig, out: Path, bases, fams: dict) -> dict:
    """Pool the bases' runs as (base, seed) units; write the pooled tables, report, figures and
    the per-unit table OUT/units.csv (``maze.units``)."""
    runs, sft, envs = {}, {}, {}
    for b in bases:
        out_b = out / f"base{b}"
        if not (out_b / "config.json").is_file():
            continue
        cfg_b = dataclasses.replace(cfg, seed=b)
        r, s = _prefixed(collect(cfg_b, out_b), b)
        runs.update(r)
        sft.update(s)
        env_path = out_b / "environment.json"
        envs[b] = json.loads(env_path.read_text()) if env_path.is_file() else None
    results = {
        "config": cfg.to_dict(),
        "bases": {str(b): fams[b] for b in bases},
        "sft": sft,
        "runs": runs,
    }
    if runs:
        paper = paper_table4()
        rows = table_rows(cfg, results, paper)
        results["table"] = rows
        write_table(rows, out, cfg, results)
        report = study(cfg, results)
        report["command"] = _command(cfg, bases, fams)
        report["variance_components"] = _components(cfg, results)
        report["kernel_family"] = _family_rows(cfg, results, fams)
        report["environments"] = {str(b): e for b, e in envs.items()}
        results["study"] = report
        write_report(cfg, report, out, extra=_extra_sections(report, fams, envs))
        write_figures(cfg, results, paper, out)
        write_units(out / "units.csv", unit_rows(cfg, results))  # ``maze --from-units`` reads it
    write_json(out / "results.json", results)
    return results


def _command(cfg: MazeConfig, bases, fams) -> str:
    cmd = command_for(dataclasses.replace(cfg, seed=0)).replace("--seed 0 ", "")
    default = all(fams[b] == KERNEL_FAMILIES[i % 2] for i, b in enumerate(bases))
    extra = f"--bases {','.join(map(str, bases))}"
    if not default:
        extra += f" --families {','.join(fams[b] for b in bases)}"
    return cmd.replace(" --out ", f" {extra} --out ")


def _values(cfg, results, method, N, metric) -> dict:
    return _per_seed(cfg, results, method, N, metric)


def _metrics(cfg) -> list[str]:
    return ["pass@1", f"pass@{cfg.eval_k_max}", "dip"]


def _components(cfg: MazeConfig, results: dict) -> list[dict]:
    """Variance components of every run's metrics and of F-GRPO - GRPO, per N."""
    rows = []
    grpo = method_name(0.0)
    for N in cfg.group_sizes:
        for gamma, matched in methods(cfg):
            method = method_name(gamma, matched)
            for metric in _metrics(cfg):
                vals = _values(cfg, results, method, N, metric)
                if vals:
                    rows.append(
                        {
                            "what": f"{method} N={N}",
                            "metric": metric,
                            **variance_components(vals).to_dict(),
                        }
                    )
        for gamma in [g for g in cfg.gammas if g > 0]:
            for metric in _metrics(cfg):
                a = _values(cfg, results, method_name(gamma), N, metric)
                b = _values(cfg, results, grpo, N, metric)
                d = {u: a[u] - b[u] for u in a.keys() & b.keys()}
                if d:
                    rows.append(
                        {
                            "what": f"{method_name(gamma)} - GRPO N={N}",
                            "metric": metric,
                            **variance_components(d).to_dict(),
                        }
                    )
    return rows


def _family_rows(cfg: MazeConfig, results: dict, fams: dict) -> list[dict]:
    """F-GRPO - GRPO per (gamma, N, metric): base means by kernel family, other - default."""
    rows = []
    grpo = method_name(0.0)
    for gamma in [g for g in cfg.gammas if g > 0]:
        for N in cfg.group_sizes:
            for metric in _metrics(cfg):
                a = _values(cfg, results, method_name(gamma), N, metric)
                b = _values(cfg, results, grpo, N, metric)
                d = {u: a[u] - b[u] for u in a.keys() & b.keys()}
                means = {base: float(np.mean(x)) for base, x in by_base(d).items()}
                groups = {
                    f: [v for base, v in means.items() if fams.get(base) == f]
                    for f in KERNEL_FAMILIES
                }
                if not all(groups.values()):
                    continue
                iv = welch_difference(groups["other"], groups["default"])
                rows.append(
                    {
                        "what": f"{method_name(gamma)} - GRPO N={N}",
                        "metric": metric,
                        "difference": iv.to_dict(),
                        "resolved": informative(iv) and iv.excludes(0.0),
                        "bases": [len(groups["default"]), len(groups["other"])],
                    }
                )
    return rows


def _sd(x: float) -> str:
    return cell(x, 1)


def _extra_sections(report: dict, fams: dict, envs: dict) -> str:
    """The pooled report's extra sections: the bases, the variance components, the kernel
    family's effect (points)."""
    bases = [
        [b, fam, (envs.get(b) or {}).get("torch_cpu_capability", "?")] for b, fam in fams.items()
    ]
    comps = [
        [c["what"], c["metric"], c["bases"], c["units"], _sd(c["between_sd"]), _sd(c["within_sd"])]
        for c in report["variance_components"]
    ]
    rows = report["kernel_family"]
    resolved = [f"{r['what']} {r['metric']}" for r in rows if r["resolved"]]
    family = [
        [
            r["what"],
            r["metric"],
            format_interval(Interval(**r["difference"]), 1, signed=True),
            f"{r['bases'][0]}/{r['bases'][1]}",
        ]
        for r in rows
    ]
    lines = ["", "## Bases", "", *table_lines(["base", "kernels", "torch capability"], bases)]
    lines += [
        "",
        "## Variance components (points)",
        "",
        "One-way random effects: the sd of the base (SFT model) effect and of the RL seed "
        "within a base (which needs a base with two RL seeds: `--seeds 0,1`).",
        "",
        *table_lines(
            [
                "run or paired effect",
                "metric",
                "bases",
                "units",
                "sd between bases",
                "sd between seeds within a base",
            ],
            comps,
        ),  # fmt: skip
        "",
        "## Kernel family",
        "",
        "F-GRPO - GRPO per base, mean over the other family's bases minus the default's, "
        "with Welch's 95% interval (points). " + family_verdict(rows, resolved),
        "",
        *table_lines(
            ["paired effect", "metric", "other - default", "bases (default/other)"], family
        ),
    ]
    return "\n".join(lines) + "\n"
