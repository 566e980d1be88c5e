"""``focal_grpo``: verl's GRPO advantage estimator times the focal weight of each uid group
(Eq. 13).

verl calls a registered estimator as ``fn(token_level_rewards, response_mask, config, index)``
(``verl.trainer.ppo.ray_trainer.compute_advantage``): ``token_level_rewards`` (bs, T) whose sum
over T is each completion's score, ``index`` (bs,) the prompt uid of each row (strings; groups
may be ragged), ``config`` verl's ``algorithm`` section. This estimator

1. calls verl's own ``compute_grpo_outcome_advantage`` with the same arguments, so the base is
   bit for bit verl's ``grpo`` (Bessel std, eps = 1e-6, ``norm_adv_by_std_in_grpo`` honoured; a
   group of one gets mean 0, std 1, verl's convention);
2. multiplies every row of uid group G by g_G = (1 - X_G / N_G)^gamma
   (:func:`fgrpo_llm.integrations.focal.group_focal_weights`), and nothing else.

Settings, read from ``algorithm`` (add them with Hydra's ``+``): ``focal_gamma`` (default 0:
exactly verl's ``grpo``), ``focal_reward_correct`` / ``focal_reward_wrong`` (1 / 0) and
``focal_correct_threshold`` (default halfway between them; a score at or above it is correct,
compared in the score's own precision: :mod:`fgrpo_llm.integrations.focal`),
``focal_weighting`` (any spelling of :mod:`fgrpo_theory.weighting`: "focal", the default,
with ``focal_gamma``; "focal:0.5"; "none"; or "maxrl": g = sqrt((1 - mu_hat) / mu_hat), which
takes no gamma), ``focal_strict_rewards`` (default False). Another ``focal_*`` key is refused (a
typo), as is a value that is not a number. They are read only when
``algorithm.adv_estimator=focal_grpo``: verl's own estimators ignore them.

Every call checks that the scores read as right or wrong
(:mod:`fgrpo_llm.integrations.reward_check`): scores that are neither reward, or every group's
weight 0 while verl's advantages are not, give one warning per run (an error with
``focal_strict_rewards=True``). The batch's focal metrics (``focal/weight_mean`` over every uid
group, ``focal/weight_mean_active`` over the active ones; :func:`focal_metrics`) are kept in
:data:`LAST_METRICS`: verl has no way for an estimator to log, so the run's records carry them
(:func:`fgrpo_llm.integrations.records.records_from_verl_dump` writes them per step).
"""

from __future__ import annotations

import numpy as np
import torch

from fgrpo_llm.integrations.focal import FocalSettings, focal_metrics, group_weights
from fgrpo_llm.integrations.reward_check import RewardCheck

ESTIMATOR_NAME = "focal_grpo"

__all__ = [
    "ESTIMATOR_NAME",
    "LAST_METRICS",
    "SETTING_KEYS",
    "focal_settings",
    "focal_grpo_advantage",
    "register",
]

#: The focal metrics of the last batch this process weighted (:func:`focal_metrics`).
LAST_METRICS: dict[str, float] = {}

#: One reward check per distinct settings (each warns once per finding in this process).
_CHECKS: dict[FocalSettings, RewardCheck] = {}


def _get(config, key, default=None):
    if config is None:
        return default
    getter = getattr(config, "get", None)
    value = getter(key, default) if callable(getter) else getattr(config, key, default)
    return default if value is None else value


#: The ``algorithm`` keys this estimator reads; another ``focal_*`` key there is a typo.
SETTING_KEYS = (
    "focal_gamma",
    "focal_reward_correct",
    "focal_reward_wrong",
    "focal_correct_threshold",
    "focal_weighting",
    "focal_strict_rewards",
)


def _number(config, key: str, default):
    """``algorithm.<key>`` as a float (None stays None); a ValueError naming the key if it is not
    a number."""
    value = _get(config, key, default)
    if value is None:
        return None
    if isinstance(value, bool):  # float(True) would be 1.0
        raise ValueError(f"algorithm.{key} must be a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"algorithm.{key} must be a number, got {value!r}") from None


def focal_settings(config) -> FocalSettings:
    """The focal settings of verl's ``algorithm`` config (a DictConfig, AlgoConfig or dict). A
    ``focal_*`` key that is not one of :data:`SETTING_KEYS` is refused: a misspelt setting would
    otherwise leave the run plain GRPO without a word."""
    keys = getattr(config, "keys", None)
    for key in keys() if callable(keys) else ():
        if str(key).startswith("focal_") and key not in SETTING_KEYS:
            raise ValueError(
                f"algorithm.{key} is not a focal_grpo setting; the settings are "
                + ", ".join(f"algorithm.{k}" for k in SETTING_KEYS)
            )
    strict = _get(config, "focal_strict_rewards", False)
    if not isinstance(strict, bool):
        raise ValueError(f"algorithm.focal_strict_rewards must be True or False, got {strict!r}")
    values = dict(
        strict_rewards=strict,
        gamma=_number(config, "focal_gamma", 0.0),
        reward_correct=_number(config, "focal_reward_correct", 1.0),
        reward_wrong=_number(config, "focal_reward_wrong", 0.0),
        weighting=str(_get(config, "focal_weighting", "focal")),
        correct_threshold=_number(config, "focal_correct_threshold", None),
    )
    try:
        return FocalSettings(**values)
    except ValueError as err:  # FocalSettings names the field; say where it is set
        raise ValueError(f"algorithm.focal_* settings: {err}") from None


def focal_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config=None,
    **kwargs,
):
    """A^F = g * A^GRPO per uid group; returns ``(advantages, returns)``, each (bs, T)."""
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    settings = focal_settings(config)
    norm = bool(_get(config, "norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo))
    advantages, returns = compute_grpo_outcome_advantage(
        token_level_rewards=token_level_rewards,
        response_mask=response_mask,
        index=index,
        epsilon=epsilon,
        norm_adv_by_std_in_grpo=norm,
        config=config,
    )
    scores = token_level_rewards.detach().sum(dim=-1)  # (bs,) in verl's own precision
    g, X, N, inverse = group_weights(scores, index, settings)  # (G,) each; inverse (bs,)
    _reward_check(settings)(scores, g, bool(advantages.ne(0).any()))
    LAST_METRICS.clear()
    LAST_METRICS.update(focal_metrics(g, X, N))
    if settings.weight_is_one:
        return advantages, returns  # exactly verl's grpo
    g_rows = g[inverse].to(advantages.device, advantages.dtype)[:, None]  # (bs, 1)
    return advantages * g_rows, returns * g_rows


def _reward_check(settings: FocalSettings) -> RewardCheck:
    if settings not in _CHECKS:
        _CHECKS[settings] = RewardCheck(
            settings,
            where="verl focal_grpo",
            advice=(
                "Return the verifier's verdict as the score (compute_score; other terms in "
                "reward_extra_info), or set +algorithm.focal_reward_wrong / "
                "+algorithm.focal_reward_correct (and +algorithm.focal_correct_threshold) to its "
                "two values"
            ),
            strict_setting="+algorithm.focal_strict_rewards",
        )
    return _CHECKS[settings]


def register() -> str:
    """Put ``focal_grpo`` in verl's ``ADV_ESTIMATOR_REGISTRY``; idempotent (a second call, or a
    second import of this module under a reload, is a no-op). Returns the name."""
    from verl.trainer.ppo import core_algos

    current = core_algos.ADV_ESTIMATOR_REGISTRY.get(ESTIMATOR_NAME)
    if current is not None:
        same = (
            getattr(current, "__module__", None) == __name__
            and getattr(current, "__qualname__", None) == focal_grpo_advantage.__qualname__
        )
        if not same:
            raise RuntimeError(
                f"verl already has an advantage estimator named {ESTIMATOR_NAME!r} ({current!r}), "
                f"not fgrpo's; refusing to replace it"
            )
        return ESTIMATOR_NAME
    core_algos.register_adv_est(ESTIMATOR_NAME)(focal_grpo_advantage)
    return ESTIMATOR_NAME
