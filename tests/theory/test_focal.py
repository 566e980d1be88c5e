"""Focal weight, Fig. 4 magnitudes and the learning-rate multiplier m_gamma."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from fgrpo_theory.focal import focal_advantage_magnitudes, focal_weight, lr_multiplier


def test_gamma_zero_is_the_base_method():
    mu_hat = np.linspace(0, 1, 9)
    np.testing.assert_array_equal(focal_weight(mu_hat, 0.0), np.ones(9))  # 0^0 = 1 included


def test_edges_give_their_limits_without_numpy_warnings():
    """mu_hat = 1 takes log1p(-1) = -inf (g = 0, or 1 at gamma = 0 where 0 * -inf is NaN): both
    are handled, so no RuntimeWarning reaches the caller."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert focal_weight(1.0, 2.0) == 0.0
        assert focal_weight(1.0, 0.0) == 1.0
        np.testing.assert_array_equal(focal_weight([1.0, 1.0, 0.5], [0.0, 3.0, 1.0]), [1, 0, 0.5])


@settings(max_examples=60, deadline=None)
@given(mu_hat=st.floats(0, 1), gamma=st.floats(0, 5), d=st.floats(0, 1))
def test_weight_in_unit_interval_and_decreasing(mu_hat, gamma, d):
    g = focal_weight(mu_hat, gamma)
    assert 0.0 <= g <= 1.0
    assert focal_weight(min(1.0, mu_hat + d), gamma) <= g


def test_magnitudes_match_population_zscore_of_an_exact_group():
    # a group of N = 8 with X = 2 correct: mu_hat = 0.25, population std, eps = 0
    R = np.array([1, 1, 0, 0, 0, 0, 0, 0], dtype=float)
    A = (R - R.mean()) / R.std()
    for gamma in (0.0, 0.5, 1.0):
        pos, neg = focal_advantage_magnitudes(0.25, gamma)
        g = 0.75**gamma
        assert pos == pytest.approx(g * A[0], rel=1e-14)
        assert neg == pytest.approx(-g * A[-1], rel=1e-14)


def test_magnitudes_stay_exact_at_tiny_mu_and_huge_gamma():
    """(1 - mu)^(gamma +- 1/2) with 1 - mu rounded loses every digit when gamma mu ~ 1 and mu is
    below the rounding of 1 (mpmath: pos = 3.6788e9 at mu = 1e-20, gamma = 1e20; rounding gave
    1e10)."""
    import mpmath as mp

    mp.mp.dps = 50
    for mu, gamma in ((1e-20, 1e20), (1e-17, 1e16), (1e-10, 1e10), (0.3, 2.0)):
        pos, neg = focal_advantage_magnitudes(mu, gamma)
        m, g = mp.mpf(mu), mp.mpf(gamma)
        assert pos == pytest.approx(float((1 - m) ** (g + 0.5) / mp.sqrt(m)), rel=1e-12)
        assert neg == pytest.approx(float((1 - m) ** (g - 0.5) * mp.sqrt(m)), rel=1e-12)


def test_lr_multiplier_paper_values_and_definition():
    assert lr_multiplier(0.0) == pytest.approx(1.0, rel=1e-14)
    assert lr_multiplier(0.5) == pytest.approx(0.679, abs=5e-4)
    assert lr_multiplier(1.0) == pytest.approx(0.5, rel=1e-14)
    assert lr_multiplier(2.0) == pytest.approx(0.3125, rel=1e-14)
    # m_gamma = E[(1 - mu)^gamma] for mu ~ Beta(3/2, 3/2)
    for gamma in (0.5, 1.7):
        mean, _ = integrate.quad(
            lambda m, g: (1 - m) ** g * stats.beta(1.5, 1.5).pdf(m), 0, 1, args=(gamma,)
        )
        assert lr_multiplier(gamma) == pytest.approx(mean, rel=1e-9)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: focal_weight(0.5, -1.0), "gamma"),
        (lambda: focal_weight(1.5, 1.0), "mu_hat"),
        (lambda: focal_advantage_magnitudes(0.0, 1.0), "mu"),
        (lambda: focal_advantage_magnitudes(1.0, 0.0), "mu"),  # open at both ends
        (lambda: focal_advantage_magnitudes(0.5, -0.5), "gamma"),
        (lambda: focal_weight(np.array([0.1, 0.2]), np.array([1.0, 2.0, 3.0])), "mu_hat, gamma"),
        (lambda: lr_multiplier(-1.0), "gamma"),
        (lambda: lr_multiplier(np.nan), "gamma"),
    ],
)
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=rf"(?<![\w.]){name}(?!\w)"):  # the name as a word
        call()


def test_scalar_in_numpy_scalar_out():
    assert isinstance(focal_weight(0.5, 1.0), np.floating)
    assert isinstance(lr_multiplier(1.0), np.floating)
    pos, neg = focal_advantage_magnitudes(0.5, 1.0)
    assert isinstance(pos, np.floating) and isinstance(neg, np.floating)
    assert focal_weight([0.5], 1.0).shape == (1,)
