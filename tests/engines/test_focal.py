"""The engines' shared focal code (no engine needed): exact correctness counts, the focal
metrics' one definition, and the check of rewards that do not read as right or wrong."""

from __future__ import annotations

import math
import warnings

import pytest

torch = pytest.importorskip("torch")

from fgrpo_llm.integrations.focal import (  # noqa: E402
    FocalSettings,
    focal_metrics,
    group_focal_weights,
    group_weights,
)
from fgrpo_llm.integrations.reward_check import RewardCheck, reward_findings  # noqa: E402
from fgrpo_theory.weighting import parse_weighting  # noqa: E402


def test_float64_scores_are_not_rounded_to_float32():
    """0.4999999999 is below the halfway threshold 0.5; as float32 it is 0.5 (correct)."""
    settings = FocalSettings(gamma=1.0)
    for scores in ([0.4999999999, 1.0], torch.tensor([0.4999999999, 1.0], dtype=torch.float64)):
        g, X, N = group_focal_weights(scores, ["a", "a"], settings)
        assert X.tolist() == [1, 1] and N.tolist() == [2, 2] and g.dtype == torch.float64
        assert g.tolist() == [0.5, 0.5]


def test_a_float32_score_meets_the_threshold_as_float32_holds_it():
    """An engine that stores a reward of 0.7 in float32 holds 0.699999988: with threshold 0.7 it
    is correct (the threshold compared as float32 holds it), not wrong."""
    settings = FocalSettings(gamma=1.0, reward_correct=0.7, correct_threshold=0.7)
    scores = torch.tensor([0.7, 0.0], dtype=torch.float32)
    _, X, _ = group_focal_weights(scores, [0, 0], settings)
    assert X.tolist() == [1, 1]
    below = torch.tensor([0.7, 0.0], dtype=torch.float32).nextafter(torch.tensor(0.0))
    _, X, _ = group_focal_weights(below, [0, 0], settings)
    assert X.tolist() == [0, 0]


@pytest.mark.slow
def test_counts_are_exact_integers_beyond_float32():
    """X and N are int64: a group of 2^24 + 1 rows, all correct but one, counts X = 2^24."""
    M = 2**24 + 1
    scores = torch.ones(M, dtype=torch.float64)
    scores[0] = 0.0
    g, X, N, _ = group_weights(scores, [0] * M, FocalSettings(gamma=1.0))
    assert X.dtype == torch.int64 and int(X[0]) == 2**24 and int(N[0]) == M
    assert float(g[0]) == pytest.approx(1 / M, rel=1e-12)


def test_focal_metrics_one_definition():
    """weight_mean over every group (inactive ones with their g), weight_mean_active over
    0 < X < N; no active group: the active mean is absent, never NaN."""
    g, X, N, _ = group_weights(
        [1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0], [0] * 4 + [1] * 4 + [2] * 4, FocalSettings(gamma=1.0)
    )
    assert g.tolist() == [0.75, 0.0, 1.0]
    m = focal_metrics(g, X, N)
    assert m == {"focal/weight_mean": pytest.approx(1.75 / 3), "focal/weight_mean_active": 0.75}
    g, X, N, _ = group_weights([1, 1, 0, 0], [0, 0, 1, 1], FocalSettings(gamma=1.0))
    m = focal_metrics(g, X, N)
    assert m == {"focal/weight_mean": 0.5} and not any(math.isnan(v) for v in m.values())
    assert focal_metrics(g[:0], X[:0], N[:0]) == {}


def test_reward_findings_name_values_that_are_no_verdict():
    s = FocalSettings(gamma=1.0)
    g = torch.tensor([0.5])
    assert reward_findings([1.0, 0.0, float("nan"), 1.0], g, True, s) == {}
    found = reward_findings([0.9, 0.0, 0.7, 1.0], g, True, s)
    assert set(found) == {"values"} and "2 of 4 scores" in found["values"]
    # DAPO's +1 / -1 with its settings: verdicts
    dapo = FocalSettings(gamma=1.0, reward_wrong=-1.0)
    assert reward_findings([1.0, -1.0], g, True, dapo) == {}
    # every group g = 0 while the engine's advantages are not: found; with A = 0: not
    zero = torch.zeros(2)
    assert set(reward_findings([1.0, 1.0], zero, True, s)) == {"all_zero"}
    assert reward_findings([1.0, 1.0], zero, False, s) == {}


def test_the_check_warns_once_per_finding_or_raises_when_strict():
    s = FocalSettings(gamma=1.0)
    check = RewardCheck(s, where="T", advice="fix it", strict_setting="strict_x")
    with pytest.warns(RuntimeWarning, match=r"T: the reward .*fix it; strict_x=True") as shown:
        check([0.9, 0.6], torch.zeros(1), True)
        check([0.9, 0.6], torch.zeros(1), True)  # again: no second warning
    assert len(shown) == 1
    strict = RewardCheck(
        FocalSettings(gamma=1.0, strict_rewards=True), where="T", advice="fix", strict_setting="x"
    )
    with pytest.raises(ValueError, match="neither reward_wrong=0 nor reward_correct=1"):
        strict([0.9, 0.6], torch.zeros(1), True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        strict([1.0, 0.0], torch.tensor([0.5]), True)
    with pytest.raises(ValueError, match="strict_rewards must be True or False"):
        FocalSettings(strict_rewards="yes")


@pytest.mark.parametrize(
    "weighting, gamma, expect",
    [
        ("none", 0.0, [1.0, 1.0, 1.0]),
        ("grpo", 0.0, [1.0, 1.0, 1.0]),
        ("focal:0.5", 0.0, [1.0, 0.5**0.5, 0.0]),
        ("focal", 2.0, [1.0, 0.25, 0.0]),
        ("maxrl", 0.0, [0.0, 1.0, 0.0]),
    ],
)
def test_settings_take_every_spelling_of_the_weighting(weighting, gamma, expect):
    """FocalSettings reads the weighting as fgrpo_theory.weighting does: the bare name with
    gamma, or "NAME:GAMMA"; g follows that rule at X / N = 0, 1/2, 1."""
    settings = FocalSettings(weighting=weighting, gamma=gamma)
    g, _, _, _ = group_weights([0.0, 0.0, 1.0, 0.0, 1.0, 1.0], [0, 0, 1, 1, 2, 2], settings)
    assert g.dtype == torch.float64 and g.tolist() == pytest.approx(expect, rel=0, abs=1e-15)
    assert str(settings.w) == str(parse_weighting(weighting if gamma == 0 else f"focal:{gamma}"))
    assert settings.weight_is_one == (expect == [1.0, 1.0, 1.0])


def test_none_with_a_gamma_is_an_error_not_a_focal_weight():
    """weighting="none" has no exponent: gamma=1 beside it is a contradiction to report, never a
    silent (1 - mu_hat)^1."""
    with pytest.raises(ValueError, match="no exponent"):
        FocalSettings(weighting="none", gamma=1.0)
    with pytest.raises(ValueError, match="contradicts"):
        FocalSettings(weighting="focal:0.5", gamma=1.0)
    with pytest.raises(ValueError, match="weighting"):
        FocalSettings(weighting="ppo")
    assert FocalSettings(weighting="focal", gamma=0.0).weight_is_one
    assert not FocalSettings(weighting="focal", gamma=1e-3).weight_is_one
