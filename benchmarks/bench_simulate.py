"""Throughput of the categorical simulator (``fgrpo_theory.simulate``) against a straightforward
one-run-at-a-time loop, measured in the same process on one core.

    OMP_NUM_THREADS=1 python benchmarks/bench_simulate.py [--steps 100] [--actions 128000] [--repeats 3]

The baseline is what one would write first: float64 softmax, ``rng.choice(K, N, p=p)``,
``np.add.at`` for the gradient, dense Adam and dense metrics, one run at a time. Both sides run
the paper-fig2 setting (Adam, ratio surrogate, centred advantage) for ``--steps`` steps at each
group size, interleaved and repeated ``--repeats`` times (median time per N: the machine is
shared); the table gives run-steps per second per N and the ratios, then the ratio over the
whole preset mix (every N weighted equally, as in paper-fig2). Early steps flatter the sparse
engine (few actions touched yet), so use at least 100 steps (the preset runs 1000). Target:
>= 10x overall.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from fgrpo_theory.simulate import PRESETS, simulate_batch, simulate_runs  # noqa: E402


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
        z = z + cfg.lr * (m / (1 - b1 ** (t + 1))) / (np.sqrt(v / (1 - b2 ** (t + 1))) + cfg.adam_eps)
    return out


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--actions", type=int, default=128_000)
    ap.add_argument("--correct", type=int, default=10_000)
    ap.add_argument("--group-sizes", default=",".join(str(2**k) for k in range(1, 18)))
    ap.add_argument("--repeats", type=int, default=3, help="timings per N and engine (median)")
    ap.add_argument("--no-dense", action="store_true", help="skip the dense engine")
    args = ap.parse_args()
    from dataclasses import replace

    cfg = replace(PRESETS["paper-fig2"], actions=args.actions, correct=args.correct, steps=args.steps)
    sizes = [int(n) for n in args.group_sizes.split(",")]
    engines = {"naive": lambda N: naive_run(cfg, N, 0.0, 0),
               "sparse": lambda N: simulate_runs(cfg, N, [(0.0, 0)], engine="sparse")}
    if not args.no_dense:
        engines["dense"] = lambda N: simulate_batch(cfg, N, [(0.0, 0)])
    print(f"K={cfg.actions} |P|={cfg.correct} steps={cfg.steps} repeats={args.repeats} "
          f"(one run per N, one core, median times)")
    print(f"{'N':>7} " + " ".join(f"{k + ' run-steps/s':>18}" for k in engines)
          + " " + " ".join(f"{k + '/naive':>13}" for k in engines if k != "naive"))
    tot = dict.fromkeys(engines, 0.0)
    warm = replace(cfg, steps=2)                    # imports and first-call costs off the clock
    naive_run(warm, 4, 0.0, 0), simulate_runs(warm, 4, [(0.0, 0)]), simulate_batch(warm, 4, [(0.0, 0)])
    for N in sizes:
        times = {k: [] for k in engines}
        for _ in range(args.repeats):               # interleaved, so load changes hit all alike
            for k, run in engines.items():
                times[k].append(_time(lambda: run(N)))
        t = {k: float(np.median(v)) for k, v in times.items()}
        for k in engines:
            tot[k] += t[k]
        print(f"{N:7d} " + " ".join(f"{cfg.steps / t[k]:18.1f}" for k in engines)
              + " " + " ".join(f"{t['naive'] / t[k]:12.1f}x" for k in engines if k != "naive"), flush=True)
    n = len(sizes) * cfg.steps
    print("overall run-steps/s: " + ", ".join(f"{k} {n / tot[k]:.1f}" for k in engines)
          + "; speed-up " + ", ".join(f"{k}/naive {tot['naive'] / tot[k]:.1f}x" for k in engines if k != "naive"))


if __name__ == "__main__":
    main()
