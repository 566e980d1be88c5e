"""What splitting one compiled simulator run over two cores could give at most: per N, one
paper-fig2 run (K actions, N draws a step) alone, against two half runs (K / 2 actions,
C / 2 correct, N / 2 draws) at once, on two threads pinned to two cores.

    python benchmarks/split_simulate.py
    python benchmarks/split_simulate.py --sizes 16384,131072 --steps 100 --repeats 3

A run split by its actions would give each core half the logits and (on average) half the
draws of a step, and exchange a few sums per step; two independent half runs are that split
with nothing exchanged, so ``together / full`` bounds from below what such a split could reach
on this machine (1.0: no faster; 0.5: the two cores add up). The half runs also run one after
the other (``halves in turn``), to tell the cores' sharing (caches, memory) apart from the
halves being cheaper than a whole. Times are wall ms per step, the median of ``--repeats``
rounds, the three kinds interleaved in each round.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from dataclasses import replace


def _pin_current_thread(cpu: int | None) -> None:
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})  # 0: the calling thread (Linux)


def _arguments(argv):
    """``(args, sizes, cpus)``: the checked command line and the cores this process may use;
    argparse's usage error (exit 2) for a bad value, no compiled engine, or fewer than 2 cores."""
    from fgrpo_common.cli import parse_list

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="2048,8192,16384,65536,131072", help="group sizes N (even)")
    p.add_argument("--steps", type=int, default=100, help="steps per run (default 100)")
    p.add_argument("--repeats", type=int, default=3, help="rounds (the median is kept)")
    args = p.parse_args(argv)
    try:
        sizes = parse_list("--sizes", args.sizes, int)
    except ValueError as err:
        p.error(str(err))
    if args.steps < 1 or args.repeats < 1 or min(sizes) < 4 or any(N % 2 for N in sizes):
        p.error(
            f"need --steps >= 1, --repeats >= 1 and every N even and >= 4, got "
            f"steps={args.steps} repeats={args.repeats} sizes={sizes}"
        )
    from fgrpo_theory.sim.compiled import unavailable_reason

    reason = unavailable_reason()
    if reason:
        p.error(f"the compiled engine is not available here: {reason}")
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) < 2:
        p.error(f"needs two cores, this process may use {len(cpus) or 'an unknown number of'}")
    return args, sizes, cpus


def main(argv=None) -> int:
    import numpy as np

    from fgrpo_theory.sim import PRESETS
    from fgrpo_theory.sim.compiled import simulate_run_compiled
    from fgrpo_theory.sim.threads import pinned

    args, sizes, cpus = _arguments(argv)
    base = PRESETS["paper-fig2"]
    full = replace(base, steps=args.steps)
    half = replace(full, actions=full.actions // 2, correct=full.correct // 2)

    def whole(N):
        t = time.perf_counter()
        simulate_run_compiled(full, N, 1.0, 0)
        return time.perf_counter() - t

    def in_turn(N):
        t = time.perf_counter()
        for seed in (0, 1):
            simulate_run_compiled(half, N // 2, 1.0, seed)
        return time.perf_counter() - t

    def together(N):
        def one(seed):
            _pin_current_thread(cpus[seed])
            simulate_run_compiled(half, N // 2, 1.0, seed)

        threads = [threading.Thread(target=one, args=(seed,)) for seed in (0, 1)]
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        return time.perf_counter() - t

    with pinned(1):
        simulate_run_compiled(replace(full, steps=3), 64, 1.0, 0)  # compile (or load) first
        simulate_run_compiled(replace(full, steps=3), 131072, 1.0, 0)
        print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print("      N  whole  halves in turn  halves together  together / whole  (ms / step)")
        for N in sizes:
            times = {"whole": [], "turn": [], "together": []}
            for _ in range(args.repeats):
                times["whole"].append(whole(N))
                times["turn"].append(in_turn(N))
                times["together"].append(together(N))
            w, s, b = (1e3 * float(np.median(times[k])) / args.steps for k in times)
            print(f"{N:7d} {w:6.3f} {s:15.3f} {b:16.3f} {b / w:17.2f}", flush=True)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
