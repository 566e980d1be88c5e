"""The library's last inexact corners, each against an mpmath oracle: the learning-rate multiplier
m_gamma (paper Section 5.2) for large gamma, the success rate mu_hat and the focal weight
g = (1 - mu_hat)^gamma (Eq. 11-13) for rewards at the ends of the float64 range, the planner's
active fraction and update shares for pass rates near the float64 underflow, and gamma refused
as an array where it must be one number."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from fgrpo_theory.advantages import focal_advantages, focal_group_weights, group_success_rate
from fgrpo_theory.focal import lr_multiplier
from fgrpo_theory.plan import plan

ULP = np.finfo(np.float64).eps


def _m_gamma_oracle(gamma: float) -> float:
    """m_gamma = B(3/2, gamma + 3/2) / B(3/2, 3/2), with enough digits for the gamma given."""
    with mp.workdps(40 + int(mp.log10(gamma + 10))):
        g = mp.mpf(gamma)
        return float(mp.beta(mp.mpf(3) / 2, g + mp.mpf(3) / 2) / mp.beta(1.5, 1.5))


@pytest.mark.parametrize(
    "gamma", [0.0, 1e-300, 0.1, 0.5, 1.0, 2.0, 3.7, 8.4, 10.0, 99.3, 1e3, 12345.6, 1e6, 1e10, 1e15]
)
def test_lr_multiplier_is_exact_to_a_few_ulp(gamma):
    """Was exp(betaln - betaln): a relative error of 2.7e-10 at gamma = 1e6."""
    ref = _m_gamma_oracle(gamma)
    got = float(lr_multiplier(gamma))
    assert abs(got - ref) <= 4 * ULP * ref, (gamma, got, ref)


def test_lr_multiplier_far_out_and_vectorised():
    gammas = np.array([1e100, 1e200, 1e300])
    got = lr_multiplier(gammas)
    for g, v in zip(gammas, got, strict=True):
        ref = _m_gamma_oracle(float(g))
        assert abs(v - ref) <= 4 * ULP * ref + 5e-324, (g, v, ref)
    assert lr_multiplier(0.0) == 1.0 and lr_multiplier(1.0) == 0.5 and lr_multiplier(2.0) == 5 / 16


def test_success_rate_with_a_subnormal_correct_reward_is_not_nan():
    mu = group_success_rate(np.array([0.0, 0.0]), reward_correct=5e-324)
    assert mu == 0.0
    mu = group_success_rate(np.array([5e-324, 0.0]), reward_correct=5e-324)
    assert mu == 0.5


def _g_oracle(rewards, R_c, R_w, gamma) -> float:
    with mp.workdps(80):
        R = [mp.mpf(float(r)) for r in rewards]
        miss = sum((mp.mpf(R_c) - r) / (mp.mpf(R_c) - mp.mpf(R_w)) for r in R) / len(R)
        return float(mp.exp(mp.mpf(gamma) * mp.log(miss))) if miss > 0 else 0.0


@pytest.mark.parametrize(
    "rewards, R_c, R_w, gamma",
    [
        ([1, 0, 0, 0], 1.0, -(2.0**63), 1e-300),
        ([1, 0, 0, 0], 1.0, -(2.0**63), 1.0),
        ([1, 0, 0, 0], 1.0, -1e300, 0.5),
        ([1, 1, 1, 0], 1.0, 0.0, 3.0),
        ([5e-324, 0.0], 5e-324, 0.0, 1.0),
        ([1e308, -1e308, 1e308], 1e308, -1e308, 2.0),
    ],
)
def test_focal_weight_of_a_group_against_mpmath(rewards, R_c, R_w, gamma):
    """g = (1 - mu_hat)^gamma from 1 - mu_hat = mean (R_c - R_i) / (R_c - R_w) itself: mu_hat
    rounded to 1 (reward_wrong = -2^63) no longer turns g = 1 into 0."""
    got = float(focal_group_weights(np.array([rewards], float), gamma=gamma, reward_correct=R_c,
                                    reward_wrong=R_w)[0])  # fmt: skip
    ref = _g_oracle(rewards, R_c, R_w, gamma)
    assert got == pytest.approx(ref, rel=8 * ULP, abs=0.0), (got, ref)


def test_the_reported_focal_weight_is_one():
    g = focal_group_weights(np.array([[1.0, 0, 0, 0]]), reward_wrong=-(2.0**63), gamma=1e-300)
    assert g[0] == 1.0


@pytest.mark.parametrize("gamma", [[0.5, 1.0], np.array([1.0]), np.ones((2, 1))])
def test_gamma_must_be_one_number(gamma):
    R = np.array([[1.0, 0.0], [0.0, 0.0]])
    with pytest.raises(TypeError, match="gamma must be a single number"):
        focal_group_weights(R, gamma=gamma)
    with pytest.raises(TypeError, match="gamma must be a single number"):
        focal_advantages(R, gamma=gamma, std="population", eps=0.0)


def _active_oracle(mus, N) -> float:
    with mp.workdps(60):
        tot = mp.mpf(0)
        for m in mus:
            m = mp.mpf(m)
            tot += -mp.expm1(N * mp.log1p(-m)) - m**N
        return tot / len(mus)


@pytest.mark.parametrize("mu", [1e-300, 1e-305, 1e-310, 1e-320, 5e-324])
@pytest.mark.parametrize("N", [2, 8, 1024, 65536])
def test_plan_active_fraction_near_underflow(mu, N):
    """The prompt-averaged P(A_N) = 1 - mu^N - (1 - mu)^N from log P(A_N) (a logsumexp over the
    prompts): exact where it is a normal float, and no OverflowError from the binomial terms."""
    mus = [mu, 2 * mu, 0.5]
    res = plan(mus, rho=0.1, group_sizes=[N])
    ref = _active_oracle(mus, N)
    assert res["rows"][0]["active"] == pytest.approx(float(ref), rel=1e-13)
    tiny = plan([mu], rho=0.1, group_sizes=[N])["rows"][0]
    ref = float(_active_oracle([mu], N))
    assert tiny["active"] == pytest.approx(ref, rel=1e-12 if ref > 1e-300 else 1e-2, abs=0.0)
    assert tiny["active"] > 0.0
    assert tiny["log_active"] == pytest.approx(float(mp.log(_active_oracle([mu], N))), rel=1e-13)
