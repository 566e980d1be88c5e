"""The focal weight of the groups of a flat batch, as an engine sees it (paper Eq. 11-13).

An engine holds M completions in one flat batch; each carries a group id (verl: the ``uid`` of
its prompt, any hashable value, groups possibly ragged; TRL: contiguous blocks of
``num_generations`` rows). For group G with N_G members of which X_G are correct,

    mu_hat_G = X_G / N_G,    g_G = (1 - mu_hat_G)^gamma,    A_i^F = g_G * A_i   (i in G),

computed from the raw outcomes of the current group only. A completion is correct when its
scalar score is at least ``correct_threshold`` (default: halfway between the correct and the
wrong reward, 0.5 for the paper's 0/1 reward; verl's DAPO recipe scores +1 / -1, threshold 0).
gamma = 0 gives g = 1 exactly. The weight itself is the rule's ``weight_torch``.

Exact counting. A score is compared with the threshold in its own precision, never a lower one:
float64 scores (TRL's reward functions' own values, Python floats) in float64; a score an engine
holds in float32 (verl's ``token_level_rewards``) against the threshold as float32 holds it, so
a reward of 0.7 stored as float32 meets a threshold of 0.7. X and N are integers and
mu_hat = X / N, g are float64.

:func:`focal_metrics` (``fgrpo_llm.advantages``, shared with our trainer) defines the focal
metrics every engine logs (one meaning each):
``focal/weight_mean`` the mean of g over all groups of the batch, ``focal/weight_mean_active``
the mean over the active groups (0 < X < N), absent when none is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from fgrpo_common.checks import is_finite_number
from fgrpo_llm.advantages import focal_metrics
from fgrpo_theory.weighting import Weighting, resolve_weighting

__all__ = [
    "FocalSettings",
    "as_scores",
    "correct_mask",
    "focal_metrics",
    "group_index",
    "group_focal_weights",
    "group_weights",
]


@dataclass(frozen=True)
class FocalSettings:
    """The weighting and the correctness rule; ``correct_threshold`` None means halfway between
    the rewards. ``weighting`` and ``gamma`` are read by
    :func:`fgrpo_theory.weighting.resolve_weighting` ("focal" with ``gamma``, "focal:0.5",
    "none", "maxrl"; a ValueError when they contradict) and stored resolved: ``weighting`` the
    rule's name, ``gamma`` its exponent (:attr:`w` the Weighting)."""

    gamma: float = 0.0
    reward_correct: float = 1.0
    reward_wrong: float = 0.0
    correct_threshold: float | None = None
    weighting: str = "focal"
    """Any spelling of a registered weighting: "focal" (g = (1 - mu_hat)^gamma), "none" (g = 1)
    or "maxrl" (g = sqrt((1 - mu_hat) / mu_hat), 0 at mu_hat = 0: times the engine's GRPO
    advantage this is MaxRL's (r - mu_hat) / mu_hat with the population std and eps -> 0; with
    the Bessel std, that times sqrt((N - 1) / N))."""
    strict_rewards: bool = False
    """A reward the weight cannot read as right or wrong is an error (default: one warning;
    :mod:`fgrpo_llm.integrations.reward_check`)."""

    def __post_init__(self):
        for name in ("gamma", "reward_correct", "reward_wrong"):
            v = getattr(self, name)
            if not is_finite_number(v):
                raise ValueError(f"focal {name} must be a finite number, got {name}={v!r}")
        if self.gamma < 0:
            raise ValueError(f"focal gamma must be >= 0, got gamma={self.gamma}")
        try:
            w = resolve_weighting(self.weighting, self.gamma)
        except (TypeError, ValueError) as err:
            raise ValueError(f"focal weighting: {err}") from None
        object.__setattr__(self, "weighting", w.kind)
        object.__setattr__(self, "gamma", w.gamma)
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
        if not isinstance(self.strict_rewards, bool):
            raise ValueError(
                f"focal strict_rewards must be True or False, got {self.strict_rewards!r}"
            )

    @property
    def w(self) -> Weighting:
        """The weighting w(mu_hat); ``str`` gives its canonical spelling ("focal:0.5")."""
        return Weighting(self.weighting, self.gamma)

    @property
    def weight_is_one(self) -> bool:
        """Whether g = 1 for every group ("none", "focal" with gamma = 0): the engine's GRPO
        exactly. Read on X / N for every N up to 64 (g is only ever evaluated there)."""
        mu = np.unique(np.concatenate([np.arange(n + 1) / n for n in range(1, 65)]))
        return bool(np.all(self.w.rule.weight(mu, self.gamma) == 1.0))

    @property
    def threshold(self) -> float:
        """Scores >= this count as correct."""
        if self.correct_threshold is not None:
            return float(self.correct_threshold)
        return 0.5 * (self.reward_correct + self.reward_wrong)


def as_scores(scores) -> tuple[torch.Tensor, torch.dtype]:
    """``(scores as float64 (M,), the precision they came in)``: a tensor keeps its values
    (float32 widens exactly; integers up to 2^53); anything else (Python floats) is read as
    float64."""
    if isinstance(scores, torch.Tensor):
        scores = scores.detach()
        held = scores.dtype if scores.is_floating_point() else torch.float64
    else:
        scores = torch.as_tensor(scores, dtype=torch.float64)
        held = torch.float64
    return scores.to(torch.float64).reshape(-1), held


def held_as(value: float, dtype: torch.dtype) -> float:
    """``value`` as a number of ``dtype`` holds it (rounded to nearest), as a Python float."""
    return float(torch.tensor(float(value), dtype=torch.float64).to(dtype).item())


def correct_mask(scores, settings: FocalSettings) -> torch.Tensor:
    """(M,) bool: score >= ``settings.threshold``, compared in the scores' own precision (module
    docstring); NaN (an unscored row) is wrong."""
    s, held = as_scores(scores)  # (M,)
    return s >= held_as(settings.threshold, held)  # NaN >= t is False


def group_index(group_ids) -> tuple[torch.Tensor, list]:
    """``(inverse (M,), keys)``: group number of each row, in order of first appearance, and the
    ids.

    ``group_ids`` may hold strings, ints, numpy scalars, anything hashable.
    """
    keys: dict = {}
    inverse = [keys.setdefault(g.item() if hasattr(g, "item") else g, len(keys)) for g in group_ids]
    return torch.tensor(inverse, dtype=torch.long), list(keys)


def group_weights(scores, group_ids, settings: FocalSettings):
    """Per group: ``(g (G,) float64, X (G,) int64, N (G,) int64, inverse (M,))`` for the groups
    named by ``group_ids`` (order of first appearance); ``inverse`` is each row's group.

    ``scores`` (M,) are the completions' scalar rewards; NaN scores (unscorable rows) count as
    wrong but still belong to their group's N.
    """
    correct = correct_mask(scores, settings)  # (M,)
    inverse, keys = group_index(group_ids)  # (M,)
    if inverse.numel() != correct.numel():
        raise ValueError(f"got {correct.numel()} scores but {inverse.numel()} group ids")
    inverse = inverse.to(correct.device)
    G = len(keys)
    X = torch.zeros(G, dtype=torch.long, device=correct.device)  # (G,)
    X.index_add_(0, inverse, correct.long())
    N = torch.zeros(G, dtype=torch.long, device=correct.device)  # (G,)
    N.index_add_(0, inverse, torch.ones_like(inverse))
    mu_hat = X.to(torch.float64) / N.to(torch.float64)  # (G,)
    g = settings.w.rule.weight_torch(mu_hat, settings.gamma)  # (G,) float64 w(mu_hat)
    return g, X, N, inverse


def group_focal_weights(scores, group_ids, settings: FocalSettings):
    """Per-row focal weight g (M,) float64, and per-row X and N (M,) int64, for the groups named
    by ``group_ids`` (:func:`group_weights`)."""
    g, X, N, inverse = group_weights(scores, group_ids, settings)
    return g[inverse], X[inverse], N[inverse]
