"""Torch group advantages and focal weight against the numpy reference (fgrpo_llm.advantages)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_llm import advantages as adv
from fgrpo_theory import advantages as ref
from fgrpo_theory.focal import focal_weight as ref_focal_weight

binary_groups = st.integers(min_value=1, max_value=6).flatmap(
    lambda B: st.integers(min_value=2, max_value=9).flatmap(
        lambda N: st.lists(
            st.lists(st.sampled_from([0.0, 1.0]), min_size=N, max_size=N), min_size=B, max_size=B
        )
    )
)


@settings(max_examples=60, deadline=None)
@given(
    R=binary_groups,
    std=st.sampled_from(["bessel", "population"]),
    eps=st.sampled_from([0.0, 1e-6, 1e-4]),
)
def test_grpo_advantages_match_numpy_reference(R, std, eps):
    expected = ref.grpo_advantages(np.array(R), std=std, eps=eps)
    got = adv.grpo_advantages(torch.tensor(R, dtype=torch.float64), std=std, eps=eps)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    R=binary_groups,
    gamma=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    std=st.sampled_from(["bessel", "population"]),
)
def test_focal_advantages_match_numpy_reference(R, gamma, std):
    expected = ref.focal_advantages(np.array(R), gamma=gamma, std=std, eps=1e-6)
    got = adv.focal_advantages(torch.tensor(R, dtype=torch.float64), gamma=gamma, std=std, eps=1e-6)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(R=binary_groups)
def test_mean_centred_and_success_rate_match_reference(R):
    R_np, R_t = np.array(R), torch.tensor(R, dtype=torch.float64)
    np.testing.assert_allclose(
        adv.mean_centred_advantages(R_t).numpy(), ref.mean_centred_advantages(R_np)
    )
    mu_hat = adv.group_success_rate(R_t)
    np.testing.assert_allclose(mu_hat.numpy(), ref.group_success_rate(R_np))
    for gamma in (0.0, 0.5, 1.0):
        np.testing.assert_allclose(
            adv.focal_weight(mu_hat, gamma=gamma).numpy(), ref_focal_weight(mu_hat.numpy(), gamma)
        )


def test_focal_weight_with_plus_minus_one_rewards():
    R = torch.tensor([[1.0, -1.0, -1.0, -1.0]], dtype=torch.float64)  # X/N = 1/4
    g = adv.focal_weight(
        adv.group_success_rate(R, reward_correct=1.0, reward_wrong=-1.0), gamma=1.0
    )
    assert g.item() == pytest.approx(0.75)


def test_gamma_zero_is_plain_grpo():
    R = torch.tensor([[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    assert torch.equal(adv.focal_advantages(R, gamma=0.0), adv.grpo_advantages(R))


def test_equal_rewards_give_zero_advantage():
    R = torch.tensor([[1.0] * 8, [0.0] * 8])
    for std in ("bessel", "population", "none"):
        for eps in (0.0, 1e-6):
            assert (adv.grpo_advantages(R, std=std, eps=eps) == 0).all()
    assert (adv.focal_advantages(R, gamma=0.5) == 0).all()


def test_focal_weight_shrinks_easy_groups_more():
    R = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
    g = adv.focal_weight(adv.group_success_rate(R), gamma=1.0)
    assert g.tolist() == [0.75, 0.25]


@pytest.mark.parametrize(
    "call",
    [
        lambda: adv.grpo_advantages(torch.zeros(3)),
        lambda: adv.grpo_advantages(torch.zeros(2, 3), std="sample"),
        lambda: adv.grpo_advantages(torch.zeros(2, 1), std="bessel"),
        lambda: adv.focal_weight(torch.zeros(2), gamma=-1.0),
        lambda: adv.group_success_rate(torch.zeros(2, 3), reward_correct=0.0, reward_wrong=0.0),
        lambda: adv.grpo_advantages(torch.tensor([[float("nan"), 1.0]])),
    ],
)
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("value", [0.7, 0.1, 1 / 3, -2.5])
def test_constant_group_of_non_dyadic_rewards_gets_exactly_zero(dtype, value):
    """Eight float32 rewards of 0.7 got advantages of 0.056: the mean rounds off 0.7, so the
    std was ~6e-8, and 6e-8 / (6e-8 + 1e-6) is not 0. Constancy is now max == min, exactly."""
    R = torch.tensor([[value] * 8, [1.0, 0.0] * 4], dtype=dtype)
    for std in ("bessel", "population", "none"):
        for eps in (0.0, 1e-6):
            A = adv.grpo_advantages(R, std=std, eps=eps)
            assert (A[0] == 0).all() and (A[1] != 0).all()
    assert (adv.mean_centred_advantages(R)[0] == 0).all()
    lo, hi = min(0.0, value), max(1.0, value)
    assert (adv.focal_advantages(R, gamma=1.0, reward_correct=hi, reward_wrong=lo)[0] == 0).all()


@pytest.mark.parametrize(
    "call, error, name",
    [
        (lambda: adv.grpo_advantages([[1.0, 0.0]]), TypeError, "rewards"),
        (lambda: adv.grpo_advantages(torch.tensor([[True, False]])), TypeError, "rewards"),
        (lambda: adv.grpo_advantages(torch.tensor([[1.0, float("inf")]])), ValueError, "rewards"),
        (lambda: adv.grpo_advantages(torch.zeros(2, 3), eps=float("nan")), ValueError, "eps"),
        (lambda: adv.grpo_advantages(torch.zeros(2, 3), eps=True), TypeError, "eps"),
        (lambda: adv.grpo_advantages(torch.zeros(2, 3), std=["bessel"]), ValueError, "std"),
        (lambda: adv.focal_weight(torch.tensor([0.5]), gamma=float("nan")), ValueError, "gamma"),
        (lambda: adv.focal_weight(torch.tensor([0.5]), gamma="1"), TypeError, "gamma"),
        (lambda: adv.focal_weight(torch.tensor([1.5]), gamma=1.0), ValueError, "mu_hat"),
        (lambda: adv.focal_weight(torch.tensor([float("nan")]), gamma=1.0), ValueError, "mu_hat"),
        (lambda: adv.focal_weight([0.5], gamma=1.0), TypeError, "mu_hat"),
        (
            lambda: adv.group_success_rate(torch.zeros(2, 3), reward_correct=float("inf")),
            ValueError,
            "reward_correct",
        ),
    ],
)
def test_bad_input_names_the_argument(call, error, name):
    with pytest.raises(error, match=name):
        call()


def test_scalars_may_be_numpy_or_one_element_tensors():
    R = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    want = adv.focal_advantages(R, gamma=1.0, eps=1e-6)
    for gamma, eps in (
        (np.float32(1.0), np.float64(1e-6)),
        (torch.tensor(1.0), torch.tensor(1e-6)),
        (1, 1e-6),
    ):
        torch.testing.assert_close(adv.focal_advantages(R, gamma=gamma, eps=eps), want)
    with pytest.raises(TypeError, match="gamma"):
        adv.focal_weight(torch.tensor([0.5]), gamma=np.bool_(True))
    with pytest.raises(ValueError, match="eps must be >= 0"):
        adv.grpo_advantages(R, eps=-1e-6)


def test_focal_advantages_pass_eps_and_rewards_through():
    """Non-default eps and reward scale reach both the z-score and the success rate."""
    R = torch.tensor([[2.0, -1.0, -1.0, -1.0], [2.0, 2.0, -1.0, 0.5]], dtype=torch.float64)
    got = adv.focal_advantages(
        R, gamma=1.0, reward_correct=2.0, reward_wrong=-1.0, std="population", eps=0.5
    )
    want = ref.focal_advantages(
        R.numpy(), gamma=1.0, reward_correct=2.0, reward_wrong=-1.0, std="population", eps=0.5
    )
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    mu_hat = (R.mean(dim=1) + 1.0) / 3.0
    torch.testing.assert_close(
        got, (1 - mu_hat)[:, None] * adv.grpo_advantages(R, std="population", eps=0.5)
    )


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: adv.focal_weight([0.5], gamma=1.0),
            TypeError,
            r"^mu_hat must be a torch\.Tensor, got list$",
        ),
        (
            lambda: adv.focal_weight(torch.tensor([True]), gamma=1.0),
            TypeError,
            r"^mu_hat must be real numbers, got dtype torch\.bool$",
        ),
        (
            lambda: adv.focal_weight(torch.tensor([0.5 + 0j]), gamma=1.0),
            TypeError,
            r"^mu_hat must be real numbers, got dtype torch\.complex64$",
        ),
        (
            lambda: adv.focal_weight(torch.tensor([0.2, 1.5]), gamma=1.0),
            ValueError,
            r"^mu_hat must lie in \[0, 1\], got mu_hat=1\.5$",
        ),
        (
            lambda: adv.focal_weight(torch.tensor([0.5]), gamma="1"),
            TypeError,
            r"^gamma must be a real number, got str gamma='1'$",
        ),
        (
            lambda: adv.focal_weight(torch.tensor([0.5]), gamma=-0.5),
            ValueError,
            r"^gamma must be >= 0, got gamma=-0\.5$",
        ),
        (
            lambda: adv.focal_weight(torch.tensor([0.5]), gamma=float("inf")),
            ValueError,
            r"^gamma must be finite, got gamma=inf$",
        ),
        (
            lambda: adv.group_success_rate(torch.zeros(1, 2), reward_correct=None),
            TypeError,
            r"^reward_correct must be a real number, got NoneType reward_correct=None$",
        ),
        (
            lambda: adv.group_success_rate(torch.zeros(1, 2), reward_wrong="0"),
            TypeError,
            r"^reward_wrong must be a real number, got str reward_wrong='0'$",
        ),
        (
            lambda: adv.group_success_rate(torch.zeros(1, 2), reward_correct=0.0, reward_wrong=1.0),
            ValueError,
            r"^reward_correct must exceed reward_wrong, got reward_correct=0\.0 <= "
            r"reward_wrong=1\.0$",
        ),
        (
            lambda: adv.grpo_advantages(torch.zeros(3)),
            ValueError,
            r"^rewards must have shape \(B, N\) with B, N >= 1, got shape \(3,\)$",
        ),
        (
            lambda: adv.grpo_advantages(torch.zeros(0, 3)),
            ValueError,
            r"^rewards must have shape \(B, N\)",
        ),
        (
            lambda: adv.grpo_advantages(torch.zeros(2, 0)),
            ValueError,
            r"^rewards must have shape \(B, N\)",
        ),
        (
            lambda: adv.grpo_advantages(torch.tensor([[1.0, float("-inf")]])),
            ValueError,
            r"^rewards must be finite, got rewards=-inf$",
        ),
        (
            lambda: adv.grpo_advantages(torch.tensor([[1 + 1j, 0j]])),
            TypeError,
            r"^rewards must be real numbers, got dtype torch\.complex64$",
        ),
        (
            lambda: adv.grpo_advantages(torch.zeros(2, 2), std="sample"),
            ValueError,
            r"^std must be one of \('bessel', 'population', 'none'\), got std='sample'$",
        ),
        (
            lambda: adv.grpo_advantages(torch.zeros(2, 1), std="bessel"),
            ValueError,
            r"^the Bessel std needs a group of N >= 2, got N=1$",
        ),
    ],
)
def test_error_messages_in_full(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_success_rate_is_clipped_for_rewards_outside_the_range_and_int_rewards_work():
    R = torch.tensor([[2.0, 2.0], [-1.0, -3.0], [1.0, 0.0]])
    torch.testing.assert_close(adv.group_success_rate(R), torch.tensor([1.0, 0.0, 0.5]))
    Ri = torch.tensor([[1, 0, 0, 0]])  # integer rewards are promoted to float
    torch.testing.assert_close(adv.grpo_advantages(Ri), adv.grpo_advantages(Ri.float()))
    assert adv.focal_weight(torch.tensor([1.0, 0.0]), gamma=0.0).tolist() == [1.0, 1.0]


def test_std_none_is_mean_centred_only():
    R = torch.tensor([[2.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(adv.grpo_advantages(R, std="none"), R - R.mean(dim=1, keepdim=True))
    torch.testing.assert_close(
        adv.focal_advantages(R, gamma=0.0, std="none", reward_correct=2.0),
        adv.mean_centred_advantages(R),
    )


def test_groups_of_one_and_the_tensor_type_message():
    """N = 1 is a valid group for the population std and for mean-centring (A = 0)."""
    for std in ("population", "none"):
        assert (adv.grpo_advantages(torch.tensor([[3.0], [0.5]]), std=std) == 0).all()
    with pytest.raises(
        TypeError, match=r"^rewards must be a torch\.Tensor of shape \(B, N\), got list$"
    ):
        adv.grpo_advantages([[1.0, 0.0]])


def test_maxrl_advantages_are_r_minus_mu_over_mu_and_grpo_times_the_weighting():
    """MaxRL (arXiv 2602.02710) on 0/1 verdicts: (r - mu_hat) / mu_hat per group, 0 when no
    completion is correct; GRPO's advantage (population std, eps 0) times
    fgrpo_theory.weighting.maxrl()'s w(mu_hat) is the same."""
    maxrl_advantages = adv.maxrl_advantages
    from fgrpo_theory.weighting import maxrl

    correct = torch.tensor(
        [[1, 0, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool
    )
    A = maxrl_advantages(correct)
    r = correct.double()
    mu = r.mean(dim=1, keepdim=True)
    expected = torch.where(mu > 0, (r - mu) / mu.clamp_min(1e-300), 0.0)
    torch.testing.assert_close(A.double(), expected)
    grpo = adv.grpo_advantages(r[:2], std="population", eps=0.0)
    w = torch.as_tensor(maxrl()(mu[:2, 0].numpy()))
    torch.testing.assert_close((w[:, None] * grpo).float(), A[:2], rtol=1e-6, atol=1e-6)
    assert A[2].abs().sum() == 0 and A[3].abs().sum() == 0
    with pytest.raises(ValueError, match="groups, N"):
        maxrl_advantages(torch.ones(4))


def test_maxrl_weight_is_the_numpy_weighting():
    from fgrpo_theory.weighting import maxrl

    mu = torch.linspace(0.0, 1.0, 33, dtype=torch.float64)
    np.testing.assert_allclose(adv.maxrl_weight(mu).numpy(), maxrl()(mu.numpy()), rtol=1e-12)
    assert adv.maxrl_weight(torch.tensor([0.0])).item() == 0.0


def test_success_rate_is_x_over_n_from_the_verdicts():
    from fgrpo_llm.advantages import focal_advantages, group_success_rate, success_rate

    correct = torch.tensor([[True, False, False], [True, True, True]])  # (B=2, N=3)
    mu = success_rate(correct)
    assert mu.dtype == torch.float32 and mu.tolist() == pytest.approx([1 / 3, 1.0])
    rewards = correct.float()
    assert torch.equal(success_rate(correct), group_success_rate(rewards))
    # the verdicts decide mu_hat even when rewards are shaped otherwise
    shaped = rewards * 2.0 - 0.5  # correct 1.5, wrong -0.5
    A = focal_advantages(shaped, gamma=1.0, correct=correct)
    B = focal_advantages(rewards, gamma=1.0)
    assert torch.allclose(A, B)
    with pytest.raises(ValueError, match="rewards' shape"):
        focal_advantages(rewards, gamma=1.0, correct=correct[:, :2])
    with pytest.raises(ValueError, match="shape"):
        success_rate(correct[None])
    with pytest.raises(TypeError, match="bool"):
        success_rate(rewards)


def test_success_rate_counts_verdicts_and_names_a_bad_input():
    """mu_hat = X / N from the verdicts, N = 1 included; a non-bool tensor is named by its dtype,
    anything else by its type; a (B, 0) or 1-d input is refused."""
    assert adv.success_rate(torch.tensor([[True], [False]])).tolist() == [1.0, 0.0]
    assert adv.success_rate(torch.tensor([[True, False, True, True]])).tolist() == [0.75]
    with pytest.raises(TypeError, match=r"torch\.float32"):
        adv.success_rate(torch.ones(2, 3))
    with pytest.raises(TypeError, match="got list"):
        adv.success_rate([[True, False]])
    for bad in (torch.ones(2, 0, dtype=torch.bool), torch.ones(3, dtype=torch.bool)):
        with pytest.raises(ValueError, match=r"\(B, N\) with N >= 1"):
            adv.success_rate(bad)


def test_maxrl_refuses_what_is_not_a_table_of_verdicts():
    whole = r"^correct must be a \(groups, N\) tensor of verdicts$"
    for bad in ([[1, 0]], torch.ones(4)):
        with pytest.raises(ValueError, match=whole):
            adv.maxrl_advantages(bad)


def test_the_engines_group_weights_count_a_score_at_the_threshold_as_correct():
    """``group_focal_weights`` (verl and TRL): scores >= the threshold are correct, NaN wrong;
    a score exactly at the threshold counts in X."""
    from fgrpo_llm.integrations.focal import FocalSettings, group_focal_weights

    settings = FocalSettings(gamma=1.0, correct_threshold=1.0)  # rewards 1 / 0
    scores = torch.tensor([1.0, 0.999, float("nan"), 0.0, 1.0, 1.0])
    g, X, N = group_focal_weights(scores, ["a", "a", "a", "a", "b", "b"], settings)
    assert X.tolist() == [1, 1, 1, 1, 2, 2] and N.tolist() == [4, 4, 4, 4, 2, 2]
    assert g.tolist() == pytest.approx([0.75] * 4 + [0.0] * 2)


@settings(max_examples=30, deadline=None)
@given(
    X=st.lists(st.integers(0, 8), min_size=1, max_size=6),
    spelling=st.sampled_from(["none", "focal:0", "focal:0.5", "focal:2", "maxrl"]),
    std=st.sampled_from(["bessel", "population"]),
)
def test_weighted_advantages_are_the_weight_times_grpo_bit_for_bit(X, spelling, std):
    """weighted_advantages(w, R, correct): g = w(X / N) from the verdicts, A = g * A_GRPO (MaxRL:
    (r - mu_hat) / mu_hat), exactly as the formulas written out here; active where R varies."""
    from fgrpo_theory.weighting import parse_weighting

    N = 8
    correct = torch.tensor([[j < x for j in range(N)] for x in X])  # (B, N)
    R = correct.float() * 2.0 - 0.5  # (B, N) rewards other than the verdicts
    g, A, active = adv.weighted_advantages(spelling, R, correct, std=std, eps=1e-6)
    mu = correct.sum(dim=1).float() / N  # (B,)
    w = parse_weighting(spelling)
    if w.kind == "maxrl":
        g_ref = torch.where(mu > 0, ((1 - mu) / mu.clamp_min(1e-30)).sqrt(), 0.0)
        r = correct.float()
        A_ref = torch.where(mu[:, None] > 0, (r - mu[:, None]) / mu[:, None].clamp_min(1e-38), 0.0)
    else:
        g_ref = (1.0 - mu).pow(w.gamma) if w.gamma else torch.ones_like(mu)
        A_ref = g_ref[:, None] * adv.grpo_advantages(R, std=std, eps=1e-6)
    assert torch.equal(g, g_ref) and torch.equal(A, A_ref)
    assert active.tolist() == [0 < x < N for x in X]
    np.testing.assert_allclose(g.numpy(), w(mu.double().numpy()), rtol=1e-6)


def test_weighted_advantages_of_no_group_and_bad_shapes():
    empty = torch.zeros((0, 4))
    g, A, active = adv.weighted_advantages("focal:1", empty, empty.bool())
    assert g.shape == (0,) and A.shape == (0, 4) and active.shape == (0,)
    with pytest.raises(ValueError, match="shape"):
        adv.weighted_advantages("maxrl", torch.zeros((2, 4)), torch.zeros((2, 3), dtype=torch.bool))
    with pytest.raises(ValueError, match="ppo"):
        adv.weighted_advantages("ppo", torch.zeros((2, 4)), torch.zeros((2, 4), dtype=torch.bool))
