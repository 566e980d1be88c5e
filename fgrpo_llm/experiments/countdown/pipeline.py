"""``fgrpo-llm demo``: the whole story at CPU scale, from the closed forms to trained policies.

Stages (each writes under OUT and is skipped when its output exists, so a rerun resumes):

1. theory: tail-miss figures and a reduced categorical regime sweep (``fgrpo_theory.demo``);
2. the plan of ``fgrpo_llm.experiments.countdown`` for one RL seed: the Countdown base, the
   rare-correct set, GRPO at N in {2, 4, 8, 16}, F-GRPO at N = 8 and the learning-rate-matched
   control, each with its pass@k (the study adds GRPO at N = 32: ``config.DEMO_PLAN``);
3. the cross-check (``fgrpo_llm.experiments.countdown.cross_check``) and OUT/report.md.

With two or more workers the theory stage runs in a side process beside pretraining, and the base's
pass@k beside the rare-correct set; the training runs share the worker pool.

One run on one base cannot separate differences smaller than the run-to-run spread, and another
machine's kernels give another base; the report says so beside each comparison and quotes the
spread that ``fgrpo-llm study`` measured over bases of both kernel families and RL seeds
(``seed_spread.json``, shipped beside this module). The report holds no wall times (they go to
OUT/timings.md), so the same command gives the same report on one machine, busy or idle.

    fgrpo-llm demo --out runs/demo                 # the default plan, 2 worker processes
    fgrpo-llm demo --out runs/demo --fast          # a smoke run in about a minute
    fgrpo-llm demo --out runs/gpu --config gpu_full
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from fgrpo_common.files import atomic_write_text, write_json
from fgrpo_common.pool import process_pool
from fgrpo_common.timer import Timer
from fgrpo_llm.evaluation.runs import load_run
from fgrpo_llm.evaluation.sweep import difference_noise
from fgrpo_llm.experiments.countdown.config import DemoConfig, load_demo_config, run_specs
from fgrpo_llm.experiments.countdown.cross_check import cross_check
from fgrpo_llm.experiments.countdown.report import write_demo_report
from fgrpo_llm.experiments.countdown.stages import (
    check_plan,
    evaluate_stage,
    map_runs,
    pretrain_base,
    rare_set_stage,
    run_done,
    run_finished,
    task_for,
)
from fgrpo_llm.experiments.paper import load_paper_results
from fgrpo_llm.experiments.tables import markdown_table
from fgrpo_theory.demo import regime_sweep_demo, run_theory_demo

__all__ = ["run_demo", "SEED_SPREAD", "load_seed_spread"]

#: The run-to-run spread measured by ``fgrpo-llm study`` (written by its ``--spread-file``).
SEED_SPREAD = Path(__file__).with_name("seed_spread.json")


def load_seed_spread(path=SEED_SPREAD) -> dict | None:
    """The study's measured seed spread, or None when no study has written it."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("sd"), dict):
        return None
    parts = [data.get(k) for k in ("between_base_sd", "within_base_sd") if k in data]
    return data if all(isinstance(p, dict) for p in parts) else None


class _Clock:
    """Wall time per stage, for OUT/timings.md (never in the report: it must not depend on load)."""

    def __init__(self):
        self.timer = Timer()
        self.stages: dict[str, float] = {}

    def elapsed(self) -> float:
        return self.timer.seconds()

    def run(self, name: str, fn, *args, **kwargs):
        timer = Timer()
        print(f"[demo {self.elapsed():6.0f}s] {name} ...", file=sys.stderr, flush=True)
        out = fn(*args, **kwargs)
        self.stages[name] = self.stages.get(name, 0.0) + timer.seconds()
        return out


def _theory(out: Path, cfg: DemoConfig) -> dict:
    done = out / "theory" / "summary.json"
    if done.is_file():
        return json.loads(done.read_text())

    summary = {
        "tail_miss": run_theory_demo(out, fast=cfg.theory_fast),  # writes OUT/theory/
        "regimes": regime_sweep_demo(out / "regimes", fast=cfg.regime_sweep_fast),
    }
    write_json(done, summary)
    return summary


def _base_eval(out: Path, cfg: DemoConfig) -> dict:
    return evaluate_stage(out / "base", out / "base_eval", cfg, task=task_for(out / "base"))


def _timed(threads: int, fn, *args):
    """In the side process: ``fn(*args)`` on ``threads`` torch threads, and its wall time."""
    import torch

    torch.set_num_threads(threads)
    timer = Timer()
    return fn(*args), timer.seconds()


class _SideStages:
    """The stages that wait for nothing the main process is doing run in one spare process while it
    works: the theory stage beside pretraining, the base's pass@k beside the rare-correct set. With
    ``cfg.workers == 1`` they run in this process, in order. Each stage is a function of the seeds
    and settings alone, so where it runs changes no number."""

    def __init__(self, cfg: DemoConfig, clock: _Clock):
        self.cfg, self.clock = cfg, clock
        self.pool = process_pool(1, spawn=True) if cfg.workers > 1 else None

    def submit(self, name: str, fn, *args):
        if self.pool is None:
            return name, self.clock.run(name, fn, *args)
        print(
            f"[demo {self.clock.elapsed():6.0f}s] {name} (side process) ...",
            file=sys.stderr,
            flush=True,
        )
        return name, self.pool.submit(_timed, self.cfg.threads, fn, *args)

    def result(self, job):
        name, value = job
        if self.pool is None:
            return value
        value, seconds = value.result()
        self.clock.stages[name] = seconds
        return value

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


def _write_timings(out: Path, clock: _Clock) -> Path:
    rows = [[name, f"{sec:.0f}"] for name, sec in clock.stages.items()]
    text = (
        "# Wall times of the last `fgrpo-llm demo` invocation\n\nTotal: "
        f"{clock.elapsed() / 60:.1f} min (stages whose outputs already existed were skipped and "
        "cost ~0 s; these depend on the machine and its load, the results in report.md do not).\n"
        "\n" + markdown_table(["stage", "seconds"], rows) + "\n"
    )
    return atomic_write_text(out / "timings.md", text)


def _train_runs(out: Path, cfg: DemoConfig, clock, specs) -> None:
    """Train and evaluate the runs of ``specs`` not done yet (``map_runs``: ``cfg.workers``
    processes); each run's seconds and the training's wall time go to ``clock.stages``."""
    todo = [spec for spec in specs if not run_done(out, spec)]  # (settings: check_plan)
    print(
        f"[demo {clock.elapsed():6.0f}s] training {len(todo)} run(s) on {cfg.workers} worker(s): "
        f"{', '.join(spec.name for spec in todo) or 'none left'}",
        file=sys.stderr,
        flush=True,
    )
    timer = Timer()
    for spec, seconds in map_runs(out, cfg, todo):
        clock.stages[f"train+eval {spec.name}"] = seconds
        print(
            f"[demo {clock.elapsed():6.0f}s] finished {spec.name} ({seconds:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    clock.stages["training (wall)"] = timer.seconds()


def _results_summary(evals: dict, rare, runs, result: dict) -> dict:
    """The demo summary's results: pass@k per model and split, the rare set's size and
    threshold, each run's Delta NLL_rare and directory, the cross-check's orderings."""
    return {
        "evals": {
            k: {
                s: {kk: v for kk, v in e.items() if kk.startswith("pass@")}
                for s, e in r["splits"].items()
            }
            for k, r in evals.items()
        },
        "rare_set": {
            "size": len(rare),
            **{k: rare.meta.get(k) for k in ("num_correct_pool", "nll_threshold")},
        },
        "runs": {r.label: {"delta_nll_rare": r.delta_nll_rare, "dir": str(r.path)} for r in runs},
        "orderings": result["orderings"],
    }


def run_demo(out_dir, cfg: DemoConfig | None = None) -> dict:
    """Run (or resume) every stage; write OUT/report.md and OUT/timings.md. Returns a summary
    dict."""
    import torch

    cfg = cfg or load_demo_config(for_demo=True)
    out = Path(out_dir)
    check_plan(out, cfg, run_specs(cfg))  # what OUT holds must be this plan's
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "demo_config.json", dataclasses.asdict(cfg))
    # the same in every stage and worker, whatever cfg.workers is
    torch.set_num_threads(cfg.threads)
    clock = _Clock()
    summary: dict = {}

    side = _SideStages(cfg, clock)
    try:
        theory = side.submit("theory", _theory, out, cfg) if cfg.theory else None
        summary["base"] = clock.run("pretrain", pretrain_base, out, cfg)
        base_eval = side.submit("eval base", _base_eval, out, cfg)
        rare = clock.run("rare set", rare_set_stage, out, cfg)
        evals = {"base": side.result(base_eval)}
        if theory is not None:
            summary["theory"] = side.result(theory)
    finally:
        side.close()
    task = task_for(out / "base")

    specs = run_specs(cfg)
    _train_runs(out, cfg, clock, specs)
    for spec in specs:
        evals[spec.name] = evaluate_stage(
            out / spec.path / "model", out / spec.path / "eval", cfg, task=task
        )

    runs = [load_run(out / spec.path) for spec in specs if run_finished(out / spec.path)]
    result = clock.run(
        "cross-check",
        cross_check,
        runs,
        rare,
        out / "validate",
        early_steps=cfg.early_steps,
        paper=load_paper_results(cfg.paper_results),
        rng=np.random.default_rng(cfg.seed),
        noise=difference_noise(load_seed_spread()),
    )
    summary.update(_results_summary(evals, rare, runs, result))

    summary["report"] = str(
        write_demo_report(
            out, cfg, summary, evals, runs, rare, result, seed_spread=load_seed_spread()
        )
    )
    summary["timings"] = str(_write_timings(out, clock))
    summary["total_seconds"] = clock.elapsed()
    write_json(out / "demo_summary.json", {**summary, "stage_seconds": clock.stages})
    print(f"[demo {clock.elapsed():6.0f}s] wrote {summary['report']}", file=sys.stderr)
    return summary
