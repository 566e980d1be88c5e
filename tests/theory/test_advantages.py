"""The numpy reference for group advantages: z-score conventions, mean-only, focal scaling."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from fgrpo_theory.advantages import (
    TRL_CONVENTION,
    VERL_CONVENTION,
    focal_advantages,
    focal_group_weights,
    group_success_rate,
    grpo_advantages,
    mean_centred_advantages,
)

binary_groups = arrays(
    np.float64,
    st.tuples(st.integers(1, 4), st.integers(2, 12)),
    elements=st.sampled_from([0.0, 1.0]),
)


def loop_reference(R, ddof, eps):
    """Plain-Python z-score of each row."""
    out = np.empty_like(R)
    for b, row in enumerate(R):
        N = len(row)
        mean = sum(row) / N
        sd = (sum((r - mean) ** 2 for r in row) / (N - ddof)) ** 0.5
        out[b] = [(r - mean) / (sd + eps) for r in row]
    return out


@settings(max_examples=60, deadline=None)
@given(R=binary_groups)
def test_grpo_matches_loop_reference(R):
    np.testing.assert_allclose(
        grpo_advantages(R, **TRL_CONVENTION), loop_reference(R, 1, 1e-4), rtol=1e-12, atol=1e-15
    )
    np.testing.assert_allclose(
        grpo_advantages(R, std="population", eps=1e-6),
        loop_reference(R, 0, 1e-6),
        rtol=1e-12,
        atol=1e-15,
    )


@settings(max_examples=60, deadline=None)
@given(R=binary_groups)
def test_advantages_sum_to_zero_and_constant_groups_vanish(R):
    for A in (grpo_advantages(R, **VERL_CONVENTION), mean_centred_advantages(R)):
        np.testing.assert_allclose(A.sum(axis=-1), 0.0, atol=1e-12)
    constant = (R == R[..., :1]).all(axis=-1)
    assert np.all(grpo_advantages(R, std="bessel", eps=0.0)[constant] == 0.0)


def test_conventions_differ_as_documented():
    R = np.array([1.0, 0.0, 0.0, 0.0])
    pop = grpo_advantages(R, std="population", eps=0.0)
    bes = grpo_advantages(R, std="bessel", eps=0.0)
    np.testing.assert_allclose(bes, pop * np.sqrt(3 / 4), rtol=1e-14)
    assert TRL_CONVENTION == {"std": "bessel", "eps": 1e-4} and VERL_CONVENTION["eps"] == 1e-6


@settings(max_examples=60, deadline=None)
@given(R=binary_groups, gamma=st.sampled_from([0.0, 0.5, 1.0, 2.0]))
def test_focal_is_weight_times_grpo(R, gamma):
    A = grpo_advantages(R, std="bessel", eps=1e-6)
    F = focal_advantages(R, gamma=gamma, std="bessel", eps=1e-6)
    mu_hat = R.mean(axis=-1)
    np.testing.assert_allclose(F, (1 - mu_hat)[:, None] ** gamma * A, rtol=1e-12, atol=1e-15)
    if gamma == 0.0:
        np.testing.assert_array_equal(F, A)


def test_focal_with_plus_minus_one_rewards():
    # categorical simulator rewards: R_c = +1, R_w = -1
    R = np.array([[1.0, -1.0, -1.0, -1.0]])
    assert group_success_rate(R, reward_correct=1.0, reward_wrong=-1.0) == pytest.approx([0.25])
    g = focal_group_weights(R, gamma=1.0, reward_correct=1.0, reward_wrong=-1.0)
    np.testing.assert_allclose(g, [0.75])


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: grpo_advantages([1.0, 0.0], std="sample", eps=1e-4), "std"),
        (lambda: grpo_advantages([1.0, 0.0], std="bessel", eps=-1.0), "eps"),
        (lambda: grpo_advantages([[1.0]], std="bessel", eps=1e-4), "N"),
        (lambda: grpo_advantages([1.0, np.nan], std="bessel", eps=1e-4), "rewards"),
        (lambda: focal_advantages([1.0, 0.0], gamma=-1, std="bessel", eps=1e-4), "gamma"),
        (lambda: focal_advantages([2.0, 0.0], gamma=1, std="bessel", eps=1e-4), "rewards"),
    ],
)
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=rf"(?<![\w.]){name}(?!\w)"):  # the name as a word
        call()


@pytest.mark.parametrize("N", [3, 7, 8, 10])
@pytest.mark.parametrize("value", [0.7, 0.1, 1 / 3, 1e-300, -2.5, 123.456])
def test_constant_group_of_any_reward_gets_exactly_zero(value, N):
    """A group of 0.7s: the mean can round off 0.7 (for N = 3, 7, 10 in numpy's summation), so
    a std-based test of constancy saw a spread and gave nonzero advantages; max == min decides
    exactly."""
    R = np.array([[value] * N, ([1.0, 0.0] * N)[:N]])
    for std in ("bessel", "population"):
        for eps in (0.0, 1e-6):
            A = grpo_advantages(R, std=std, eps=eps)
            assert (A[0] == 0.0).all() and (A[1] != 0.0).all()
    assert (mean_centred_advantages(R)[0] == 0.0).all()
    assert (
        focal_advantages(
            R,
            gamma=0.5,
            std="bessel",
            eps=1e-6,
            reward_wrong=min(0.0, value),
            reward_correct=max(1.0, value),
        )[0]
        == 0.0
    ).all()


def test_huge_finite_rewards_do_not_overflow():
    A = grpo_advantages([[1e308, -1e308, 0.0]], std="population", eps=1e-6)
    np.testing.assert_allclose(A, [[np.sqrt(1.5), -np.sqrt(1.5), 0.0]], rtol=1e-12)
    mu_hat = group_success_rate([[1e308, -1e308]], reward_correct=1e308, reward_wrong=-1e308)
    assert mu_hat == pytest.approx([0.5])


@pytest.mark.parametrize(
    "call, error, name",
    [
        (lambda: grpo_advantages([[1.0, 0.0]], std=["bessel"], eps=1e-4), ValueError, "std"),
        (lambda: grpo_advantages([[1.0, 0.0]], std="bessel", eps=True), TypeError, "eps"),
        (lambda: grpo_advantages([[True, False]], std="bessel", eps=1e-4), TypeError, "rewards"),
        (lambda: grpo_advantages([["a", "b"]], std="bessel", eps=1e-4), TypeError, "rewards"),
        (lambda: grpo_advantages([[1.0, np.inf]], std="bessel", eps=1e-4), ValueError, "rewards"),
        (lambda: grpo_advantages(0.7, std="bessel", eps=1e-4), ValueError, "rewards"),
        (lambda: group_success_rate([[1.0, 0.0]], reward_correct="1"), TypeError, "reward_correct"),
        (lambda: group_success_rate([[1.0, 0.0]], reward_wrong=np.nan), ValueError, "reward_wrong"),
        (
            lambda: group_success_rate([[1.0, 0.0]], reward_correct=0.0, reward_wrong=1.0),
            ValueError,
            "reward_correct must exceed reward_wrong",
        ),
    ],
)
def test_wrong_types_and_values_name_the_argument(call, error, name):
    with pytest.raises(error, match=name):
        call()


def test_constant_groups_with_eps_zero_come_without_runtime_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        A = grpo_advantages([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]], std="bessel", eps=0.0)
        F = focal_advantages(
            [[0.0, 0.0], [1e308, -1e308]],
            gamma=1.0,
            std="population",
            eps=0.0,
            reward_correct=1e308,
            reward_wrong=-1e308,
        )
    assert (A[0] == 0).all() and np.isfinite(F).all() and (F[0] == 0).all()


def test_groups_of_very_different_scales_and_leading_axes():
    """Each group is normalised on its own (the overflow guard rescales per group, never by the
    largest reward of the batch), over the last axis of any leading shape."""
    R = np.array([[1e-300, 3e-300, 2e-300], [1e300, -1e300, 0.0]])
    np.testing.assert_allclose(
        mean_centred_advantages(R)[0], [-1e-300, 1e-300, 0.0], rtol=1e-12, atol=1e-312
    )
    np.testing.assert_allclose(
        grpo_advantages(R, std="population", eps=0.0)[0],
        [-np.sqrt(1.5), np.sqrt(1.5), 0.0],
        rtol=1e-12,
    )
    rng = np.random.default_rng(0)
    R3 = rng.choice([0.0, 0.5, 2.0], size=(2, 3, 5))  # (..., N) with two leading axes
    flat = R3.reshape(6, 5)
    np.testing.assert_allclose(
        mean_centred_advantages(R3).reshape(6, 5),
        flat - flat.mean(axis=1, keepdims=True),
        rtol=1e-12,
        atol=1e-15,
    )
    np.testing.assert_allclose(
        grpo_advantages(R3, std="bessel", eps=1e-4).reshape(6, 5),
        loop_reference(flat, 1, 1e-4),
        rtol=1e-12,
        atol=1e-15,
    )
    np.testing.assert_allclose(
        focal_group_weights(R3, gamma=1.0, reward_correct=2.0).reshape(6),
        1 - flat.mean(axis=1) / 2,
        rtol=1e-12,
    )


def test_default_rewards_are_one_and_zero():
    R = np.array([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
    np.testing.assert_allclose(focal_group_weights(R, gamma=1.0), [0.75, 0.25], rtol=1e-15)
    np.testing.assert_allclose(group_success_rate(R), [0.25, 0.75], rtol=1e-15)
    np.testing.assert_allclose(
        focal_advantages(R, gamma=2.0, std="bessel", eps=0.0),
        np.array([[0.5625], [0.0625]]) * grpo_advantages(R, std="bessel", eps=0.0),
        rtol=1e-15,
    )


def test_subnormal_rewards_and_equal_reward_bounds():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # eps / s overflows to inf for a subnormal scale s: silent
        A = grpo_advantages([[1e-320, 0.0]], std="population", eps=1e-6)
    assert np.all(np.abs(A) < 1e-300)
    with pytest.raises(ValueError, match=r"^rewards must be finite, got rewards=inf$"):
        grpo_advantages([[1.0, np.inf, 0.0]], std="bessel", eps=0.0)
    with pytest.raises(ValueError, match="^reward_correct must exceed reward_wrong"):
        group_success_rate([[1.0, 1.0]], reward_correct=1.0, reward_wrong=1.0)
