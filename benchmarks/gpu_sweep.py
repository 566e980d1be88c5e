"""The paper-fig2 sweep (paper Section 5.1 / App. J, Fig. 2) on the batched torch engine, on a
GPU, against the compiled CPU engine in the same run: the one prepared script for a GPU machine.

    python benchmarks/gpu_sweep.py [--device cuda] [--workers 2] [--json PATH]

1. The environment: torch and its CUDA, the device's name, the CPU, numpy and numba.
2. A warm-up sweep of two steps on the device (CUDA's start and its kernels' first launch),
   timed apart and not counted.
3. The sweep (136 runs x 1000 steps, K = 128,000) with ``engine="torch"`` on ``--device``:
   wall time, the device synchronised before the clock stops.
4. The baseline: the same sweep with the compiled engine on ``--workers`` CPU processes (the
   README's CPU number is this with 2 workers on 2 idle cores), unless ``--no-baseline``.
5. The engines' contract (``fgrpo_theory.sim.agreement``): final Q_pos and M_ret agree in
   distribution over seeds (torch draws its own random numbers, so the two sweeps are
   independent samples).

``--json PATH`` also writes all of it as one JSON object. The reduced flags (``--steps``,
``--actions``, ``--correct``, ``--group-sizes``, ``--seeds``) make the same run small enough for
a CPU (``tests/theory/test_sim_gpu_sweep_script.py`` runs it so on CPU torch).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from fgrpo_common.cli import parse_list
from fgrpo_theory.sim import PRESETS, run_sweep
from fgrpo_theory.sim.agreement import compare_sweeps
from fgrpo_theory.sim.torch_engine import check_device


def _environment(torch, device) -> dict:
    """What ran the sweep: versions, the CPU, the device."""
    from fgrpo_common.environment import machine_environment

    env = machine_environment(("numpy", "scipy", "numba"))
    env["torch"] = torch.__version__
    env["torch_cuda"] = torch.version.cuda
    env["device"] = str(device)
    if device.type == "cuda":
        env["device_name"] = torch.cuda.get_device_name(device)
    env["cpus"] = os.cpu_count()
    env["python"] = platform.python_version()
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
    cfg = PRESETS["paper-fig2"]
    try:
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
        cfg = replace(cfg, **changes)
        if args.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {args.workers}")
        check_device(args.device)  # (a ValueError naming it; torch missing is one too)
        import torch

        device = torch.device(args.device)
    except (TypeError, ValueError) as err:
        ap.error(str(err))
    if args.json is not None and not Path(args.json).parent.is_dir():
        ap.error(f"--json: no folder {Path(args.json).parent}")

    out: dict = {"environment": _environment(torch, device)}
    runs = len(cfg.group_sizes) * len(cfg.gammas) * len(cfg.seeds)
    out["sweep"] = {"runs": runs, "steps": cfg.steps, "K": cfg.actions, "correct": cfg.correct}
    print(f"gpu_sweep: {json.dumps(out['environment'])}", flush=True)

    warm = replace(cfg, steps=2, group_sizes=(min(cfg.group_sizes), max(cfg.group_sizes)))
    out["warmup_s"], _ = _timed_sweep(warm, torch, device, engine="torch", device=str(device))
    print(f"warm-up (2 steps, not counted): {out['warmup_s']:.2f} s", flush=True)

    wall, res_torch = _timed_sweep(cfg, torch, device, engine="torch", device=str(device))
    out["torch_s"] = wall
    print(
        f"torch engine on {out['environment'].get('device_name', device)}: {wall:.2f} s wall "
        f"({runs} runs of {cfg.steps} steps, K = {cfg.actions:,})",
        flush=True,
    )
    if not args.no_baseline:
        base, res_cpu = _timed_sweep(cfg, torch, device, engine="compiled", workers=args.workers)
        out["compiled_s"], out["workers"] = base, args.workers
        out["compiled_over_torch"] = base / wall
        print(
            f"compiled engine, {args.workers} CPU workers: {base:.2f} s wall; compiled / torch: "
            f"{base / wall:.2f}x",
            flush=True,
        )
        agreement = compare_sweeps(res_torch, res_cpu)
        out["agreement"] = agreement.summary()
        out["agree"] = agreement.ok
        print(f"agreement, torch vs compiled: {agreement.summary()}", flush=True)
    finals = {k: float(np.mean(res_torch.records[k][..., -1])) for k in ("q_pos", "m_ret")}
    out["torch_final_means"] = finals
    if args.json is not None:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}", flush=True)


def _ints(flag: str, text: str | None):
    """``text`` as a tuple of ints (None stays None); a ValueError naming ``flag``."""
    return None if text is None else tuple(parse_list(flag, text, int))


if __name__ == "__main__":
    main()
