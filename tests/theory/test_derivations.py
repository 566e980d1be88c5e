"""The sympy derivation of Lemma 3.1 and its consequences, checked against the numerics."""

import mpmath
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_theory import derivations as d
from fgrpo_theory.tail_miss import p_active, p_tail_miss, stationary_group_size


def test_derivation_steps_end_in_lemma_3_1():
    steps = d.derive_lemma_3_1()
    assert sp.simplify(steps["no_rare"] - (1 - d.tau) ** d.N) == 0
    assert sp.simplify(steps["tail_miss"] - d.p_tail_miss_expr()) == 0


def test_lemma_equals_trinomial_brute_force():
    assert d.check_lemma_3_1(range(1, 6))
    assert sp.expand(d.trinomial_tail_miss(2) - 2 * (d.mu - d.tau) * (1 - d.mu)) == 0


def test_limits():
    assert d.value_at_group_size_one() == 0
    assert d.limit_large_group() == 0
    point = {d.mu: sp.Rational(3, 10), d.tau: sp.Rational(1, 100)}
    assert sp.limit(d.p_tail_miss_expr().subs(point), d.N, sp.oo) == 0
    assert sp.simplify(d.p_active_expr() - (1 - d.mu**d.N - (1 - d.mu) ** d.N)) == 0


def test_the_large_group_limit_is_taken_on_the_lemma(monkeypatch):
    """limit_large_group reads p_tail_miss_expr: a wrong P gives a wrong limit, or an error
    when a base is not one known to lie in (0, 1)."""
    lemma = d.p_tail_miss_expr
    monkeypatch.setattr(d, "p_tail_miss_expr", lambda: lemma() + 1)
    assert d.limit_large_group() == 1
    monkeypatch.setattr(d, "p_tail_miss_expr", lambda: lemma() + (1 + d.tau) ** d.N)
    with pytest.raises(ValueError, match=r"not known to lie in \(0, 1\)"):
        d.limit_large_group()


_P = d.lambdify(d.p_tail_miss_expr())
_dP = d.lambdify(d.dP_dN_expr())


@settings(max_examples=40, deadline=None)
@given(mu=st.floats(0.01, 0.99), frac=st.floats(0.0, 0.99), N=st.integers(1, 2000))
def test_numpy_closed_form_equals_sympy_expression(mu, frac, N):
    tau = frac * mu
    with mpmath.workdps(60):
        ref = _P(mpmath.mpf(mu), mpmath.mpf(tau), mpmath.mpf(N))
        assert float(abs(p_tail_miss(mu, tau, N) - ref)) <= 1e-13 * max(float(abs(ref)), 1e-290)
        ref_a = d.lambdify(d.p_active_expr())(mpmath.mpf(mu), 0, mpmath.mpf(N))
        assert p_active(mu, N) == pytest.approx(float(ref_a), rel=1e-13, abs=1e-300)


@pytest.mark.parametrize("mu, rho", [(0.3, 0.05), (0.8, 0.01), (0.2, 0.2), (0.64, 6.3e-5 / 0.64)])
def test_dP_dN_matches_finite_difference_and_vanishes_at_stationary_point(mu, rho):
    tau = rho * mu
    for N in (3.0, 10.5, 40.0):
        h = 1e-5
        fd = (p_tail_miss(mu, tau, N + h) - p_tail_miss(mu, tau, N - h)) / (2 * h)
        assert float(_dP(mu, tau, N)) == pytest.approx(fd, rel=1e-5, abs=1e-9)
    n_c = stationary_group_size(mu, tau)
    with mpmath.workdps(40):
        scale = max(abs(float(_dP(mu, tau, n_c / 2))), 1e-30)
        assert abs(float(_dP(mu, tau, mpmath.mpf(n_c)))) <= 1e-9 * scale
