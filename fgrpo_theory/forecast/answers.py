"""A prompt's enumerated answer distribution under a policy.

For a task whose answers can be listed (Countdown: every well-formed expression of the prompt's
numbers), a policy pi puts log-probability ``logp[k] = log pi(y_k | x)`` on each well-formed
answer y_k; the rest of its mass goes to malformed completions:

    log pi(malformed | x) = log(1 - sum_k exp(logp[k]))   (computed as log1p(-exp(logsumexp)))

``tokens[k]`` is y_k's token sequence as the policy emits it (without the end-of-sequence token),
so a forecast model can share parameters along the answers' prefix tree.

    from fgrpo_theory.forecast import PromptAnswers
    pa = PromptAnswers("p0", ("1+2", "2+1"), (("1", "+", "2"), ("2", "+", "1")),
                       np.log([0.5, 0.25]), np.array([True, False]))
    pa.malformed_logp  # log 0.25
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

__all__ = ["PromptAnswers", "malformed_logp"]


def malformed_logp(logp) -> float:
    """log(1 - sum exp(logp)): the log-mass outside the listed answers (-inf when they hold it
    all; a sum above 1 beyond float rounding is a ValueError)."""
    logp = np.asarray(logp, dtype=float)
    if logp.size == 0:
        return 0.0
    total = float(logsumexp(logp))
    if total > 1e-9:
        raise ValueError(f"the answers' probabilities sum to {math.exp(total):.12g} > 1")
    if total >= 0.0:
        return -math.inf
    return math.log(-math.expm1(total))


@dataclass(frozen=True)
class PromptAnswers:
    """One prompt's K well-formed answers and their log-probabilities under one policy."""

    prompt_id: str
    """The prompt's id (the task's problem id)."""
    answers: tuple
    """(K,) each answer's text, as the verifier reads it."""
    tokens: tuple
    """(K,) each answer's token sequence (a tuple of str), without the end-of-sequence token."""
    logp: np.ndarray
    """(K,) log pi(y_k | x) under the policy (-inf allowed)."""
    correct: np.ndarray
    """(K,) bool, the verifier's verdict on each answer."""

    def __post_init__(self):
        if not isinstance(self.prompt_id, str):
            raise TypeError(f"prompt_id must be a str, got {type(self.prompt_id).__name__}")
        object.__setattr__(self, "answers", tuple(self.answers))
        object.__setattr__(self, "tokens", tuple(tuple(t) for t in self.tokens))
        logp = np.asarray(self.logp, dtype=float)
        correct = np.asarray(self.correct)
        K = len(self.answers)
        if logp.shape != (K,) or correct.shape != (K,) or len(self.tokens) != K:
            raise ValueError(
                f"prompt {self.prompt_id!r}: answers ({K}), tokens ({len(self.tokens)}), logp "
                f"{logp.shape} and correct {correct.shape} must have one entry per answer"
            )
        if correct.dtype != bool:
            raise TypeError(f"prompt {self.prompt_id!r}: correct must be bool, got {correct.dtype}")
        if np.isnan(logp).any() or (logp > 1e-9).any():
            raise ValueError(f"prompt {self.prompt_id!r}: logp must be <= 0 and not NaN")
        if len(set(self.answers)) != K:
            raise ValueError(f"prompt {self.prompt_id!r}: an answer is listed twice")
        object.__setattr__(self, "logp", logp)
        object.__setattr__(self, "correct", correct)

    @property
    def malformed_logp(self) -> float:
        """log pi(malformed | x): the mass outside the listed answers."""
        return malformed_logp(self.logp)

    @property
    def log_mu(self) -> float:
        """log mu(x) = logsumexp of the correct answers' logp (-inf with none)."""
        if not self.correct.any():
            return -math.inf
        return float(logsumexp(self.logp[self.correct]))
