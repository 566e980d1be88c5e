"""Throughput of the categorical simulator (``fgrpo_theory.sim``, paper Section 5.1 / App. J)
against a straightforward one-run-at-a-time loop, and the wall time of the paper-fig2 sweep,
all measured in the same run.

    python benchmarks/bench_simulate.py [--steps 100] [--repeats 3] [--no-sweep] [--no-baseline]

Part 1, one run at a time: the baseline is what one would write first (float64 softmax,
``rng.choice(K, N, p=p)``, ``np.add.at`` for the gradient, dense Adam and dense metrics, on one
core). It, the numpy sparse engine and the compiled engine (one core each), and the split
engine (the compiled engine with the run over two cores, where there are two) run the
paper-fig2 setting (Adam, ratio surrogate, centred advantage) for ``--steps`` steps at each
group size, interleaved and repeated ``--repeats`` times (median: the machine may be shared);
the table gives run-steps per second and the ratios to the baseline at every N. Target:
>= 10x at every N.

Part 2: the whole paper-fig2 sweep (136 runs of 1000 steps) with ``--workers`` processes on the
compiled engine, and (unless ``--no-baseline``) on the numpy sparse engine, the baseline; wall
and CPU time, their ratio, and the agreement check of the engines' contract
(``fgrpo_theory.sim.agreement``: final Q_pos and M_ret in distribution over seeds, with the
largest difference of a run's final values beside it). Target: <= 30 s wall on 2 idle cores.
The load average is printed before and after: a number measured on a loaded machine says so.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from functools import partial

import numpy as np

from fgrpo_theory.sim import PRESETS, run_sweep, simulate_runs, split
from fgrpo_theory.sim.threads import pinned


def naive_run(cfg, N: int, gamma: float, seed: int) -> dict:
    """The straightforward loop: one run, dense float64 everything."""
    K, C, E = cfg.actions, cfg.correct, cfg.rare
    rng = np.random.default_rng([seed, N])
    z = cfg.logits0().copy()
    m, v = np.zeros(K), np.zeros(K)
    b1, b2 = cfg.adam_betas
    p0 = np.exp(z - z.max())
    p0 /= p0.sum()
    out = {"q_pos": [], "m_ret": [], "entropy": [], "tail_miss": []}
    for t in range(cfg.steps):
        p = np.exp(z - z.max())
        p /= p.sum()
        out["q_pos"].append(p[:C].sum())
        out["m_ret"].append(1 - np.maximum(p0[:C] - p[:C], 0).sum() / p0[:C].sum())
        out["entropy"].append(-(p * np.log(p)).sum())
        a = rng.choice(K, size=N, p=p)
        rewards = np.where(a < C, cfg.reward_correct, cfg.reward_wrong)
        X = (a < C).sum()
        out["tail_miss"].append(0 < X < N and not ((a >= 1) & (a < 1 + E)).any())
        r = rewards - rewards.mean()
        grad = np.zeros(K)
        np.add.at(grad, a, r)
        grad -= p * r.sum()
        grad *= (1 - X / N) ** gamma / N
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad**2
        z = z + cfg.lr * (m / (1 - b1 ** (t + 1))) / (
            np.sqrt(v / (1 - b2 ** (t + 1))) + cfg.adam_eps
        )
    return out


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _cpu() -> float:
    """CPU seconds of this process and its finished children."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def per_group_size(cfg, sizes, repeats: int) -> None:
    from dataclasses import replace

    engines = {
        "naive": lambda c, N: naive_run(c, N, 0.0, 0),
        "sparse": lambda c, N: simulate_runs(c, N, [(0.0, 0)], engine="sparse"),
        "compiled": lambda c, N: simulate_runs(c, N, [(0.0, 0)], engine="compiled"),
        "split": lambda c, N: simulate_runs(c, N, [(0.0, 0)], engine="split"),
    }
    why = split.unavailable_reason(cfg)
    if why:
        del engines["split"]
        print(f"(the split engine does not run here: {why})")
    print(
        f"part 1: K={cfg.actions} |P|={cfg.correct} steps={cfg.steps} repeats={repeats} "
        f"(one run per N, median times; split: two cores, the others one)"
    )
    print(
        f"{'N':>7} "
        + " ".join(f"{k + ' run-steps/s':>20}" for k in engines)
        + " "
        + " ".join(f"{k + '/naive':>15}" for k in engines if k != "naive")
    )
    warm = replace(cfg, steps=2)  # compilation and first calls off the clock
    for run in engines.values():
        run(warm, 4), run(warm, 65536)
    tot = dict.fromkeys(engines, 0.0)
    fast = [k for k in ("compiled", "split") if k in engines]
    worst = dict.fromkeys(fast, np.inf)
    for N in sizes:
        times = {k: [] for k in engines}
        for _ in range(repeats):  # interleaved, so load changes hit all alike
            for k, run in engines.items():
                times[k].append(_time(partial(run, cfg, N)))
        t = {k: float(np.median(v)) for k, v in times.items()}
        for k in engines:
            tot[k] += t[k]
        for k in fast:
            worst[k] = min(worst[k], t["naive"] / t[k])
        print(
            f"{N:7d} "
            + " ".join(f"{cfg.steps / t[k]:20.1f}" for k in engines)
            + " "
            + " ".join(f"{t['naive'] / t[k]:14.1f}x" for k in engines if k != "naive"),
            flush=True,
        )
    n = len(sizes) * cfg.steps
    print(
        "overall run-steps/s: "
        + ", ".join(f"{k} {n / tot[k]:.1f}" for k in engines)
        + "; speed-up "
        + ", ".join(f"{k}/naive {tot['naive'] / tot[k]:.1f}x" for k in engines if k != "naive")
        + "; smallest over N: "
        + ", ".join(f"{k}/naive {worst[k]:.1f}x" for k in fast)
        + " (target >= 10x)",
        flush=True,
    )


def sweep(workers: int, baseline: bool) -> None:
    cfg = PRESETS["paper-fig2"]
    runs = len(cfg.group_sizes) * len(cfg.gammas) * len(cfg.seeds)
    print(
        f"part 2: the paper-fig2 sweep ({runs} runs of {cfg.steps} steps), --workers "
        f"{workers}; {_load()}",
        flush=True,
    )
    results = {}
    for engine in ("compiled", "sparse") if baseline else ("compiled",):
        c0, t0 = _cpu(), time.perf_counter()
        res = run_sweep(cfg, workers=workers, progress=False, engine=engine)
        wall, cpu = time.perf_counter() - t0, _cpu() - c0
        results[engine] = (wall, res)
        print(f"  {engine:9s} {wall:7.1f} s wall, {cpu:7.1f} s CPU ({_load()})", flush=True)
    wall = results["compiled"][0]
    verdict = "meets" if wall <= 30 else "misses"
    line = f"sweep wall time: {wall:.1f} s with {workers} workers ({verdict} the 30 s target)"
    if baseline:
        line += f"; numpy sparse engine / compiled: {results['sparse'][0] / wall:.2f}x"
    print(line, flush=True)
    if baseline:
        from fgrpo_theory.sim.agreement import compare_sweeps

        a, b = results["compiled"][1], results["sparse"][1]
        gap = max(
            float(np.abs(a.records[k][..., -1] - b.records[k][..., -1]).max())
            for k in ("q_pos", "m_ret")
        )
        print(
            f"agreement, compiled vs numpy sparse: {compare_sweeps(a, b).summary()}; largest "
            f"difference of a run's final Q_pos or M_ret: {gap:.2e}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--actions", type=int, default=128_000)
    ap.add_argument("--correct", type=int, default=10_000)
    ap.add_argument("--group-sizes", default=",".join(str(2**k) for k in range(1, 18)))
    ap.add_argument("--repeats", type=int, default=3, help="timings per N and engine (median)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes of the sweep")
    ap.add_argument("--no-sweep", action="store_true", help="skip part 2 (the fig2 sweep)")
    ap.add_argument(
        "--no-baseline", action="store_true", help="part 2 without the numpy sparse engine's sweep"
    )
    ap.add_argument("--no-per-n", action="store_true", help="skip part 1")
    args = ap.parse_args()
    from dataclasses import replace

    from fgrpo_common.cli import parse_list

    try:
        sizes = parse_list("--group-sizes", args.group_sizes, int)
    except ValueError as err:
        ap.error(str(err))
    print(f"bench_simulate: {os.cpu_count()} CPUs, {_load()}", flush=True)
    if not args.no_per_n:
        cfg = replace(
            PRESETS["paper-fig2"], actions=args.actions, correct=args.correct, steps=args.steps
        )
        with pinned(1):
            per_group_size(cfg, list(sizes), args.repeats)
    if not args.no_sweep:
        sweep(args.workers, not args.no_baseline)
    print(f"done; {_load()}")


if __name__ == "__main__":
    main()
