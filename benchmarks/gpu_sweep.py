"""The paper-fig2 sweep (paper Section 5.1 / App. J, Fig. 2) on the batched torch engine, on a
GPU, against the compiled CPU engine in the same run: the one prepared script for a GPU machine.

    python benchmarks/gpu_sweep.py [--device cuda] [--workers 2] [--json PATH]

It runs from a checkout whether or not the package is installed (it puts the checkout first on
the import path). What it checks before anything runs: the device, the compiled engine (numba
imports and compiles here), at least two seeds for the agreement check, the JSON's folder.

1. The environment: torch and its CUDA, the device's name, the CPU, numpy and numba.
2. Warm-ups, timed apart and not counted: a sweep of two steps on the device (CUDA's start,
   its kernels' first launch) and one on the compiled engine (numba's compile on first use,
   which the kernels' cache keeps for the workers).
3. The sweep (136 runs x 1000 steps, K = 128,000) with ``engine="torch"`` on ``--device``:
   wall time, the device synchronised before the clock stops.
4. The baseline: the same sweep with the compiled engine on ``--workers`` CPU processes (as
   ``bench_simulate.py`` times it for the README's CPU number, 2 workers on 2 idle cores),
   unless ``--no-baseline``.
5. The engines' contract (``fgrpo_theory.sim.agreement``): final Q_pos and M_ret agree in
   distribution over seeds (torch draws its own random numbers, so the two sweeps are
   independent samples). With the preset's 4 seeds the check is weak (a few degrees of freedom
   per cell); ``--seeds 0,...,15`` makes it sharper at four times the CPU baseline's time.

``--json PATH`` writes all of it as one JSON object, rewritten after each stage. The reduced
flags (``--steps``, ``--actions``, ``--correct``, ``--group-sizes``, ``--seeds``) make the same
run small enough for a CPU (``tests/theory/test_sim_gpu_sweep_script.py`` runs it so on CPU
torch).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, installed or not

from fgrpo_common.cli import parse_list  # noqa: E402
from fgrpo_common.files import atomic_write_text  # noqa: E402
from fgrpo_theory.sim import PRESETS, run_sweep  # noqa: E402
from fgrpo_theory.sim.agreement import compare_sweeps  # noqa: E402
from fgrpo_theory.sim.sweep import environment as sweep_environment  # noqa: E402
from fgrpo_theory.sim.torch_engine import check_device  # noqa: E402


def _environment(cfg, torch, device) -> dict:
    """What ran the sweep: a sweep's record (``sweep.environment``: versions, the CPU), torch
    and its CUDA, the device, the CPU count."""
    env = sweep_environment(cfg, engine="torch")
    env["torch"] = torch.__version__
    env["torch_cuda"] = torch.version.cuda
    env["device"] = str(device)
    if device.type == "cuda":
        env["device_name"] = torch.cuda.get_device_name(device)
    env["cpus"] = os.cpu_count()
    return env


def _timed_sweep(cfg, torch, dev, **kw) -> tuple[float, object]:
    """(wall seconds, result) of ``run_sweep(cfg, **kw)``, the device ``dev`` synchronised at
    the end."""
    t0 = time.perf_counter()
    res = run_sweep(cfg, progress=False, **kw)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    return time.perf_counter() - t0, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="the torch device (default cuda)")
    ap.add_argument("--workers", type=int, default=2, help="CPU processes of the baseline")
    ap.add_argument("--no-baseline", action="store_true", help="skip the compiled CPU sweep")
    ap.add_argument("--json", default=None, help="also write the results to this JSON file")
    ap.add_argument("--steps", type=int, default=None, help="steps per run (default: preset's)")
    ap.add_argument("--actions", type=int, default=None, help="K (default: the preset's)")
    ap.add_argument("--correct", type=int, default=None, help="|P| (default: the preset's)")
    ap.add_argument("--group-sizes", default=None, help="N values (default: the preset's)")
    ap.add_argument("--seeds", default=None, help="seeds (default: the preset's 0,1,2,3)")
    args = ap.parse_args()
    try:
        cfg, device = _checked(args)
    except (TypeError, ValueError) as err:
        ap.error(str(err))
    import torch

    out: dict = {"environment": _environment(cfg, torch, device)}
    runs = len(cfg.group_sizes) * len(cfg.gammas) * len(cfg.seeds)
    out["sweep"] = {"runs": runs, "steps": cfg.steps, "K": cfg.actions, "correct": cfg.correct}
    save = partial(_save, args.json, out)
    print(f"gpu_sweep: {json.dumps(out['environment'])}", flush=True)
    save()

    warm = replace(
        cfg, steps=2, group_sizes=tuple(sorted({min(cfg.group_sizes), max(cfg.group_sizes)}))
    )
    out["warmup_torch_s"], _ = _timed_sweep(warm, torch, device, engine="torch", device=str(device))
    line = f"warm-ups (2 steps, not counted): torch {out['warmup_torch_s']:.2f} s"
    if not args.no_baseline:
        out["warmup_compiled_s"], _ = _timed_sweep(
            warm, torch, device, engine="compiled", workers=args.workers
        )
        line += f", compiled {out['warmup_compiled_s']:.2f} s"
    print(line, flush=True)
    save()

    wall, res_torch = _timed_sweep(cfg, torch, device, engine="torch", device=str(device))
    out["torch_s"] = wall
    out["torch_final_means"] = {
        k: float(np.mean(res_torch.records[k][..., -1])) for k in ("q_pos", "m_ret")
    }
    print(
        f"torch engine on {out['environment'].get('device_name', device)}: {wall:.2f} s wall "
        f"({runs} runs of {cfg.steps} steps, K = {cfg.actions:,})",
        flush=True,
    )
    save()
    if args.no_baseline:
        return
    base, res_cpu = _timed_sweep(cfg, torch, device, engine="compiled", workers=args.workers)
    out["compiled_s"], out["workers"] = base, args.workers
    out["compiled_over_torch"] = base / wall
    print(
        f"compiled engine, {args.workers} CPU workers: {base:.2f} s wall; compiled / torch: "
        f"{base / wall:.2f}x",
        flush=True,
    )
    save()
    agreement = compare_sweeps(res_torch, res_cpu)
    out["agreement"], out["agree"] = agreement.summary(), agreement.ok
    weak = len(cfg.seeds) < 8
    note = f" ({len(cfg.seeds)} seeds per engine: a weak check)" if weak else ""
    print(f"agreement, torch vs compiled: {agreement.summary()}{note}", flush=True)
    save()


def _checked(args):
    """(the sweep's config, the torch device), or a ValueError / TypeError naming the bad flag,
    before anything runs."""
    changes = {
        name: value
        for name, value in (
            ("steps", args.steps),
            ("actions", args.actions),
            ("correct", args.correct),
            ("group_sizes", _ints("--group-sizes", args.group_sizes)),
            ("seeds", _ints("--seeds", args.seeds)),
        )
        if value is not None
    }
    cfg = replace(PRESETS["paper-fig2"], **changes)
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    check_device(args.device)  # (a ValueError naming it; torch missing is one too)
    if not args.no_baseline:
        from fgrpo_theory.sim.compiled import unavailable_reason

        reason = unavailable_reason()
        if reason is not None:
            raise ValueError(f"the compiled engine does not run here ({reason}): use --no-baseline")
        if len(cfg.seeds) < 2:
            raise ValueError(
                f"--seeds: the agreement check needs at least 2 seeds, got {list(cfg.seeds)}"
            )
    if args.json is not None and not Path(args.json).resolve().parent.is_dir():
        raise ValueError(f"--json: no folder {Path(args.json).parent}")
    import torch

    return cfg, torch.device(args.device)


def _save(path, out: dict) -> None:
    """``out`` as JSON at ``path`` (nothing when None), written atomically."""
    if path is not None:
        atomic_write_text(path, json.dumps(out, indent=2) + "\n")


def _ints(flag: str, text: str | None):
    """``text`` as a tuple of ints (None stays None); a ValueError naming ``flag``."""
    return None if text is None else tuple(parse_list(flag, text, int))


if __name__ == "__main__":
    main()
