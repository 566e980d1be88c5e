"""Lemma 3.1 closed forms: against mpmath at 80 digits, invariants, peaks, bad input."""

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_theory.tail_miss import (
    expected_tail_miss_count,
    log_p_active,
    log_p_tail_miss,
    log_p_tail_miss_rho,
    p_active,
    p_tail_miss,
    p_tail_miss_given_active,
    p_tail_miss_rho,
    peak_group_size,
    stationary_group_size,
)

TOL = 1e-12


def mp_p_tail_miss(mu, tau, N):
    """The three-term formula in high precision on the exact float inputs: 60 digits plus twice
    the decades of the smallest region mass, so the cancellation stays exact; more when P is so
    close to 1 that log P needs digits beyond that."""
    masses = [m for m in (mu, tau, mu - tau, 1 - mu) if m > 0]
    digits = 60 + 2 * int(max([0.0] + [-np.log10(m) for m in masses]))
    while True:
        with mpmath.workdps(digits):
            m, t, n = mpmath.mpf(mu), mpmath.mpf(tau), mpmath.mpf(N)
            value = (1 - t) ** n - (m - t) ** n - (1 - m) ** n
            gap = 1 - value
            if gap > 0 and -mpmath.log10(gap) < digits - 40 or digits > 4000:
                return +value
        digits *= 2


def rel_err(value, ref):
    if ref == 0:
        return abs(value)
    return float(abs(mpmath.mpf(float(value)) / ref - 1))


def log_rel_err(log_value, ref):
    with mpmath.workprec(int(ref.man).bit_length() + 200):  # every bit the reference carries
        ref_log = mpmath.log(ref)
        # below 1e-300 in magnitude log P is not a normal double: an absolute floor there
        return float(
            abs(mpmath.mpf(float(log_value)) - ref_log) / max(abs(ref_log), mpmath.mpf(1e-300))
        )


EDGE_MU = [1e-9, 1e-6, 0.3, 0.5, 0.64, 1 - 1e-6, 1 - 1e-9]
EDGE_TAU_FRAC = [0.0, 1e-12, 1e-3, 0.5, 1 - 1e-9, 1.0]
EDGE_N = [1, 2, 3, 8, 128, 1e4, 1e6, 1e7]


@pytest.mark.parametrize("mu", EDGE_MU)
def test_matches_mpmath_on_edge_grid(mu):
    taus = [f * mu for f in EDGE_TAU_FRAC] + [t for t in (1e-12, 1e-9) if t <= mu]
    for tau in taus:
        for N in EDGE_N:
            ref = mp_p_tail_miss(mu, tau, N)
            if ref == 0 or abs(ref) > 1e-300:  # value representable as a normal double
                assert rel_err(p_tail_miss(mu, tau, N), ref) <= TOL, (mu, tau, N)
            if ref > 0:
                assert log_rel_err(log_p_tail_miss(mu, tau, N), ref) <= TOL, (mu, tau, N)


@settings(max_examples=150, deadline=None)
@given(
    mu=st.floats(0.0, 1.0),
    frac=st.floats(0.0, 1.0),
    log10_tau=st.floats(-12, 0),
    use_frac=st.booleans(),
    N=st.one_of(st.integers(1, 10_000_000), st.floats(1.0, 1e7)),
)
def test_closed_form_equals_mpmath(mu, frac, log10_tau, use_frac, N):
    tau = frac * mu if use_frac else min(mu, 10.0**log10_tau)
    ref = mp_p_tail_miss(mu, tau, N)
    if ref == 0 or abs(ref) > 1e-300:
        assert rel_err(p_tail_miss(mu, tau, N), ref) <= TOL
    if ref > 0:
        assert log_rel_err(log_p_tail_miss(mu, tau, N), ref) <= TOL


def test_tiny_tau_huge_group_is_not_cancelled_away():
    # the cancellation case: the naive three-term formula loses every digit here
    mu, tau, N = 0.3, 1e-9, 1e6
    naive = (1 - tau) ** N - (mu - tau) ** N - (1 - mu) ** N
    ref = mp_p_tail_miss(mu, tau, N)
    assert rel_err(p_tail_miss(mu, tau, N), ref) <= TOL
    assert rel_err(naive, ref) > 1e-11  # rounding 1 - tau, then raising it to N = 1e6


@settings(max_examples=100, deadline=None)
@given(mu=st.floats(0.0, 1.0), a=st.floats(0.0, 1.0), b=st.floats(0.0, 1.0), N=st.integers(1, 5000))
def test_bounds_and_monotone_in_tau(mu, a, b, N):
    tau_lo, tau_hi = sorted((a * mu, b * mu))
    p_lo, p_hi, pa = p_tail_miss(mu, tau_lo, N), p_tail_miss(mu, tau_hi, N), p_active(mu, N)
    assert 0.0 <= p_hi <= p_lo * (1 + 1e-12) + 1e-300  # more rare mass, fewer misses
    assert p_lo <= pa * (1 + 1e-12) + 1e-300
    assert pa <= 1.0


@settings(max_examples=100, deadline=None)
@given(mu=st.floats(1e-6, 1 - 1e-6), frac=st.floats(0.0, 0.999), N=st.integers(2, 100_000))
def test_log_forms_equal_log_of_values(mu, frac, N):
    tau = frac * mu
    p = p_tail_miss(mu, tau, N)
    if p > 1e-300:
        assert log_p_tail_miss(mu, tau, N) == pytest.approx(np.log(p), rel=1e-12, abs=1e-13)
        assert log_p_tail_miss_rho(mu, frac, N) == pytest.approx(
            np.log(p_tail_miss_rho(mu, frac, N)), rel=1e-12, abs=1e-13
        )
    pa = p_active(mu, N)
    assert log_p_active(mu, N) == pytest.approx(np.log(pa), rel=1e-12, abs=1e-13)


def test_limits_and_special_values():
    assert p_tail_miss(0.3, 0.03, 1) == 0.0  # one rollout is never an active group
    assert p_tail_miss(0.3, 0.03, 1e7) == 0.0  # a huge group always contains E
    assert p_tail_miss(0.3, 0.3, 8) == 0.0  # tau = mu: every correct rollout is rare
    assert p_tail_miss(1.0, 1.0, 8) == 0.0 and p_tail_miss(1.0, 0.2, 8) == 0.0
    assert log_p_tail_miss(0.3, 0.03, 1) == -np.inf
    assert p_tail_miss(0.3, 0.0, 8) == pytest.approx(p_active(0.3, 8), rel=1e-15)
    assert p_active(0.5, 2) == pytest.approx(0.5, rel=1e-15)
    assert p_tail_miss_rho(0.3, 0.1, 8) == pytest.approx(p_tail_miss(0.3, 0.03, 8), rel=1e-15)


def test_broadcasting_and_scalar_types():
    mu = np.array([0.2, 0.5, 0.8])[:, None]
    N = np.arange(1, 6)[None, :]
    out = p_tail_miss(mu, 0.01, N)
    assert out.shape == (3, 5)
    for i in range(3):
        for j in range(5):
            assert out[i, j] == p_tail_miss(float(mu[i, 0]), 0.01, int(N[0, j]))
    assert isinstance(p_tail_miss(0.3, 0.01, 8), np.floating)
    big = p_tail_miss(np.linspace(0.01, 0.99, 40_001), 0.005, 16)  # crosses the kernel's chunking
    assert big.shape == (40_001,) and np.all(np.isfinite(big))


def test_conditional_on_active():
    mu, tau = 0.3, 0.015
    N = np.array([2, 8, 64])
    np.testing.assert_allclose(
        p_tail_miss_given_active(mu, tau, N), p_tail_miss(mu, tau, N) / p_active(mu, N), rtol=1e-13
    )
    assert np.isnan(p_tail_miss_given_active(mu, tau, 1))
    # N = 2: P(B) = 2 (mu - tau)(1 - mu), P(A) = 2 mu (1 - mu), so P(B | A) = 1 - rho
    assert p_tail_miss_given_active(mu, tau, 2) == pytest.approx(1 - tau / mu, rel=1e-12)


def test_expected_count_is_sum_of_probabilities():
    mu = np.array([0.9, 0.5, 0.2, 0.05])
    tau = np.array([0.01, 0.1, 0.001, 0.05])
    N = np.array([4, 8, 16])
    got = expected_tail_miss_count(mu, tau, N)
    want = [sum(p_tail_miss(m, t, n) for m, t in zip(mu, tau, strict=True)) for n in N]
    np.testing.assert_allclose(got, want, rtol=1e-14)


@settings(max_examples=60, deadline=None)
@given(mu=st.floats(0.01, 0.99), frac=st.floats(0.001, 0.9))
def test_peak_is_integer_argmax_and_stationary_root(mu, frac):
    tau = frac * mu
    n_star, p_star = peak_group_size(mu, tau)
    n_c = stationary_group_size(mu, tau)
    grid = np.arange(1, int(max(4 * n_c, 16)) + 1)
    values = p_tail_miss(mu, tau, grid)
    assert n_star == grid[np.argmax(values)]
    assert p_star == values.max()
    assert abs(n_star - n_c) < 1.0
    # dP/dN changes sign at N_c
    h = 1e-6 * n_c
    assert p_tail_miss(mu, tau, n_c) >= p_tail_miss(mu, tau, n_c - h) - 1e-15
    assert p_tail_miss(mu, tau, n_c) >= p_tail_miss(mu, tau, n_c + h) - 1e-15


def test_peak_paper_settings_and_capping():
    # smaller rho: peak at larger N and higher (paper Fig. 3)
    n, p = peak_group_size(0.3, 0.3 * np.array([0.2, 0.1, 0.05]))
    assert np.all(np.diff(n) >= 0) and np.all(np.diff(p) > 0)
    assert peak_group_size(0.3, 0.0, n_max=64) == (64, p_active(0.3, 64))
    n_cap, _ = peak_group_size(0.2, 0.002, n_max=10)
    assert n_cap == 10
    assert peak_group_size(0.3, 0.3) == (1, 0.0)
    assert np.isinf(stationary_group_size(0.3, 0.0)) and np.isnan(stationary_group_size(0.3, 0.3))
    # mu = 1 (no incorrect rollout) and mu = 0: P(B) = 0 for every N, so no stationary point
    assert np.isnan(stationary_group_size([1.0, 1.0, 0.0], [0.5, 0.0, 0.0])).all()
    assert peak_group_size(1.0, 0.5) == (1, 0.0)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: p_tail_miss(0.3, 0.01, 0), "N"),
        (lambda: p_tail_miss(1.2, 0.01, 8), "mu"),
        (lambda: p_tail_miss(0.3, -0.1, 8), "tau"),
        (lambda: p_tail_miss(0.3, 0.4, 8), "tau"),
        (lambda: p_tail_miss(np.nan, 0.1, 8), "mu"),
        (lambda: p_tail_miss([], 0.1, 8), "mu"),
        (lambda: p_active(0.3, np.inf), "N"),
        (lambda: p_tail_miss_rho(0.3, 1.5, 8), "rho"),
        (lambda: peak_group_size(0.3, 0.0), "tau"),
        (lambda: peak_group_size(0.3, 0.01, n_max=0), "n_max"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"(?<![\w.]){name}(?!\w)"):  # the name as a word
        call()


@pytest.mark.slow
def test_matches_mpmath_on_a_dense_random_sample():
    """The accuracy claim of the README at scale: 30,000 random points over the whole domain
    (log-uniform tau down to 1e-12, N up to 1e7, mu within 1e-9 of 0 and 1)."""
    rng = np.random.default_rng(2026)
    mus = np.concatenate(
        [rng.random(20_000), 1e-9 * rng.random(5_000), 1 - 1e-9 * rng.random(5_000)]
    )
    for mu in mus:
        tau = min(mu, 10.0 ** rng.uniform(-12, 0)) if rng.random() < 0.5 else mu * rng.random()
        N = float(np.round(10.0 ** rng.uniform(0, 7)))
        ref = mp_p_tail_miss(mu, tau, N)
        if ref == 0 or abs(ref) > 1e-300:
            assert rel_err(p_tail_miss(mu, tau, N), ref) <= TOL, (mu, tau, N)
        if ref > 0:
            assert log_rel_err(log_p_tail_miss(mu, tau, N), ref) <= TOL, (mu, tau, N)


def test_stationary_point_far_beyond_the_old_bracket_is_the_true_root():
    """A reported case: (1e-30, 1e-31) used to return the bisection bound e^60 + 1. There
    P(B) ~ e^(-tau N) - e^(-mu N), whose maximiser is log(mu / tau) / (mu - tau)."""
    mu, tau = 1e-30, 1e-31
    assert stationary_group_size(mu, tau) == pytest.approx(np.log(mu / tau) / (mu - tau), rel=1e-9)
    assert stationary_group_size(0.3, 1e-300) == pytest.approx(1933.8, rel=1e-4)
    with pytest.raises(
        ValueError,
        match=r"^the stationary group size for mu=1e-310, tau=1e-311 "
        r"lies above e\^709, outside what float64 resolves",
    ):
        stationary_group_size(1e-310, 1e-311)  # N_c ~ 2.6e310: beyond float64, not a bound
    with pytest.raises(ValueError, match="lies above e"):  # N_c = 8.7e307, just above e^709
        stationary_group_size(1.6e-308, 0.8e-308)
    assert stationary_group_size(2.2e-308, 1.1e-308) == pytest.approx(
        np.log(2) / 1.1e-308, rel=1e-6
    )
    with pytest.raises(ValueError, match="mu=1e-310, tau=1e-311"):
        stationary_group_size(np.array([0.3, 1e-310]), np.array([0.01, 1e-311]))
    with pytest.raises(ValueError, match=r"mu=1e-30, tau=1e-31 is beyond 2\^53; pass n_max"):
        peak_group_size(1e-30, 1e-31)
    with pytest.raises(
        ValueError,
        match=r"^the peak group size for mu=0.3, tau=0.0 is beyond "
        r"2\^53; pass an n_max of at most 2\^53$",
    ):
        peak_group_size(0.3, 0.0, n_max=1e300)
    assert peak_group_size(0.3, 0.0, n_max=2**53)[0] == 2**53  # still an exact integer
    with pytest.raises(ValueError, match=r"is beyond 2\^53; pass an n_max of at most 2\^53$"):
        peak_group_size(0.3, 0.0, n_max=2.0**53 + 2)  # a float just above 2^53 (exact in float64)
    for big in (2**53 + 1, 2**53 + 2, np.array([4, 2**53 + 1])):  # 2^53 + 1 would round to 2^53
        with pytest.raises(
            ValueError,
            match=r"n_max must be at most 2\^53 .*got n_max=900719925474099[34]$",
        ):
            peak_group_size(0.3, 0.0, n_max=big)
    with pytest.raises(ValueError, match=r"^tau=0: P\(B\) = P\(A\) increases with N"):
        peak_group_size(np.array([0.3, 0.5]), np.array([0.01, 0.0]))
    with pytest.raises(ValueError, match=r"mu and tau, n_max cannot be broadcast"):
        peak_group_size([0.3, 0.5], 0.01, n_max=[3, 4, 5])
    with pytest.raises(ValueError, match="n_max must be an integer >= 1, got n_max=2.5"):
        peak_group_size(0.3, 0.01, n_max=2.5)


def test_shape_and_type_errors_name_the_arguments():
    with pytest.raises(ValueError, match="mu, tau, N cannot be broadcast together"):
        p_tail_miss(np.array([0.3, 0.4]), 0.01, np.array([1, 2, 3]))
    with pytest.raises(TypeError, match="N must be a number, not a bool"):
        p_active(0.3, True)
    with pytest.raises(TypeError, match="mu"):
        p_tail_miss("0.3", 0.01, 8)


@pytest.mark.parametrize(
    "call",
    [
        lambda: p_tail_miss(0.3, 0.3, 8),  # tau = mu: log(0)
        lambda: p_tail_miss(1.0, 1.0, 8),  # 1 - tau = 0
        lambda: log_p_tail_miss(np.array([0.3, 0.3, 1.0]), np.array([0.03, 0.3, 1.0]), 1),
        lambda: log_p_active(np.array([0.0, 1.0, 0.5]), np.array([5, 5, 1])),
        lambda: p_tail_miss_given_active(0.3, 0.015, np.array([1, 2, 8])),  # NaN at N = 1
        lambda: p_tail_miss_given_active(np.array([0.0, 1.0]), 0.0, 4),
        lambda: stationary_group_size(
            np.array([0.3, 0.3, 0.0, 1.0]), np.array([0.0, 0.3, 0.0, 0.5])
        ),
        lambda: peak_group_size(np.array([0.3, 0.3]), np.array([0.3, 0.0]), n_max=64),
        lambda: expected_tail_miss_count(
            np.array([0.3, 1.0]), np.array([0.3, 0.0]), np.array([1, 9])
        ),
        lambda: p_tail_miss(0.3, 1e-9, 1e6),
    ],
)
def test_documented_special_values_come_without_runtime_warnings(call):
    """The inf / NaN / log(0) of the edge cases are handled inside: no RuntimeWarning escapes."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        call()


@pytest.mark.parametrize(
    "mu, tau",
    [
        (1 - 1e-10, 0.3),
        (1 - 1e-13, 0.5),
        (1 - 1e-6, 1e-3),
        (0.3, 0.015),
        (1e-8, 1e-9),
        (0.5, 1e-12),
    ],
)
def test_stationary_point_against_an_mpmath_root(mu, tau):
    """N_c to ~1e-15 relative, also with mu near 1, where 1 - mu is the small base (the kernel
    takes the smaller of mu - tau and 1 - mu so that no base is a rounded 1 - tiny)."""
    m, t = mpmath.mpf(mu), mpmath.mpf(tau)
    with mpmath.workdps(60):

        def dP(N):
            return (
                (1 - t) ** N * mpmath.log(1 - t)
                - (m - t) ** N * mpmath.log(m - t)
                - (1 - m) ** N * mpmath.log(1 - m)
            )

        n_c = stationary_group_size(mu, tau)
        ref = mpmath.findroot(dP, mpmath.mpf(n_c))
    assert float(abs(n_c / ref - 1)) < 1e-12


@pytest.mark.parametrize(
    "call",
    [
        lambda: p_tail_miss(0.3, 0.03, 1e9),  # (1 - tau)^N underflows
        lambda: log_p_tail_miss(0.3, 0.03, 1e9),
        lambda: p_tail_miss(0.3, 0.3, 1e9),  # N log(0) -> N * -1e300 overflows
        lambda: log_p_tail_miss(0.3, 0.3, 1e9),
        lambda: stationary_group_size(0.3, 0.015),  # the bracket top e^709 overflows
    ],
)
def test_results_do_not_depend_on_the_callers_floating_point_error_state(call):
    """Overflow / underflow inside the closed forms are handled there, also when the caller
    has made every floating-point error raise (np.errstate(all="raise"))."""
    expected = call()
    with np.errstate(all="raise"):
        assert call() == expected


def test_log_forms_are_minus_inf_exactly_where_the_probability_is_zero():
    assert log_p_tail_miss(0.3, 0.3, 8) == -np.inf  # tau = mu
    assert log_p_tail_miss(0.3, 0.3, 1e6) == -np.inf
    assert log_p_active(0.0, 8) == -np.inf and log_p_active(1.0, 8) == -np.inf
    assert log_p_tail_miss(1.0, 0.5, 8) == -np.inf  # mu = 1
    assert log_p_tail_miss(1.0, 1.0, 5) == -np.inf  # tau = 1: 1 - tau = 0


@pytest.mark.parametrize(
    "mu, tau, N",
    [
        (0.3, 0.03, 1 + 2**-40),  # N - 1 tiny: (N - 1) |log q| below 1e-9, the series branch
        (0.6, 0.2, 1 + 2**-40),  # the same with mu > 1/2 (q = 1 - mu)
        # q subnormal and N - 1 = 1/3: (N - 1) log(1 - q) rounds to a few bits, so
        # log(-expm1(.)) of it is off by ~1e-7; the log-space series keeps full precision
        (4e-321, 1e-321, 1 + 1 / 3),
    ],
)
def test_log_p_tail_miss_near_N_1_and_with_a_subnormal_base(mu, tau, N):
    ref = mp_p_tail_miss(mu, tau, N)
    assert log_rel_err(log_p_tail_miss(mu, tau, N), ref) < TOL


def test_a_peak_capped_by_n_max_needs_no_stationary_point_in_float64_range():
    """With mu = 1e-320 and tau = 5e-324, P(B) ~ e^(-tau N) - e^(-mu N) (Lemma 3.1) rises up to
    N_c = log(mu / tau) / (mu - tau) ~ 7.6e320, beyond float64. Over N <= n_max, P(B) is then
    increasing, so N* = n_max: the capped peak exists although N_c does not in float64."""
    mu, tau = 1e-320, 5e-324
    with pytest.raises(ValueError, match="outside what float64 resolves"):
        stationary_group_size(mu, tau)
    with pytest.raises(ValueError, match="outside what float64 resolves"):
        peak_group_size(mu, tau)  # no cap: no answer
    n_star, p_star = peak_group_size(mu, tau, n_max=100)
    assert n_star == 100 and p_star == p_tail_miss(mu, tau, 100) > 0
    n_star, _ = peak_group_size([mu, 0.3], [tau, 0.015], n_max=[2**53, 1000])
    assert list(n_star) == [2**53, peak_group_size(0.3, 0.015)[0]]
