"""Symbolic derivation of Lemma 3.1 with sympy (paper Section 3.1).

Each rollout of a group lands in exactly one of three disjoint regions: the rare-correct set E
(probability tau), the rest of the correct set C \\ E (mu - tau) and the incorrect set (1 - mu).
The region counts of a group are therefore Multinomial(N; tau, mu - tau, 1 - mu), and

    B_{E,N} = {#E = 0} minus {all N rollouts incorrect} minus {all N in C \\ E},

so by the binomial theorem P(B_{E,N}) = (1 - tau)^N - (1 - mu)^N - (mu - tau)^N. This module
derives that step by step, checks it against a brute-force sum over the trinomial for small N,
and derives P = 0 at N = 1, P -> 0 as N -> infinity, and dP/dN.
Shown in ``notebooks/02_derivations.ipynb``.

    >>> from fgrpo_theory.derivations import p_tail_miss_expr, value_at_group_size_one
    >>> value_at_group_size_one()
    0
"""

from __future__ import annotations

import sympy as sp

#: Symbols: success probability, rare-correct mass, group size (real, for the continuous
#: relaxation and dP/dN) and a summation index.
mu, tau = sp.symbols("mu tau", positive=True)
N = sp.Symbol("N", positive=True)
k = sp.Symbol("k", integer=True, nonnegative=True)
_N_int = sp.Symbol("N", integer=True, positive=True)


def region_probabilities() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """(P(E), P(C \\ E), P(not C)) = (tau, mu - tau, 1 - mu)."""
    return tau, mu - tau, 1 - mu


def p_tail_miss_expr() -> sp.Expr:
    """Lemma 3.1: P(B_{E,N}) = (1 - tau)^N - (mu - tau)^N - (1 - mu)^N."""
    return (1 - tau) ** N - (mu - tau) ** N - (1 - mu) ** N


def p_active_expr() -> sp.Expr:
    """P(A_N) = 1 - mu^N - (1 - mu)^N (the case tau = 0 of Lemma 3.1)."""
    return p_tail_miss_expr().subs(tau, 0)


def _first_branch(expr: sp.Expr) -> sp.Expr:
    """Replace each Piecewise by its first branch (sympy attaches convergence conditions to
    finite binomial sums that hold for every finite N)."""
    return expr.replace(lambda e: isinstance(e, sp.Piecewise), lambda e: e.args[0].expr)


def derive_lemma_3_1() -> dict[str, sp.Expr]:
    """The derivation as named steps (each a sympy expression), ending in Lemma 3.1.

    1. no_rare: P(#E = 0) = sum_k C(N, k) (mu - tau)^k (1 - mu)^(N - k), summed by sympy.
    2. all_incorrect: P(#E = 0, X = 0) = (1 - mu)^N.
    3. all_common_correct: P(#E = 0, X = N) = (mu - tau)^N.
    4. tail_miss = no_rare - all_incorrect - all_common_correct.
    """
    _, common, wrong = region_probabilities()
    b, c = sp.symbols("b c", positive=True)  # stand-ins for mu - tau and 1 - mu
    binomial_sum = sp.Sum(sp.binomial(_N_int, k) * b**k * c ** (_N_int - k), (k, 0, _N_int))
    closed = sp.powsimp(
        sp.expand_power_base(_first_branch(binomial_sum.doit()) / c**_N_int) * c**_N_int, force=True
    )
    closed = sp.simplify(closed)  # (b + c)^N
    no_rare = sp.simplify(closed.subs({b: common, c: wrong})).subs(_N_int, N)
    all_incorrect = wrong**N
    all_common_correct = common**N
    return {
        "binomial_sum": binomial_sum.subs({b: common, c: wrong}),
        "no_rare": no_rare,
        "all_incorrect": all_incorrect,
        "all_common_correct": all_common_correct,
        "tail_miss": no_rare - all_incorrect - all_common_correct,
    }


def trinomial_tail_miss(n: int) -> sp.Expr:
    """Brute force for a concrete group size n: the sum of the trinomial probabilities of every
    count vector (k_E, k_C, k_W) with k_E = 0 and 0 < k_E + k_C < n."""
    p_E, p_C, p_W = region_probabilities()
    total = sp.Integer(0)
    for k_E in range(n + 1):
        for k_C in range(n + 1 - k_E):
            k_W = n - k_E - k_C
            X = k_E + k_C
            if k_E == 0 and 0 < X < n:
                coeff = sp.factorial(n) / (
                    sp.factorial(k_E) * sp.factorial(k_C) * sp.factorial(k_W)
                )
                total += coeff * p_E**k_E * p_C**k_C * p_W**k_W
    return sp.expand(total)


def check_lemma_3_1(n_values=range(1, 7)) -> bool:
    """True when Lemma 3.1 equals the trinomial brute force, as polynomials, for every n given."""
    P = p_tail_miss_expr()
    return all(sp.expand(P.subs(N, n) - trinomial_tail_miss(n)) == 0 for n in n_values)


def value_at_group_size_one() -> sp.Expr:
    """P(B_{E,1}) = 0: a single rollout is never an active group."""
    return sp.simplify(p_tail_miss_expr().subs(N, 1))


def limit_large_group() -> sp.Expr:
    """lim_{N -> oo} P(B_{E,N}) = 0 for 0 < tau < mu < 1, taken on :func:`p_tail_miss_expr`.

    Each of its terms is +-b^N with a base b in {1 - tau, mu - tau, 1 - mu}, which lies in
    (0, 1) for 0 < tau < mu < 1, so b = exp(-alpha) with alpha > 0; sympy takes the limit of the
    sum of +-exp(-N alpha) (a term free of N is kept as it is).
    """
    total = sp.Integer(0)
    for i, term in enumerate(sp.Add.make_args(p_tail_miss_expr())):
        coeff, power = term.as_independent(N, as_Add=False)
        base, expo = power.as_base_exp()
        if expo != N:  # not of the form c b^N: kept whole (its limit is sympy's to take)
            total += term
            continue
        if base not in (1 - tau, mu - tau, 1 - mu):  # the bases known to lie in (0, 1)
            raise ValueError(f"the term {term} of P has a base not known to lie in (0, 1)")
        total += coeff * sp.exp(-N * sp.Symbol(f"alpha_{i + 1}", positive=True))
    return sp.limit(total, N, sp.oo)


def dP_dN_expr() -> sp.Expr:
    """dP(B_{E,N})/dN = (1-tau)^N log(1-tau) - (mu-tau)^N log(mu-tau) - (1-mu)^N log(1-mu)."""
    return sp.diff(p_tail_miss_expr(), N)


def stationary_condition() -> sp.Eq:
    """The equation dP/dN = 0 whose unique root N_c > 1 is ``tail_miss.stationary_group_size``."""
    return sp.Eq(dP_dN_expr(), 0)


def lambdify(expr: sp.Expr, modules: str = "mpmath"):
    """expr as a function f(mu, tau, N) (mpmath by default, for high-precision checks)."""
    return sp.lambdify((mu, tau, N), expr, modules=modules)


__all__ = [
    "mu",
    "tau",
    "N",
    "region_probabilities",
    "p_tail_miss_expr",
    "p_active_expr",
    "derive_lemma_3_1",
    "trinomial_tail_miss",
    "check_lemma_3_1",
    "value_at_group_size_one",
    "limit_large_group",
    "dP_dN_expr",
    "stationary_condition",
    "lambdify",
]
