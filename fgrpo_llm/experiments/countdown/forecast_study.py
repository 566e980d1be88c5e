"""The forecast of a Countdown study: the tied prefix-tree categorical model
(``fgrpo_theory.forecast``; paper Section 2.3, Eq. 5 and Eq. 11-13 on each prompt's enumerated
answers) fitted on the study's GRPO runs at N = 8, lr x 1, RL seed 0, one per base, and run on
every other cell of the study before it is trained.

- :func:`study_plan`: the study's plan and design, from ``STUDY_DIR/study_config.json``;
- :func:`schedule_of`: a run's ``RunSchedule`` from its ``TrainConfig`` (lr, AdamW's betas, eps,
  decay and warm-up, N, weighting, the GRPO std convention) and prompt order;
- :func:`planned_order`: the prompt order a run WILL have: the trainer's ``PromptStream`` is
  deterministic given the RL seed and the pool, so no training is needed;
- :func:`measured`: a run's exact Delta NLL_rare (nats per token, App. M.2), in-domain pass@1
  and OOD pass@64 (``exact_eval.json`` of the base and the run);
- :func:`predict_cell`: one cell's forecast with pass@1 on the in-domain split and pass@64 on
  the OOD split, each rare trajectory's Delta NLL kept;
- :func:`fit_study`: the whole forecast (fit, every cell, the nulls) as ``write_forecast`` takes
  it.

    fgrpo-llm forecast fit runs/study --out docs/data/forecast.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from fgrpo_llm.config import TrainConfig
from fgrpo_llm.experiments.countdown.config import DemoConfig
from fgrpo_llm.experiments.countdown.forecast_inputs import base_answers, rare_pairs, run_order
from fgrpo_llm.experiments.countdown.stages import run_finished, task_for, train_config_for
from fgrpo_llm.experiments.countdown.study import StudyDesign, base_config
from fgrpo_llm.experiments.countdown.study_cells import cell_specs
from fgrpo_theory.forecast import (
    FitUnit,
    ForecastBase,
    Optimizer,
    RunSchedule,
    evaluate,
    fit_lr_only,
    fit_step_sizes,
    fit_untied,
    predict_lr_only,
    train_once,
)
from fgrpo_theory.forecast.policy import gather, log1m_mu
from fgrpo_theory.forecast.train import gathered_steps
from fgrpo_theory.weighting import Weighting, focal, none

__all__ = [
    "FIT_CELL",
    "study_plan",
    "weighting_of",
    "schedule_of",
    "planned_order",
    "run_config",
    "measured",
    "forecast_base",
    "predict_cell",
    "predicted_specs",
    "fit_study",
]

#: The cell the step sizes are fitted on (GRPO, N = 8, lr x 1, the first RL seed).
FIT_CELL = "fit"


def study_plan(study_dir):
    """``(DemoConfig, StudyDesign)`` of a study, from ``STUDY_DIR/study_config.json``."""

    path = Path(study_dir) / "study_config.json"
    if not path.is_file():
        raise ValueError(f"{study_dir} is not a study directory: {path} not found")
    doc = json.loads(path.read_text())
    d = doc["design"]
    design = StudyDesign(
        bases=tuple(d["bases"]),
        seeds=tuple(d["seeds"]),
        sweep_bases=tuple(d["sweep_bases"]),
        extended_bases=tuple(d.get("extended_bases", ())),
        tune_base=d.get("tune_base"),
    )
    return DemoConfig.from_dict(doc["plan"]), design


def weighting_of(tc) -> Weighting:
    """w(mu_hat) of a ``TrainConfig``: its own weighting (any registered rule), focal at gamma 0
    named as what it is, GRPO's."""
    w = tc.advantage_weighting
    return none() if w == focal(0.0) else w


def schedule_of(tc, order) -> RunSchedule:
    """The ``RunSchedule`` a ``TrainConfig`` ``tc`` trains with on ``order`` (per step, the
    prompt ids): its effective lr, AdamW (betas, eps, decay, warm-up), N, weighting and the GRPO
    advantage's std convention and eps."""
    opt = Optimizer(
        "adam",
        betas=(tc.adam_beta1, tc.adam_beta2),
        eps=tc.adam_eps,
        weight_decay=tc.weight_decay,
        warmup_steps=tc.warmup_steps,
    )
    return RunSchedule(
        order=order,
        group_size=tc.group_size,
        weighting=weighting_of(tc),
        lr=float(tc.effective_lr),
        optimizer=opt,
        adv_std=tc.adv_std,
        adv_eps=tc.adv_eps,
    )


def planned_order(task, tc) -> list[list[str]]:
    """Per step, the ids of the prompts a run of ``tc`` will train on: the trainer's
    ``PromptStream`` over the split (its first ``prompt_pool`` problems when set), seeded by the
    RL seed, ``prompts_per_step`` a step. Refused under dynamic sampling (its refills depend on
    the rollouts)."""
    from fgrpo_llm.trainer import PromptStream  # lazy: torch, transformers

    if tc.dynamic_sampling:
        raise ValueError("the prompt order of a run with dynamic sampling depends on its rollouts")
    problems = task.problems(tc.split)
    pool = getattr(tc, "prompt_pool", None)
    if pool is not None:
        problems = problems[:pool]
    stream = PromptStream(len(problems), seed=tc.seed)
    return [[problems[i].id for i in stream.take(tc.prompts_per_step)] for _ in range(tc.steps)]


def run_config(run_dir):
    """The ``TrainConfig`` a run was trained with (its ``config.json``)."""

    return TrainConfig.from_dict(json.loads((Path(run_dir) / "config.json").read_text()))


def _split(exact: dict, role: str) -> dict:
    from fgrpo_llm.evaluation.passk import split_role  # lazy: torch

    found = [e for s, e in exact["splits"].items() if split_role(s) == role]
    if not found:
        raise ValueError(f"the exact evaluation has no {role} split: {sorted(exact['splits'])}")
    return found[0]


def measured(base_dir, run_dir) -> dict:
    """What the LLM run measured, exactly: Delta NLL_rare (nats per token), in-domain pass@1,
    OOD pass@64, and each rare trajectory's Delta NLL (``per_rare``)."""
    from fgrpo_llm.evaluation.exact_eval import load_exact_eval  # lazy: torch

    # lazy: torch
    from fgrpo_llm.experiments.countdown.exact_stage import rare_delta_nll_of, run_exact_path

    exact = load_exact_eval(run_exact_path(run_dir))
    d = np.asarray(rare_delta_nll_of(base_dir, run_dir), dtype=float)  # (S,)
    return {
        "delta_nll_rare": float(d.mean()),
        "pass@1": float(_split(exact, "in_domain")["pass@k"]["1"]),
        "pass@64": float(_split(exact, "ood")["pass@k"]["64"]),
        "per_rare": [float(v) for v in d],
    }


def forecast_base(answers: dict, rare) -> tuple[ForecastBase, dict]:
    """The base's ``ForecastBase`` (Delta NLL per token) from ``base_answers``' groups, and the
    gathered eval prompts of each role ({"in_domain": Gathered, "ood": Gathered})."""
    from fgrpo_llm.evaluation.passk import split_role  # lazy: torch

    evals = [pa for name, pas in answers.items() if name != "train" for pa in pas]
    base = ForecastBase(answers["train"], evals, rare, per_token=True)
    f = base.forest
    roles = {}
    for name, pas in answers.items():
        if name != "train":
            roles.setdefault(split_role(name), []).extend(
                f.prompt_index(pa.prompt_id) for pa in pas
            )
    return base, {role: gather(f, idx) for role, idx in roles.items()}


def _pass_at(base: ForecastBase, g, trained, k: int) -> float:
    logp = ForecastBase._logp(g, trained.delta, trained.phi)
    return float(np.mean(-np.expm1(k * log1m_mu(g, logp, base.forest.correct[g.outcomes]))))


def predict_cell(base, roles, run, *, lr_theta_scale, lr_phi_scale, seed, replicates, steps=None):
    """One cell's forecast, averaged over ``replicates`` runs (generators spawned from ``seed``,
    as ``fgrpo_theory.forecast.forecast``): {"delta_nll_rare", "pass@1" (in-domain),
    "pass@64" (OOD), "mean_weight", "per_rare"}."""

    steps = gathered_steps(base, run) if steps is None else steps
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(replicates)]
    d, p1, p64, w = [], [], [], []
    for rng in rngs:
        tr = train_once(
            base,
            run,
            lr_theta_scale=lr_theta_scale,
            lr_phi_scale=lr_phi_scale,
            rng=rng,
            steps=steps,
        )
        d.append(evaluate(base, tr)[0])
        p1.append(_pass_at(base, roles["in_domain"], tr, 1))
        p64.append(_pass_at(base, roles["ood"], tr, 64))
        w.append(tr.mean_weight)
    per_rare = np.mean(d, axis=0)  # (S,)
    return {
        "delta_nll_rare": float(per_rare.mean()),
        "pass@1": float(np.mean(p1)),
        "pass@64": float(np.mean(p64)),
        "mean_weight": float(np.nanmean(w)) if not np.isnan(w).all() else 1.0,
        "per_rare": [float(v) for v in per_rare],
    }


def predicted_specs(cfg, design, base: int) -> list[tuple[str, object]]:
    """[(cell, RunSpec)] of one base the forecast predicts: the fit run, then every published
    and blind run at the first RL seed that the model can replay (no entropy bonus, no KL)."""

    s0 = design.seeds[0]
    by_cell = cell_specs(cfg, design, base)
    return [
        (cell, spec)
        for cell in ("fit", "published", "blind")
        for spec in by_cell[cell]
        if spec.seed == s0 and not spec.entropy_coef and not spec.kl_coef
    ]


def _log(progress: bool, text: str) -> None:
    if progress:
        print(f"[forecast] {text}", file=sys.stderr, flush=True)


def _base_inputs(out_b: Path, cfg_b, fit_run: Path, *, progress: bool):
    """The base's task, its ForecastBase and eval roles, after making sure the base's and the
    fit run's exact evaluations exist."""
    from fgrpo_llm.experiments.countdown.exact_stage import exact_stages  # lazy: torch

    task = task_for(out_b / "base")
    exact_stages(out_b, cfg_b, task=task, rare=out_b / "rare_set.json", run_dir=fit_run)
    answers = base_answers(out_b, cfg_b, task=task, progress=progress)
    base, roles = forecast_base(answers, rare_pairs(out_b))
    return task, base, roles


def _fit_units(study_dir: Path, cfg, design, *, progress: bool) -> tuple[list, list]:
    """Per base with a finished fit run: its FitUnit (inputs, the run's own schedule, the measured
    Delta NLL_rare) and its plan (base, dirs, task, inputs, roles, cells, measured, fit spec)."""
    units, plans = [], []
    for b in design.bases:
        out_b, cfg_b = study_dir / f"base{b}", base_config(cfg, b)
        specs = predicted_specs(cfg, design, b)
        fit_spec = next(spec for cell, spec in specs if cell == "fit")
        fit_run = out_b / fit_spec.path
        if not run_finished(fit_run):
            _log(progress, f"base{b}: no finished fit run ({fit_run}), left out")
            continue
        task, base, roles = _base_inputs(out_b, cfg_b, fit_run, progress=progress)
        meas = measured(out_b, fit_run)
        run = schedule_of(run_config(fit_run), run_order(fit_run))
        units.append(FitUnit(f"base{b}", base, run, {"delta_nll_rare": meas["delta_nll_rare"]}))
        plans.append((b, out_b, cfg_b, task, base, roles, specs, meas, fit_spec))
    if not units:
        raise ValueError(f"no base of {study_dir} has a finished fit run: nothing to fit")
    return units, plans


_QUANTITIES = ("delta_nll_rare", "pass@1", "pass@64")


def _predict_base(i: int, plan: tuple, unit, models: dict, cfg, *, seed: int, replicates: int):
    """One base's cells: (model rows, untied rows, lr-only rows, seconds per cell). ``models``:
    the fitted FitResult, the untied one and the lr-only k."""
    b, out_b, cfg_b, task, base, roles, specs, _meas, _fit_spec = plan
    fitted, untied, k = models["fitted"], models["untied"], models["k"]
    cells, untied_cells, lr_only, seconds = [], [], [], []
    for cell, spec in specs:
        tc = train_config_for(out_b, cfg_b, spec)
        # the fit cell replays the order its run had (its log); the rest as they will have it
        run = unit.run if cell == "fit" else schedule_of(tc, planned_order(task, tc))
        c0 = time.perf_counter()
        steps = unit.steps if cell == "fit" else gathered_steps(base, run)
        kw = dict(seed=seed + i, replicates=replicates, steps=steps)
        pred = predict_cell(
            base,
            roles,
            run,
            lr_theta_scale=fitted.lr_theta_scale,
            lr_phi_scale=fitted.lr_phi_scale,
            **kw,
        )
        seconds.append(time.perf_counter() - c0)
        un = predict_cell(
            base, roles, run, lr_theta_scale=untied.lr_theta_scale, lr_phi_scale=0.0, **kw
        )
        scale = float(tc.effective_lr / cfg.lr)
        common = {
            "cell": spec.path.split("/", 1)[-1],
            "base": f"base{b}",
            "run": spec.path,
            "stage": cell,
            "lr_scale": scale,
            "group_size": int(spec.N),
            "weighting": weighting_of(tc).label,
        }
        cells.append(
            {
                **common,
                "predicted": {q: pred[q] for q in _QUANTITIES},
                "mean_weight": pred["mean_weight"],
                "per_rare": pred["per_rare"],
            }
        )
        untied_cells.append({**common, "predicted": {q: un[q] for q in _QUANTITIES}})
        lr_only.append(
            {
                **common,
                "delta_nll_rare": predict_lr_only(k, scale, pred["mean_weight"]),
                "mean_weight": pred["mean_weight"],
            }
        )
    return cells, untied_cells, lr_only, seconds


def fit_study(study_dir, *, replicates: int = 1, seed: int = 0, progress: bool = False) -> dict:
    """The forecast of a study: step sizes fitted on every base's finished fit run; every cell
    of :func:`predicted_specs` predicted per base (the fit cell too, with the fitted draws); the
    nulls (lr-only's k on the fit cells; the untied model fitted and run the same way).

    Returns {"fitted": FitResult, "untied": FitResult, "cells": [...], "fit_cells": [...],
    "extra": {...}, "timings": {...}}, the arguments of ``write_forecast``."""
    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 1:
        raise ValueError(f"replicates must be an int >= 1, got {replicates!r}")
    study_dir = Path(study_dir)
    cfg, design = study_plan(study_dir)
    t0 = time.perf_counter()
    units, plans = _fit_units(study_dir, cfg, design, progress=progress)
    t_inputs = time.perf_counter()
    _log(progress, f"fitting the step sizes on {len(units)} bases")
    models = {
        "fitted": fit_step_sizes(units, seed=seed, replicates=replicates),
        "untied": fit_untied(units, seed=seed, replicates=replicates),
        # lr-only: D = k * lr_scale * w_bar on the fit cells (GRPO: w = 1, lr x 1)
        "k": fit_lr_only(
            [1.0] * len(plans), [1.0] * len(plans), [p[7]["delta_nll_rare"] for p in plans]
        ),
    }
    t_fit = time.perf_counter()
    cells, untied_cells, lr_only, per_cell_s = [], [], [], []
    for i, plan in enumerate(plans):
        rows = _predict_base(i, plan, units[i], models, cfg, seed=seed, replicates=replicates)
        for acc, got in zip((cells, untied_cells, lr_only, per_cell_s), rows, strict=True):
            acc.extend(got)
        _log(progress, f"base{plan[0]}: {len(plan[6])} cells predicted")
    t_end = time.perf_counter()
    fit_cells = [{"base": f"base{p[0]}", "run": p[8].path, "measured": p[7]} for p in plans]
    constant = [
        {"base": f"base{p[0]}", "reference": {q: p[7][q] for q in _QUANTITIES}} for p in plans
    ]
    untied = models["untied"]
    extra = {
        "study": {
            "bases": [p[0] for p in plans],
            "replicates": replicates,
            "seed": seed,
            "delta_nll_unit": "nats per token (App. M.2)",
        },
        "fit_predictions": models["fitted"].predictions,
        "nulls": {
            "constant": constant,
            "lr_only": {"k": models["k"], "cells": lr_only},
            "untied": {
                "lr_theta_scale": untied.lr_theta_scale,
                "loss": untied.loss,
                "cells": untied_cells,
            },
        },
    }
    timings = {
        "inputs_s": t_inputs - t0,
        "fit_s": t_fit - t_inputs,
        "predict_s": t_end - t_fit,
        "cell_s_median": float(np.median(per_cell_s)),
        "cells": len(cells),
    }
    return {
        "fitted": models["fitted"],
        "untied": untied,
        "cells": cells,
        "fit_cells": fit_cells,
        "extra": extra,
        "timings": timings,
    }


def score_rows(study_dir, doc: dict, *, progress: bool = False) -> list[dict]:
    """The rows ``forecast_score.score_forecast`` takes: every cell of the forecast ``doc``
    with its prediction, the nulls' and, for a finished run, what it measured (its exact
    evaluation computed when missing; None: not trained)."""
    # lazy: torch
    from fgrpo_llm.experiments.countdown.exact_stage import exact_eval_stage, run_exact_path

    study_dir = Path(study_dir)
    cfg, _ = study_plan(study_dir)
    nulls = doc.get("nulls", {})
    lr_only = {(c["cell"], c["base"]): c["delta_nll_rare"] for c in nulls["lr_only"]["cells"]}
    untied = {(c["cell"], c["base"]): c["predicted"] for c in nulls["untied"]["cells"]}
    rows = []
    for c in doc["cells"]:
        out_b = study_dir / c["base"]
        run = out_b / c["run"]
        meas = None
        if run_finished(run):
            cfg_b = base_config(cfg, int(c["base"].removeprefix("base")))
            exact_eval_stage(
                run / "model",
                run_exact_path(run).parent,
                cfg_b,
                task=task_for(out_b / "base"),
                rare_set=out_b / "rare_set.json",
            )
            meas = measured(out_b, run)
            _log(progress, f"{c['base']}/{c['run']}: measured")
        key = (c["cell"], c["base"])
        rows.append(
            {**c, "measured": meas, "nulls": {"lr_only": lr_only[key], "untied": untied[key]}}
        )
    return rows
