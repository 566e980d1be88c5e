"""Where a run's time goes in the compiled simulator engine: CPU time per step of one whole
paper-fig2 run (K = 128,000, Adam, 1000 steps, gamma = 0, seed 0) at each N, split by kernel.

    python benchmarks/profile_simulate.py                      # every paper-fig2 N, 1000 steps
    python benchmarks/profile_simulate.py --sizes 1024,16384 --steps 300

Each kernel of ``fgrpo_theory.sim.compiled`` that the run loop calls is wrapped in a
``time.process_time`` timer (a few microseconds per call, counted in the kernel's share);
"other" is the rest of the loop: numpy's generator calls (``rng.random``,
``rng.standard_exponential``), the advantages, the per-step records and Python. The last line
estimates the paper-fig2 sweep's CPU time: 8 runs (2 gammas x 4 seeds) per N, gamma 1 taken
to cost what gamma 0 costs. One process, one thread; a profile, not a target: no baseline.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from dataclasses import replace

#: The kernels the run loop calls (module globals, looked up at each call, so wrappable).
KERNELS = (
    "_draw_guide",
    "_draw_blocks",
    "_guide_prefix",
    "_move_full",
    "_move_slots",
    "_record",
    "_record_rest",
    "_touch",
    "_go_full",
    "_adam_sparse",
    "_sgd_sparse",
    "_sgd_dense",
    "_shift",
)


def main(argv=None) -> int:
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
        sizes = [int(n) for n in args.sizes.split(",")]
    except ValueError:
        p.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    if args.steps < 1 or min(sizes) < 2:
        p.error(f"need --steps >= 1 and every N >= 2, got steps={args.steps} sizes={sizes}")

    import fgrpo_theory.sim.compiled as cm

    reason = cm.unavailable_reason()
    if reason:
        p.error(f"the compiled engine is not available here: {reason}")
    cfg = replace(base, steps=args.steps)
    spent: dict[str, float] = defaultdict(float)  # CPU seconds of each kernel called

    def timed(name, fn):
        def wrapper(*a):
            t = time.process_time()
            out = fn(*a)
            spent[name] += time.process_time() - t
            return out

        return wrapper

    with pinned(1):
        # compile (or load the cache) every kernel outside the timings, before any is wrapped
        # (kernels call kernels): both samplers, slots and full mode (N = 16,384 is full at
        # step 13)
        for n, steps in ((64, 3), (2048, 3), (16384, 20)):
            cm.simulate_run_compiled(replace(cfg, steps=steps), n, 0.0, 0)
        originals = {name: getattr(cm, name) for name in KERNELS}
        for name, fn in originals.items():
            setattr(cm, name, timed(name, fn))
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; ms of CPU per step")
        total = 0.0
        try:
            for N in sizes:
                spent.clear()
                t = time.process_time()
                cm.simulate_run_compiled(cfg, N, 0.0, 0)
                dt = time.process_time() - t
                total += dt
                parts = sorted(spent.items(), key=lambda kv: -kv[1])
                shown = " ".join(f"{k.lstrip('_')} {1e3 * v / args.steps:.3f}" for k, v in parts)
                other = 1e3 * (dt - sum(spent.values())) / args.steps
                print(
                    f"N={N:7d} {dt:6.2f} s {1e3 * dt / args.steps:6.3f} ms/step | {shown} | "
                    f"other {other:.3f}",
                    flush=True,
                )
        finally:
            for name, fn in originals.items():
                setattr(cm, name, fn)
    print(
        f"sum {total:.1f} s; the sweep (8 runs per N) would take about {8 * total:.0f} s of CPU; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
