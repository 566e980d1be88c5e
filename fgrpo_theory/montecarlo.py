"""Monte Carlo estimators of P(A_N) and P(B_{E,N}) (checks of paper Lemma 3.1).

Each trial samples one group of N rollouts: every rollout falls in exactly one of the three
regions E (mass tau), C \\ E (mu - tau) or not-C (1 - mu), so the region counts of a group are
Multinomial(N; tau, mu - tau, 1 - mu). A group is active when 0 < #correct < N and a tail miss
when it is active with #E = 0. Randomness comes only from the Generator passed in.

    >>> import numpy as np
    >>> est = mc_p_tail_miss(0.3, 0.03, 8, trials=10_000, rng=np.random.default_rng(0))
    >>> abs(est.estimate - 0.726) < 4 * est.stderr
    True
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from fgrpo_common.checks import (
    broadcast,
    check_integer,
    check_probability,
    check_tau_le_mu,
    single,
)


class MonteCarloEstimate(NamedTuple):
    """A Monte Carlo frequency with its binomial standard error sqrt(p (1 - p) / trials): floats, or
    arrays of them when the inputs broadcast to an array."""

    estimate: float
    stderr: float
    trials: int


def simulate_group_regions(
    mu: float, tau: float, N: int, *, trials: int, rng: np.random.Generator
) -> np.ndarray:
    """Region counts (#E, #C\\E, #notC) of ``trials`` groups of N rollouts: shape (trials, 3)."""
    _check_rng(rng)
    mu = float(single("mu", check_probability("mu", mu)))
    tau = float(single("tau", check_probability("tau", tau)))
    check_tau_le_mu(np.asarray(mu), np.asarray(tau))
    N = single("N", check_integer("N", N, minimum=1))
    trials = single("trials", check_integer("trials", trials, minimum=1))
    pvals = np.array([tau, mu - tau, 1.0 - mu])
    return rng.multinomial(N, pvals / pvals.sum(), size=trials)


def _check_rng(rng) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got rng={rng!r}")


def _frequency(hits: np.ndarray) -> tuple[float, float]:
    p = float(hits.mean())
    return p, float(np.sqrt(p * (1.0 - p) / hits.size))


def _estimate(mu, tau, N, trials, rng, event) -> MonteCarloEstimate:
    _check_rng(rng)
    mu, tau = check_probability("mu", mu), check_probability("tau", tau)
    check_tau_le_mu(mu, tau)
    N = check_integer("N", N, minimum=1)
    trials = single("trials", check_integer("trials", trials, minimum=1))
    mu_b, tau_b, N_b = broadcast(mu=mu, tau=tau, N=N)
    est = np.empty(mu_b.shape)
    se = np.empty(mu_b.shape)
    for idx in np.ndindex(mu_b.shape):
        counts = simulate_group_regions(mu_b[idx], tau_b[idx], N_b[idx], trials=trials, rng=rng)
        est[idx], se[idx] = _frequency(event(counts, int(N_b[idx])))
    if mu_b.ndim == 0:
        return MonteCarloEstimate(float(est), float(se), int(trials))
    return MonteCarloEstimate(est, se, int(trials))


def _active(counts: np.ndarray, N: int) -> np.ndarray:
    X = counts[:, 0] + counts[:, 1]  # correct rollouts
    return (X > 0) & (X < N)


def mc_p_active(mu, N, *, trials: int, rng: np.random.Generator) -> MonteCarloEstimate:
    """Frequency of active groups A_N = {0 < X < N}; arrays broadcast (one run per element)."""
    return _estimate(mu, 0.0, N, trials, rng, _active)


def mc_p_tail_miss(mu, tau, N, *, trials: int, rng: np.random.Generator) -> MonteCarloEstimate:
    """Frequency of tail misses B_{E,N} = A_N and {#E = 0}; arrays broadcast."""
    return _estimate(
        mu, tau, N, trials, rng, lambda counts, N: _active(counts, N) & (counts[:, 0] == 0)
    )


__all__ = ["MonteCarloEstimate", "simulate_group_regions", "mc_p_active", "mc_p_tail_miss"]
