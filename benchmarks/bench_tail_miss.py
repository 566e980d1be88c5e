"""Throughput and accuracy of P(B_{E,N}) (Lemma 3.1) on one core.

    OMP_NUM_THREADS=1 python benchmarks/bench_tail_miss.py [--points 10000000]

Times ``tail_miss.p_tail_miss`` over a grid of (mu, rho, N) points, times the naive three-term
formula in a plain-Python float loop on a subset, and measures the worst relative error of both
against mpmath (60+ digits) on a random sample that includes the hard corners (tau down to 1e-12,
N up to 1e7, mu within 1e-9 of 0 or 1). Prints a short table. Target: >= 1e7 evaluations/s.
"""

from __future__ import annotations

import argparse
import math
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import mpmath  # noqa: E402
import numpy as np  # noqa: E402

from fgrpo_theory.tail_miss import p_tail_miss  # noqa: E402


def grid(points: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A points-sized grid: mu x rho x N (N = 1..2^20 on a log scale)."""
    side = max(2, round(points ** (1 / 3)))
    mu = np.linspace(1e-3, 1 - 1e-3, side)
    rho = np.geomspace(1e-6, 1.0, side)
    N = np.unique(np.round(np.geomspace(1, 2**20, side)))
    mu, rho, N = (x.ravel() for x in np.meshgrid(mu, rho, N, indexing="ij"))
    reps = -(-points // mu.size)
    mu, rho, N = (np.tile(x, reps)[:points] for x in (mu, rho, N))
    return mu, rho * mu, N


def naive_loop(mu, tau, N) -> list[float]:
    return [
        (1.0 - t) ** n - (m - t) ** n - (1.0 - m) ** n for m, t, n in zip(mu, tau, N, strict=True)
    ]


def hard_sample(size: int, rng: np.random.Generator):
    r = rng.random(size)
    mu = np.where(
        r < 0.3,
        10 ** rng.uniform(-9, 0, size),
        np.where(r < 0.6, 1 - 10 ** rng.uniform(-9, 0, size), rng.random(size)),
    )
    t = rng.random(size)
    tau = np.where(
        t < 0.5,
        mu * 10 ** rng.uniform(-12, 0, size),
        np.minimum(mu, 10 ** rng.uniform(-12, 0, size)),
    )
    N = np.floor(10 ** rng.uniform(0, 7, size))
    return mu, tau, N


def mp_reference(mu: float, tau: float, N: float):
    masses = [m for m in (mu, tau, mu - tau, 1 - mu) if m > 0]
    with mpmath.workdps(60 + 2 * int(max([0.0] + [-math.log10(m) for m in masses]))):
        mu, tau, N = mpmath.mpf(mu), mpmath.mpf(tau), mpmath.mpf(N)
        return +((1 - tau) ** N - (mu - tau) ** N - (1 - mu) ** N)


def worst_rel_error(values, mu, tau, N) -> float:
    worst = 0.0
    for v, m, t, n in zip(values, mu, tau, N, strict=True):
        ref = mp_reference(float(m), float(t), float(n))
        if ref != 0 and abs(ref) < 1e-300:
            continue  # subnormal reference: compare in log space instead (tests do)
        err = abs(float(v)) if ref == 0 else float(abs(mpmath.mpf(float(v)) / ref - 1))
        worst = max(worst, min(err, 1.0))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10_000_000)
    parser.add_argument("--loop-points", type=int, default=200_000)
    parser.add_argument("--accuracy-points", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    mu, tau, N = grid(args.points)
    p_tail_miss(mu[:1000], tau[:1000], N[:1000])  # warm-up
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        p_tail_miss(mu, tau, N)
        times.append(time.perf_counter() - start)
    vec_rate = args.points / min(times)

    sub = slice(0, args.loop_points)
    m_l, t_l, n_l = mu[sub].tolist(), tau[sub].tolist(), N[sub].tolist()
    start = time.perf_counter()
    naive_loop(m_l, t_l, n_l)
    loop_rate = args.loop_points / (time.perf_counter() - start)

    rng = np.random.default_rng(0)
    hm, ht, hN = hard_sample(args.accuracy_points, rng)
    err_ours = worst_rel_error(p_tail_miss(hm, ht, hN), hm, ht, hN)
    err_naive = worst_rel_error(naive_loop(hm.tolist(), ht.tolist(), hN.tolist()), hm, ht, hN)

    print(f"P(B_E,N) on one core, {args.points:,} grid points (best of {args.repeats})")
    print(f"{'implementation':<34} {'evals/s':>12} {'ratio':>8} {'worst rel. err':>15}")
    print(
        f"{'fgrpo_theory.tail_miss (numpy)':<34} {vec_rate:>12.3e} {vec_rate / loop_rate:>8.1f} "
        f"{err_ours:>15.2e}"
    )
    print(
        f"{'naive formula, Python float loop':<34} {loop_rate:>12.3e} {1.0:>8.1f} "
        f"{err_naive:>15.2e}"
    )
    print(
        f"target >= 1e7 evals/s: {'met' if vec_rate >= 1e7 else 'NOT met'}; "
        f"accuracy sample: {args.accuracy_points} points vs mpmath, tau >= 1e-12, N <= 1e7, "
        f"mu within 1e-9 of 0 or 1 included"
    )


if __name__ == "__main__":
    main()
