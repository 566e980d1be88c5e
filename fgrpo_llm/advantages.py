"""Group-relative advantages and the focal weight, in torch (SPEC.md §2, paper Eq. 11-13).

Rewards arrive as a (B, N) tensor: B prompts, N rollouts per prompt (the group). The numpy
functions of ``fgrpo_theory.advantages`` / ``fgrpo_theory.focal`` are the reference these are
tested against.

- GRPO:        A_i = (R_i - mean_j R_j) / (std_j R_j + eps)
- mean-centred: A_i = R_i - mean_j R_j (no std, as in the categorical simulation, SPEC §4)
- focal:       g = (1 - mu_hat)^gamma with mu_hat = X/N = (mean R - R_w) / (R_c - R_w), one scalar
               per group from the current group's raw outcomes only; A_i^F = g * A_i.
               gamma = 0 gives g = 1 (the base method exactly).
"""

from __future__ import annotations

import torch

__all__ = ["grpo_advantages", "mean_centred_advantages", "group_success_rate", "focal_weight", "focal_advantages"]

STD_CONVENTIONS = ("bessel", "population", "none")


def _check_rewards(rewards: torch.Tensor) -> torch.Tensor:
    if rewards.ndim != 2 or rewards.shape[1] < 1 or rewards.shape[0] < 1:
        raise ValueError(f"rewards must have shape (B, N) with B, N >= 1, got shape {tuple(rewards.shape)}")
    if torch.isnan(rewards).any():
        raise ValueError("rewards must not contain NaN")
    return rewards.float() if not rewards.is_floating_point() else rewards


def mean_centred_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """A_i = R_i - mean_j R_j per group. (B, N) -> (B, N)."""
    R = _check_rewards(rewards)
    return R - R.mean(dim=1, keepdim=True)


def grpo_advantages(rewards: torch.Tensor, *, std: str = "bessel", eps: float = 1e-6) -> torch.Tensor:
    """A_i = (R_i - mean_j R_j) / (std_j R_j + eps) per group. (B, N) -> (B, N).

    ``std``: "bessel" (divide by N - 1, as TRL and verl; needs N >= 2),
    "population" (divide by N) or "none" (mean-centred only). ``eps`` (>= 0) is added to the std;
    verl uses 1e-6 (the default here), TRL 1e-4. A group whose rewards are all equal gets A = 0.
    """
    if std not in STD_CONVENTIONS:
        raise ValueError(f"std must be one of {STD_CONVENTIONS}, got std={std!r}")
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got eps={eps}")
    A = mean_centred_advantages(rewards)  # (B, N)
    if std == "none":
        return A
    N = A.shape[1]
    if std == "bessel" and N < 2:
        raise ValueError(f"the Bessel std needs a group of N >= 2, got N={N}")
    sigma = A.pow(2).sum(dim=1, keepdim=True).div(N - 1 if std == "bessel" else N).sqrt()  # (B, 1)
    # An all-equal group has A = 0 exactly, so 0 / (0 + eps) = 0; guard eps = 0 too.
    return torch.where(sigma > 0, A / (sigma + eps), torch.zeros_like(A))


def group_success_rate(rewards: torch.Tensor, *, reward_correct: float = 1.0,
                       reward_wrong: float = 0.0) -> torch.Tensor:
    """mu_hat = X/N = (mean_j R_j - R_w) / (R_c - R_w) per group, clipped to [0, 1]. (B, N) -> (B,)."""
    if not reward_correct > reward_wrong:
        raise ValueError(f"reward_correct must exceed reward_wrong, got {reward_correct} <= {reward_wrong}")
    R = _check_rewards(rewards)
    return ((R.mean(dim=1) - reward_wrong) / (reward_correct - reward_wrong)).clamp(0.0, 1.0)


def focal_weight(mu_hat: torch.Tensor, *, gamma: float) -> torch.Tensor:
    """g = (1 - mu_hat)^gamma (Eq. 11), elementwise; gamma = 0 gives exactly 1 (also at mu_hat = 1)."""
    if not gamma >= 0:
        raise ValueError(f"gamma must be >= 0, got gamma={gamma}")
    if gamma == 0:
        return torch.ones_like(mu_hat)
    return (1.0 - mu_hat).clamp(min=0.0).pow(gamma)


def focal_advantages(rewards: torch.Tensor, *, gamma: float, reward_correct: float = 1.0,
                     reward_wrong: float = 0.0, std: str = "bessel", eps: float = 1e-6) -> torch.Tensor:
    """A_i^F = g * A_i^GRPO with g = (1 - X/N)^gamma of the same group (Eq. 12-13). (B, N) -> (B, N).

    The weight multiplies the advantage after the mean/std normalisation and changes nothing else.
    """
    A = grpo_advantages(rewards, std=std, eps=eps)  # (B, N)
    g = focal_weight(group_success_rate(rewards, reward_correct=reward_correct, reward_wrong=reward_wrong),
                     gamma=gamma)  # (B,)
    return g[:, None] * A
