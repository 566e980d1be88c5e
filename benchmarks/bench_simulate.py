"""Throughput of the categorical simulator (``fgrpo_theory.simulate``) against a straightforward
one-run-at-a-time loop, measured in the same process on one core.

    OMP_NUM_THREADS=1 python benchmarks/bench_simulate.py [--steps 100] [--actions 128000]

The baseline is what one would write first: float64 softmax, ``rng.choice(K, N, p=p)``,
``np.add.at`` for the gradient, dense Adam and dense metrics, one run at a time. Both sides run
the paper-fig2 setting (Adam, ratio surrogate, centred advantage) for ``--steps`` steps at each
group size; the table gives run-steps per second per N and the ratio, then the ratio over the
whole preset mix (every N weighted equally, as in paper-fig2). Early steps flatter the sparse
engine (few actions touched yet), so use at least 100 steps. Target: >= 10x overall.
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
    args = ap.parse_args()
    from dataclasses import replace

    cfg = replace(PRESETS["paper-fig2"], actions=args.actions, correct=args.correct, steps=args.steps)
    sizes = [int(n) for n in args.group_sizes.split(",")]
    print(f"K={cfg.actions} |P|={cfg.correct} steps={cfg.steps} (one run per N, one core)")
    print(f"{'N':>7} {'naive run-steps/s':>18} {'sparse':>10} {'dense':>10} {'ratio(sparse)':>14}")
    tot = {"naive": 0.0, "sparse": 0.0, "dense": 0.0}
    warm = replace(cfg, steps=2)                    # imports and first-call costs off the clock
    naive_run(warm, 4, 0.0, 0), simulate_runs(warm, 4, [(0.0, 0)]), simulate_batch(warm, 4, [(0.0, 0)])
    for N in sizes:
        t_naive = _time(lambda: naive_run(cfg, N, 0.0, 0))
        t_sparse = _time(lambda: simulate_runs(cfg, N, [(0.0, 0)], engine="sparse"))
        t_dense = _time(lambda: simulate_batch(cfg, N, [(0.0, 0)]))
        for k, dt in (("naive", t_naive), ("sparse", t_sparse), ("dense", t_dense)):
            tot[k] += dt
        print(f"{N:7d} {cfg.steps / t_naive:18.1f} {cfg.steps / t_sparse:10.1f} {cfg.steps / t_dense:10.1f}"
              f" {t_naive / t_sparse:13.1f}x")
    n = len(sizes) * cfg.steps
    print(f"overall: naive {n / tot['naive']:.1f}, sparse {n / tot['sparse']:.1f}, dense {n / tot['dense']:.1f}"
          f" run-steps/s; speed-up sparse/naive {tot['naive'] / tot['sparse']:.1f}x,"
          f" dense/naive {tot['naive'] / tot['dense']:.1f}x")


if __name__ == "__main__":
    main()
