"""Does the engine's reward read as right or wrong? The check F-GRPO runs on every batch.

The focal weight g = (1 - X/N)^gamma (paper Eq. 11-13) counts X, the correct completions of a
group, from a verifier's outcome: a score is correct when it is >= the threshold, halfway
between the wrong and the correct reward by default (0.5 for the paper's 0/1 reward). A reward
that is not a verdict (a length reward, a reward model's score, a format bonus summed into the
verifier's score) still yields an X, but a meaningless one: a continuous reward in [0.5, 1]
marks every completion correct, so X = N and g = 0 in every group and the model never moves,
without a word. Two findings are reported:

- ``values``: scores that are neither ``reward_wrong`` nor ``reward_correct`` (NaN, an unscored
  row, is not counted: it is wrong by rule). Compared in the scores' own precision
  (:func:`fgrpo_llm.integrations.focal.correct_mask`).
- ``all_zero``: every group's weight is 0 while the engine's advantages are not: F-GRPO trains
  nothing on the batch although the engine would.

:class:`RewardCheck` reports each finding once per run as a ``RuntimeWarning`` (the first batch
that shows it, so at the first step for a reward that is never a verdict), or raises a
ValueError when ``FocalSettings.strict_rewards`` is set.
"""

from __future__ import annotations

import warnings

import torch

from fgrpo_llm.integrations.focal import FocalSettings, as_scores, held_as

__all__ = ["RewardCheck", "reward_findings"]


def reward_findings(
    scores, g: torch.Tensor, advantages_nonzero: bool, settings: FocalSettings
) -> dict[str, str]:
    """The findings of one batch, ``{kind: sentence}`` (empty when the reward reads as 0/1).

    ``scores`` (M,): the verifier's score of each row; ``g`` (G,): each group's weight;
    ``advantages_nonzero``: whether any of the engine's own advantages (before the weight) is
    not 0.
    """
    s, held = as_scores(scores)  # (M,) float64
    known = (s == held_as(settings.reward_wrong, held)) | (
        s == held_as(settings.reward_correct, held)
    )  # (M,)
    odd = ~known & ~torch.isnan(s)  # (M,)
    found = {}
    if bool(odd.any()):
        examples = ", ".join(f"{v:g}" for v in s[odd].unique()[:3].tolist())
        found["values"] = (
            f"{int(odd.sum())} of {s.numel()} scores are neither reward_wrong="
            f"{settings.reward_wrong:g} nor reward_correct={settings.reward_correct:g} (e.g. "
            f"{examples}); a completion counts as correct when its score is >= "
            f"{settings.threshold:g}, so X and g = (1 - X/N)^gamma follow that cut, not a "
            "verifier"
        )
    if g.numel() and bool((g == 0).all()) and advantages_nonzero and settings.weighting == "focal":
        found["all_zero"] = (
            f"every group's focal weight is 0 (all {g.numel()} groups have X = N: every "
            "completion counted as correct) while the engine's advantages are not 0, so F-GRPO "
            "trains nothing on this batch"
        )
    return found


class RewardCheck:
    """Runs :func:`reward_findings` on each batch; warns once per finding, or raises under
    ``settings.strict_rewards``. ``where`` names the engine's trainer, ``advice`` which of its
    settings to change, ``strict_setting`` the engine's name of ``strict_rewards``."""

    def __init__(self, settings: FocalSettings, *, where: str, advice: str, strict_setting: str):
        self.settings = settings
        self.where = where
        self.advice = advice
        self.strict_setting = strict_setting
        self.reported: set[str] = set()

    def __call__(self, scores, g: torch.Tensor, advantages_nonzero: bool) -> dict[str, str]:
        found = reward_findings(scores, g, advantages_nonzero, self.settings)
        new = {k: v for k, v in found.items() if k not in self.reported}
        if not new:
            return found
        text = f"{self.where}: the reward does not read as right or wrong: " + "; ".join(
            new.values()
        )
        if self.settings.strict_rewards:
            raise ValueError(f"{text}. {self.advice}")
        self.reported.update(new)
        warnings.warn(
            f"{text}. {self.advice}; {self.strict_setting}=True makes this an error",
            RuntimeWarning,
            stacklevel=3,
        )
        return found
