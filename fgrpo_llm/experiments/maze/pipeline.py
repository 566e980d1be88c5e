"""The Maze experiment's pipeline: SFT, its held-out evaluations, every RL run (on worker
processes, longest first), then the study (``fgrpo_llm.experiments.maze.study.summarize``) and
its per-unit table OUT/units.csv (``maze.units``).

The configuration, the runs and their stages are ``fgrpo_llm.experiments.maze``; the statistics
and the report are ``maze.study``'s; this module runs them in order, resumably.

    from fgrpo_llm.experiments.maze.config import make_config
    from fgrpo_llm.experiments.maze.pipeline import run_experiment
    results = run_experiment(make_config("reduced"), "runs/maze", workers=2)
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import torch

from fgrpo_common.files import changed_settings, write_json
from fgrpo_common.pool import as_finished
from fgrpo_common.timer import Timer
from fgrpo_llm.config import TrainConfig
from fgrpo_llm.experiments.maze.config import MazeConfig, MazeRun, plan
from fgrpo_llm.experiments.maze.stages import (
    build_task,
    dip_statistics,
    evaluate_heldout,
    read_curve,
    run_rl,
    run_sft,
    torch_threads,
)
from fgrpo_llm.experiments.maze.study import summarize
from fgrpo_llm.experiments.maze.units import unit_rows, write_units

__all__ = ["run_experiment", "FREE_FIELDS"]


def _rl_job(cfg: MazeConfig, out: Path, run: MazeRun, progress: bool) -> dict:
    """Worker: one RL run (resuming it if it was cut) and its result.json, ``cfg.threads``
    threads. Returns its wall and CPU seconds (for OUT/timings.json, never for a result)."""
    timer = Timer()
    with torch_threads(cfg.threads):
        run_dir = out / "rl" / run.key
        task = build_task(cfg)
        run_rl(cfg, task, out / "sft", run_dir, run, progress=progress)
        threads = torch.get_num_threads()
    sft_eval = json.loads((out / "sft" / f"eval_seed{run.seed}.json").read_text())
    curve = read_curve(run_dir, sft_eval)

    lr = TrainConfig.from_dict(json.loads((run_dir / "config.json").read_text())).effective_lr
    result = {
        "method": run.method,
        "gamma": run.gamma,
        "lr_match_gamma": run.lr_match_gamma,
        "N": run.N,
        "seed": run.seed,
        "lr": lr,
        "torch_threads": threads,
        "curve": curve,
        "final": curve[-1],
        "dips": dip_statistics(curve, cfg.ks),
    }
    write_json(run_dir / "result.json", result)
    return {"key": run.key, "wall_s": timer.seconds(), "cpu_s": timer.cpu()}


def _map_jobs(cfg: MazeConfig, out: Path, todo: list[MazeRun], workers: int, progress: bool):
    """Yield each job's timing as runs finish: in this process for one worker, else on a pool
    of spawned processes (``fgrpo_common.pool``; fresh interpreters: no forked torch thread
    pools)."""
    if workers == 1 or len(todo) <= 1:
        for run in todo:
            yield _rl_job(cfg, out, run, progress)
        return
    # progress bars of parallel runs would interleave: each run reports when it is done
    yield from as_finished(_rl_job, [(cfg, out, run, False) for run in todo], workers=workers)


# -- the whole experiment ------------------------------------------------------------------------

#: Settings that may differ from those of a previous call in the same OUT (they change no
#: finished stage): more N, gamma, controls or seeds run only the new runs.
FREE_FIELDS = ("group_sizes", "gammas", "lr_matched_gammas", "rl_seeds", "device", "preset")


def _check_out(cfg: MazeConfig, out: Path) -> None:
    """OUT may hold a previous run only with the same settings (so finished stages are reused)."""
    diff = changed_settings(
        out / "config.json", cfg.to_dict(), free=FREE_FIELDS, hint="; use another --out"
    )
    if diff:
        shown = ", ".join(f"{k}={old!r}" for k, (old, _) in diff.items())
        raise ValueError(
            f"{out} holds a maze run with other settings ({shown}); "
            "use another --out or the same settings"
        )


class _Timings:
    """OUT/timings.json: wall and CPU seconds per stage, and one entry per call."""

    def __init__(self, out: Path, workers: int):
        self.path = out / "timings.json"
        self.data = {"stages": {}, "calls": []}
        if self.path.is_file():
            with contextlib.suppress(ValueError):
                data = json.loads(self.path.read_text())
                if isinstance(data, dict) and {"stages", "calls"} <= set(data):
                    self.data = data
        self.call = {"workers": workers, "wall_s": 0.0, "cpu_s": 0.0}
        self.data["calls"].append(self.call)
        self._timer = Timer()

    def stage(self, name: str, wall_s: float, cpu_s: float) -> None:
        self.data["stages"][name] = {"wall_s": round(wall_s, 2), "cpu_s": round(cpu_s, 2)}
        self.save()

    def save(self) -> None:
        self.call["wall_s"] = round(self._timer.seconds(), 2)
        self.call["cpu_s"] = round(self._timer.cpu(), 2)
        write_json(self.path, self.data)


def run_experiment(cfg: MazeConfig, out, *, workers: int = 1, progress: bool = True) -> dict:
    """Run (or continue) every stage of the experiment in ``out``; return the summary.

    ``workers`` processes train the RL runs (longest first); it changes only the wall time.
    """
    from fgrpo_llm.model import load_model_and_tokenizer, resolve_device  # lazy: transformers

    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got workers={workers!r}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out must be a directory, but {out} is a file")
    _check_out(cfg, out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "config.json", cfg.to_dict())
    timings = _Timings(out, workers)
    task = build_task(cfg)

    sft_dir = out / "sft"
    with torch_threads(cfg.threads):
        if not (sft_dir / "model" / "config.json").is_file():
            timer = Timer()
            summary = run_sft(cfg, task, sft_dir / "model", progress=progress)
            write_json(sft_dir / "sft_summary.json", summary)
            timings.stage("sft", timer.seconds(), timer.cpu())
        model = tokenizer = None
        for s in cfg.rl_seeds:
            path = sft_dir / f"eval_seed{s}.json"
            if path.is_file():
                continue
            timer = Timer()
            if model is None:
                model, tokenizer = load_model_and_tokenizer(
                    sft_dir / "model", device=resolve_device(cfg.device)
                )
            write_json(path, evaluate_heldout(model, tokenizer, task, cfg, rl_seed=s))
            timings.stage(f"sft_eval/seed{s}", timer.seconds(), timer.cpu())
            _log(
                progress,
                f"SFT model, held-out with seed {s}: " + _fmt(json.loads(path.read_text()), cfg),
            )

    todo = [r for r in plan(cfg) if not (out / "rl" / r.key / "result.json").is_file()]
    todo.sort(key=lambda r: -r.N)  # longest first (cost ~ N), so the workers finish together
    _log(
        progress,
        f"{len(todo)} RL run(s) to train on {min(workers, max(len(todo), 1))} "
        f"worker(s), {cfg.threads} thread(s) each",
    )
    for done, job in enumerate(_map_jobs(cfg, out, todo, workers, progress), 1):
        timings.stage(f"rl/{job['key']}", job["wall_s"], job["cpu_s"])
        result = json.loads((out / "rl" / job["key"] / "result.json").read_text())
        K = cfg.eval_k_max
        _log(
            progress,
            f"[{done}/{len(todo)}] seed {result['seed']} {result['method']} "
            f"N={result['N']}: final "
            + _fmt(result["final"], cfg)
            + f"; largest pass@{K} dip {result['dips'][f'dip/pass@{K}']:.3f} "
            f"({job['wall_s']:.0f} s)",
        )
    results = summarize(cfg, out)
    if results["runs"]:  # the claims' numbers, judged again by ``fgrpo-llm maze --from-units``
        write_units(out / "units.csv", unit_rows(cfg, results))
    timings.save()
    results["timings"] = timings.data
    return results


def _fmt(metrics: dict, cfg: MazeConfig) -> str:
    return ", ".join(f"pass@{k}={metrics[f'eval/test/pass@{k}']:.3f}" for k in (1, cfg.eval_k_max))


def _log(progress: bool, text: str) -> None:
    if progress:
        print(f"[maze] {text}", file=sys.stderr, flush=True)
