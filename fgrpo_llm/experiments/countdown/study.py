"""``fgrpo-llm study``: the plan over K base models and S RL seeds per base, with the base as a
random factor, intervals over bases, variance components and a verdict per claim.

A base model is a draw, not a constant: pretraining under other seeds, or under another CPU's
kernels (which round differently), gives another base, another rare-correct set and RL outcomes
that differ far more than RL seeds do. So the study draws bases: base b is pretrained with seed b
(``OUT/base<b>/``: the model, its rare-correct set with exact (mu, tau), its pass@k), half of them
under torch's and numpy's default kernels for this CPU and half under the other kernel family
(``fgrpo_llm.environment.kernel_family_env``; every process of a base runs under its family).
On each base it trains, for every RL seed s, the core of the plan (GRPO and F-GRPO at N = 8 and
the learning-rate-matched control; ``OUT/base<b>/seed<s>/<run>/``), and on the ``sweep_bases`` the
rest of the GRPO group-size sweep at the first RL seed. The design's layers:

    base b (pretraining seed b, kernel family)  >  RL seed s  >  run (algorithm, N, gamma, lr)

Every comparison is paired within (base, seed); intervals take the base as the unit
(``fgrpo_llm.evaluation.stats.base_level_interval``); variance components split each metric's
spread into between bases and between seeds within a base; the kernel family's effect is the
difference of the two families' base means (Welch). The claims are in ``study_claims``, the
report in ``study_report``, the tuning of the regularised baselines in ``study_tuning``.

Every stage resumes: a prepared base, a finished run are kept; a killed run continues from its
last checkpoint; the report is rebuilt each time.

    fgrpo-llm study --out runs/study --bases 0,1,2,3,4,5 --seeds 0,1 --sweep-bases 0,1
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from fgrpo_common.cli import bar_disabled
from fgrpo_common.files import writable_file, write_json
from fgrpo_common.timer import cpu_seconds
from fgrpo_llm.environment import (
    KERNEL_FAMILIES,
    kernel_family_env,
    pin_kernel_family,
    write_environment,
)
from fgrpo_llm.evaluation.runs import load_run, split_pass_at
from fgrpo_llm.experiments.countdown.config import DemoConfig, RunSpec
from fgrpo_llm.experiments.countdown.stages import (
    check_plan,
    evaluate_stage,
    pretrain_base,
    rare_set_stage,
    record_exact_mu_tau,
    run_done,
    task_for,
    train_and_evaluate,
)
from fgrpo_llm.experiments.countdown.study_cells import CELLS, cell_specs, committed_forecast
from fgrpo_llm.experiments.countdown.study_claims import METRICS, judge_claims
from fgrpo_llm.experiments.countdown.study_report import run_numbers, write_study_outputs
from fgrpo_llm.experiments.countdown.study_tuning import (
    choose_coefficients,
    tuned_config,
    tuning_specs,
)
from fgrpo_llm.experiments.countdown.study_units import COLUMNS as UNIT_COLUMNS
from fgrpo_llm.experiments.countdown.study_units import (
    EXACT_KS,
    exact_columns,
    exact_metrics,
    mechanism_columns,
    realised_weight,
)
from fgrpo_llm.experiments.runner import Task, run_tasks
from fgrpo_theory.focal import lr_multiplier
from fgrpo_theory.sim import config_from_preset, run_sweep

__all__ = ["StudyDesign", "run_study", "study_specs", "METRICS"]


@dataclass(frozen=True)
class StudyDesign:
    """Which bases, RL seeds and runs the study trains (the plan's sizes are a DemoConfig)."""

    bases: tuple = (0, 1, 2, 3, 4, 5)
    """Pretraining seeds, one base each (K = len(bases))."""
    seeds: tuple = (0, 1)
    """RL seeds of the core runs on every base (S)."""
    sweep_bases: tuple | None = None
    """Bases that also train the rest of the GRPO group-size sweep, at the first RL seed (None:
    the first two bases, one per kernel family)."""
    families: tuple = ()
    """Kernel family of each base ("default" or "other"); empty: alternating, starting with
    "default", so half the bases fall under each."""
    extended_bases: tuple = ()
    """Bases that also train the extended plan (MaxRL, GRPO + entropy, GRPO + KL, F-GRPO at the
    other gammas; ``config.extended_specs``) at the first RL seed."""
    tune_base: int | None = None
    """The base on which the entropy and KL coefficients are tuned before the extended plan trains
    with them (``study_tuning``; not among ``extended_bases``). None: the plan's coefficients."""

    def __post_init__(self):
        if self.sweep_bases is None:
            object.__setattr__(self, "sweep_bases", tuple(self.bases)[:2])
        for name in ("bases", "seeds", "sweep_bases", "families", "extended_bases"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for name in ("bases", "seeds", "sweep_bases", "extended_bases"):
            vals = getattr(self, name)
            bad = [v for v in vals if isinstance(v, bool) or not isinstance(v, int) or v < 0]
            if bad or len(set(vals)) != len(vals):
                raise ValueError(f"{name} must be distinct integers >= 0, got {name}={list(vals)}")
        if not self.bases or not self.seeds:
            raise ValueError(
                f"a study needs a base and a seed, got bases={list(self.bases)}, "
                f"seeds={list(self.seeds)}"
            )
        for name in ("sweep_bases", "extended_bases"):
            stray = [b for b in getattr(self, name) if b not in self.bases]
            if stray:
                raise ValueError(f"{name} must be among bases {list(self.bases)}, got {stray}")
        if self.tune_base is not None:
            if isinstance(self.tune_base, bool) or self.tune_base not in self.bases:
                raise ValueError(
                    f"tune_base must be among bases {list(self.bases)}, got {self.tune_base!r}"
                )
            if self.tune_base in self.extended_bases:
                raise ValueError(
                    f"tune_base {self.tune_base} must not be among extended_bases "
                    f"{list(self.extended_bases)}: the claims would be judged on the runs that "
                    "chose the coefficients"
                )
            if not self.extended_bases:
                raise ValueError(
                    f"tune_base={self.tune_base} tunes the extended plan's coefficients, but no "
                    "extended_bases were given"
                )
        if self.families:
            if len(self.families) != len(self.bases):
                raise ValueError(
                    f"families must name one kernel family per base ({len(self.bases)}), got "
                    f"families={list(self.families)}"
                )
            for f in self.families:
                if f not in KERNEL_FAMILIES:
                    raise ValueError(f"families must be among {KERNEL_FAMILIES}, got {f!r}")

    def family(self, base: int) -> str:
        i = self.bases.index(base)
        return self.families[i] if self.families else KERNEL_FAMILIES[i % 2]

    def to_dict(self) -> dict:
        return {
            "bases": list(self.bases),
            "seeds": list(self.seeds),
            "sweep_bases": list(self.sweep_bases),
            "extended_bases": list(self.extended_bases),
            "tune_base": self.tune_base,
            "families": {str(b): self.family(b) for b in self.bases},
        }


def base_dir(out: Path, base: int) -> Path:
    return out / f"base{base}"


def base_config(cfg: DemoConfig, base: int) -> DemoConfig:
    """The plan for base b: seed b for pretraining, the rare set and evaluation (so base b is the
    demo's base for ``--seed b`` under the same kernels)."""
    return dataclasses.replace(cfg, seed=base)


def study_specs(cfg: DemoConfig, design: StudyDesign, base: int, cells=CELLS) -> list[RunSpec]:
    """The runs of one base in ``cells`` (``study_cells``: fit, published, blind; default all):
    the core (N = ``group_size``) for every RL seed, the sweep, the extended plan and the blind
    cells."""
    by_cell = cell_specs(cfg, design, base)
    return [spec for cell in CELLS if cell in cells for spec in by_cell[cell]]


def core_specs(cfg: DemoConfig, design: StudyDesign, base: int) -> list[RunSpec]:
    """The runs of one base without the extended plan (every cell; the extended plan trains with
    the coefficients its tuning chose, so what OUT holds of it is checked against those)."""
    by_cell = cell_specs(cfg, design, base, extended=False)
    return [spec for cell in CELLS for spec in by_cell[cell]]


# ----------------------------------------------------------------------------- stages
def base_prepared(out_b: Path) -> bool:
    return all(
        (out_b / p).is_file()
        for p in ("base_summary.json", "rare_set.json", "base_eval/eval.json", "environment.json")
    )


def prepare_base(out_b: Path, cfg: DemoConfig) -> None:
    """Task: pretrain base b, build its rare-correct set with exact (mu, tau), evaluate it (and
    exactly, where the task lists every answer), and record the environment it was made in
    (``environment.json``)."""
    import torch

    from fgrpo_llm.model import resolve_device  # lazy: transformers

    torch.set_num_threads(cfg.threads)
    pretrain_base(out_b, cfg)
    rare = rare_set_stage(out_b, cfg)
    exact_stage(out_b, cfg, rare)
    task = task_for(out_b / "base")
    evaluate_stage(out_b / "base", out_b / "base_eval", cfg, task=task)
    if rare.has_exact:  # the task lists every answer: the base's exact evaluation
        from fgrpo_llm.experiments.countdown.exact_stage import exact_stages  # lazy: torch

        exact_stages(out_b, cfg, task=task, rare=rare)
    write_environment(out_b, resolve_device(cfg.device))  # the device it ran on (auto: CUDA?)


def exact_stage(out: Path, cfg: DemoConfig, rare) -> dict | None:
    """Exact base (mu, tau) per prompt (Countdown), recorded in OUT/rare_set.json when a rare set
    built before they existed lacks them; their summary (how far the sampled estimates were off),
    or None for a task that cannot list its correct answers."""
    if rare.has_exact:
        return rare.meta.get("exact")
    from fgrpo_llm.evaluation.rare import save_rare_set  # lazy: torch
    from fgrpo_llm.model import load_model_and_tokenizer  # lazy: torch, transformers

    model, tok = load_model_and_tokenizer(out / "base", device=cfg.device)
    task = task_for(out / "base")
    summary = record_exact_mu_tau(
        model, tok, task, task.problems("train")[: cfg.rare_prompts], rare
    )
    if summary is not None:
        save_rare_set(rare, out / "rare_set.json")
    return summary


def _tasks(out: Path, cfg: DemoConfig, design: StudyDesign, *, extended=True, cells=CELLS):
    """The bases to prepare, then the runs of ``cells`` to train in :func:`_tier`'s order, each
    tier longest first (``extended``: with the extended plan). Every base's kernel family is
    checked against the one it was drawn under before anything is written."""
    for check_only in (True, False):  # every base checked before any is pinned
        for b in design.bases:
            pin_kernel_family(base_dir(out, b), design.family(b), check_only=check_only)
    prep = [
        Task(
            f"base{b}",
            prepare_base,
            (base_dir(out, b), base_config(cfg, b)),
            kernel_family_env(design.family(b)),
            cost=1.0,
        )
        for b in design.bases
        if not base_prepared(base_dir(out, b))
    ]
    if cfg.workers > 1:  # progress bars of parallel runs would interleave
        cfg = dataclasses.replace(cfg, train_overrides={**cfg.train_overrides, "progress": False})
    runs = []
    for b in design.bases:
        cfg_b = base_config(cfg, b)
        by_cell = cell_specs(cfg, design, b, extended=extended)
        if b == design.tune_base:
            by_cell["published"] = by_cell["published"] + tuning_specs(
                cfg, seed=design.seeds[0], prefix=f"seed{design.seeds[0]}/"
            )
        for cell in cells:
            for spec in by_cell[cell]:
                if run_done(base_dir(out, b), spec, cfg_b, exact=True):
                    continue
                task = Task(
                    f"base{b}/{spec.path}",
                    train_and_evaluate,
                    (base_dir(out, b), cfg_b, spec, True),  # evaluated exactly where it can be
                    kernel_family_env(design.family(b)),
                    cost=float(spec.N),
                )
                runs.append((_tier(cfg, design, spec, cell), -spec.N, task))
    runs.sort(key=lambda r: (r[0], r[1]))
    return prep, [task for *_, task in runs]


def _tier(cfg: DemoConfig, design: StudyDesign, spec: RunSpec, cell: str) -> tuple:
    """Training order, so that an interrupted study holds the most complete verdicts: the fit
    cell; the lr frontier's units at the first RL seed (GRPO and F-GRPO at N = 8 at every lr
    scale, the control included); the revisit arm; the frontier's units at the other seeds; the
    rest of the blind cells (the other gammas, the sweep); the published sweep and the tuning
    runs (the extended plan trains after them, with the tuned coefficients)."""
    if cell == "fit":
        return (0, 0)
    if spec.prompt_pool:
        return (2, 0)
    plain = spec.weighting == "focal" and not (spec.entropy_coef or spec.kl_coef)
    if plain and spec.N == cfg.group_size and spec.gamma in (0.0, cfg.gamma):  # the frontier
        seed = design.seeds.index(spec.seed)
        return (1, 0) if seed == 0 else (3, seed)
    return (4, 0) if cell == "blind" else (5, 0)


def _run(tasks, workers: int, what: str) -> None:
    if not tasks:
        return
    from tqdm import tqdm

    with tqdm(
        total=len(tasks), desc=what, unit="task", file=sys.stderr, disable=bar_disabled()
    ) as bar:
        for task, _seconds in run_tasks(tasks, workers):
            bar.update(1)
            bar.set_postfix_str(task.name, refresh=True)


# ----------------------------------------------------------------------------- numbers
def _collect(out: Path, cfg: DemoConfig, design: StudyDesign) -> tuple[dict, dict]:
    """``numbers[name][(base, seed)]`` for every finished and evaluated run, and per base its
    summary (family, environment, rare set)."""
    from fgrpo_llm.evaluation.rare import load_rare_set  # lazy: torch

    numbers: dict = {}
    bases: dict = {}
    for b in design.bases:
        out_b = base_dir(out, b)
        if not base_prepared(out_b):
            continue
        rare = load_rare_set(out_b / "rare_set.json")
        ids, _, _ = rare.mu_tau()
        bases[b] = {
            "family": design.family(b),
            "environment": json.loads((out_b / "environment.json").read_text()),
            "rare_trajectories": len(rare),
            "rare_prompts": len(ids),
            "exact": rare.meta.get("exact"),
            "base_eval": json.loads((out_b / "base_eval" / "eval.json").read_text()),
        }
        by_cell = cell_specs(cfg, design, b)
        for cell in CELLS:
            for spec in by_cell[cell]:
                if run_done(out_b, spec, exact=True):
                    numbers.setdefault(spec.name, {})[(b, spec.seed)] = _unit_numbers(
                        out_b, cfg, spec, cell, rare
                    )
    return numbers, bases


def _unit_numbers(out_b: Path, cfg: DemoConfig, spec: RunSpec, cell: str, rare) -> dict:
    """One finished run's row of the per-unit table (``study_units.COLUMNS``)."""
    # lazy: torch
    from fgrpo_llm.experiments.countdown.exact_stage import base_exact_path, run_exact_path

    run = load_run(out_b / spec.path)
    run_exact, base_exact = run_exact_path(out_b / spec.path), base_exact_path(out_b)
    lr_scale = spec.lr_scale * (
        float(lr_multiplier(spec.lr_match_gamma)) if spec.lr_match_gamma is not None else 1.0
    )
    sampled = run_numbers(run, rare, early_steps=cfg.early_steps, exact=rare.has_exact)
    exact = exact_columns(run_exact, base_exact, ks=sorted({*EXACT_KS, sampled["kmax"]}))
    return {
        **sampled,
        "label": run.label
        + (f" gamma={spec.gamma:g}" if spec.gamma not in (0, cfg.gamma) else "")
        + (f" + entropy {spec.entropy_coef:g}" if spec.entropy_coef else "")
        + (f" + KL {spec.kl_coef:g}" if spec.kl_coef else "")
        + (f", pool {spec.prompt_pool}" if spec.prompt_pool else ""),
        "environment": run.environment,
        "cell": cell,
        "N": spec.N,
        "gamma": spec.gamma,
        "weighting": spec.weighting,
        "lr_scale": lr_scale,
        "lr_match_gamma": spec.lr_match_gamma,
        "prompt_pool": spec.prompt_pool,
        "entropy_coef": spec.entropy_coef,
        "kl_coef": spec.kl_coef,
        "tail_miss_steps": cfg.early_steps,
        "id_pass8": split_pass_at(run.eval, "in_domain", 8),
        "ood_pass8": split_pass_at(run.eval, "ood", 8),
        "focal_weight": realised_weight(run.groups, gamma=spec.gamma, weighting=spec.weighting),
        **{k: v for k, v in exact.items() if k in UNIT_COLUMNS},
        **exact_metrics(exact, sampled["kmax"]),  # Countdown: pass@k exact, not sampled
        **mechanism_columns(run.groups, rare, run_exact, base_exact),
    }


#: Simulator seeds of the weighting comparison's prediction (its own interval needs several).
PREDICTION_SEEDS = tuple(range(8))


def simulator_prediction(out: Path, cfg: DemoConfig) -> dict:
    """The categorical simulator's final retained positive mass M_ret at N = ``group_size`` per
    weighting of the plan (GRPO, F-GRPO at every gamma, MaxRL) on the preset
    ``cfg.prediction_preset`` over :data:`PREDICTION_SEEDS` (``fgrpo_theory.sim``): ``{"m_ret":
    {label: mean}, "per_seed": {label: [M_ret per seed]}}``, kept in
    OUT/simulator_prediction.json. More retained mass predicts less likelihood lost on the rare
    correct solutions (a lower Delta NLL_rare); the seeds pair the weightings (the same initial
    logits and random streams per seed)."""
    N = cfg.group_size
    gammas = sorted({0.0, float(cfg.gamma), *(float(g) for g in cfg.extended_gammas)})
    seeds = list(PREDICTION_SEEDS)
    path = out / "simulator_prediction.json"
    key = {"preset": cfg.prediction_preset, "N": N, "gammas": gammas, "seeds": seeds}
    if path.is_file():  # kept when it was computed for these settings
        saved = json.loads(path.read_text())
        if {k: saved.get(k) for k in key} == key:
            return {"m_ret": saved["m_ret"], "per_seed": saved["per_seed"]}
    import numpy as np

    def final(weighting: str, gs) -> list[dict]:
        sim = config_from_preset(
            cfg.prediction_preset,
            group_sizes=(N,),
            gammas=tuple(gs),
            seeds=tuple(seeds),
            weighting=weighting,
        )
        return run_sweep(sim, progress=False).final_rows()

    focal, maxrl = final("focal", gammas), final("maxrl", (0.0,))
    per_seed = {}
    for g in gammas:
        label = "GRPO" if g == 0 else f"F-GRPO gamma={g:g}"
        per_seed[label] = [
            r["m_ret"] for r in sorted(focal, key=lambda r: r["seed"]) if r["gamma"] == g
        ]
    per_seed["MaxRL"] = [r["m_ret"] for r in sorted(maxrl, key=lambda r: r["seed"])]
    m_ret = {label: float(np.mean(v)) for label, v in per_seed.items()}
    write_json(path, {**key, "m_ret": m_ret, "per_seed": per_seed})
    return {"m_ret": m_ret, "per_seed": per_seed}


def _record_time(out: Path, wall: float, cpu: float) -> dict:
    """Append this invocation's wall and CPU seconds to OUT/timings.json; the totals."""
    path = out / "timings.json"
    try:
        log = json.loads(path.read_text())
        assert isinstance(log, list)
    except (FileNotFoundError, ValueError, AssertionError):
        log = []
    log.append({"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)})
    write_json(path, log)
    return {
        "invocations": len(log),
        "wall_s": sum(e["wall_s"] for e in log),
        "cpu_s": sum(e["cpu_s"] for e in log),
    }


def _tune_then_extend(out: Path, cfg: DemoConfig, design: StudyDesign, cells) -> tuple:
    """Choose the regularised baselines' coefficients from the tuning runs on the tuning base,
    then train the extended plan with them; the tuned plan and the tuning record."""
    b, s = design.tune_base, design.seeds[0]
    tuning = choose_coefficients(out, base_dir(out, b), cfg, b, s)
    cfg = tuned_config(cfg, tuning)
    _, runs = _tasks(out, cfg, design, cells=cells)
    print(
        f"[study] tuned on base {b}: "
        + ", ".join(f"{k} = {v['chosen']:g}" for k, v in tuning["knobs"].items())
        + f"; {len(runs)} runs of the extended plan to train",
        file=sys.stderr,
        flush=True,
    )
    _run(runs, cfg.workers, "extended")
    return cfg, tuning


def _time_invocation(out: Path, t0: float, cpu0: float) -> dict:
    """Record this invocation's wall and CPU seconds (``_record_time``) and say them."""
    timing = _record_time(out, time.perf_counter() - t0, cpu_seconds() - cpu0)
    print(
        f"[study] this invocation: {(time.perf_counter() - t0) / 60:.1f} min wall, "
        f"{(cpu_seconds() - cpu0) / 60:.1f} min CPU; all invocations: "
        f"{timing['cpu_s'] / 60:.1f} min CPU",
        file=sys.stderr,
    )
    return timing


def run_study(
    out_dir,
    cfg: DemoConfig,
    design: StudyDesign | None = None,
    *,
    command: str = "fgrpo-llm study",
    spread_file=None,
    cells=CELLS,
    forecast=None,
) -> dict:
    """Run (or resume) the runs of ``cells`` (``study_cells``: fit, published, blind); write
    OUT/report.md, OUT/study.json, OUT/units.csv (one row per run), OUT/seed_spread.json and
    OUT/timings.json (wall and CPU seconds of each invocation), and ``spread_file`` when given
    (checked first, not after the study). A blind run is trained only with ``forecast``, a
    forecast file committed in git (``study_cells.committed_forecast``), recorded in
    OUT/forecast_record.json first."""
    design = design or StudyDesign()
    out = Path(out_dir)
    cells = tuple(c for c in CELLS if c in cells)
    if not cells:
        raise ValueError(f"cells must name one of {CELLS}, got {cells!r}")
    if spread_file is not None:
        writable_file(spread_file, what="spread_file")
    for b in design.bases:  # what OUT holds must be this plan's (the untuned part of it)
        check_plan(base_dir(out, b), base_config(cfg, b), core_specs(cfg, design, b))
    record = committed_forecast(forecast) if forecast is not None else None
    blind = [
        f"base{b}/{spec.path}"
        for b in design.bases
        for spec in cell_specs(cfg, design, b)["blind"]
        if "blind" in cells and not run_done(base_dir(out, b), spec)
    ]
    if blind and record is None:  # before anything is written
        raise ValueError(
            f"{len(blind)} runs of the blind cells to train (the first: {blind[0]}): they are "
            "trained only after the forecast is committed; pass its file as forecast "
            "(--forecast), or leave the blind cells out (--cells fit,published)"
        )
    tune = design.tune_base is not None and "published" in cells
    prep, runs = _tasks(out, cfg, design, extended=not tune, cells=cells)
    out.mkdir(parents=True, exist_ok=True)
    write_json(
        out / "study_config.json",
        {"design": design.to_dict(), "plan": dataclasses.asdict(cfg), "cells": list(cells)},
    )
    if blind:
        _record_forecast(out, record, blind)
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    print(
        f"[study] {len(design.bases)} bases ({len(prep)} to prepare), {len(runs)} runs to train "
        f"({', '.join(cells)}; {len(blind)} blind) on {cfg.workers} worker(s)"
        + (" before the extended plan" if tune else ""),
        file=sys.stderr,
        flush=True,
    )
    _run(prep, cfg.workers, "bases")
    _run(runs, cfg.workers, "runs")
    tuning = None
    if tune:  # the extended plan trains with the coefficients the tuning runs chose
        cfg, tuning = _tune_then_extend(out, cfg, design, cells)
    numbers, bases = _collect(out, cfg, design)
    timing = _time_invocation(out, t0, cpu0)
    extended = any(name.startswith("maxrl_") for name in numbers)
    prediction = simulator_prediction(out, cfg) if extended else None
    return write_study_outputs(
        out,
        cfg,
        design,
        numbers,
        bases,
        judge_claims(numbers, cfg, prediction),
        command=command,
        spread_file=spread_file,
        timing=timing,
        tuning=tuning,
    )


def _record_forecast(out: Path, record: dict, runs: list[str]) -> None:
    """Append the forecast the blind runs about to train follow (its path, sha256, commit), with
    the time and the runs, to OUT/forecast_record.json."""
    path = out / "forecast_record.json"
    try:
        log = json.loads(path.read_text())
        assert isinstance(log, list)
    except (FileNotFoundError, ValueError, AssertionError):
        log = []
    log.append({**record, "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "runs": runs})  # fmt: skip
    write_json(path, log)
