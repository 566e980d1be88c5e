"""The focal weight of the groups of a flat batch, as an engine sees it (paper Eq. 11-13).

An engine holds M completions in one flat batch; each carries a group id (verl: the ``uid`` of
its prompt, any hashable value, groups possibly ragged; TRL: contiguous blocks of
``num_generations`` rows). For group G with N_G members of which X_G are correct,

    mu_hat_G = X_G / N_G,    g_G = (1 - mu_hat_G)^gamma,    A_i^F = g_G * A_i   (i in G),

computed from the raw outcomes of the current group only. A completion is correct when its
scalar score is at least ``correct_threshold`` (default: halfway between the correct and the
wrong reward, 0.5 for the paper's 0/1 reward; verl's DAPO recipe scores +1 / -1, threshold 0).
gamma = 0 gives g = 1 exactly. The weight itself is :func:`fgrpo_llm.advantages.focal_weight`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from fgrpo_common.checks import is_finite_number
from fgrpo_llm.advantages import focal_weight, maxrl_weight
from fgrpo_llm.config import WEIGHTINGS

__all__ = ["FocalSettings", "group_index", "group_focal_weights"]


@dataclass(frozen=True)
class FocalSettings:
    """gamma and the correctness rule; ``correct_threshold`` None means halfway between the
    rewards."""

    gamma: float = 0.0
    reward_correct: float = 1.0
    reward_wrong: float = 0.0
    correct_threshold: float | None = None
    weighting: str = "focal"
    """"focal" (g = (1 - mu_hat)^gamma) or "maxrl" (g = sqrt((1 - mu_hat) / mu_hat), 0 at
    mu_hat = 0: times the engine's GRPO advantage this is MaxRL's (r - mu_hat) / mu_hat with
    the population std and eps -> 0; with the Bessel std, that times sqrt((N - 1) / N))"""

    def __post_init__(self):
        if self.weighting not in WEIGHTINGS:
            raise ValueError(
                f"focal weighting must be one of {WEIGHTINGS}, got weighting={self.weighting!r}"
            )
        for name in ("gamma", "reward_correct", "reward_wrong"):
            v = getattr(self, name)
            if not is_finite_number(v):
                raise ValueError(f"focal {name} must be a finite number, got {name}={v!r}")
        if self.gamma < 0:
            raise ValueError(f"focal gamma must be >= 0, got gamma={self.gamma}")
        if self.weighting == "maxrl" and self.gamma != 0:
            raise ValueError(
                f"focal gamma has no effect with weighting='maxrl' (its weight takes none); "
                f"leave gamma at 0, got gamma={self.gamma}"
            )
        if not self.reward_correct > self.reward_wrong:
            raise ValueError(
                "focal reward_correct must exceed reward_wrong, got "
                f"reward_correct={self.reward_correct}, reward_wrong={self.reward_wrong}"
            )
        t = self.correct_threshold
        if t is not None and (
            isinstance(t, bool)
            or not isinstance(t, (int, float))
            or not math.isfinite(t)
            or not self.reward_wrong < t <= self.reward_correct
        ):
            raise ValueError(
                f"focal correct_threshold must lie in (reward_wrong, reward_correct] = "
                f"({self.reward_wrong}, {self.reward_correct}], got correct_threshold={t!r}"
            )

    @property
    def threshold(self) -> float:
        """Scores >= this count as correct."""
        if self.correct_threshold is not None:
            return float(self.correct_threshold)
        return 0.5 * (self.reward_correct + self.reward_wrong)


def group_index(group_ids) -> tuple[torch.Tensor, list]:
    """``(inverse (M,), keys)``: group number of each row, in order of first appearance, and the
    ids.

    ``group_ids`` may hold strings, ints, numpy scalars, anything hashable.
    """
    keys: dict = {}
    inverse = [keys.setdefault(g.item() if hasattr(g, "item") else g, len(keys)) for g in group_ids]
    return torch.tensor(inverse, dtype=torch.long), list(keys)


def group_focal_weights(scores: torch.Tensor, group_ids, settings: FocalSettings):
    """Per-row focal weight g (M,), and per-row X and N (M,), for the groups named by ``group_ids``.

    ``scores`` (M,) are the completions' scalar rewards; NaN scores (unscorable rows) count as
    wrong but still belong to their group's N.
    """
    scores = torch.as_tensor(scores).detach().float().reshape(-1)  # (M,)
    inverse, keys = group_index(group_ids)  # (M,)
    if inverse.numel() != scores.numel():
        raise ValueError(f"got {scores.numel()} scores but {inverse.numel()} group ids")
    inverse = inverse.to(scores.device)
    correct = (scores >= settings.threshold).float()  # (M,), NaN >= t is False
    G = len(keys)
    X = torch.zeros(G, device=scores.device).index_add_(0, inverse, correct)  # (G,)
    # (G,)
    N = torch.zeros(G, device=scores.device).index_add_(0, inverse, torch.ones_like(correct))
    mu_hat = X / N  # (G,)
    if settings.weighting == "maxrl":
        g = maxrl_weight(mu_hat)  # (G,)
    else:
        g = focal_weight(mu_hat, gamma=float(settings.gamma))  # (G,)
    return g[inverse], X[inverse].long(), N[inverse].long()
