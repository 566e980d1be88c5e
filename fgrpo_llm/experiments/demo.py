"""``fgrpo-llm demo``: the whole story at CPU scale, from the closed forms to trained policies.

Stages (each writes under OUT and is skipped when its output exists, so a rerun resumes):

1. theory: tail-miss figures (``fgrpo_theory.demo``) and a reduced categorical regime sweep
   (``fgrpo_theory.simulate``, its "tiny" preset unless ``regime_sweep_fast`` is off);
2. base: the built-in Countdown base model (``fgrpo_llm.experiments.countdown_base``, SPEC §8);
3. rare set: P prompts x M base rollouts, top q by NLL, per-prompt (mu, tau) (App. M.2);
4. training: GRPO and F-GRPO at N = 8, the learning-rate-matched control (GRPO at N = 8 with
   lr * m_gamma, SPEC §2 and §6) and the rest of the group-size sweep (GRPO at N in
   {2, 4, 16, 32}), all from the same base with the same number of steps, Delta NLL_rare logged
   every ``eval_every`` steps; the runs go to ``workers`` single-threaded processes, longest first
   (a tiny model gains little from a second thread but a lot from a second process);
5. pass@k of the base and of every trained policy (in-domain "test" and OOD splits);
6. the cross-check (``validate.py``) and OUT/report.md with every table and figure.

    fgrpo-llm demo --out runs/demo                 # under 25 minutes on 2 CPU cores
    fgrpo-llm demo --out runs/demo --fast          # a smoke run in about a minute
    fgrpo-llm demo --out runs/gpu --config configs/gpu_full.yaml
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of every stage of the demo; saved resolved to OUT/demo_config.json."""

    seed: int = 0
    """Seed of pretraining, rare-set sampling, training and evaluation."""
    device: str | None = None
    """"cpu", "cuda" or None (CUDA when available)."""
    theory: bool = True
    """Run the theory stage (tail-miss figures and the categorical regime sweep)."""
    theory_fast: bool = False
    """Draw the closed-form tail-miss figures on the theory demo's coarse grid."""
    regime_sweep_fast: bool = True
    """Categorical regime sweep on ``fgrpo_theory.simulate``'s "tiny" preset (seconds) rather than
    "small" (10+ minutes on 2 busy cores, too long for the demo)."""
    pretrain_seconds: float = 600.0
    """Wall-clock cap on base-model pretraining; the step budget (``PretrainConfig.max_steps``,
    600 by default) normally ends it first, so the base does not depend on the machine's speed."""
    pretrain_overrides: dict = field(default_factory=dict)
    """Further ``PretrainConfig`` fields (e.g. hidden_size, max_steps)."""
    rare_prompts: int = 256
    """P: training prompts of the rare-correct set (paper: 256)."""
    rare_rollouts: int = 100
    """M: base rollouts per prompt (paper: 800; fewer here so that more prompts, 256, cover more
    training groups in the tail-miss check at the same sampling cost)."""
    rare_top_fraction: float = 0.01
    """q: fraction of the correct rollouts kept, highest NLL first (paper: 0.01)."""
    steps: int = 150
    """Training steps of every run (the sweep uses the same number: "same steps")."""
    prompts_per_step: int = 32
    """B: prompts per training step."""
    group_size: int = 8
    """N of the main GRPO / F-GRPO comparison (paper: 8)."""
    gamma: float = 1.0
    """Focal exponent of the F-GRPO run (SPEC §8 used 1.0; the paper's main tables use 0.5 or 1)."""
    lr: float = 1e-4
    """AdamW learning rate of RL training (SPEC §8)."""
    sweep_group_sizes: tuple = (2, 4, 16, 32)
    """Extra GRPO group sizes of the sweep."""
    lr_matched_control: bool = True
    """Also train GRPO at N = ``group_size`` with lr * m_gamma (``lr_match_gamma = gamma``; m_1 = 0.5,
    m_0.5 = 0.679), the paper's low-LR control (SPEC §2, §6): the focal weight shrinks the average
    update to about m_gamma of GRPO's, and this run tells a smaller step apart from the focal
    reweighting. Skipped when gamma = 0 (m_0 = 1: it would repeat the GRPO run)."""
    eval_every: int = 25
    """Steps between Delta NLL_rare evaluations during training."""
    train_overrides: dict = field(default_factory=dict)
    """Further ``TrainConfig`` fields applied to every run (e.g. rollout_batch_size, dtype)."""
    eval_n: int = 64
    """Samples per problem for pass@k (paper: 1024)."""
    eval_max_problems: int | None = 100
    """Problems per evaluation split (None: all)."""
    max_new_tokens: int = 16
    """Completion token limit (sampling, training and evaluation)."""
    batch_size: int = 2048
    """Sequences decoded at once in evaluation and rare-set sampling."""
    early_steps: int = 50
    """Early window of the tail-miss check (the policy is still near the base there)."""
    workers: int = 2
    """Training runs (each followed by its pass@k evaluation) in parallel processes."""
    threads_per_worker: int = 1
    """torch intra-op threads of each worker (and of the sequential stages: ``workers`` threads)."""
    paper_results: str | None = None
    """Path of paper_results.json (None: the copy shipped in ``fgrpo_llm/experiments/``)."""

    def __post_init__(self):
        ints = {"seed": 0, "rare_prompts": 1, "rare_rollouts": 1, "steps": 1, "prompts_per_step": 1,
                "group_size": 2, "eval_every": 0, "eval_n": 1, "max_new_tokens": 1, "batch_size": 1,
                "early_steps": 0, "workers": 1, "threads_per_worker": 1}
        for name, low in ints.items():
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {name}={v!r}")
        for name in ("pretrain_seconds", "gamma", "lr"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not np.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {name}={v!r}")
        if not isinstance(self.lr_matched_control, bool):
            raise ValueError(f"lr_matched_control must be true or false, got {self.lr_matched_control!r}")
        if not 0 < self.rare_top_fraction <= 1:
            raise ValueError(f"rare_top_fraction must lie in (0, 1], got {self.rare_top_fraction}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got lr={self.lr}")
        sizes = tuple(int(n) for n in self.sweep_group_sizes)
        if any(n < 2 for n in sizes):
            raise ValueError(f"sweep_group_sizes must be integers >= 2, got {list(self.sweep_group_sizes)}")
        object.__setattr__(self, "sweep_group_sizes", sizes)
        if self.eval_max_problems is not None and self.eval_max_problems < 1:
            raise ValueError(f"eval_max_problems must be None or >= 1, got {self.eval_max_problems}")

    @classmethod
    def from_dict(cls, data: dict) -> "DemoConfig":
        from fgrpo_llm.config import dataclass_from_dict

        return dataclass_from_dict(cls, data, what="demo config")


#: The test-suite preset: every stage, tiny budgets (well under a minute on one core).
FAST = dict(theory_fast=True, regime_sweep_fast=True, pretrain_seconds=4.0,
            pretrain_overrides={"hidden_size": 32, "num_layers": 2, "num_heads": 2, "eval_prompts": 4,
                                "eval_samples": 2, "batch_size": 32, "warmup_steps": 2},
            rare_prompts=8, rare_rollouts=16, rare_top_fraction=0.05, steps=3, prompts_per_step=4, group_size=4,
            sweep_group_sizes=(2,), eval_every=2, eval_n=4, eval_max_problems=4, max_new_tokens=8,
            batch_size=256, early_steps=2, workers=1,
            train_overrides={"warmup_steps": 1, "checkpoint_every": 0, "progress": False})


def load_demo_config(path=None, *, fast: bool = False, **overrides) -> DemoConfig:
    """Defaults (or the FAST preset), then the YAML/JSON file, then keyword overrides."""
    data = dict(FAST) if fast else {}
    if path is not None:
        from fgrpo_llm.config import read_config_file

        data.update(read_config_file(path))
    data.update({k: v for k, v in overrides.items() if v is not None})
    return DemoConfig.from_dict(data)


# ----------------------------------------------------------------------------- helpers
class _Clock:
    """Wall time per stage, for the report."""

    def __init__(self):
        self.start = time.perf_counter()
        self.stages: dict[str, float] = {}

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def run(self, name: str, fn, *args, **kwargs):
        t = time.perf_counter()
        print(f"[demo {self.elapsed():6.0f}s] {name} ...", file=sys.stderr, flush=True)
        out = fn(*args, **kwargs)
        self.stages[name] = self.stages.get(name, 0.0) + time.perf_counter() - t
        return out


def _write_json(path: Path, data) -> None:
    from fgrpo_llm.files import atomic_write_text

    atomic_write_text(path, json.dumps(data, indent=1, default=str))


def _generator(device, seed: int):
    import torch

    return torch.Generator(device=device).manual_seed(seed)


def _theory(out: Path, cfg: DemoConfig) -> dict:
    done = out / "theory" / "summary.json"
    if done.is_file():
        return json.loads(done.read_text())
    from fgrpo_theory.demo import run_theory_demo
    from fgrpo_theory.demo import regime_sweep_demo

    summary = {"tail_miss": run_theory_demo(out, fast=cfg.theory_fast),  # writes OUT/theory/
               "regimes": regime_sweep_demo(out / "regimes", fast=cfg.regime_sweep_fast)}
    _write_json(done, summary)
    return summary


def _pretrain(out: Path, cfg: DemoConfig) -> dict:
    base = out / "base"
    summary_path = out / "base_summary.json"
    if (base / "config.json").is_file() and summary_path.is_file():
        return json.loads(summary_path.read_text())
    from fgrpo_llm.experiments.countdown_base import PretrainConfig, pretrain

    pcfg = PretrainConfig.from_dict({"seed": cfg.seed, "seconds": float(cfg.pretrain_seconds),
                                     "max_new_tokens": cfg.max_new_tokens,
                                     "device": cfg.device or "auto", **cfg.pretrain_overrides})
    summary = pretrain(pcfg, base, progress=True)
    _write_json(summary_path, summary)
    return summary


def _task_for(base: Path):
    from fgrpo_llm.tasks.for_model import task_for_model

    return task_for_model("countdown", {}, model_dir=base)


def _rare_set(out: Path, cfg: DemoConfig):
    from fgrpo_llm.evaluation.rare import build_rare_set, load_rare_set, save_rare_set

    path = out / "rare_set.json"
    if path.is_file():
        return load_rare_set(path)
    from fgrpo_llm.model import load_model_and_tokenizer, resolve_autocast_dtype

    model, tok = load_model_and_tokenizer(out / "base", device=cfg.device)
    device = next(model.parameters()).device
    task = _task_for(out / "base")
    rare = build_rare_set(model, tok, task, task.problems("train")[:cfg.rare_prompts],
                          num_rollouts=cfg.rare_rollouts, top_fraction=cfg.rare_top_fraction,
                          max_new_tokens=cfg.max_new_tokens, generator=_generator(device, cfg.seed + 1),
                          batch_size=cfg.batch_size, progress=True, autocast_dtype=resolve_autocast_dtype(device))
    rare.meta.update({"base": str(out / "base"), "split": "train", "seed": cfg.seed + 1})
    save_rare_set(rare, path)
    return rare


def _evaluate(model_dir: Path, out_dir: Path, cfg: DemoConfig, *, task) -> dict:
    from fgrpo_llm.evaluation.passk import default_ks, evaluate_model, load_eval, write_eval_outputs
    from fgrpo_llm.model import load_model_and_tokenizer, resolve_autocast_dtype

    if (out_dir / "eval.json").is_file():
        return load_eval(out_dir)[0]
    model, tok = load_model_and_tokenizer(model_dir, device=cfg.device)
    device = next(model.parameters()).device
    results, outcomes = evaluate_model(model, tok, task, n=cfg.eval_n, ks=default_ks(cfg.eval_n),
                                       max_problems=cfg.eval_max_problems, max_new_tokens=cfg.max_new_tokens,
                                       generator=_generator(device, cfg.seed + 2), batch_size=cfg.batch_size,
                                       autocast_dtype=resolve_autocast_dtype(device))
    results["model"] = str(model_dir)
    write_eval_outputs(results, outcomes, out_dir, label=model_dir.parent.name)
    return results


def _run_finished(run_dir: Path) -> bool:
    return (run_dir / "model" / "config.json").is_file() and (run_dir / "groups.jsonl").is_file()


def _train(run_dir: Path, cfg: DemoConfig, *, N: int, gamma: float, rare, lr_match_gamma: float | None = None) -> None:
    """One RL run from the demo's base, Delta NLL_rare logged every ``eval_every`` steps; with
    ``lr_match_gamma`` the lr is multiplied by m_gamma (``TrainConfig.effective_lr``)."""
    from fgrpo_llm.config import TrainConfig
    from fgrpo_llm.evaluation.rare import make_rare_evaluator
    from fgrpo_llm.trainer import train

    if _run_finished(run_dir):
        return
    data = {"base": str(run_dir.parent / "base"), "out": str(run_dir), "algo": "grpo", "gamma": float(gamma),
            "task": "countdown", "task_kwargs": _task_kwargs(run_dir.parent / "base"),
            "steps": cfg.steps, "prompts_per_step": cfg.prompts_per_step, "group_size": int(N), "lr": cfg.lr,
            "max_new_tokens": cfg.max_new_tokens, "eval_every": cfg.eval_every, "seed": cfg.seed,
            "device": cfg.device, **cfg.train_overrides}
    if lr_match_gamma is not None:
        data["lr_match_gamma"] = float(lr_match_gamma)
    tcfg = TrainConfig.from_dict(data)
    train(tcfg, evaluators=[make_rare_evaluator(rare)], resume=True)  # continues a killed run, or starts it


def _task_kwargs(base: Path) -> dict:
    from fgrpo_llm.tasks.for_model import model_task_kwargs

    return model_task_kwargs(base, "countdown")


class RunSpec(NamedTuple):
    """One training run of the demo."""

    name: str
    """Directory under OUT."""
    N: int
    """Group size."""
    gamma: float
    """Focal exponent (0: GRPO)."""
    lr_match_gamma: float | None = None
    """Train at lr * m_gamma for this gamma (the low-LR control), or None for lr."""


def _run_specs(cfg: DemoConfig) -> list[RunSpec]:
    """The main pair first, then the learning-rate-matched control, then the sweep, smallest N first."""
    N = cfg.group_size
    specs = [RunSpec(f"grpo_n{N}", N, 0.0), RunSpec(f"fgrpo_n{N}", N, cfg.gamma)]
    if cfg.lr_matched_control and cfg.gamma > 0:
        specs.append(RunSpec(f"grpo_n{N}_lrmatched", N, 0.0, lr_match_gamma=cfg.gamma))
    specs += [RunSpec(f"grpo_n{n}", n, 0.0) for n in sorted(cfg.sweep_group_sizes) if n != N]
    return specs


def _train_and_evaluate(out: Path, cfg: DemoConfig, spec: RunSpec) -> tuple[str, float]:
    """Worker: one training run then its pass@k evaluation, single-threaded."""
    import torch

    from fgrpo_llm.evaluation.rare import load_rare_set

    torch.set_num_threads(cfg.threads_per_worker)
    start = time.perf_counter()
    rare = load_rare_set(out / "rare_set.json")
    run_dir = out / spec.name
    _train(run_dir, cfg, N=spec.N, gamma=spec.gamma, rare=rare, lr_match_gamma=spec.lr_match_gamma)
    _evaluate(run_dir / "model", run_dir / "eval", cfg, task=_task_for(out / "base"))
    return spec.name, time.perf_counter() - start


def _map_runs(out: Path, cfg: DemoConfig, specs):
    """Yield (name, seconds) as runs finish: in this process for one worker, else in a pool."""
    if cfg.workers == 1 or len(specs) <= 1:
        for spec in specs:
            yield _train_and_evaluate(out, cfg, spec)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # progress bars of parallel runs would interleave: each run reports when it is done instead
    cfg = dataclasses.replace(cfg, train_overrides={**cfg.train_overrides, "progress": False})
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no forked torch thread pools
    with ProcessPoolExecutor(max_workers=cfg.workers, mp_context=ctx) as pool:
        futures = [pool.submit(_train_and_evaluate, out, cfg, spec) for spec in specs]
        for future in as_completed(futures):
            yield future.result()


# ----------------------------------------------------------------------------- the demo
def run_demo(out_dir, cfg: DemoConfig | None = None) -> dict:
    """Run (or resume) every stage; write OUT/report.md. Returns a summary dict."""
    cfg = cfg or DemoConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _write_json(out / "demo_config.json", dataclasses.asdict(cfg))
    clock = _Clock()
    summary: dict = {}
    import torch

    torch.set_num_threads(cfg.workers * cfg.threads_per_worker)

    if cfg.theory:
        summary["theory"] = clock.run("theory", _theory, out, cfg)
    summary["base"] = clock.run("pretrain", _pretrain, out, cfg)
    rare = clock.run("rare set", _rare_set, out, cfg)
    task = _task_for(out / "base")
    evals = {"base": clock.run("eval base", _evaluate, out / "base", out / "base_eval", cfg, task=task)}

    specs = _run_specs(cfg)
    todo = [spec for spec in specs
            if not (_run_finished(out / spec.name) and (out / spec.name / "eval" / "eval.json").is_file())]
    # longest first (cost ~ N) so that the workers finish together
    todo.sort(key=lambda spec: -spec.N)
    print(f"[demo {clock.elapsed():6.0f}s] training {len(todo)} run(s) on {cfg.workers} worker(s): "
          f"{', '.join(spec.name for spec in todo) or 'none left'}", file=sys.stderr, flush=True)
    t = time.perf_counter()
    for name, seconds in _map_runs(out, cfg, todo):
        clock.stages[f"train+eval {name}"] = seconds
        print(f"[demo {clock.elapsed():6.0f}s] finished {name} ({seconds:.0f} s)", file=sys.stderr, flush=True)
    clock.stages["training (wall)"] = time.perf_counter() - t
    for spec in specs:
        evals[spec.name] = _evaluate(out / spec.name / "model", out / spec.name / "eval", cfg, task=task)

    from fgrpo_llm.evaluation.runs import load_run
    from fgrpo_llm.experiments.cross_check import cross_check
    from fgrpo_llm.experiments.paper import load_paper_results

    runs = [load_run(out / spec.name) for spec in specs if _run_finished(out / spec.name)]
    result = clock.run("cross-check", cross_check, runs, rare, out / "validate", early_steps=cfg.early_steps,
                       paper=load_paper_results(cfg.paper_results), rng=np.random.default_rng(cfg.seed))
    summary.update({"evals": {k: {s: {kk: v for kk, v in e.items() if kk.startswith("pass@")}
                                  for s, e in r["splits"].items()} for k, r in evals.items()},
                    "rare_set": {"size": len(rare), **{k: rare.meta.get(k) for k in ("num_correct_pool",
                                                                                       "nll_threshold")}},
                    "runs": {r.label: {"delta_nll_rare": r.delta_nll_rare, "dir": str(r.path)} for r in runs},
                    "orderings": result["orderings"], "stage_seconds": clock.stages,
                    "total_seconds": clock.elapsed()})
    from fgrpo_llm.experiments.report import write_demo_report

    summary["report"] = str(write_demo_report(out, cfg, summary, evals, runs, rare, result))
    _write_json(out / "demo_summary.json", summary)
    print(f"[demo {clock.elapsed():6.0f}s] wrote {summary['report']}", file=sys.stderr)
    return summary
