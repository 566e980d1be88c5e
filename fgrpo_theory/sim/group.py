"""What one sampled group gives the categorical simulator: the advantages of its correct and
incorrect draws, the focal weight, and the per-step records (paper Section 5.1, Eq. 11-13,
Lemma 3.1).

A group of N draws with X correct ones has rewards R_c (X times) and R_w (N - X times), so every
advantage is one of two numbers (r_c, r_w): ``group_advantages`` gives them in closed form,
O(1) instead of O(N) per step (tested against the reference ``fgrpo_theory.advantages``). The
weight g = w(X/N) ((1 - X/N)^gamma for the focal one) depends on X only, so ``focal_table``
tabulates g / N for X = 0..N once per run, for any weighting (``fgrpo_theory.weighting``).

    >>> import numpy as np
    >>> r_c, r_w = group_advantages(np.array([1]), 4, R_c=1.0, R_w=-1.0, kind="centered")
    >>> float(r_c[0]), float(r_w[0])
    (1.5, -0.5)
"""

from __future__ import annotations

import math

import numpy as np

from fgrpo_theory.tail_miss import p_tail_miss
from fgrpo_theory.weighting import series

#: The records of a run: policy quantities at t = 0..T, group quantities for t = 0..T-1.
POLICY_RECORDS = ("q_pos", "m_ret", "entropy", "tau")
GROUP_RECORDS = ("q_u_pos", "p_tail_miss", "mu_hat", "tail_miss")

#: GRPO's eps added to the (Bessel) std, verl's convention (``advantages.VERL_CONVENTION``).
GRPO_EPS = 1e-6


def group_advantages(X: np.ndarray, N: int, *, R_c: float, R_w: float, kind: str):
    """Advantages (r_c, r_w) of a correct / incorrect draw for groups with X correct of N (R,).

    centered: r = R - mean (App. J). grpo: (R - mean) / (std + 1e-6), Bessel std (verl's
    convention; std = 0 when N = 1). raw: r = R."""
    X = X.astype(np.float64)
    if kind == "raw":
        return np.full_like(X, R_c), np.full_like(X, R_w)
    mean = (X * R_c + (N - X) * R_w) / N
    r_c, r_w = R_c - mean, R_w - mean
    if kind == "grpo":
        var = (R_c - R_w) ** 2 * X * (N - X) / (N * max(N - 1, 1))
        scale = 1.0 / (np.sqrt(var) + GRPO_EPS)
        r_c, r_w = r_c * scale, r_w * scale
    return r_c, r_w


def scalar_advantages(X: int, N: int, *, R_c: float, R_w: float, kind: str):
    """``group_advantages`` for one group, as Python floats: the same operations in the same
    order on scalars (bit for bit the same numbers, without numpy's per-call cost)."""
    X = float(X)
    if kind == "raw":
        return float(R_c), float(R_w)
    mean = (X * R_c + (N - X) * R_w) / N
    r_c, r_w = R_c - mean, R_w - mean
    if kind == "grpo":
        var = (R_c - R_w) ** 2 * X * (N - X) / (N * max(N - 1, 1))
        scale = 1.0 / (math.sqrt(var) + GRPO_EPS)
        r_c, r_w = r_c * scale, r_w * scale
    return float(r_c), float(r_w)


def focal_table(N: int, gamma, weighting: str = "focal") -> np.ndarray:
    """g / N for every possible X = 0..N, (R, N + 1): row j is w(X / N) / N of the weighting
    ``weighting`` (a rule's name, ``fgrpo_theory.weighting``) at ``gamma[j]`` (ignored by a rule
    without an exponent): (1 - X/N)^gamma / N for "focal"."""
    gamma = np.atleast_1d(np.asarray(gamma, dtype=np.float64))
    return np.stack([series(weighting, g).table(N) for g in gamma]) / N


def new_records(R: int, T: int) -> dict:
    """Empty records of R runs of T steps: (R, T + 1) policy, (R, T) group quantities."""
    rec = {k: np.empty((R, T + 1)) for k in POLICY_RECORDS}
    rec.update({k: np.empty((R, T)) for k in GROUP_RECORDS if k != "tail_miss"})
    rec["tail_miss"] = np.empty((R, T), dtype=bool)
    return rec


def record_group(rec, r, t, *, X, N, hit_rare, sampled_correct_mass, S, q_pos):
    """Group records at step t for run r (rows may be arrays for a batch)."""
    rec["mu_hat"][r, t] = X / N
    rec["tail_miss"][r, t] = (X > 0) & (X < N) & ~hit_rare
    rec["q_u_pos"][r, t] = q_pos - sampled_correct_mass / S


def out_of_range(N: int, t: int, lr: float | None) -> ValueError:
    """The error of a run whose policy left float64's range at step t: its logits overflowed (a
    huge lr, rewards or initial logits) or lie further apart than float64 reaches, so its
    masses, normaliser or entropy are no longer numbers."""
    lower = "lower lr" if lr is None else f"lower lr={lr:g}"
    return ValueError(
        f"the simulated policy left float64's range at step {t} of the run at N={N} (its logits "
        f"overflowed or lie over ~1.8e308 apart): {lower}, or bring the rewards or initial "
        "logits closer"
    )


def finish_records(rec, N: int, *, lr: float | None = None) -> dict:
    """Lemma 3.1 at the (mu, tau) = (Q_pos, tau) each group was drawn from, all steps at once.
    Q_pos and tau are sums of probabilities: rounding can put them an ulp outside [0, 1] (a
    policy with all its mass on correct actions), so they are clipped into it first.
    A ValueError (``out_of_range``; ``lr`` named in it) when a record is not a finite number."""
    for key in POLICY_RECORDS + ("q_u_pos", "mu_hat"):
        bad = ~np.isfinite(rec[key])
        if bad.any():
            raise out_of_range(N, int(np.flatnonzero(bad.any(axis=0))[0]), lr)
    for key in ("q_pos", "tau", "q_u_pos"):
        np.clip(rec[key], 0.0, 1.0, out=rec[key])
    mu, tau = rec["q_pos"][:, :-1], rec["tau"][:, :-1]
    rec["p_tail_miss"][:] = p_tail_miss(mu, np.minimum(tau, mu), N)
    return rec
