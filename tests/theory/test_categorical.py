"""Property tests of the one-step categorical theory (paper Section 2.3, App. C-H): Eq. 5, Eq. 17,
Proposition 3.2, Lemma H.1 / Corollary H.2."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fgrpo_theory.categorical import (
    expected_p_neg_given_k,
    expected_p_pos_given_k,
    expected_s_r_given_k,
    group_stats,
    logit_update,
    predicted_delta_q_pos,
    predicted_delta_q_u_pos,
    sampled_mask,
    softmax,
)


@st.composite
def problems(draw):
    """A random policy, correct mask (both classes present), group and rewards R_c > R_w."""
    K = draw(st.integers(3, 25))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, draw(st.floats(0.1, 2.0)), size=K)
    n_correct = draw(st.integers(1, K - 1))
    correct = np.zeros(K, dtype=bool)
    correct[rng.choice(K, n_correct, replace=False)] = True
    N = draw(st.integers(1, 12))
    p = softmax(z)
    actions = rng.choice(K, size=N, p=p)
    R_w = draw(st.floats(-2.0, 1.0))
    R_c = R_w + draw(st.floats(0.1, 3.0))
    return z, p, correct, actions, R_c, R_w


def _masses(z, correct, actions):
    p = softmax(z)
    unsampled = ~sampled_mask(actions, z.size)
    return p[correct].sum(), p[correct & unsampled].sum()


@given(problems(), st.floats(1e-3, 1.0))
@settings(max_examples=60, deadline=None)
def test_unsampled_actions_move_by_minus_eta_over_N_S_R_p(prob, eta):
    z, p, correct, actions, R_c, R_w = prob
    dz = logit_update(p, correct, actions, eta=eta, R_c=R_c, R_w=R_w)
    s = group_stats(p, correct, actions, R_c=R_c, R_w=R_w)
    unsampled = ~sampled_mask(actions, p.size)
    np.testing.assert_allclose(
        dz[unsampled], -(eta / len(actions)) * s.S_R * p[unsampled], rtol=1e-12, atol=1e-300
    )


@given(problems())
@settings(max_examples=60, deadline=None)
def test_set_sums_partition_the_policy(prob):
    z, p, correct, actions, R_c, R_w = prob
    s = group_stats(p, correct, actions, R_c=R_c, R_w=R_w)
    assert s.P_pos + s.Q_u_pos == pytest.approx(s.Q_pos, abs=1e-12)
    assert s.A_2 + s.B_2 + s.U_2 == pytest.approx(float((p * p).sum()), abs=1e-12)
    assert s.S_R == pytest.approx(R_c * s.P_pos + R_w * s.P_neg, abs=1e-12)


def _first_order_errors(prob, eta):
    z, p, correct, actions, R_c, R_w = prob
    s = group_stats(p, correct, actions, R_c=R_c, R_w=R_w)
    q0, qu0 = _masses(z, correct, actions)
    q1, qu1 = _masses(
        z + logit_update(p, correct, actions, eta=eta, R_c=R_c, R_w=R_w), correct, actions
    )
    return (
        abs((q1 - q0) - predicted_delta_q_pos(s, eta=eta, R_c=R_c, R_w=R_w)),
        abs((qu1 - qu0) - predicted_delta_q_u_pos(s, eta=eta, R_c=R_c, R_w=R_w)),
    )


@given(problems())
@settings(max_examples=60, deadline=None)
def test_eq17_and_prop32_hold_to_second_order_in_eta(prob):
    """|actual - predicted| = O(eta^2): shrinking eta 8x shrinks the error ~64x (at least 25x).
    (eta small enough that the third-order term cannot undo the ratio: at eta = 0.05 a
    three-action case with third/second-order coefficients ~ -14 gave 22x.)"""
    eta = 0.01
    e_big = _first_order_errors(prob, eta)
    e_small = _first_order_errors(prob, eta / 8)
    for big, small in zip(e_big, e_small, strict=True):
        assert small <= big / 25 + 1e-15
        assert big <= 10 * eta**2  # the error itself is small, not just shrinking


def test_first_order_prediction_is_not_trivially_zero():
    """The Eq. 17 prediction matches a non-zero change (guards against comparing 0 with 0)."""
    z = np.array([2.0, 0.5, 0.0, -1.0, 1.0])
    correct = np.array([True, True, True, False, False])
    p = softmax(z)
    actions = np.array([0, 0, 3, 1])
    s = group_stats(p, correct, actions)
    dz = logit_update(p, correct, actions, eta=1e-4)
    q0, qu0 = _masses(z, correct, actions)
    q1, qu1 = _masses(z + dz, correct, actions)
    assert abs(predicted_delta_q_pos(s, eta=1e-4)) > 1e-7
    assert (q1 - q0) == pytest.approx(predicted_delta_q_pos(s, eta=1e-4), rel=1e-3)
    assert (qu1 - qu0) == pytest.approx(predicted_delta_q_u_pos(s, eta=1e-4), rel=1e-3)


def test_prop32_total_correct_mass_rises_while_unsampled_correct_mass_falls():
    """A reward-positive batch on a high-success prompt (S_R > 0): Q_pos up, Q_u,pos down."""
    z = np.concatenate([[4.0], np.full(50, 1.0), np.zeros(20)])
    correct = np.zeros(z.size, dtype=bool)
    correct[:51] = True
    p = softmax(z)
    actions = np.array([0, 0, 0, 60])
    s = group_stats(p, correct, actions)
    assert s.S_R > 0
    assert predicted_delta_q_pos(s, eta=1.0) > 0
    assert predicted_delta_q_u_pos(s, eta=1.0) < 0


@given(problems(), st.floats(1e-3, 1.0))
@settings(max_examples=40, deadline=None)
def test_gamma_zero_reproduces_the_unweighted_update(prob, eta):
    z, p, correct, actions, R_c, R_w = prob
    base = logit_update(p, correct, actions, eta=eta, R_c=R_c, R_w=R_w)
    np.testing.assert_array_equal(
        logit_update(p, correct, actions, eta=eta, R_c=R_c, R_w=R_w, gamma=0.0), base
    )
    mu_hat = correct[actions].mean()
    np.testing.assert_allclose(
        logit_update(p, correct, actions, eta=eta, R_c=R_c, R_w=R_w, gamma=1.0),
        (1 - mu_hat) * base,
        rtol=1e-12,
        atol=1e-300,
    )


def _monte_carlo_given_k(p, correct, k, N, rng, draws=4000):
    """Draws groups with exactly k correct rollouts; returns mean P_pos and P_neg."""
    pc, pn = p[correct] / p[correct].sum(), p[~correct] / p[~correct].sum()
    ic, inn = np.flatnonzero(correct), np.flatnonzero(~correct)
    P_pos = np.empty(draws)
    P_neg = np.empty(draws)
    for d in range(draws):
        a = np.concatenate(
            [ic[rng.choice(ic.size, k, p=pc)], inn[rng.choice(inn.size, N - k, p=pn)]]
        )
        s = group_stats(p, correct, a)
        P_pos[d], P_neg[d] = s.P_pos, s.P_neg
    return P_pos, P_neg


def test_lemma_h1_exact_expectations_match_monte_carlo():
    rng = np.random.default_rng(0)
    z = rng.normal(0, 1.0, 12)
    correct = np.arange(12) < 5
    p = softmax(z)
    N = 6
    for k in (1, 3, 5):
        P_pos, P_neg = _monte_carlo_given_k(p, correct, k, N, rng)
        se_pos, se_neg = P_pos.std() / np.sqrt(P_pos.size), P_neg.std() / np.sqrt(P_neg.size)
        assert abs(P_pos.mean() - expected_p_pos_given_k(p, correct, k)) < 5 * se_pos + 1e-12
        assert abs(P_neg.mean() - expected_p_neg_given_k(p, correct, k, N)) < 5 * se_neg + 1e-12


@given(
    st.integers(0, 2**31 - 1),
    st.integers(3, 30),
    st.integers(1, 16),
    st.floats(-3.0, 0.0),
    st.floats(0.0, 3.0),
)
@settings(max_examples=60, deadline=None)
def test_cor_h2_expected_S_R_is_nondecreasing_in_k_when_R_w_le_0(seed, K, N, R_w, R_c):
    """Needs R_c >= 0 as well (see the next test): both terms then move the same way."""
    assume(R_c > R_w)
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1.5, K)
    correct = rng.random(K) < 0.5
    assume(0 < correct.sum() < K)
    p = softmax(z)
    k = np.arange(N + 1)
    S = expected_s_r_given_k(p, correct, k, N, R_c=R_c, R_w=R_w)
    assert np.all(np.diff(S) >= -1e-12)
    assert np.all(np.diff(expected_p_pos_given_k(p, correct, k)) >= -1e-12)


def test_cor_h2_can_fail_when_both_rewards_are_negative():
    """R_c = -1 > R_w = -2 (R_w <= 0 holds, R_c < 0): E[S_R | X = k] can decrease in k, so
    Corollary H.2 also needs R_c >= 0 (true for the paper's +1/-1 and 1/0 rewards)."""
    p = softmax(np.array([1.0, 0.0, -0.5]))
    correct = np.array([True, False, False])
    S = expected_s_r_given_k(p, correct, np.arange(4), 3, R_c=-1.0, R_w=-2.0)
    assert np.any(np.diff(S) < 0)


def test_cor_h2_monte_carlo_agrees_with_the_exact_curve():
    rng = np.random.default_rng(1)
    z = rng.normal(0, 1.0, 10)
    correct = np.arange(10) < 4
    p = softmax(z)
    N = 5
    exact = expected_s_r_given_k(p, correct, np.arange(N + 1), N)
    mc = []
    for k in range(N + 1):
        P_pos, P_neg = _monte_carlo_given_k(p, correct, k, N, rng, draws=1500)
        mc.append((P_pos - P_neg).mean())
    np.testing.assert_allclose(mc, exact, atol=0.01)
    assert np.all(np.diff(exact) > 0)


@pytest.mark.parametrize(
    "bad",
    [
        dict(R_c=0.0, R_w=0.0),
        dict(R_c=-1.0, R_w=1.0),
    ],
)
def test_rewards_must_be_ordered(bad):
    p = softmax(np.zeros(4))
    with pytest.raises(ValueError, match="R_c"):
        group_stats(p, np.array([1, 0, 1, 0], bool), [0, 1], **bad)


def test_bad_actions_and_policy_are_rejected():
    p = softmax(np.zeros(4))
    mask = np.array([1, 0, 1, 0], bool)
    with pytest.raises(ValueError, match="actions"):
        group_stats(p, mask, [0, 4])
    with pytest.raises(ValueError, match="p must"):
        group_stats(np.array([0.5, 0.6, 0, 0]), mask, [0])
    with pytest.raises(ValueError, match="k must"):
        expected_p_neg_given_k(p, mask, 5, 3)


def test_softmax_of_infinite_logits():
    """-inf is a masked action (probability 0); +inf, NaN and all -inf have no softmax."""
    p = softmax(np.array([0.0, -np.inf, 1.0]))
    assert p[1] == 0.0 and p.sum() == pytest.approx(1.0) and np.isfinite(p).all()
    with pytest.raises(ValueError, match=r"z must not contain \+inf, got z\[1\]=inf"):
        softmax(np.array([0.0, np.inf]))
    with pytest.raises(ValueError, match="z must have at least one finite logit"):
        softmax(np.array([-np.inf, -np.inf]))
    with pytest.raises(ValueError, match="z must not be NaN"):
        softmax(np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match="z must be a 1-D logit vector"):
        softmax(np.zeros((2, 2)))
    with warnings.catch_warnings():  # a span beyond float64 underflows to 0, without a warning
        warnings.simplefilter("error")
        np.testing.assert_array_equal(softmax(np.array([1.7e308, -1.7e308])), [1.0, 0.0])


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(eta=np.nan), "eta must not be NaN"),
        (dict(eta=np.inf), "eta must be finite"),
        (dict(eta=-0.1), "eta must be >= 0, got eta=-0.1"),
        (dict(eta=0.1, R_c=np.nan), "R_c must not be NaN"),
        (dict(eta=0.1, R_w=np.inf), "R_w must be finite"),
        (dict(eta=0.1, R_c=-1.0, R_w=1.0), "need R_c > R_w, got R_c=-1.0, R_w=1.0"),
        (dict(eta=True), "eta must be a number, not a bool"),
        (dict(eta="0.1"), "eta must be a number or an array of numbers"),
    ],
)
def test_eta_and_rewards_are_checked_everywhere(kw, message):
    p = softmax(np.zeros(4))
    correct = np.array([1, 0, 1, 0], bool)
    s = group_stats(p, correct, [0, 1])
    error = TypeError if isinstance(kw["eta"], (bool, str)) else ValueError
    for call in (
        lambda: logit_update(p, correct, [0, 1], **kw),
        lambda: predicted_delta_q_pos(s, **kw),
        lambda: predicted_delta_q_u_pos(s, **kw),
    ):
        with pytest.raises(error, match=message):
            call()


def test_eq17_keeps_its_digits_when_the_prompt_is_nearly_solved():
    """Q_neg = 1 - Q_pos cancels when Q_pos is within rounding of 1 (Q_neg = 7.9e-19 here read
    0, and Eq. 17 lost every digit); summed over the incorrect actions it is exact. Reference:
    Eq. 17 in 50-digit mpmath."""
    import mpmath as mp

    mp.mp.dps = 50
    z = np.array([1.0, 0.0, 0.5, -40.0])
    correct = np.array([True, True, True, False])
    actions = [0, 0, 1]
    s = group_stats(softmax(z), correct, actions)
    e = [mp.e ** mp.mpf(v) for v in z]
    p = [v / sum(e) for v in e]
    q_pos, q_neg = p[0] + p[1] + p[2], p[3]
    a2, u_pos2, u_neg2, s_r = p[0] ** 2 + p[1] ** 2, p[2] ** 2, p[3] ** 2, p[0] + p[1]
    ref = (1 - s_r) * q_neg * a2 + s_r * (q_pos * u_neg2 - q_neg * u_pos2)  # B = {}, eta / N = 1/3
    assert s.Q_neg == pytest.approx(float(q_neg), rel=1e-13)
    assert predicted_delta_q_pos(s, eta=3.0) == pytest.approx(float(ref), rel=1e-12)


def test_the_rewards_are_those_the_stats_were_built_with():
    """S_R = R_c P_pos + R_w P_neg was computed in group_stats: other rewards passed to Eq. 17 /
    Prop. 3.2 would mix two reward schemes, so they are refused; the same ones are accepted."""
    p, correct = softmax(np.array([0.0, 1.0, -1.0, 0.5])), np.array([True, False, True, False])
    s = group_stats(p, correct, [0, 1, 1], R_c=1.0, R_w=0.0)
    for predict in (predicted_delta_q_pos, predicted_delta_q_u_pos):
        with pytest.raises(ValueError, match=r"R_w=-1.0 differs from the R_w=0.0 that s was built"):
            predict(s, eta=1.0, R_w=-1.0)
        with pytest.raises(ValueError, match=r"R_c=2.0 differs from the R_c=1.0 that s was built"):
            predict(s, eta=1.0, R_c=2.0)
        assert predict(s, eta=1.0, R_c=1.0, R_w=0.0) == predict(s, eta=1.0)


def test_wrong_types_for_the_policy_arguments():
    p = softmax(np.zeros(4))
    with pytest.raises(TypeError, match=r"s must be a GroupStats \(from group_stats\), got dict"):
        predicted_delta_q_pos({"S_R": 0.1}, eta=0.1)
    with pytest.raises(ValueError, match=r"gamma must be a single number, got shape \(2,\)"):
        logit_update(p, np.array([1, 0, 1, 0], bool), [0], eta=0.1, gamma=[0.5, 1.0])
    with pytest.raises(TypeError, match="correct must be a boolean array"):
        group_stats(p, np.array([0.5, 0.0, 1.0, 0.0]), [0])
    with pytest.raises(ValueError, match="correct must hold booleans"):
        group_stats(p, np.array([2, 0, 1, 0]), [0])
    with pytest.raises(ValueError, match="K must be an integer >= 1"):
        sampled_mask([0], 0)
    with pytest.raises(ValueError, match=r"^K must be a single number, got shape \(2,\)$"):
        sampled_mask([0], [3, 4])
    with pytest.raises(ValueError, match="N must be a single number"):
        expected_p_neg_given_k(p, np.array([1, 0, 1, 0], bool), 1, [3, 4])
    with pytest.raises(ValueError, match="R_c"):
        expected_s_r_given_k(p, np.array([1, 0, 1, 0], bool), 1, 3, R_c=np.nan)


def test_a_single_correct_action_comes_without_runtime_warnings():
    """q_pos = 1 for a lone correct action: log1p(-1) = -inf is handled, not warned about."""
    import warnings

    p = softmax(np.array([1.0, 0.0, 0.0]))
    correct = np.array([True, False, False])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = expected_p_pos_given_k(p, correct, np.arange(4))
    np.testing.assert_allclose(got, [0.0, p[0], p[0], p[0]], rtol=1e-15)


def test_policy_check_rejects_negative_masses_and_accepts_zero_masses():
    mask = np.array([True, False, False])
    with pytest.raises(ValueError, match=r"^p must be a 1-D probability vector, got shape \(3,\)"):
        group_stats(np.array([1.5, -0.5, 0.0]), mask, [0])  # sums to 1, but p_1 < 0
    s = group_stats(np.array([0.5, 0.5, 0.0]), mask, [0, 1])  # a zero-probability action
    assert (s.P_pos, s.P_neg, s.Q_u_pos) == (0.5, 0.5, 0.0)


def test_softmax_is_shift_invariant_for_large_logits():
    for z in ([1000.0, 999.0], [-1000.0, -1001.0]):
        np.testing.assert_allclose(softmax(np.array(z)), softmax(np.array([1.0, 0.0])), rtol=1e-15)


def test_lemma_h1_errors_quote_the_empty_class_and_the_group_size():
    p = np.array([0.25, 0.75])
    with pytest.raises(
        ValueError, match=r"^z must have at least one finite logit, got every z = -inf$"
    ):
        softmax(np.array([-np.inf, -np.inf]))
    with pytest.raises(
        ValueError, match=r"^the policy puts no mass on correct actions \(mu = 0\)$"
    ):
        expected_p_pos_given_k(p, np.array([False, False]), 2)
    with pytest.raises(
        ValueError, match=r"^the policy puts no mass on correct actions \(mu = 0\)$"
    ):
        expected_p_pos_given_k(np.array([0.0, 1.0]), np.array([True, False]), 2)
    with pytest.raises(
        ValueError, match=r"^the policy puts no mass on incorrect actions \(mu = 1\)$"
    ):
        expected_p_neg_given_k(p, np.array([True, True]), 1, 2)
    with pytest.raises(
        ValueError, match=r"^the policy puts no mass on incorrect actions \(mu = 1\)$"
    ):
        expected_p_neg_given_k(np.array([1.0, 0.0]), np.array([True, False]), 1, 2)
    with pytest.raises(ValueError, match=r"^N must be an integer >= 1, got N=0$"):
        expected_p_neg_given_k(p, np.array([True, False]), 0, 0)
