"""Monte Carlo group simulation agrees with Lemma 3.1 within a CLT bound (seeded)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_theory.montecarlo import mc_p_active, mc_p_tail_miss, simulate_group_regions
from fgrpo_theory.tail_miss import p_active, p_tail_miss

TRIALS = 20_000
Z = 5.0  # |estimate - P| <= Z * sqrt(P (1 - P) / trials) (two-sided 5-sigma)


@settings(max_examples=25, deadline=None)
@given(
    mu=st.floats(0.0, 1.0),
    frac=st.floats(0.0, 1.0),
    N=st.integers(1, 300),
    seed=st.integers(0, 2**32 - 1),
)
def test_closed_form_equals_monte_carlo(mu, frac, N, seed):
    tau = frac * mu
    rng = np.random.default_rng(seed)
    for est, exact in (
        (mc_p_tail_miss(mu, tau, N, trials=TRIALS, rng=rng), p_tail_miss(mu, tau, N)),
        (mc_p_active(mu, N, trials=TRIALS, rng=rng), p_active(mu, N)),
    ):
        bound = Z * np.sqrt(exact * (1 - exact) / TRIALS) + 1e-12
        assert abs(est.estimate - exact) <= bound


def test_seeded_and_shaped():
    a = mc_p_tail_miss([0.3, 0.6], 0.03, 8, trials=1000, rng=np.random.default_rng(7))
    b = mc_p_tail_miss([0.3, 0.6], 0.03, 8, trials=1000, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(a.estimate, b.estimate)
    assert a.estimate.shape == (2,) and a.trials == 1000
    est, se, _ = mc_p_active(0.5, 2, trials=4000, rng=np.random.default_rng(0))
    assert se == pytest.approx(np.sqrt(est * (1 - est) / 4000))
    counts = simulate_group_regions(0.3, 0.03, 8, trials=50, rng=np.random.default_rng(0))
    assert counts.shape == (50, 3) and np.all(counts.sum(axis=1) == 8)


def test_bad_input():
    with pytest.raises(TypeError, match="rng"):
        mc_p_active(0.3, 8, trials=10, rng=0)
    with pytest.raises(ValueError, match="tau"):
        mc_p_tail_miss(0.3, 0.4, 8, trials=10, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="N"):
        mc_p_active(0.3, 0, trials=10, rng=np.random.default_rng(0))
