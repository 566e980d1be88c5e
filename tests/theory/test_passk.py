"""pass@k: exact form, the unbiased product-form estimator, and the paired subsampling test."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_theory.passk import (
    mean_pass_at_k,
    null_rejection_rate,
    paired_subsampling_test,
    pass_at_k_exact,
    pass_at_k_unbiased,
)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 10), data=st.data())
def test_estimator_equals_mean_over_all_k_subsets(n, data):
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    brute = sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)
    assert pass_at_k_unbiased(n, c, k) == pytest.approx(brute, rel=1e-13, abs=1e-15)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 60), p=st.floats(0, 1), data=st.data())
def test_estimator_is_unbiased(n, p, data):
    k = data.draw(st.integers(1, n))
    c = np.arange(n + 1)
    weights = np.array([math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in c])
    expectation = float(np.sum(weights * pass_at_k_unbiased(n, c, k)))
    assert expectation == pytest.approx(pass_at_k_exact(p, k), rel=1e-10, abs=1e-12)


def test_estimator_against_binomial_ratio_at_paper_scale():
    n, c = 1024, np.array([0, 1, 7, 300, 1000, 1024])
    for k in (1, 2, 16, 256):
        want = [1 - math.comb(n - ci, k) / math.comb(n, k) for ci in c]
        np.testing.assert_allclose(pass_at_k_unbiased(n, c, k), want, rtol=1e-12, atol=1e-15)
    assert pass_at_k_unbiased(1024, 0, 256) == 0.0 and pass_at_k_unbiased(1024, 800, 256) == 1.0


def test_mean_pass_at_k_and_exact():
    c = np.array([0, 3, 8])
    np.testing.assert_allclose(mean_pass_at_k(8, c, [1, 8]), [np.mean(c / 8), 2 / 3], rtol=1e-14)
    assert pass_at_k_exact(0.1, 2) == pytest.approx(0.19, rel=1e-14)
    assert pass_at_k_exact(1e-12, 256) == pytest.approx(256e-12, rel=1e-9)  # no cancellation


def _outcomes(rng, p, n):
    return rng.random((p.size, n)) < p[:, None]


def test_subsampling_test_detects_a_real_difference_and_accepts_a_null():
    rng = np.random.default_rng(0)
    p = rng.beta(0.6, 1.4, 80)
    A = _outcomes(rng, p, 256)
    B_same = _outcomes(rng, p, 256)
    B_better = _outcomes(rng, np.clip(p + 0.1, 0, 1), 256)
    null = paired_subsampling_test(
        A, B_same, m=64, iterations=2000, rng=np.random.default_rng(1), k=4
    )
    alt = paired_subsampling_test(
        A, B_better, m=64, iterations=2000, rng=np.random.default_rng(1), k=4
    )
    assert alt.p_value < 0.01 and alt.significant(0.05) and alt.statistic < 0
    assert null.p_value > 0.05
    assert null.pass_at_k_a == pytest.approx(mean_pass_at_k(256, A.sum(1), [4])[0], rel=1e-14)
    assert 0 < null.subsample_std and set(null.to_dict()) >= {"statistic", "p_value", "k", "m", "n"}


def test_subsampling_test_is_reproducible_and_antisymmetric():
    rng = np.random.default_rng(3)
    A = _outcomes(rng, rng.random(30), 64)
    B = _outcomes(rng, rng.random(30), 64)
    r1 = paired_subsampling_test(A, B, m=16, iterations=500, rng=np.random.default_rng(5), k=2)
    r2 = paired_subsampling_test(A, B, m=16, iterations=500, rng=np.random.default_rng(5), k=2)
    r3 = paired_subsampling_test(B, A, m=16, iterations=500, rng=np.random.default_rng(5), k=2)
    assert r1 == r2
    assert r3.statistic == pytest.approx(-r1.statistic, abs=1e-15)
    assert r3.p_value == pytest.approx(r1.p_value, abs=0.1)  # same test, other random draws
    same = paired_subsampling_test(A, A, m=16, iterations=200, rng=np.random.default_rng(5), k=2)
    assert same.statistic == 0.0 and same.p_value == 1.0


def _subsample_differences(A, B, m, iterations, seed=7):
    """D*_m for pass@1, re-derived: each problem that is not constant in both methods takes one
    multivariate-hypergeometric draw of its (A and B, A only, B only, neither) cells, in problem
    order, from one generator seeded as the test's, so the subsamples are the test's; a constant
    one (a single non-empty cell) adds its own difference, the same in every subsample."""
    subsamples = np.random.default_rng(seed)
    D_star = np.zeros(iterations)  # (I,)
    for a, b in zip(A, B, strict=True):
        cells = [(a & b).sum(), (a & ~b).sum(), (~a & b).sum(), (~a & ~b).sum()]
        if np.count_nonzero(cells) == 1:
            D_star += (cells[1] - cells[2]) / len(a)
            continue
        draw = subsamples.multivariate_hypergeometric(cells, m, size=iterations)  # (I, 4)
        D_star += (draw[:, 1] - draw[:, 2]) / m
    return D_star / len(A)


def test_subsampling_p_value_is_the_share_of_scaled_subsample_differences():
    # A re-derivation of the test for pass@1 (_subsample_differences)
    n, m, iterations = 64, 16, 4000
    rng = np.random.default_rng(2)
    p = rng.random(20)
    A, B = _outcomes(rng, p, n), _outcomes(rng, np.clip(p + 0.02, 0, 1), n)
    D = (A.mean() - B.mean()).item()
    D_star = _subsample_differences(A, B, m, iterations)
    seen = set()
    for finite_population, f in ((True, np.sqrt((n - 1) / (n - m))), (False, 1.0)):
        out = paired_subsampling_test(
            A,
            B,
            m=m,
            iterations=iterations,
            rng=np.random.default_rng(7),
            finite_population=finite_population,
        )
        assert out.statistic == pytest.approx(D, abs=1e-15)
        extreme = np.sqrt(m) * f * np.abs(D_star - D) >= np.sqrt(n) * abs(D) - 1e-12
        assert out.p_value == pytest.approx((1 + extreme.sum()) / (1 + iterations), abs=1e-12)
        assert out.finite_population is finite_population
        seen.add(out.p_value)
    assert len(seen) == 2  # the factor changes the p-value here


def test_the_finite_population_factor_is_sqrt_n_minus_1_over_n_minus_m():
    """Many problems (500) make the subsample law fine enough that the factors sqrt((n-1)/(n-m)),
    sqrt((n-2)/(n-m)) and sqrt(n/(n-m)) mark different draws extreme (checked here); the test's
    p-value is the first's, draw for draw (the re-derivation above, at n = 8, m = 4)."""
    n, m, iterations = 8, 4, 2000
    rng = np.random.default_rng(2)
    p = rng.random(500)
    A, B = _outcomes(rng, p, n), _outcomes(rng, p, n)
    D = (A.mean() - B.mean()).item()
    D_star = _subsample_differences(A, B, m, iterations)

    def p_value(top):
        f = np.sqrt((n - top) / (n - m))
        extreme = np.sqrt(m) * f * np.abs(D_star - D) >= np.sqrt(n) * abs(D) - 1e-12
        return (1 + extreme.sum()) / (1 + iterations)

    assert len({p_value(1), p_value(2), p_value(0)}) == 3  # the data tell the factors apart
    out = paired_subsampling_test(A, B, m=m, iterations=iterations, rng=np.random.default_rng(7))
    assert out.p_value == pytest.approx(p_value(1), abs=1e-12)


def test_the_null_rejection_rate_re_derived():
    """null_rejection_rate is the share of `tests` paired tests on Bernoulli(p_x) outcomes of
    both methods that reject at alpha, drawn in this order from one generator, with the Wilson
    95% interval; its defaults are the documented ones; with 19 subsamples the smallest p-value
    is 1/20 = alpha, so a test at alpha = 0.05 never rejects (p < alpha, strictly)."""
    n, m, tests, iterations, problems = 6, 3, 40, 30, 4
    got = null_rejection_rate(
        n=n, m=m, problems=problems, tests=tests, iterations=iterations, alpha=0.3,
        rng=np.random.default_rng(5),
    )  # fmt: skip
    rng, rejected = np.random.default_rng(5), 0
    for _ in range(tests):
        p = rng.random((problems, 1))
        A, B = rng.random((problems, n)) < p, rng.random((problems, n)) < p
        rejected += paired_subsampling_test(A, B, m=m, iterations=iterations, rng=rng).p_value < 0.3
    z, rate = 1.959963984540054, rejected / tests  # Wilson's interval by its formula
    centre = (rate + z * z / (2 * tests)) / (1 + z * z / tests)
    half = z * np.sqrt(rate * (1 - rate) / tests + z * z / (4 * tests**2)) / (1 + z * z / tests)
    assert 0 < rejected < tests
    assert got == pytest.approx((rate, centre - half, centre + half), abs=1e-12)
    documented = dict(k=1, problems=20, tests=1000, iterations=400, alpha=0.05)
    default_call = null_rejection_rate(n=4, m=2, rng=np.random.default_rng(1))  # ~1 s
    assert 0 < default_call[0] < 1
    assert default_call == null_rejection_rate(
        n=4, m=2, rng=np.random.default_rng(1), **documented, finite_population=True
    )
    never = null_rejection_rate(n=6, m=3, tests=30, iterations=19, rng=np.random.default_rng(0))
    assert never[0] == 0.0
    smallest = null_rejection_rate(n=2, m=1, tests=2, iterations=5, rng=np.random.default_rng(0))
    assert 0.0 <= smallest[0] <= 1.0  # n = 2 is allowed
    with pytest.raises(TypeError, match="finite_population must be True or False, got 'yes'"):
        paired_subsampling_test(
            np.ones((2, 8)), np.ones((2, 8)), m=4, iterations=1, rng=np.random.default_rng(0),
            finite_population="yes",
        )  # fmt: skip
    for bad, message in (
        (dict(n=1), "n must be an integer >= 2"),
        (dict(n=[6, 7]), "n must be a single"),
        (dict(problems=0), "problems must be an integer >= 1"),
        (dict(problems=[2, 3]), "problems must be a single"),
        (dict(tests=0), "tests must be an integer >= 1"),
        (dict(tests=[2, 3]), "tests must be a single"),
    ):
        with pytest.raises(ValueError, match=message):
            null_rejection_rate(**{"n": 6, "m": 3, "rng": np.random.default_rng(0), **bad})


def test_subsampling_test_holds_its_level_at_a_quarter_of_the_samples():
    # Under H0 the rejections of 600 tests are Binomial(600, size). With the finite-population
    # factor the size is about 0.05 (a 99.9% binomial range [0.027, 0.079]); the paper's scaling
    # alone rejects more often (0.078 over 1,000 tests with another seed; here > 0.07 has a
    # false-alarm chance of about 3% should its size be 0.078).
    def size(finite_population):
        rng = np.random.default_rng(11)
        rate, low, high = null_rejection_rate(
            n=128, m=32, tests=600, iterations=200, finite_population=finite_population, rng=rng
        )
        assert low < rate < high
        return rate

    corrected, literal = size(True), size(False)
    assert 0.027 <= corrected <= 0.079
    assert literal > corrected and literal > 0.07


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: pass_at_k_unbiased(8, 9, 1), "c"),
        (lambda: pass_at_k_unbiased(8, 2, 9), "k"),
        (lambda: pass_at_k_unbiased(0, 0, 1), "n"),
        (lambda: pass_at_k_unbiased(8, 2, 0), "k"),
        (lambda: pass_at_k_exact(1.5, 1), "p"),
        (lambda: pass_at_k_exact(0.5, 0), "k"),
        (lambda: pass_at_k_exact(-0.5, 1), "p"),
        (lambda: mean_pass_at_k(8, [9], [1]), "c"),
        (lambda: mean_pass_at_k(8, [1], [0]), "ks"),
        (lambda: mean_pass_at_k(0, [0], [1]), "n"),
        (
            lambda: paired_subsampling_test(
                np.ones((2, 8)),
                np.ones((2, 8)),
                m=1,
                iterations=10,
                rng=np.random.default_rng(0),
                k=2,
            ),
            "m",
        ),
        (
            lambda: paired_subsampling_test(
                np.ones((2, 8)), np.ones((2, 8)), m=4, iterations=0, rng=np.random.default_rng(0)
            ),
            "iterations",
        ),
        (
            lambda: paired_subsampling_test(
                np.ones((2, 8)),
                np.ones((2, 8)),
                m=4,
                iterations=1,
                rng=np.random.default_rng(0),
                k=0,
            ),
            "k",
        ),
        (
            lambda: paired_subsampling_test(
                np.ones(8), np.ones(8), m=4, iterations=1, rng=np.random.default_rng(0)
            ),
            "correct_a",
        ),
        (
            lambda: paired_subsampling_test(
                np.ones((2, 8)),
                np.full((2, 8), 0.5),
                m=4,
                iterations=1,
                rng=np.random.default_rng(0),
            ),
            "correct_b",
        ),
        (
            lambda: paired_subsampling_test(
                np.ones((2, 8)), np.ones((2, 8)), m=8, iterations=10, rng=np.random.default_rng(0)
            ),
            "m",
        ),
        (
            lambda: paired_subsampling_test(
                np.ones((2, 8)), np.ones((2, 7)), m=4, iterations=10, rng=np.random.default_rng(0)
            ),
            "shape",
        ),
        (
            lambda: paired_subsampling_test(
                np.full((2, 8), 2),
                np.ones((2, 8)),
                m=4,
                iterations=10,
                rng=np.random.default_rng(0),
            ),
            "correct_a",
        ),
    ],
)
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=rf"(?<![\w.]){name}(?!\w)"):  # the name as a word
        call()


def _mp_pass_at_k(n, c, k):
    import mpmath

    with mpmath.workdps(80):
        return 1 - mpmath.binomial(n - c, k) / mpmath.binomial(n, k)


@pytest.mark.parametrize(
    "n, c, k",
    [
        (10**9, 5 * 10**8, 256),  # an ~11 GB table before: now a product of 256 factors
        (10**9, 3, 256),
        (10**9, 1000, 1000),
        (10**18, 10**4, 10**4),
        (10**12, 5000, 5000),
        (2**63 - 1, 2**62, 2),
        (1024, 1023, 1),
        (5000, 4000, 4100),
        (9000, 4500, 4200),
    ],
)
def test_large_counts_are_exact_and_cheap(n, c, k):
    """min(c, k) factors in log space (mpmath log-gamma beyond 4096 factors): relative error
    ~1e-15 against 80-digit binomials, with no memory or time proportional to c or n."""
    want = _mp_pass_at_k(n, c, k)
    got = pass_at_k_unbiased(n, c, k)
    assert got == pytest.approx(float(want), rel=1e-12, abs=0.0)
    assert pass_at_k_unbiased(n, k, c) == pytest.approx(got, rel=1e-12)  # symmetric in c, k


def test_symmetry_in_c_and_k_and_vectorised_mixed_widths():
    n = np.array([10, 10, 1000, 40])
    c = np.array([3, 7, 500, 0])
    k = np.array([7, 3, 2, 40])
    got = pass_at_k_unbiased(n, c, k)
    want = [float(_mp_pass_at_k(*v)) for v in zip(n.tolist(), c.tolist(), k.tolist(), strict=True)]
    np.testing.assert_allclose(got, want, rtol=1e-13)
    assert got[0] == got[1]  # C(n-c, k)/C(n, k) = C(n-k, c)/C(n, c)
    assert got[3] == 0.0 and pass_at_k_unbiased(10, 4, 7) == 1.0  # c = 0; n - c < k


def test_shape_errors_name_the_arguments():
    with pytest.raises(ValueError, match="n, c, k cannot be broadcast together"):
        pass_at_k_unbiased(np.array([8, 8]), np.array([1, 2, 3]), 1)
    with pytest.raises(ValueError, match="p, k cannot be broadcast together"):
        pass_at_k_exact(np.array([0.1, 0.2]), np.array([1, 2, 3]))
    with pytest.raises(ValueError, match="n must be one number or one per problem"):
        mean_pass_at_k([8, 8, 8], [1, 2], [1])
    with pytest.raises(TypeError, match="rng"):
        paired_subsampling_test(np.ones((2, 8)), np.ones((2, 8)), m=4, iterations=10, rng=0)
    with pytest.raises(TypeError, match="correct_a"):
        paired_subsampling_test(
            np.array([["a"] * 8] * 2),
            np.ones((2, 8)),
            m=4,
            iterations=10,
            rng=np.random.default_rng(0),
        )
    with pytest.raises(TypeError, match="correct_a"):
        paired_subsampling_test(
            np.ma.masked_array(np.ones((2, 8))),
            np.ones((2, 8)),
            m=4,
            iterations=10,
            rng=np.random.default_rng(0),
        )
    with pytest.raises(ValueError, match="iterations must be a single number"):
        paired_subsampling_test(
            np.ones((2, 8)), np.ones((2, 8)), m=4, iterations=[10, 20], rng=np.random.default_rng(0)
        )


@pytest.mark.parametrize(
    "call",
    [
        lambda: pass_at_k_exact(np.array([1.0, 0.0, 0.5]), 3),  # log1p(-1) = -inf
        lambda: pass_at_k_unbiased(
            np.array([10, 3, 40, 6]), np.array([5, 2, 0, 5]), np.array([5, 1, 3, 2])
        ),  # rows of unequal width share one block
        lambda: mean_pass_at_k(4, [0, 4, 2], [1, 4]),
    ],
)
def test_edge_values_come_without_runtime_warnings(call):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        call()


def test_zero_is_a_positive_zero():
    """-expm1(0) is -0.0; a printed '-0.000000' pass@k would look like a bug."""
    assert not np.signbit(pass_at_k_exact(0.0, 5))
    assert not np.signbit(pass_at_k_exact(-0.0, 5))  # log1p(+0.0) = +0.0, -expm1(+0.0) = -0.0
    assert not np.signbit(pass_at_k_unbiased(8, 0, 3))
    assert not np.signbit(mean_pass_at_k(8, [0, 0], [1, 2])).any()


def test_significance_is_strictly_below_alpha_with_default_0_05():
    from fgrpo_theory.passk import PairedSubsamplingResult

    base = dict(
        k=1,
        n=8,
        m=4,
        iterations=10,
        num_problems=2,
        pass_at_k_a=0.5,
        pass_at_k_b=0.5,
        statistic=0.0,
        subsample_std=0.1,
    )
    assert PairedSubsamplingResult(**base, p_value=0.04).significant()
    assert not PairedSubsamplingResult(**base, p_value=0.06).significant()
    assert not PairedSubsamplingResult(**base, p_value=0.05).significant(0.05)  # p < alpha
    assert PairedSubsamplingResult(**base, p_value=0.05).significant(0.051)


def test_paired_subsampling_argument_errors_in_full():
    rng = np.random.default_rng(0)
    ones = np.ones((2, 8))

    def call(a=ones, b=ones, **kw):
        return paired_subsampling_test(a, b, **{"m": 4, "iterations": 5, "rng": rng, **kw})

    bad = ones.copy()
    bad[1, 3] = 5.0  # one bad outcome: the message quotes it
    cases = [
        (dict(a=bad), ValueError, r"^correct_a must hold 0/1 outcomes, got correct_a=5.0$"),
        (
            dict(a=np.ones((0, 8)), b=np.ones((0, 8))),
            ValueError,
            r"^correct_a must be a non-empty \(problems, samples\) array, got shape \(0, 8\)$",
        ),
        (dict(a=np.ones((1, 1)), b=np.ones((1, 1)), m=1), ValueError, r"^m must be < n=1"),
        (dict(a=[[1, 0], [1]]), ValueError, r"^correct_a must be a rectangular"),
        (
            dict(b=np.ma.masked_array(ones)),
            TypeError,
            r"^correct_b must be a plain array, got a masked array \(its mask would be ignored\)$",
        ),
        (dict(b=ones.astype(str)), TypeError, r"^correct_b must hold 0/1 outcomes"),
        (dict(k=[1, 2]), ValueError, r"^k must be a single number"),
        (dict(m=[2, 3]), ValueError, r"^m must be a single number"),
        (dict(iterations=[2, 3]), ValueError, r"^iterations must be a single number"),
        (dict(k=0), ValueError, r"^k must be an integer >= 1, got k=0$"),
        (dict(m=1, k=2), ValueError, r"^m must be an integer >= 2, got m=1$"),
    ]
    for kw, error, message in cases:
        with pytest.raises(error, match=message):
            call(**kw)
    A = np.array([[1, 0, 1, 0, 1, 0], [0, 0, 1, 1, 1, 1]])
    B = np.array([[0, 0, 1, 0, 0, 0], [1, 0, 0, 0, 1, 1]])
    default = paired_subsampling_test(A, B, m=3, iterations=20, rng=np.random.default_rng(2))
    explicit = paired_subsampling_test(A, B, m=3, iterations=20, rng=np.random.default_rng(2), k=1)
    assert default == explicit and default.k == 1  # k defaults to pass@1


def _exact_subsample_law(A, B, m, k):
    """All equally likely values of D*_m: every problem draws its own m of the n positions
    (the same ones for A and B), enumerated exactly and combined over problems."""
    P, n = A.shape
    table = [float(pass_at_k_unbiased(m, c, k)) for c in range(m + 1)]
    total = np.zeros(1)
    for x in range(P):
        values = np.array(
            [
                table[A[x, list(S)].sum()] - table[B[x, list(S)].sum()]
                for S in itertools.combinations(range(n), m)
            ]
        )
        total = (total[:, None] + values[None, :]).ravel()
    return total / P


def test_subsampling_law_matches_exact_enumeration():
    """subsample_std and p_value against the exact law of D*_m (all C(6, 3)^4 subsamples), with
    problems that are mixed in both methods, constant in one only, constant in both, and one
    with a single correct sample."""
    A = np.array([[1, 0, 1, 0, 0, 1], [1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0]])
    B = np.array([[0, 0, 1, 0, 1, 0], [1, 1, 0, 1, 1, 0], [1, 1, 1, 1, 1, 1], [0, 0, 1, 0, 0, 0]])
    m, k, n = 3, 2, 6
    law = _exact_subsample_law(A, B, m, k)
    D = float(
        np.mean(pass_at_k_unbiased(n, A.sum(1), k)) - np.mean(pass_at_k_unbiased(n, B.sum(1), k))
    )
    assert law.mean() == pytest.approx(D, abs=1e-12)  # the subsample estimator is unbiased too
    f = np.sqrt((n - 1) / (n - m))  # the finite-population factor
    p_exact = np.mean(np.sqrt(m) * f * np.abs(law - D) >= np.sqrt(n) * abs(D) - 1e-12)
    p_literal = np.mean(np.sqrt(m) * np.abs(law - D) >= np.sqrt(n) * abs(D) - 1e-12)
    assert p_literal < p_exact - 0.1  # the factor matters here
    iterations = 40_000
    res = paired_subsampling_test(
        A, B, m=m, iterations=iterations, rng=np.random.default_rng(7), k=k
    )
    literal = paired_subsampling_test(
        A, B, m=m, iterations=iterations, rng=np.random.default_rng(7), k=k, finite_population=False
    )
    assert abs(literal.p_value - p_literal) < 5 * np.sqrt(p_literal * (1 - p_literal) / iterations)
    assert res.statistic == pytest.approx(D, abs=1e-15)
    assert (res.k, res.n, res.m, res.iterations, res.num_problems) == (k, n, m, iterations, 4)
    assert res.pass_at_k_a == pytest.approx(np.mean(pass_at_k_unbiased(n, A.sum(1), k)))
    assert res.subsample_std == pytest.approx(law.std(), rel=0.03)
    assert abs(res.p_value - p_exact) < 5 * np.sqrt(p_exact * (1 - p_exact) / iterations) + 1e-4
    assert 0.01 < p_exact < 0.99  # the comparison is not trivially 0 or 1


def test_all_constant_problems_give_a_point_law():
    """Every problem all-correct or all-wrong in both methods: D*_m = D in every subsample."""
    A = np.array([[1] * 6, [0] * 6, [1] * 6])
    B = np.array([[1] * 6, [1] * 6, [0] * 6])
    same = paired_subsampling_test(A, A, m=3, iterations=50, rng=np.random.default_rng(0))
    assert same.p_value == 1.0 and same.subsample_std == 0.0 and same.statistic == 0.0
    diff = paired_subsampling_test(A, B, m=3, iterations=50, rng=np.random.default_rng(0))
    assert diff.statistic == pytest.approx(0.0) and diff.subsample_std == pytest.approx(
        0.0, abs=1e-15
    )
    shifted = paired_subsampling_test(
        A, np.array([[1] * 6, [1] * 6, [1] * 6]), m=3, iterations=50, rng=np.random.default_rng(0)
    )
    assert shifted.statistic == pytest.approx(-1 / 3) and shifted.p_value == pytest.approx(1 / 51)


def test_count_errors_quote_the_offending_element():
    with pytest.raises(ValueError, match=r"^c must be <= n, got c=9 > n=8$"):
        pass_at_k_unbiased(8, np.array([8, 9]), 1)
    with pytest.raises(ValueError, match=r"^c must be <= n, got c=10 > n=9$"):
        pass_at_k_unbiased(np.array([8, 9]), np.array([8, 10]), 1)
    with pytest.raises(ValueError, match=r"^k must be <= n, got k=9 > n=8$"):
        pass_at_k_unbiased(np.array([5, 8]), 0, np.array([5, 9]))
    with pytest.raises(ValueError, match=r"^n must be an integer >= 1, got n=0$"):
        pass_at_k_unbiased(0, 0, 1)
    with pytest.raises(ValueError, match=r"^c must be an integer >= 0, got c=-1$"):
        pass_at_k_unbiased(8, -1, 1)


def test_scalar_in_numpy_scalar_out_and_no_mpmath_where_every_subset_hits():
    assert isinstance(pass_at_k_exact(0.5, 2), np.floating)
    assert isinstance(pass_at_k_unbiased(8, 2, 3), np.floating)
    assert pass_at_k_unbiased(np.array([8]), 2, 3).shape == (1,)
    assert pass_at_k_exact([[0.5]], 2).shape == (1, 1)
    # n - c < k with both c and k above the 4096-factor limit: every k-subset holds a correct one
    assert pass_at_k_unbiased(10_000, 6_000, 5_000) == 1.0
    assert pass_at_k_unbiased(np.array([10_000, 20_000]), 6_000, 5_000)[0] == 1.0


@pytest.mark.parametrize(
    "a_row, b_row",
    [
        ([1, 0, 0, 0, 0, 0, 0, 0], [0] * 8),  # A has one success, B is constant
        ([1, 1, 1, 1, 0, 0, 0, 0], [0] * 8),  # A mixed
        ([0] * 8, [1, 0, 0, 0, 0, 0, 0, 0]),  # B has one success, A is constant
        ([1] * 8, [1, 1, 0, 0, 0, 0, 0, 0]),
    ],
)
def test_a_problem_mixed_in_one_method_only_is_resampled(a_row, b_row):
    """Only problems constant in both methods skip the subsampling: one mixed method is enough
    for D*_m to vary (pass@1(m, c*) = c*/m takes several values)."""
    A, B = np.array([a_row]), np.array([b_row])
    res = paired_subsampling_test(A, B, m=4, iterations=200, rng=np.random.default_rng(0), k=1)
    assert res.subsample_std > 0.05


def test_the_size_example_prints_both_scalings_and_refuses_bad_input():
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "subsampling_test_size.py"
    small = ["--n", "32", "--m", "8", "--k", "1,2", "--tests", "20", "--iterations", "20"]
    done = subprocess.run([sys.executable, script, *small], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows = done.stdout.strip().splitlines()[2:]
    assert [row.split()[0] for row in rows] == ["1", "2"] and all(
        row.count("[") == 2 for row in rows
    )
    bad = subprocess.run(
        [sys.executable, script, *small, "--m", "32"], capture_output=True, text=True
    )
    assert (
        bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "m=32" in bad.stderr
    )
    fixed = subprocess.run(  # one pass rate for every problem: k = m saturates, every null rejected
        [sys.executable, script, *small, "--k", "8", "--iterations", "200", "--rate", "0.7"],
        capture_output=True,
        text=True,
    )
    assert fixed.returncode == 0 and "pass rates 0.7" in fixed.stdout
    assert fixed.stdout.strip().splitlines()[-1].split()[1] == "1.0000"


def test_the_subsampling_test_says_when_k_close_to_m_saturates_it():
    """App. Q's subsampling at k close to m: with k = m = 16 of n = 64 and every pass rate 0.5,
    a subsample's pass@16 is 1 unless all 16 fail, so nearly every D*_m is 0, about |D| from D:
    two evaluations of the same rates are then rejected (p far below 0.05), and the result says
    the p-value is not calibrated. At k = 1 the subsample law is spread and nothing is flagged."""
    rng = np.random.default_rng(0)
    p = np.full(20, 0.5)
    A, B = _outcomes(rng, p, 64), _outcomes(rng, p, 64)
    flat = paired_subsampling_test(A, B, m=16, iterations=2000, rng=np.random.default_rng(1), k=16)
    assert flat.statistic != 0.0 and flat.p_value < 0.05  # a true H0 rejected: the breakdown
    assert flat.saturated > 0.9 and not flat.calibrated
    assert flat.to_dict()["calibrated"] is False
    fine = paired_subsampling_test(A, B, m=16, iterations=2000, rng=np.random.default_rng(1), k=1)
    assert fine.saturated < 0.5 and fine.calibrated
    same = paired_subsampling_test(A, A, m=16, iterations=200, rng=np.random.default_rng(1), k=16)
    assert same.saturated == 0.0 and same.calibrated  # D = 0: nothing to misjudge, p = 1
