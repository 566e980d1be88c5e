"""Group-relative advantages: the numpy reference (paper Section 2 and Eq. 11-13).

The torch code in ``fgrpo_llm`` is tested against these functions. Rewards have shape (..., N):
the last axis is the group of N rollouts of one prompt, leading axes are prompts.

    GRPO z-score      A_i = (R_i - mean_j R_j) / (std_j R_j + eps)
    mean-centred      A_i = R_i - mean_j R_j        (categorical simulation, paper Section 5.1)
    focal (F-GRPO)    A_i^F = g * A_i^GRPO,  g = (1 - mu_hat)^gamma,
                      mu_hat = (mean_j R_j - R_w) / (R_c - R_w)

The std convention and eps are explicit, because implementations differ:
TRL uses the Bessel-corrected std (divide by N - 1) with eps = 1e-4; verl uses Bessel with
eps = 1e-6 (``TRL_CONVENTION`` / ``VERL_CONVENTION`` below, usable as ``**TRL_CONVENTION``).
The population std (divide by N) is the convention of the paper's Fig. 4 magnitudes.
A group of equal rewards gets A = 0 exactly: it is detected by max == min, not by a std that
rounding leaves a hair above zero.

    >>> import numpy as np
    >>> grpo_advantages(np.array([1.0, 0.0, 0.0, 0.0]), std="population", eps=0.0)
    array([ 1.73205081, -0.57735027, -0.57735027, -0.57735027])
"""

from __future__ import annotations

import numpy as np

from fgrpo_common.checks import as_float_array, check_nonnegative, check_real_scalar

#: TRL's GRPOTrainer: Bessel-corrected std, eps = 1e-4.
TRL_CONVENTION = {"std": "bessel", "eps": 1e-4}
#: verl's GRPO advantage estimator: Bessel-corrected std, eps = 1e-6.
VERL_CONVENTION = {"std": "bessel", "eps": 1e-6}

_STD_DDOF = {"bessel": 1, "population": 0}


def _rewards(rewards) -> np.ndarray:
    R = as_float_array("rewards", rewards)
    if R.ndim == 0:
        raise ValueError(
            f"rewards must have a group axis (..., N), got a scalar rewards={R.item()}"
        )
    if not np.isfinite(R).all():
        raise ValueError(f"rewards must be finite, got rewards={R[~np.isfinite(R)].ravel()[0]}")
    return R


def _constant_groups(R: np.ndarray) -> np.ndarray:
    """True for each group whose rewards are all equal, shape (..., 1): decided exactly by
    max == min, never by a std that rounding leaves a hair above 0 (eight rewards of 0.7)."""
    return R.max(axis=-1, keepdims=True) == R.min(axis=-1, keepdims=True)


def _check_std_eps(std, eps) -> float:
    if not isinstance(std, str) or std not in _STD_DDOF:
        raise ValueError(f"std must be 'bessel' or 'population', got std={std!r}")
    eps = check_real_scalar("eps", eps)
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got eps={eps}")
    return eps


def mean_centred_advantages(rewards) -> np.ndarray:
    """A_i = R_i - mean_j R_j over the last axis (shape (..., N) in and out); exactly 0 in a
    group of equal rewards."""
    R = _rewards(rewards)
    constant = _constant_groups(R)  # (..., 1)
    s = np.where(constant, 1.0, np.abs(R).max(axis=-1, keepdims=True))  # (..., 1), > 0
    mean = s * (R / s).mean(axis=-1, keepdims=True)  # no overflow in the sum
    return np.where(constant, 0.0, R - mean)


def grpo_advantages(rewards, *, std: str, eps: float) -> np.ndarray:
    """A_i = (R_i - mean_j R_j) / (std_j R_j + eps) over the last axis (shape (..., N)).

    A group whose rewards are all equal gets A = 0 exactly (any eps, any reward values).

    Args:
        rewards: array (..., N).
        std: "bessel" (divide by N - 1; TRL, verl) or "population" (divide by N).
        eps: added to the std, >= 0.
    """
    R = _rewards(rewards)
    eps = _check_std_eps(std, eps)
    N = R.shape[-1]
    if std == "bessel" and N < 2:
        raise ValueError(f"the Bessel std needs a group of N >= 2, got N={N}")
    # (R - mean) / (std + eps) = (R/s - mean(R/s)) / (std(R/s) + eps/s) with s = max |R| of the
    # group: the same value, without overflow for rewards near the float64 limit.
    constant = _constant_groups(R)  # (..., 1)
    s = np.abs(R).max(axis=-1, keepdims=True)
    s = np.where(constant, 1.0, s)  # (..., 1), > 0
    Rs = R / s
    centred = Rs - Rs.mean(axis=-1, keepdims=True)
    sd = Rs.std(axis=-1, ddof=_STD_DDOF[std], keepdims=True)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        A = centred / (sd + eps / s)  # 0 / 0 in a constant group with eps = 0: replaced below
    return np.where(constant, 0.0, A)


def _check_rewards_in_range(rewards, reward_correct, reward_wrong):
    R = _rewards(rewards)
    reward_correct = check_real_scalar("reward_correct", reward_correct)
    reward_wrong = check_real_scalar("reward_wrong", reward_wrong)
    if not reward_correct > reward_wrong:
        raise ValueError(
            f"reward_correct must exceed reward_wrong, got reward_correct={reward_correct}, "
            f"reward_wrong={reward_wrong}"
        )
    bad = (R < reward_wrong) | (R > reward_correct)
    if bad.any():
        raise ValueError(
            f"rewards must lie in [reward_wrong, reward_correct] = [{reward_wrong}, "
            f"{reward_correct}], got rewards={R[bad].ravel()[0]}"
        )
    # everything divided by s = max(|R_c|, |R_w|) (exact up to rounding of each quotient): the
    # span R_c - R_w then neither overflows (R_w = -1e308) nor underflows (R_c = 5e-324)
    s = max(abs(reward_correct), abs(reward_wrong))
    return R / s, reward_correct / s, reward_wrong / s


def group_success_rate(
    rewards, *, reward_correct: float = 1.0, reward_wrong: float = 0.0
) -> np.ndarray:
    """mu_hat = (mean_j R_j - R_w) / (R_c - R_w), shape (...,); rewards must lie in [R_w, R_c]."""
    R, c, w = _check_rewards_in_range(rewards, reward_correct, reward_wrong)
    mu_hat = ((R - w) / (c - w)).mean(axis=-1)
    return np.clip(mu_hat, 0.0, 1.0)  # rounding of the mean can step a hair outside [0, 1]


def group_failure_rate(
    rewards, *, reward_correct: float = 1.0, reward_wrong: float = 0.0
) -> np.ndarray:
    """1 - mu_hat = (R_c - mean_j R_j) / (R_c - R_w), shape (...,), computed as itself: 1 - mu_hat
    from a mu_hat rounded to 1 would be 0 (R_w = -2^63, one success in four: 8.1e-20)."""
    R, c, w = _check_rewards_in_range(rewards, reward_correct, reward_wrong)
    return np.clip(((c - R) / (c - w)).mean(axis=-1), 0.0, 1.0)


def _scalar_gamma(gamma) -> float:
    """The focal exponent of a call: one number, never an array broadcast over the groups."""
    if np.ndim(gamma) != 0:
        raise TypeError(f"gamma must be a single number, got an array of shape {np.shape(gamma)}")
    return float(check_nonnegative("gamma", gamma))


def focal_group_weights(
    rewards, *, gamma: float, reward_correct: float = 1.0, reward_wrong: float = 0.0
) -> np.ndarray:
    """g = (1 - mu_hat)^gamma per group, shape (...,), from the raw rewards of that group only.

    g = (1 - mu_hat)^gamma with 1 - mu_hat from ``group_failure_rate`` (a correctly rounded
    power, not exp(gamma log(.)), which loses |log(1 - mu_hat)| ulp); gamma = 0 gives g = 1
    (0^0 = 1, the base method)."""
    gamma = _scalar_gamma(gamma)
    miss = group_failure_rate(rewards, reward_correct=reward_correct, reward_wrong=reward_wrong)
    if gamma == 0:
        return np.ones_like(miss)
    with np.errstate(under="ignore"):
        return np.power(miss, gamma)


def focal_advantages(
    rewards,
    *,
    gamma: float,
    reward_correct: float = 1.0,
    reward_wrong: float = 0.0,
    std: str,
    eps: float,
) -> np.ndarray:
    """A_i^F = g * A_i^GRPO with g = (1 - mu_hat)^gamma (Eq. 11-13), shape (..., N).

    The weight multiplies the advantage after the mean/std normalisation and changes nothing
    else; gamma = 0 returns ``grpo_advantages`` exactly.
    """
    g = focal_group_weights(
        rewards, gamma=gamma, reward_correct=reward_correct, reward_wrong=reward_wrong
    )  # (...,)
    return g[..., None] * grpo_advantages(rewards, std=std, eps=eps)  # (..., N)


__all__ = [
    "TRL_CONVENTION",
    "VERL_CONVENTION",
    "grpo_advantages",
    "mean_centred_advantages",
    "group_success_rate",
    "group_failure_rate",
    "focal_group_weights",
    "focal_advantages",
]
