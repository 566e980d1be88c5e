"""The stages of the CPU-scale Countdown plan (``countdown.config``).

The demo (``fgrpo_llm.experiments.countdown.pipeline``, one RL seed) and the study
(``fgrpo_llm.experiments.countdown.study``, several RL seeds) share one plan; the demo leaves out
GRPO at N = 32 (``config.DEMO_PLAN``), whose run alone takes longer than the rest of the demo's
training:

1. the built-in Countdown base (``fgrpo_llm.experiments.countdown.base``, a step budget);
2. the rare-correct set: P prompts x M base rollouts, top q by NLL, per-prompt (mu, tau) (App. M.2);
3. pass@k of the base (in-domain "test" and OOD splits);
4. training: GRPO and F-GRPO at N = 8, the learning-rate-matched control (GRPO at N = 8 with
   lr * m_gamma, paper Table 3) and the rest of the group-size sweep (GRPO at N in {2, 4, 16, 32}
   in the study, {2, 4, 16} in the demo; Table 2), all from the same base with the same number of
   steps, each followed by its pass@k.

Each stage writes under OUT and is skipped when its output exists, so a rerun resumes; training
runs go to ``workers`` processes of ``threads`` threads each. Every number depends on the seeds and
the settings only: not on the machine's load, the worker count or the order runs finish in.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from fgrpo_common.files import refuse_other_settings, write_json
from fgrpo_common.timer import Timer
from fgrpo_llm.config import TrainConfig, run_sampling
from fgrpo_llm.environment import environment
from fgrpo_llm.experiments.countdown.config import DemoConfig, RunSpec
from fgrpo_llm.experiments.runner import Task, run_tasks
from fgrpo_llm.tasks.for_model import model_task_kwargs, task_for_model
from fgrpo_llm.tracking import model_step

#: What a refusal of other saved settings advises.
_ADVICE = "use another --out or the same settings"


def generator_for(device, seed: int):
    import torch

    return torch.Generator(device=device).manual_seed(seed)


def _pretrain_config(cfg: DemoConfig):
    """The plan's ``PretrainConfig`` of its base."""
    # lazy: tokenizers, torch, transformers
    from fgrpo_llm.experiments.countdown.base import PretrainConfig

    return PretrainConfig.from_dict(
        {
            "seed": cfg.seed,
            "seconds": float(cfg.pretrain_seconds),
            "max_new_tokens": cfg.max_new_tokens,
            "device": cfg.device or "auto",
            **cfg.pretrain_overrides,
        }
    )


def check_base(out: Path, cfg: DemoConfig) -> None:
    """A ValueError when OUT/base exists and was pretrained with other settings than the plan's."""
    from fgrpo_llm.experiments.countdown.base import CONFIG_NAME  # lazy: torch

    if (out / "base" / CONFIG_NAME).is_file():
        want = dataclasses.asdict(_pretrain_config(cfg))
        refuse_other_settings(
            out / "base" / CONFIG_NAME,
            want,
            free=("device",),
            what=f"the base model in {out / 'base'} was",
            advice=_ADVICE,
        )


def check_plan(out: Path, cfg: DemoConfig, specs) -> None:
    """A ValueError when what OUT already holds of the plan (its base, rare set, evaluations,
    finished runs) was made with other settings: checked before anything is written, so that a
    rerun with a changed plan neither reuses the old results nor records the new plan over them."""
    check_base(out, cfg)
    check_rare_set(out, cfg)
    check_evaluation(out / "base_eval", cfg, base=True)
    for spec in specs:
        run_done(out, spec, cfg)
        check_evaluation(out / spec.path / "eval", cfg, base=False)


def check_rare_set(out: Path, cfg: DemoConfig) -> None:
    """A ValueError when OUT/rare_set.json was built with other settings than the plan's."""
    want = {
        "max_prompts": cfg.rare_prompts,
        "num_rollouts": cfg.rare_rollouts,
        "top_fraction": cfg.rare_top_fraction,
        "max_new_tokens": cfg.max_new_tokens,
        "batch_size": cfg.batch_size,
        "seed": cfg.seed + 1,
    }
    refuse_other_settings(
        out / "rare_set.json",
        want,
        what=f"the rare set {out / 'rare_set.json'} was",
        advice=_ADVICE,
        section="meta",
        since=("max_prompts", "batch_size"),
    )


def check_evaluation(out_dir: Path, cfg: DemoConfig, *, base: bool) -> None:
    """A ValueError when ``out_dir``/eval.json was sampled with other settings than the plan's
    (a base's completion length is the plan's; a run's is its own, checked with its config)."""
    want = {
        "n": cfg.eval_n,
        "max_problems": cfg.eval_max_problems,
        "batch_size": cfg.batch_size,
        "seed": cfg.seed + 2,
    }
    if base:
        want["max_new_tokens"] = cfg.max_new_tokens
    refuse_other_settings(
        out_dir / "eval.json",
        want,
        what=f"the evaluation in {out_dir} was",
        advice=_ADVICE,
        since=("max_problems",),
    )


def pretrain_base(out: Path, cfg: DemoConfig) -> dict:
    from fgrpo_llm.experiments.countdown.base import pretrain  # lazy: torch, transformers

    base = out / "base"
    summary_path = out / "base_summary.json"
    if (base / "config.json").is_file() and summary_path.is_file():
        check_base(out, cfg)
        return json.loads(summary_path.read_text())
    summary = pretrain(_pretrain_config(cfg), base, progress=True)
    write_json(summary_path, summary)
    return summary


def task_for(base: Path):
    return task_for_model("countdown", {}, model_dir=base)


def rare_set_stage(out: Path, cfg: DemoConfig):
    # lazy: torch
    from fgrpo_llm.evaluation.rare import build_rare_set, load_rare_set, save_rare_set

    path = out / "rare_set.json"
    if path.is_file():
        check_rare_set(out, cfg)
        return load_rare_set(path)
    # lazy: torch, transformers
    from fgrpo_llm.model import load_model_and_tokenizer, resolve_autocast_dtype
    from fgrpo_llm.rollout import SamplingParams  # lazy: torch, transformers

    model, tok = load_model_and_tokenizer(out / "base", device=cfg.device)
    device = next(model.parameters()).device
    task = task_for(out / "base")
    rare = build_rare_set(
        model,
        tok,
        task,
        task.problems("train")[: cfg.rare_prompts],
        num_rollouts=cfg.rare_rollouts,
        top_fraction=cfg.rare_top_fraction,
        sampling=SamplingParams(
            max_new_tokens=cfg.max_new_tokens,
            batch_size=cfg.batch_size,
            autocast_dtype=resolve_autocast_dtype(device),
        ),
        generator=generator_for(device, cfg.seed + 1),
        progress=True,
    )
    rare.meta.update(
        {
            "base": str(out / "base"),
            "split": "train",
            "seed": cfg.seed + 1,
            "max_prompts": cfg.rare_prompts,
        }
    )
    record_exact_mu_tau(model, tok, task, task.problems("train")[: cfg.rare_prompts], rare)
    save_rare_set(rare, path)
    return rare


def record_exact_mu_tau(model, tokenizer, task, problems, rare) -> dict | None:
    """Exact base (mu, tau) of every rare-set prompt, recorded in ``rare`` (``mu_exact``,
    ``tau_exact``, and ``rare.meta["exact"]``: how far the sampled estimates were off), when the
    task can list its correct answers (Countdown) and every answer has one spelling in the
    tokenizer's vocabulary (a character tokenizer: ``exact.check_character_vocabulary``); None
    otherwise, saying why on stderr (a subword tokenizer spells an answer many ways, so the sum
    over canonical spellings is not mu). The tail-miss check then predicts with them, or with the
    sampled estimates."""
    import sys

    # lazy: torch
    from fgrpo_llm.evaluation.exact import (
        check_character_vocabulary,
        exact_rare_set,
        supports_exact,
    )

    if not supports_exact(task):
        return None
    try:
        check_character_vocabulary(tokenizer)
    except ValueError as err:
        print(f"exact (mu, tau) not computed, the sampled estimates stand: {err}", file=sys.stderr)
        return None
    return exact_rare_set(model, tokenizer, task, problems, rare, record=True).summary


def evaluate_stage(model_dir: Path, out_dir: Path, cfg: DemoConfig, *, task) -> dict:
    """pass@k of ``model_dir`` on the plan's problems; a trained run's policy is sampled with the
    run's own settings (``fgrpo_llm.config.run_sampling``), a base with the plan's."""
    import dataclasses as dc

    # lazy: torch
    from fgrpo_llm.evaluation.passk import default_ks, evaluate_model, load_eval, write_eval_outputs

    # lazy: torch, transformers
    from fgrpo_llm.model import load_model_and_tokenizer, resolve_autocast_dtype
    from fgrpo_llm.rollout import SamplingParams  # lazy: torch, transformers

    if (out_dir / "eval.json").is_file():
        check_evaluation(out_dir, cfg, base=run_sampling(model_dir) is None)
        return load_eval(out_dir)[0]
    model, tok = load_model_and_tokenizer(model_dir, device=cfg.device)
    device = next(model.parameters()).device
    sampling = run_sampling(model_dir) or SamplingParams(max_new_tokens=cfg.max_new_tokens)
    # how many rows are decoded at once is the plan's (evaluation) setting, not the policy's
    sampling = dc.replace(
        sampling, batch_size=cfg.batch_size, autocast_dtype=resolve_autocast_dtype(device)
    )
    results, outcomes = evaluate_model(
        model,
        tok,
        task,
        n=cfg.eval_n,
        ks=default_ks(cfg.eval_n),
        max_problems=cfg.eval_max_problems,
        sampling=sampling,
        generator=generator_for(device, cfg.seed + 2),
    )
    results["model"] = str(model_dir)
    results["step"] = model_step(model_dir)  # as ``fgrpo-llm eval`` records it
    results["seed"] = cfg.seed + 2  # the sampling generator's, as ``fgrpo-llm eval`` records it
    results["environment"] = environment(device)
    write_eval_outputs(results, outcomes, out_dir, label=model_dir.parent.name)
    return results


def run_finished(run_dir: Path) -> bool:
    return (run_dir / "model" / "config.json").is_file() and (run_dir / "groups.jsonl").is_file()


def base_task_kwargs(base: Path) -> dict:
    """The Countdown settings the base was pretrained with (``fgrpo_llm.tasks.for_model``)."""
    return model_task_kwargs(base, "countdown")


def train_config_for(out: Path, cfg: DemoConfig, spec: RunSpec):
    """The ``TrainConfig`` of one run of the plan, from the plan's base (``OUT/base``): with
    ``lr_match_gamma`` the lr is multiplied by m_gamma (``TrainConfig.effective_lr``); the
    extended plan's runs add their weighting, entropy bonus or KL penalty."""
    data = {
        "base": str(out / "base"),
        "out": str(out / spec.path),
        "algo": "grpo",
        "gamma": float(spec.gamma),
        "task": "countdown",
        "task_kwargs": base_task_kwargs(out / "base"),
        "steps": cfg.steps,
        "prompts_per_step": cfg.prompts_per_step,
        "group_size": int(spec.N),
        "lr": cfg.lr,
        "max_new_tokens": cfg.max_new_tokens,
        "eval_every": cfg.eval_every,
        "seed": int(spec.seed),
        "device": cfg.device,
        **cfg.train_overrides,
    }
    if spec.lr_match_gamma is not None:
        data["lr_match_gamma"] = float(spec.lr_match_gamma)
    if spec.weighting != "focal":
        data["weighting"] = spec.weighting
    if spec.entropy_coef:
        data["entropy_coef"] = float(spec.entropy_coef)
    if spec.kl_coef:
        data["kl_coef"] = float(spec.kl_coef)
    if spec.lr_scale != 1.0:  # the lr frontier (x 0.9, x 0.75): the multiplier, not the lr
        data["lr_multiplier"] = float(spec.lr_scale)
    if spec.prompt_pool is not None:  # the revisit arm
        data["prompt_pool"] = int(spec.prompt_pool)
    return TrainConfig.from_dict(data)


def train_run(out: Path, cfg: DemoConfig, spec: RunSpec, rare) -> None:
    """One RL run from the plan's base (``train_config_for``), Delta NLL_rare logged every
    ``eval_every`` steps. A killed run continues from its last checkpoint; a finished one is left
    as it is."""
    from fgrpo_llm.evaluation.rare import make_rare_evaluator  # lazy: torch
    from fgrpo_llm.trainer import train  # lazy: torch, transformers

    if run_finished(out / spec.path):
        return
    train(train_config_for(out, cfg, spec), evaluators=[make_rare_evaluator(rare)], resume=True)


def train_and_evaluate(
    out: Path, cfg: DemoConfig, spec: RunSpec, exact: bool = False
) -> tuple[RunSpec, float]:
    """Worker: one training run, then its pass@k evaluation, on ``cfg.threads`` threads; with
    ``exact``, also the exact evaluations of the base and of the run where the base's rare set
    carries exact (mu, tau), i.e. the task lists every answer (``exact_stage``)."""
    import torch

    from fgrpo_llm.evaluation.rare import load_rare_set  # lazy: torch

    torch.set_num_threads(cfg.threads)
    timer = Timer()
    rare = load_rare_set(out / "rare_set.json")
    train_run(out, cfg, spec, rare)
    run_dir = out / spec.path
    task = task_for(out / "base")
    evaluate_stage(run_dir / "model", run_dir / "eval", cfg, task=task)
    if exact and rare.has_exact:
        from fgrpo_llm.experiments.countdown.exact_stage import exact_stages  # lazy: torch

        exact_stages(out, cfg, task=task, rare=rare, run_dir=run_dir)
    return spec, timer.seconds()


def run_done(
    out: Path, spec: RunSpec, cfg: DemoConfig | None = None, *, exact: bool = False
) -> bool:
    """Trained and evaluated (with ``exact``, exactly too where the base's rare set carries
    exact (mu, tau)); with the plan ``cfg``, a ValueError when the finished run was trained
    with other settings than the plan's (``train_config_for``)."""
    from fgrpo_llm.evaluation.rare import load_rare_set  # lazy: torch
    from fgrpo_llm.experiments.countdown.exact_stage import run_exact_path  # lazy: torch
    from fgrpo_llm.trainer import RESUMABLE_FIELDS  # lazy: torch, transformers

    run = out / spec.path
    if cfg is not None and run_finished(run):
        refuse_other_settings(
            run / "config.json",
            train_config_for(out, cfg, spec).to_dict(),
            # (where the output went and how it was watched; not the steps: a run of fewer
            # steps is not the plan's)
            free=("base", *(f for f in RESUMABLE_FIELDS if f != "steps")),
            what=f"the run {spec.path} in {run} was",
            advice=_ADVICE,
        )
    done = run_finished(run) and (run / "eval" / "eval.json").is_file()
    if done and exact and not run_exact_path(run).is_file():
        return not load_rare_set(out / "rare_set.json").has_exact
    return done


def map_runs(out: Path, cfg: DemoConfig, specs: list[RunSpec]):
    """Yield ``(spec, seconds)`` as runs finish: in this process for one worker, else each run in
    a fresh (spawned) process, ``cfg.workers`` at a time, longest run (largest N) first
    (``fgrpo_llm.experiments.runner``). Every run is a function of its seed and settings only, so
    neither the worker count nor the finishing order changes a number."""
    specs = sorted(specs, key=lambda spec: -spec.N)  # cost ~ N: the workers finish together
    if cfg.workers > 1 and len(specs) > 1:
        # progress bars of parallel runs would interleave: each run reports when it is done
        cfg = dataclasses.replace(cfg, train_overrides={**cfg.train_overrides, "progress": False})
    tasks = [
        Task(spec.path, train_and_evaluate, (out, cfg, spec), cost=float(spec.N)) for spec in specs
    ]
    for task, seconds in run_tasks(tasks, workers=min(cfg.workers, max(len(tasks), 1))):
        yield task.args[2], seconds
