"""The exact evaluation as a stage of the Countdown plan: one ``exact_eval.json`` per base and per
run (``fgrpo_llm.evaluation.exact_eval``), and the exact Delta NLL_rare between them.

Layout: a base's at ``<base_dir>/base_exact/exact_eval.json`` (model ``<base_dir>/base``, rare
set ``<base_dir>/rare_set.json``), a run's at ``<run>/exact/exact_eval.json`` (model
``<run>/model``). The problems are those of the sampled evaluation (``stages.evaluate_stage``:
every evaluation split, its first ``cfg.eval_max_problems``); a run is scored under its own
sampling settings, a base under the plan's. The stage is skipped when its file exists.

    exact_eval_stage(run_dir / "model", run_exact_path(run_dir).parent, cfg,
                     task=task_for(base_dir / "base"), rare_set=base_dir / "rare_set.json")
    exact_stages(base_dir, cfg, task=task, rare=rare, run_dir=run_dir)   # the base's, the run's
    exact_delta_nll_rare_of(base_dir, run_dir)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fgrpo_llm.config import run_sampling
from fgrpo_llm.environment import environment
from fgrpo_llm.evaluation.exact_eval import (
    EXACT_EVAL,
    evaluate_exact,
    exact_delta_nll_rare,
    load_exact_eval,
    rare_delta_nll,
    write_exact_eval,
)
from fgrpo_llm.evaluation.passk import default_eval_splits
from fgrpo_llm.evaluation.rare import RareSet, load_rare_set
from fgrpo_llm.tracking import model_step

__all__ = [
    "base_exact_path",
    "run_exact_path",
    "exact_eval_stage",
    "exact_stages",
    "rare_delta_nll_of",
    "exact_delta_nll_rare_of",
]


def base_exact_path(base_dir) -> Path:
    """``<base_dir>/base_exact/exact_eval.json``."""
    return Path(base_dir) / "base_exact" / EXACT_EVAL


def run_exact_path(run_dir) -> Path:
    """``<run>/exact/exact_eval.json``."""
    return Path(run_dir) / "exact" / EXACT_EVAL


def exact_eval_stage(model_dir, out_dir, cfg, *, task, rare_set) -> dict:
    """The exact evaluation of ``model_dir`` written to ``out_dir/exact_eval.json`` (read back
    when it exists): ``cfg`` a ``DemoConfig`` (its ``max_new_tokens``, ``batch_size``,
    ``eval_max_problems``, ``device``), ``rare_set`` the base's rare set (a path or a RareSet)."""
    # lazy: transformers
    from fgrpo_llm.model import load_model_and_tokenizer, resolve_autocast_dtype
    from fgrpo_llm.rollout import SamplingParams  # lazy: transformers

    model_dir, out_dir = Path(model_dir), Path(out_dir)
    sampling = run_sampling(model_dir) or SamplingParams(max_new_tokens=cfg.max_new_tokens)
    if (out_dir / EXACT_EVAL).is_file():
        return _check_saved(load_exact_eval(out_dir), out_dir, sampling.policy(), task, cfg)
    model, tok = load_model_and_tokenizer(model_dir, device=cfg.device)
    rare = rare_set if isinstance(rare_set, RareSet) else load_rare_set(rare_set)
    device = next(model.parameters()).device
    sampling = dataclasses.replace(
        sampling, batch_size=cfg.batch_size, autocast_dtype=resolve_autocast_dtype(device)
    )
    results = evaluate_exact(
        model, tok, task, sampling=sampling, rare_set=rare, max_problems=cfg.eval_max_problems
    )
    results.update({"model": str(model_dir), "step": model_step(model_dir)})
    results["environment"] = environment(device)
    write_exact_eval(results, out_dir)
    return load_exact_eval(out_dir)


def exact_stages(out_b, cfg, *, task, rare, run_dir=None) -> None:
    """The exact evaluation of the base in ``out_b`` (``base_exact_path``) and, with
    ``run_dir``, of that run (``run_exact_path``), each computed when missing; ``rare`` the base's
    rare set (a path or a RareSet)."""
    out_b = Path(out_b)
    exact_eval_stage(out_b / "base", base_exact_path(out_b).parent, cfg, task=task, rare_set=rare)
    if run_dir is not None:
        run_dir = Path(run_dir)
        exact_eval_stage(
            run_dir / "model", run_exact_path(run_dir).parent, cfg, task=task, rare_set=rare
        )


def _check_saved(saved: dict, out_dir: Path, policy: dict, task, cfg) -> dict:
    """``saved`` when it was made under ``policy`` on the plan's problems; else a ValueError (a
    rerun with a changed plan must not reuse it)."""
    want = {s: len(task.problems(s)[: cfg.eval_max_problems]) for s in default_eval_splits(task)}
    got = {s: e["problems"] for s, e in saved["splits"].items()}
    if saved.get("sampling") != policy or got != want:
        raise ValueError(
            f"{out_dir / EXACT_EVAL} was made with other settings (sampling "
            f"{saved.get('sampling')}, problems {got}; now {policy}, {want}): remove it to "
            "recompute"
        )
    return saved


def rare_delta_nll_of(base_dir, run_dir, *, per_token: bool = True):
    """(S,) Delta NLL per rare trajectory of a run against its base, from their files."""
    return rare_delta_nll(
        load_exact_eval(base_exact_path(base_dir)),
        load_exact_eval(run_exact_path(run_dir)),
        per_token=per_token,
    )


def exact_delta_nll_rare_of(base_dir, run_dir, *, per_token: bool = True) -> float:
    """Delta NLL_rare (exact) of a run against its base, from their files."""
    return exact_delta_nll_rare(
        load_exact_eval(base_exact_path(base_dir)),
        load_exact_eval(run_exact_path(run_dir)),
        per_token=per_token,
    )
