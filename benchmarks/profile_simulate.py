"""Where a run's time goes in the compiled simulator engine: CPU time per step of one whole
paper-fig2 run (K = 128,000, Adam, 1000 steps, gamma = 0, seed 0) at each N, split by part of
the step.

    python benchmarks/profile_simulate.py                      # every paper-fig2 N, 1000 steps
    python benchmarks/profile_simulate.py --sizes 1024,16384 --steps 300

The steps of a run run inside one numba kernel (``fgrpo_theory.sim.compiled._run_steps``),
which, given a profile array, adds the CPU's cycle counter's ticks spent in each part of a step
(``compiled.PROFILE_PARTS``: ``record`` pi_t's records, ``rng`` the random numbers, ``sampler``,
``touch`` new actions, ``moments`` of the sampled actions, ``move`` the logits (Adam's pass with
exp and the next step's sums), ``rest``); the ticks are converted to seconds by the counter's
rate measured over the run, and "python" is the rest of the run's CPU time (set-up, the
records' last pass; it reads slightly negative when the process was descheduled, since the
counter runs on wall time).
The last line estimates the paper-fig2 sweep's CPU time: 8 runs (2 gammas x 4 seeds) per N,
gamma 1 taken to cost what gamma 0 costs. One process, one thread; a profile, not a target: no
baseline.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace


def main(argv=None) -> int:
    import numpy as np

    from fgrpo_common.cli import parse_list
    from fgrpo_theory.sim import PRESETS
    from fgrpo_theory.sim.threads import pinned

    base = PRESETS["paper-fig2"]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--sizes",
        default=",".join(map(str, base.group_sizes)),
        help="group sizes N (default: paper-fig2's)",
    )
    p.add_argument("--steps", type=int, default=base.steps, help="steps per run (default 1000)")
    args = p.parse_args(argv)
    try:
        sizes = parse_list("--sizes", args.sizes, int)
    except ValueError as err:
        p.error(str(err))
    if args.steps < 1 or min(sizes) < 2:
        p.error(f"need --steps >= 1 and every N >= 2, got steps={args.steps} sizes={sizes}")

    import fgrpo_theory.sim.compiled as cm

    reason = cm.unavailable_reason()
    if reason:
        p.error(f"the compiled engine is not available here: {reason}")
    cfg = replace(base, steps=args.steps)
    with pinned(1):
        cm.simulate_run_compiled(replace(cfg, steps=3), 64, 0.0, 0)  # compile outside the timings
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; ms of CPU per step")
        total = 0.0
        for N in sizes:
            ticks = np.zeros(len(cm.PROFILE_PARTS), dtype=np.int64)
            t, c, w = time.process_time(), cm.cycles_now(), time.perf_counter()
            cm.simulate_run_compiled(cfg, N, 0.0, 0, profile=ticks)
            dt = time.process_time() - t
            rate = (cm.cycles_now() - c) / (time.perf_counter() - w)  # ticks per second
            total += dt
            parts = zip(cm.PROFILE_PARTS, ticks, strict=True)
            ms = {k: 1e3 * v / rate / args.steps for k, v in parts}
            ms["python"] = 1e3 * dt / args.steps - sum(ms.values())
            shown = " ".join(f"{k} {v:.3f}" for k, v in sorted(ms.items(), key=lambda kv: -kv[1]))
            print(
                f"N={N:7d} {dt:6.2f} s {1e3 * dt / args.steps:6.3f} ms/step | {shown}", flush=True
            )
    print(
        f"sum {total:.1f} s; the sweep (8 runs per N) would take about {8 * total:.0f} s of CPU; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
