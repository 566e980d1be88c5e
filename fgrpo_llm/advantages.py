"""Group-relative advantages and the focal weight, in torch (paper Section 2, Eq. 11-13).

Rewards arrive as a (B, N) tensor: B prompts, N rollouts per prompt (the group). The numpy
functions of ``fgrpo_theory.advantages`` / ``fgrpo_theory.focal`` are the reference these are
tested against.

- GRPO:        A_i = (R_i - mean_j R_j) / (std_j R_j + eps)
- mean-centred: A_i = R_i - mean_j R_j (no std, as in the categorical simulation, paper Section 5.1)
- focal:       g = (1 - mu_hat)^gamma with mu_hat = X/N = (mean R - R_w) / (R_c - R_w), one scalar
               per group from the current group's raw outcomes only; A_i^F = g * A_i.
               gamma = 0 gives g = 1 (the base method exactly).
- any weighting (``fgrpo_theory.weighting``: "none", "focal:GAMMA", "maxrl" or a registered
  rule): ``weighted_advantages`` gives (g, A) from the rewards and the verifier's verdicts, the
  trainer's one call.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import torch

from fgrpo_theory.weighting import Weighting, focal, maxrl, resolve_weighting

__all__ = [
    "WeightedAdvantages",
    "weighted_advantages",
    "maxrl_advantages",
    "maxrl_weight",
    "grpo_advantages",
    "mean_centred_advantages",
    "group_success_rate",
    "success_rate",
    "focal_weight",
    "focal_advantages",
    "focal_metrics",
]

STD_CONVENTIONS = ("bessel", "population", "none")


def _check_scalar(name: str, value, *, minimum: float | None = None) -> float:
    """A finite real number (not a bool) as a Python float, optionally >= ``minimum``."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.dtype.is_complex:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # np.float32 is Real
        raise TypeError(
            f"{name} must be a real number, got {type(value).__name__} {name}={value!r}"
        )
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {name}={value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum:g}, got {name}={value}")
    return value


def _check_rewards(rewards: torch.Tensor) -> torch.Tensor:
    if not isinstance(rewards, torch.Tensor):
        raise TypeError(
            f"rewards must be a torch.Tensor of shape (B, N), got {type(rewards).__name__}"
        )
    if rewards.dtype == torch.bool or rewards.is_complex():
        raise TypeError(f"rewards must be real numbers, got dtype {rewards.dtype}")
    if rewards.ndim != 2 or rewards.shape[1] < 1 or rewards.shape[0] < 1:
        raise ValueError(
            f"rewards must have shape (B, N) with B, N >= 1, got shape {tuple(rewards.shape)}"
        )
    R = rewards.float() if not rewards.is_floating_point() else rewards
    bad = ~torch.isfinite(R)
    if bad.any():
        raise ValueError(f"rewards must be finite, got rewards={R[bad][0].item()}")
    return R


def _constant_groups(R: torch.Tensor) -> torch.Tensor:
    """True for each group whose rewards are all equal, (B, N) -> (B, 1): exactly, by max == min,
    never by a std that rounding leaves a hair above 0 (eight float32 rewards of 0.7)."""
    return R.amax(dim=1, keepdim=True) == R.amin(dim=1, keepdim=True)


def mean_centred_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """A_i = R_i - mean_j R_j per group, exactly 0 in a group of equal rewards. (B, N) -> (B, N)."""
    R = _check_rewards(rewards)
    A = R - R.mean(dim=1, keepdim=True)  # (B, N)
    return torch.where(_constant_groups(R), torch.zeros_like(A), A)


def grpo_advantages(
    rewards: torch.Tensor, *, std: str = "bessel", eps: float = 1e-6
) -> torch.Tensor:
    """A_i = (R_i - mean_j R_j) / (std_j R_j + eps) per group. (B, N) -> (B, N).

    ``std``: "bessel" (divide by N - 1, as TRL and verl; needs N >= 2),
    "population" (divide by N) or "none" (mean-centred only). ``eps`` (>= 0) is added to the std;
    verl uses 1e-6 (the default here), TRL 1e-4. A group whose rewards are all equal gets A = 0
    exactly (detected by max == min).
    """
    if not isinstance(std, str) or std not in STD_CONVENTIONS:
        raise ValueError(f"std must be one of {STD_CONVENTIONS}, got std={std!r}")
    eps = _check_scalar("eps", eps, minimum=0.0)
    A = mean_centred_advantages(rewards)  # (B, N), 0 in constant groups
    if std == "none":
        return A
    N = A.shape[1]
    if std == "bessel" and N < 2:
        raise ValueError(f"the Bessel std needs a group of N >= 2, got N={N}")
    sigma = A.pow(2).sum(dim=1, keepdim=True).div(N - 1 if std == "bessel" else N).sqrt()  # (B, 1)
    # A constant group has A = 0 exactly and sigma = 0: guard 0 / 0 when eps = 0.
    return torch.where(sigma > 0, A / (sigma + eps), torch.zeros_like(A))


def success_rate(correct: torch.Tensor) -> torch.Tensor:
    """mu_hat = X / N per group from the verifier's verdicts, the one the trainer uses.
    (B, N) bool -> (B,) float32."""
    if not isinstance(correct, torch.Tensor) or correct.dtype != torch.bool:
        raise TypeError(
            f"correct must be a bool torch.Tensor of verdicts, got "
            f"{getattr(correct, 'dtype', type(correct).__name__)}"
        )
    if correct.dim() != 2 or correct.shape[1] < 1:
        raise ValueError(f"correct must be (B, N) with N >= 1, got shape {tuple(correct.shape)}")
    return correct.sum(dim=1).float() / correct.shape[1]


def group_success_rate(
    rewards: torch.Tensor, *, reward_correct: float = 1.0, reward_wrong: float = 0.0
) -> torch.Tensor:
    """mu_hat = X/N = (mean_j R_j - R_w) / (R_c - R_w) per group, clipped to [0, 1].
    (B, N) -> (B,)."""
    reward_correct = _check_scalar("reward_correct", reward_correct)
    reward_wrong = _check_scalar("reward_wrong", reward_wrong)
    if not reward_correct > reward_wrong:
        raise ValueError(
            f"reward_correct must exceed reward_wrong, got reward_correct={reward_correct} "
            f"<= reward_wrong={reward_wrong}"
        )
    R = _check_rewards(rewards)
    return ((R.mean(dim=1) - reward_wrong) / (reward_correct - reward_wrong)).clamp(0.0, 1.0)


def focal_weight(mu_hat: torch.Tensor, *, gamma: float) -> torch.Tensor:
    """g = (1 - mu_hat)^gamma (Eq. 11), elementwise; gamma = 0 gives exactly 1 (also at mu_hat = 1).

    ``mu_hat`` is a tensor of success rates in [0, 1] (NaN or values outside are an error)."""
    gamma = _check_scalar("gamma", gamma, minimum=0.0)
    if not isinstance(mu_hat, torch.Tensor):
        raise TypeError(f"mu_hat must be a torch.Tensor, got {type(mu_hat).__name__}")
    if mu_hat.dtype == torch.bool or mu_hat.is_complex():
        raise TypeError(f"mu_hat must be real numbers, got dtype {mu_hat.dtype}")
    bad = ~((mu_hat >= 0) & (mu_hat <= 1))
    if bad.any():
        raise ValueError(f"mu_hat must lie in [0, 1], got mu_hat={mu_hat[bad][0].item()}")
    return focal(gamma).rule.weight_torch(mu_hat, gamma)  # (1 - mu_hat)^gamma, 1 at gamma = 0


def maxrl_weight(mu_hat: torch.Tensor) -> torch.Tensor:
    """MaxRL's success-rate weight w = sqrt((1 - mu_hat) / mu_hat) (0 at mu_hat = 0),
    elementwise: GRPO's advantage (population std, eps -> 0) times w is MaxRL's
    (``maxrl_advantages``; ``fgrpo_theory.weighting.maxrl`` in numpy)."""
    return maxrl().rule.weight_torch(mu_hat, 0.0)


def maxrl_advantages(correct: torch.Tensor) -> torch.Tensor:
    """MaxRL's advantages (arXiv 2602.02710) on the verifier's verdicts, per group (row):

        A_i = (r_i - mu_hat) / mu_hat,   r_i in {0, 1},   mu_hat = X / N,

    0 for a group with X = 0. On 0/1 rewards this is GRPO's advantage (population std,
    eps -> 0) times w(mu_hat) = sqrt((1 - mu_hat) / mu_hat) (``fgrpo_theory.weighting.maxrl``).
    ``correct`` (B, N) bool or 0/1; returns (B, N) float."""
    if not isinstance(correct, torch.Tensor) or correct.dim() != 2:
        raise ValueError("correct must be a (groups, N) tensor of verdicts")
    return maxrl().rule.advantages_torch(None, None, correct)  # (B, N)


def focal_advantages(
    rewards: torch.Tensor,
    *,
    gamma: float,
    reward_correct: float = 1.0,
    reward_wrong: float = 0.0,
    std: str = "bessel",
    eps: float = 1e-6,
    correct: torch.Tensor | None = None,
) -> torch.Tensor:
    """A_i^F = g * A_i^GRPO with g = (1 - X/N)^gamma of the same group (Eq. 12-13).
    (B, N) -> (B, N).

    X/N comes from the verifier's verdicts ``correct`` (B, N) when given (:func:`success_rate`,
    as in the trainer), else from binary rewards (:func:`group_success_rate`). The weight
    multiplies the advantage after the mean/std normalisation and changes nothing else.
    """
    A = grpo_advantages(rewards, std=std, eps=eps)  # (B, N)
    if correct is not None:
        if correct.shape != A.shape:
            raise ValueError(
                f"correct must have the rewards' shape {tuple(A.shape)}, got {tuple(correct.shape)}"
            )
        mu_hat = success_rate(correct)  # (B,)
    else:
        mu_hat = group_success_rate(
            rewards, reward_correct=reward_correct, reward_wrong=reward_wrong
        )  # (B,)
    g = focal_weight(mu_hat, gamma=gamma)  # (B,)
    return g[:, None] * A


class WeightedAdvantages(NamedTuple):
    """One step's advantages: the weight g (B,) of each group, its advantages A (B, N) and which
    groups carry a learning signal (B,) bool (GRPO's advantage not all 0: rewards not all equal)."""

    g: torch.Tensor
    A: torch.Tensor
    active: torch.Tensor


def weighted_advantages(
    weighting: Weighting | str,
    rewards: torch.Tensor,
    correct: torch.Tensor,
    *,
    std: str = "bessel",
    eps: float = 1e-6,
) -> WeightedAdvantages:
    """A = g * A^GRPO with g = w(mu_hat) one weight per group, mu_hat = X / N from the verifier's
    verdicts (Eq. 11-13 for w = (1 - mu_hat)^gamma), for any weighting (a ``Weighting`` or its
    spelling, ``fgrpo_theory.weighting``); a rule may give its own advantage (MaxRL:
    (r - mu_hat) / mu_hat on the verdicts). ``rewards`` and ``correct`` (B, N), B >= 0; ``std``
    and ``eps`` as :func:`grpo_advantages`."""
    w = resolve_weighting(weighting)
    mu_hat = success_rate(correct)  # (B,) X / N from the verifier's verdicts
    if rewards.shape != correct.shape:
        raise ValueError(
            f"correct must have the rewards' shape {tuple(rewards.shape)}, "
            f"got {tuple(correct.shape)}"
        )
    if rewards.shape[0] == 0:  # no group trained this step
        return WeightedAdvantages(w.rule.weight_torch(mu_hat, w.gamma), rewards, mu_hat > 0)
    A_grpo = grpo_advantages(rewards, std=std, eps=eps)  # (B, N)
    g = w.rule.weight_torch(mu_hat, w.gamma)  # (B,) one weight per group
    A = w.rule.advantages_torch(A_grpo, g, correct)  # (B, N)
    return WeightedAdvantages(g, A, (A_grpo != 0).any(dim=1))


def focal_metrics(g: torch.Tensor, X: torch.Tensor, N: torch.Tensor) -> dict[str, float]:
    """The focal metrics of one batch from its groups' g, X, N (each (G,), one entry per group),
    with one meaning in our trainer, TRL and verl (g = w(X / N) of any weighting):

    - ``focal/weight_mean``: mean of g over all G groups (inactive ones, X = 0 or X = N, with
      their own g);
    - ``focal/weight_mean_active``: mean of g over the active groups (0 < X < N), the ones whose
      advantages are not 0; absent when no group is active (never NaN).
    """
    if g.numel() == 0:
        return {}
    active = (X > 0) & (X < N)  # (G,)
    out = {"focal/weight_mean": float(g.to(torch.float64).mean())}
    if bool(active.any()):
        out["focal/weight_mean_active"] = float(g[active].to(torch.float64).mean())
    return out
