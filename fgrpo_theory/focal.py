"""Focal weighting of group advantages (paper Section 4, Eq. 11-13, Fig. 4).

F-GRPO multiplies every advantage of a group by one scalar

    g(x) = (1 - mu_hat)^gamma,      mu_hat = X / N  (the group's raw success rate),

after the mean/std normalisation; gamma = 0 recovers the base method exactly. This module holds
g itself, the focal-scaled advantage magnitudes of paper Fig. 4 and the learning-rate multiplier
m_gamma of the paper's "low-LR" control.

    >>> from fgrpo_theory.focal import focal_weight, lr_multiplier
    >>> float(focal_weight(0.75, 1.0)), round(float(lr_multiplier(0.5)), 3)
    (0.25, 0.679)
"""

from __future__ import annotations

import numpy as np

from fgrpo_common.checks import broadcast, check_nonnegative, check_probability


def _out(x: np.ndarray):
    x = np.asarray(x)
    return x[()] if x.ndim == 0 else x


def focal_weight(mu_hat, gamma):
    """g = (1 - mu_hat)^gamma (Eq. 11), with 0^0 = 1 so that gamma = 0 is the base method.

    Computed as exp(gamma log1p(-mu_hat)): 1 - mu_hat loses mu_hat below an ulp of 1, which a
    large gamma would amplify (g(1e-300, 1e300) = e^-1, not 1).

    Args:
        mu_hat: empirical success rate X / N of the group, in [0, 1].
        gamma: focal exponent, >= 0.
    """
    mu_hat = check_probability("mu_hat", mu_hat)
    gamma = check_nonnegative("gamma", gamma)
    mu_hat, gamma = broadcast(mu_hat=mu_hat, gamma=gamma)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.exp(gamma * np.log1p(-mu_hat))
    return _out(np.where(gamma == 0, 1.0, g))


def focal_advantage_magnitudes(mu, gamma):
    """Focal-scaled advantage magnitudes g * |A| of correct and incorrect rollouts (Fig. 4).

    For a group whose success rate equals mu, with population std and eps -> 0,
    |A+| = sqrt((1 - mu) / mu) and |A-| = sqrt(mu / (1 - mu)); with g = (1 - mu)^gamma:

        pos = (1 - mu)^(gamma + 1/2) / sqrt(mu),     neg = (1 - mu)^(gamma - 1/2) * sqrt(mu).

    Args:
        mu: success rate, in the open interval (0, 1).
        gamma: focal exponent, >= 0.

    Returns:
        (pos, neg), broadcast over mu and gamma.
    """
    mu = check_probability("mu", mu, open_low=True, open_high=True)
    gamma = check_nonnegative("gamma", gamma)
    mu, gamma = broadcast(mu=mu, gamma=gamma)
    log_1m = np.log1p(-mu)  # log(1 - mu) without rounding 1 - mu (mu tiny, gamma huge)
    pos = np.exp((gamma + 0.5) * log_1m) / np.sqrt(mu)
    neg = np.exp((gamma - 0.5) * log_1m) * np.sqrt(mu)
    return _out(pos), _out(neg)


def lr_multiplier(gamma):
    """m_gamma = B(3/2, gamma + 3/2) / B(3/2, 3/2): learning-rate matching (paper Section 5.2).

    The mean focal weight E[(1 - mu)^gamma] for mu ~ Beta(3/2, 3/2); the paper's low-LR control
    trains the baseline at lr * m_gamma. m_0.5 = 0.679, m_1 = 1/2, m_2 = 5/16.

    With x = gamma + 3/2 and B(3/2, 3/2) = pi / 8,

        m_gamma = (4 / sqrt(pi)) Gamma(x) / Gamma(x + 3/2) = (4 / sqrt(pi)) x^(-3/2) S(x),

    where log S(x) = -(x + 1) log1p(3 / (2x)) + 3/2 + c(x) - c(x + 3/2) by Stirling's series
    c(z) = sum_k B_2k / (2k (2k - 1) z^(2k - 1)), used for x >= 10; below, the recurrence
    Gamma(x) / Gamma(x + 3/2) = (x + 3/2) / x * Gamma(x + 1) / Gamma(x + 5/2) lifts x to 10.
    A difference of log-Beta values (each ~gamma log gamma) would lose gamma log gamma ulp of
    them: a relative error of 2.7e-10 at gamma = 1e6; this is within a few ulp.
    """
    gamma = check_nonnegative("gamma", gamma)
    x = gamma + 1.5
    lift = np.maximum(np.ceil(_STIRLING_FROM - x), 0.0)  # steps to reach x >= 10
    num = np.ones_like(x)
    den = np.ones_like(x)
    for k in range(int(lift.max(initial=0.0))):
        step = k < lift
        num = np.where(step, num * (x + k + 1.5), num)
        den = np.where(step, den * (x + k), den)
    y = x + lift  # >= 10
    log_S = -(y + 1.0) * np.log1p(1.5 / y) + 1.5 + _stirling_tail(y) - _stirling_tail(y + 1.5)
    with np.errstate(under="ignore"):
        m = (4.0 / np.sqrt(np.pi)) * (num / den) * (y**-1.5 * np.exp(log_S))
    return _out(np.where(gamma == 0, 1.0, m))


#: Stirling's series is used from this argument up (its 7 terms then err below 1e-17).
_STIRLING_FROM = 10.0
#: B_2k / (2k (2k - 1)) for k = 1..7: Stirling's series of log Gamma(z).
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156)


def _stirling_tail(z: np.ndarray) -> np.ndarray:
    """c(z) = log Gamma(z) - (z - 1/2) log z + z - log(2 pi) / 2, for z >= 10 (Horner in 1/z^2)."""
    inv = 1.0 / z
    with np.errstate(under="ignore"):
        w = inv * inv
    acc = np.zeros_like(z)
    for coef in reversed(_STIRLING):
        acc = acc * w + coef
    return acc * inv


__all__ = ["focal_weight", "focal_advantage_magnitudes", "lr_multiplier"]
