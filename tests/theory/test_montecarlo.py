"""Monte Carlo group simulation agrees with Lemma 3.1 within a CLT bound (seeded)."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fgrpo_theory.montecarlo import mc_p_active, mc_p_tail_miss, simulate_group_regions
from fgrpo_theory.tail_miss import p_active, p_tail_miss

TRIALS = 20_000
#: Two-sided false-alarm rate of one check: the count must lie in the central 1 - ALPHA of its
#: exact binomial law (a normal bound fails for rare events: at P = 2e-6 one hit in 20,000 trials
#: is "10 sigma" out, yet happens 4% of the time). 50 checks per run: a false alarm about once in
#: 10^5 runs.
ALPHA = 2e-7


@settings(max_examples=25, deadline=None)
@given(
    mu=st.floats(0.0, 1.0),
    frac=st.floats(0.0, 1.0),
    N=st.integers(1, 300),
    seed=st.integers(0, 2**32 - 1),
)
@example(mu=0.25, frac=0.25, N=205, seed=1_357_369_861)  # one hit at P = 1.8e-6
def test_closed_form_equals_monte_carlo(mu, frac, N, seed):
    from scipy.stats import binom

    tau = frac * mu
    rng = np.random.default_rng(seed)
    for est, exact in (
        (mc_p_tail_miss(mu, tau, N, trials=TRIALS, rng=rng), p_tail_miss(mu, tau, N)),
        (mc_p_active(mu, N, trials=TRIALS, rng=rng), p_active(mu, N)),
    ):
        p = float(np.clip(exact, 0.0, 1.0))
        count = round(float(est.estimate) * TRIALS)
        lo, hi = binom.ppf(ALPHA / 2, TRIALS, p), binom.isf(ALPHA / 2, TRIALS, p)
        assert lo <= count <= hi, (count, lo, hi, p)


def test_the_bound_rejects_a_wrong_probability():
    """The check is not vacuous: a closed form off by 0.03 at P(A_2) = 0.42 (mu = 0.3) fails it."""
    from scipy.stats import binom

    est = mc_p_active(0.3, 2, trials=TRIALS, rng=np.random.default_rng(0))
    count = round(float(est.estimate) * TRIALS)
    right, wrong = float(p_active(0.3, 2)), 0.45
    assert right == pytest.approx(0.42)
    assert binom.ppf(ALPHA / 2, TRIALS, right) <= count <= binom.isf(ALPHA / 2, TRIALS, right)
    assert not binom.ppf(ALPHA / 2, TRIALS, wrong) <= count <= binom.isf(ALPHA / 2, TRIALS, wrong)


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
