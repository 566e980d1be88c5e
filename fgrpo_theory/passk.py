"""pass@k: exact, the unbiased estimator, and the paired subsampling test (paper Section 5.3,
Appendix Q; the estimator of Chen et al. 2021).

    exact       pass@k(p) = 1 - (1 - p)^k
    unbiased    pass@k(n, c) = 1 - C(n - c, k) / C(n, k)
                             = 1 - prod_{i=0}^{k-1} (n - c - i) / (n - i)

The estimator is a product of k factors (or, by the symmetry C(n - c, k) / C(n, k) =
C(n - k, c) / C(n, c), of c factors: whichever is fewer), summed in log space with ``log1p``,
so no binomial coefficient is ever formed and time and memory grow with min(c, k), never with
n. It is unbiased: its expectation over c ~ Binomial(n, p) is exactly pass@k(p) for every
k <= n.

    >>> float(pass_at_k_unbiased(4, 1, 2))     # 1 - C(3, 2) / C(4, 2)
    0.5
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from fgrpo_common.checks import broadcast, check_integer, check_probability, single

#: Elements (problems x factors) per block of the vectorised product.
_BLOCK = 1 << 20
#: Beyond this many factors the log of the product comes from log-gamma differences evaluated
#: by mpmath at a precision that covers their cancellation (one problem at a time).
_MAX_FACTORS = 4096
#: From this share of subsamples at one value of D*_m (away from D), the paired subsampling
#: test's p-value is not calibrated (``PairedSubsamplingResult.saturated``).
SATURATED = 0.5


def _out(x: np.ndarray):
    x = np.asarray(x)
    return x[()] if x.ndim == 0 else x


def pass_at_k_exact(p, k):
    """pass@k = 1 - (1 - p)^k for a per-sample success probability p (computed as -expm1).

    Args:
        p: success probability per sample, in [0, 1].
        k: attempts, an integer >= 1. Arrays broadcast.
    """
    p = check_probability("p", p)
    k = check_integer("k", k, minimum=1)
    p, k = broadcast(p=p, k=k)
    with np.errstate(divide="ignore"):
        return _out(-np.expm1(k * np.log1p(-p)) + 0.0)


def _log_factors(n: np.ndarray, x: np.ndarray, j: np.ndarray) -> np.ndarray:
    """log(1 - x / (n - j)) for int64 n, x (P, 1) and factor index j (W,): (P, W).

    log1p keeps every factor's relative accuracy where x / (n - j) is small; where it is near 1
    the product, and with it 1 - pass@k, is near 0 and pass@k stays accurate to an ulp.
    Entries with n - j <= x are not used by the caller (NaN or -inf there)."""
    return np.log1p(-x / (n - j))


def _log_ratio_mpmath(n: int, c: int, k: int) -> float:
    """-expm1(log C(n - c, k) - log C(n, k)) from log-gamma values at enough digits."""
    import mpmath

    with mpmath.workdps(40 + 2 * len(str(n))):
        lg = mpmath.loggamma
        log_ratio = lg(n - c + 1) - lg(n - c - k + 1) - lg(n + 1) + lg(n - k + 1)
        return float(-mpmath.expm1(log_ratio))


def pass_at_k_unbiased(n, c, k):
    """Unbiased pass@k from c correct out of n samples:

        pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i=0}^{m-1} (1 - x / (n - i)),

    with m = min(c, k) and x = max(c, k) (the product is symmetric in c and k). It is 1 when
    n - c < k and 0 when c = 0. Arrays broadcast. Up to 4096 factors the product is vectorised
    in log space; beyond that (a rare case: both c and k above 4096) each such problem is
    evaluated by mpmath log-gamma differences at sufficient precision.

    Args:
        n: samples per problem, an integer >= 1.
        c: correct samples, 0 <= c <= n.
        k: attempts, 1 <= k <= n.
    """
    n = check_integer("n", n, minimum=1)
    c = check_integer("c", c, minimum=0)
    k = check_integer("k", k, minimum=1)
    n, c, k = broadcast(n=n, c=c, k=k)
    if (c > n).any():
        raise ValueError(f"c must be <= n, got c={c[c > n].ravel()[0]} > n={n[c > n].ravel()[0]}")
    if (k > n).any():
        raise ValueError(f"k must be <= n, got k={k[k > n].ravel()[0]} > n={n[k > n].ravel()[0]}")
    shape = n.shape
    n, c, k = (np.ascontiguousarray(v).ravel() for v in (n, c, k))
    m, x = np.minimum(c, k), np.maximum(c, k)
    value = np.zeros(n.shape[0])  # c = 0: no correct sample, pass@k = 0
    value[(n - c) < k] = 1.0  # every k-subset holds a correct sample
    work = ((n - c) >= k) & (c > 0)
    idx = np.flatnonzero(work & (m <= _MAX_FACTORS))
    if idx.size:
        width = int(m[idx].max())
        j = np.arange(width)  # (W,)
        rows = max(1, _BLOCK // width)
        with np.errstate(divide="ignore", invalid="ignore"):
            for lo in range(0, idx.size, rows):
                sel = idx[lo : lo + rows]
                terms = _log_factors(n[sel, None], x[sel, None], j)  # (P, W)
                terms = np.where(j < m[sel, None], terms, 0.0)  # only the first m factors count
                value[sel] = -np.expm1(terms.sum(axis=1))
    for i in np.flatnonzero(work & (m > _MAX_FACTORS)):
        value[i] = _log_ratio_mpmath(int(n[i]), int(c[i]), int(k[i]))
    return _out(value.reshape(shape))


def mean_pass_at_k(n, c_per_problem, ks):
    """Mean unbiased pass@k over problems, one value per k: shape (len(ks),).

    Args:
        n: samples per problem (scalar, or one per problem).
        c_per_problem: correct counts, shape (P,).
        ks: the k values.
    """
    c = check_integer("c_per_problem", c_per_problem, minimum=0).ravel()
    ks = check_integer("ks", ks, minimum=1).ravel()
    n = check_integer("n", n, minimum=1)
    if n.size not in (1, c.size):
        raise ValueError(f"n must be one number or one per problem ({c.size}), got shape {n.shape}")
    n = np.broadcast_to(n.ravel(), c.shape)
    return np.asarray(pass_at_k_unbiased(n[None, :], c[None, :], ks[:, None])).mean(axis=1)


@dataclass(frozen=True)
class PairedSubsamplingResult:
    """Outcome of ``paired_subsampling_test`` (all fields plain Python numbers)."""

    k: int
    """The k of pass@k."""
    n: int
    """Samples per problem in the full evaluation."""
    m: int
    """Samples per problem in each subsample (drawn without replacement)."""
    iterations: int
    """Number of subsamples."""
    num_problems: int
    """Number of problems P (the same problems for both methods)."""
    pass_at_k_a: float
    """Mean unbiased pass@k of method A on all n samples."""
    pass_at_k_b: float
    """Mean unbiased pass@k of method B on all n samples."""
    statistic: float
    """D = pass_at_k_a - pass_at_k_b."""
    subsample_std: float
    """Standard deviation of the subsample differences D*_m."""
    p_value: float
    """Two-sided p-value of H0: equal expected pass@k."""
    finite_population: bool = True
    """Whether the subsample differences were scaled by the finite-population factor."""
    saturated: float = 0.0
    """The share of the subsamples whose D*_m takes one value lying at least |D| / 2 from D (0.0
    where none does): pass@k of m samples saturates at 1 once m - c* < k, so with k close to m
    most subsamples can give the same D*_m, and the subsample law is then not that of D. From
    ``SATURATED`` on, the p-value is not calibrated (true nulls are rejected far more often than
    alpha; see ``paired_subsampling_test``)."""

    @property
    def calibrated(self) -> bool:
        """Whether the subsample law is spread enough for the p-value to mean what it says."""
        return self.saturated < SATURATED

    def significant(self, alpha: float = 0.05) -> bool:
        """Whether H0 is rejected at level alpha."""
        return self.p_value < alpha

    def to_dict(self) -> dict:
        return {**asdict(self), "calibrated": self.calibrated}


def _outcomes(name: str, x) -> np.ndarray:
    """(P, n) outcomes as bool: a bool array, or numbers that are all 0 or 1."""
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(
            f"{name} must be a plain array, got a masked array "
            "(its mask would be ignored)"  # kept apart: mutant numbers in mutation/equivalent.md
        )
    try:
        x = np.asarray(x)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a rectangular (problems, samples) array") from None
    if x.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold 0/1 outcomes (bool or numbers), got dtype {x.dtype}")
    if x.ndim != 2 or x.size == 0:
        raise ValueError(
            f"{name} must be a non-empty (problems, samples) array, got shape {x.shape}"
        )
    bad = (x != 0) & (x != 1)
    if bad.any():
        raise ValueError(f"{name} must hold 0/1 outcomes, got {name}={x[bad].ravel()[0].item()}")
    return x.astype(bool)


def paired_subsampling_test(
    correct_a,
    correct_b,
    *,
    m: int,
    iterations: int,
    rng: np.random.Generator,
    k: int = 1,
    finite_population: bool = True,
) -> PairedSubsamplingResult:
    """Paired m-out-of-n subsampling test for a difference in mean pass@k (App. Q).

    ``correct_a`` and ``correct_b`` are (P, n) 0/1 outcomes of two methods on the same P
    problems. The statistic is D = mean_x pass@k_A(x) - mean_x pass@k_B(x) from all n samples.
    Each iteration draws, for every problem, m of the n sample positions without replacement
    (the same positions for A and B: the pairing), and recomputes D*_m from those m samples.
    Subsampling (Politis & Romano) approximates the law of sqrt(n) (D - Delta) by that of
    sqrt(m) f (D*_m - D), so the two-sided p-value of H0: Delta = 0 is

        p = (1 + #{ sqrt(m) f |D*_m - D| >= sqrt(n) |D| }) / (1 + iterations),

    with the finite-population factor f = sqrt((n - 1) / (n - m)): m draws without replacement
    from n have a mean whose variance is (n - m) / (n - 1) times that of m independent draws,
    so without f (``finite_population=False``, the m/n -> 0 limit the paper's formula takes)
    the subsample law is too narrow at the paper's m = n / 4 and a true H0 is rejected too
    often. At n = 1024, m = 256, 20 problems, alpha = 0.05, 2,000 null tests each
    (:func:`null_rejection_rate`; ``python examples/subsampling_test_size.py``): pass@1 0.096
    without f, 0.056 with it; pass@16 0.083 and 0.045; pass@64 0.039 and 0.023 (both
    conservative there).

    With k close to m the test breaks down: a subsample's pass@k is exactly 1 once fewer than k
    of its m samples fail, so on problems both methods nearly always solve most subsamples give
    one D*_m, about |D| from D and not extreme, and p is the chance of the rare unsaturated
    ones, tiny under a true H0. Two evaluations of the same pass rates, alpha = 0.05
    (``examples/subsampling_test_size.py``): at n = 1024, m = 256, pass@256 is rejected in 99 of
    100 tests at a pass rate of 0.03 on every problem (``--k 256 --rate 0.03 --tests 100``) and
    in 64% over U(0, 1) rates (``--k 256 --tests 200``); at n = 64, m = 16, pass@16 in all 200 at
    a rate of 0.5, pass@8 in all 200 at 0.9, pass@1 in 6.5% at 0.5. ``saturated`` measures it and
    ``calibrated`` is False from ``SATURATED`` on.

    Only the per-problem counts of the subsample matter, so each problem's draw is a
    multivariate hypergeometric over its four (A, B) outcome cells: no permutation is formed.
    The paper uses n = 1024, m = 256, 50,000 iterations, alpha = 0.05.

    Args:
        correct_a, correct_b: (P, n) arrays of 0/1.
        m: subsample size, k <= m < n.
        iterations: number of subsamples, >= 1.
        rng: the source of randomness.
        k: the k of pass@k, >= 1.
        finite_population: scale by f (the default); False gives the paper's sqrt(m) alone.
    """
    A = _outcomes("correct_a", correct_a)
    B = _outcomes("correct_b", correct_b)
    if A.shape != B.shape:
        raise ValueError(
            f"correct_a and correct_b must have the same shape, got {A.shape} and {B.shape}"
        )
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got rng={rng!r}")
    if not isinstance(finite_population, bool):
        raise TypeError(f"finite_population must be True or False, got {finite_population!r}")
    P, n = A.shape
    k = single("k", check_integer("k", k, minimum=1))
    m = single("m", check_integer("m", m, minimum=k))
    iterations = single("iterations", check_integer("iterations", iterations, minimum=1))
    if m >= n:
        raise ValueError(
            f"m must be < n={n} (a subsample of all n samples is the sample itself), got m={m}"
        )
    c_a, c_b = A.sum(axis=1), B.sum(axis=1)
    full_a = np.asarray(pass_at_k_unbiased(n, c_a, k))
    full_b = np.asarray(pass_at_k_unbiased(n, c_b, k))
    D = float(full_a.mean() - full_b.mean())
    table = np.asarray(pass_at_k_unbiased(m, np.arange(m + 1), k))  # pass@k(m, c*) for c* = 0..m
    D_star = np.zeros(iterations)
    # A problem whose outcomes are all equal within each method contributes a constant
    # (pass@k(m, 0) = 0, pass@k(m, m) = 1, the same as with n samples).
    constant = ((c_a == 0) | (c_a == n)) & ((c_b == 0) | (c_b == n))
    D_star += (full_a[constant] - full_b[constant]).sum()
    cells = np.stack([A & B, A & ~B, ~A & B, ~A & ~B], axis=-1).sum(axis=1)  # (P, 4)
    for x in np.flatnonzero(~constant):
        draw = rng.multivariate_hypergeometric(cells[x], m, size=iterations)  # (I, 4)
        D_star += table[draw[:, 0] + draw[:, 1]] - table[draw[:, 0] + draw[:, 2]]
    D_star /= P
    f = np.sqrt((n - 1) / (n - m)) if finite_population else 1.0
    extreme = np.sqrt(m) * f * np.abs(D_star - D) >= np.sqrt(n) * abs(D) - 1e-12
    p_value = (1.0 + extreme.sum()) / (1.0 + iterations)
    values, counts = np.unique(D_star, return_counts=True)
    top = int(np.argmax(counts))
    saturated = 0.0
    if D != 0.0 and abs(values[top] - D) >= 0.5 * abs(D):
        saturated = float(counts[top] / iterations)
    return PairedSubsamplingResult(
        k=k,
        n=n,
        m=m,
        iterations=iterations,
        num_problems=P,
        pass_at_k_a=float(full_a.mean()),
        pass_at_k_b=float(full_b.mean()),
        statistic=D,
        subsample_std=float(D_star.std()),
        p_value=float(p_value),
        finite_population=finite_population,
        saturated=saturated,
    )


def null_rejection_rate(
    *,
    n: int,
    m: int,
    k: int = 1,
    problems: int = 20,
    tests: int = 1000,
    iterations: int = 400,
    alpha: float = 0.05,
    finite_population: bool = True,
    rate: float | None = None,
    rng: np.random.Generator,
) -> tuple[float, float, float]:
    """The size of :func:`paired_subsampling_test` at level ``alpha``: the share of ``tests``
    tests that reject when H0 holds, with its 95% Wilson interval. Each test draws a pass rate
    p_x ~ U(0, 1) per problem (or takes p_x = ``rate`` for every problem) and n outcomes of each
    method from Bernoulli(p_x), so both methods have the same expected pass@k. Returns (rate,
    low, high)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got rng={rng!r}")
    n = single("n", check_integer("n", n, minimum=2))
    problems = single("problems", check_integer("problems", problems, minimum=1))
    tests = single("tests", check_integer("tests", tests, minimum=1))
    alpha = float(check_probability("alpha", alpha))
    if rate is not None:
        rate = float(check_probability("rate", rate))
    rejected = 0
    for _ in range(tests):
        p = rng.random((problems, 1)) if rate is None else np.full((problems, 1), rate)
        A, B = rng.random((problems, n)) < p, rng.random((problems, n)) < p
        out = paired_subsampling_test(
            A, B, m=m, iterations=iterations, rng=rng, k=k, finite_population=finite_population
        )
        rejected += out.p_value < alpha
    from scipy.stats import binomtest  # lazy: scipy

    ci = binomtest(int(rejected), tests).proportion_ci(0.95, method="wilson")
    return rejected / tests, float(ci.low), float(ci.high)


__all__ = [
    "pass_at_k_exact",
    "pass_at_k_unbiased",
    "mean_pass_at_k",
    "PairedSubsamplingResult",
    "SATURATED",
    "paired_subsampling_test",
    "null_rejection_rate",
]
