"""Tail-miss probabilities of group sampling (paper Section 3.1, Lemma 3.1).

A group of N i.i.d. rollouts is *active* (A_N) when it holds both correct and incorrect rollouts,
and it is a *tail miss* (B_{E,N}) when it is active yet no rollout lands in the rare-correct set E:

    P(A_N)     = 1 - mu^N - (1 - mu)^N
    P(B_{E,N}) = (1 - tau)^N - (mu - tau)^N - (1 - mu)^N          (Lemma 3.1)

with mu = pi(C(x)) and tau = pi(E) <= mu (rho = tau / mu).

Numerics. The three terms of P(B) nearly cancel when tau is tiny and N is large. Since the three
bases satisfy (mu - tau) + (1 - mu) = 1 - tau, factoring out the largest term gives

    P(B) = (1 - tau)^N * f_N(q),     q = min(mu - tau, 1 - mu) / (1 - tau) <= 1/2,
    f_N(q) = 1 - q^N - (1 - q)^N = q (1 - q^(N-1)) + (1 - q) (1 - (1 - q)^(N-1)),

a sum of two non-negative terms, each evaluated with ``expm1``/``log1p``: no subtraction of
nearly equal numbers is left, for every N >= 1 (integer or real). P(A) is the case tau = 0.
Relative error is a few ulp times max(1, |N log(1 - tau)|) against mpmath at 50 digits
(``benchmarks/bench_tail_miss.py`` measures it).

    >>> from fgrpo_theory.tail_miss import p_tail_miss, peak_group_size
    >>> float(p_tail_miss(0.3, 0.03, 8))            # doctest: +ELLIPSIS
    0.726...
    >>> int(peak_group_size(0.3, 0.015)[0])         # integer argmax N*
    9
"""

from __future__ import annotations

import numpy as np

from fgrpo_common.checks import (
    broadcast,
    check_group_size,
    check_probability,
    check_tau_le_mu,
)

#: Elements per chunk of the vectorised kernel: keeps the temporaries in cache.
_CHUNK = 1 << 14
#: Stand-in for log(0) that keeps 0 * log(0) = 0 (a group of size N = 1).
_LOG_ZERO = -1e300
#: Below this size the first-order series of log1p / expm1 is exact to double precision.
_SMALL = 1e-9
_LOG_SMALL = float(np.log(_SMALL))


# ----------------------------------------------------------------------------------------------
# argument handling
# ----------------------------------------------------------------------------------------------


def _check_mu_tau(mu, tau) -> tuple[np.ndarray, np.ndarray]:
    mu = check_probability("mu", mu)
    tau = check_probability("tau", tau)
    check_tau_le_mu(mu, tau)
    return mu, tau


def _tau_from_rho(mu, rho) -> tuple[np.ndarray, np.ndarray]:
    mu = check_probability("mu", mu)
    rho = check_probability("rho", rho)
    return mu, rho * mu


def _out(x: np.ndarray):
    """0-d arrays become numpy scalars (``np.float64``); other shapes stay arrays."""
    return x[()] if x.ndim == 0 else x


# ----------------------------------------------------------------------------------------------
# the kernel: log(1 - tau) and f_N(q), chunked
# ----------------------------------------------------------------------------------------------


def _kernel(mu: np.ndarray, tau: np.ndarray, N: np.ndarray, *, log: bool) -> np.ndarray:
    """P(B) (or log P(B)) on 1-D float64 arrays of equal length, in cache-sized chunks."""
    out = np.empty(mu.shape[0])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        for lo in range(0, mu.shape[0], _CHUNK):
            hi = min(lo + _CHUNK, mu.shape[0])
            _kernel_chunk(mu[lo:hi], tau[lo:hi], N[lo:hi], out[lo:hi], log=log)
    return out


def _kernel_chunk(mu, tau, N, out, *, log: bool) -> None:
    # log(1 - tau): exact-input log1p, never log of a rounded 1 - tau (its error would grow N-fold).
    log_a = np.log1p(-tau)
    a = 1.0 - tau
    # q: the smaller of the two conditional bases (mu - tau)/(1 - tau) and (1 - mu)/(1 - tau).
    # 1 - mu enters only when it is the smaller one, i.e. mu >= 1/2, where it is exact.
    m = np.minimum(mu - tau, 1.0 - mu)
    q = m / a
    log_q = np.log(m)
    log_q -= log_a
    np.maximum(log_q, _LOG_ZERO, out=log_q)
    Q = 1.0 - q  # >= 1/2, so rounding here is relative eps
    log_Q = np.log1p(-q)
    n1 = N - 1.0
    # f = q * (1 - q^(N-1)) + Q * (1 - Q^(N-1)), both terms >= 0
    t = np.multiply(n1, log_q)
    np.expm1(t, out=t)
    t *= q
    u = np.multiply(n1, log_Q)
    np.expm1(u, out=u)
    u *= Q
    f = np.add(t, u, out=t)
    np.negative(f, out=f)
    if log:
        np.copyto(out, _log_f(f, q, log_q, log_Q, n1, N))
        out += N * log_a
        out[m == 0.0] = -np.inf  # tau = mu or mu = 1: P = 0 exactly
    else:
        np.multiply(N, log_a, out=out)
        np.exp(out, out=out)
        out *= f
    # tau = 1 forces mu = 1: every base is 0 and P = 0 (the kernel would give 0/0 there).
    zero_a = a == 0.0
    if zero_a.any():
        out[zero_a] = -np.inf if log else 0.0


def _log_minus_expm1(log_minus_x, x):
    """log(-expm1(x)) for x <= 0 given log(-x) too; exact in log space when x is tiny
    (even subnormal), where -expm1(x) = -x (1 + x/2 + ...)."""
    return np.where(log_minus_x < _LOG_SMALL, log_minus_x + 0.5 * x, np.log(-np.expm1(x)))


def _log_f(f, q, log_q, log_Q, n1, N):
    """log f_N(q) with f = q (1 - q^(N-1)) + Q (1 - Q^(N-1)), every piece in log space.

    Near f = 1 it is log1p(-(q^N + Q^N)); elsewhere the logaddexp of the two terms, with
    log(-log Q) = log q + q/2 for tiny q so that a subnormal q keeps its full precision.
    """
    log_n1 = np.log(n1)
    log_mlog_q = np.log(-log_q)
    log_mlog_Q = np.where(q < _SMALL, log_q + 0.5 * q, np.log(-log_Q))
    term_q = log_q + _log_minus_expm1(log_n1 + log_mlog_q, n1 * log_q)
    term_Q = log_Q + _log_minus_expm1(log_n1 + log_mlog_Q, n1 * log_Q)
    near_one = np.log1p(-(np.exp(N * log_q) + np.exp(N * log_Q)))
    return np.where(f > 0.5, near_one, np.logaddexp(term_q, term_Q))


def _broadcast_eval(mu, tau, N, *, log: bool):
    mu_b, tau_b, N_b = broadcast(mu=mu, tau=tau, N=N)
    shape = mu_b.shape
    flat = [np.ascontiguousarray(x, dtype=np.float64).ravel() for x in (mu_b, tau_b, N_b)]
    return _out(_kernel(*flat, log=log).reshape(shape))


# ----------------------------------------------------------------------------------------------
# public closed forms
# ----------------------------------------------------------------------------------------------


def p_tail_miss(mu, tau, N):
    """P(B_{E,N}) = (1 - tau)^N - (mu - tau)^N - (1 - mu)^N  (Lemma 3.1).

    The probability that a group of N rollouts is active (mixed rewards) yet misses the
    rare-correct set E of mass tau. Arrays broadcast; N may be real (continuous relaxation).

    Args:
        mu: success probability pi(C), in [0, 1].
        tau: rare-correct mass pi(E), in [0, mu].
        N: group size, >= 1.
    """
    mu, tau = _check_mu_tau(mu, tau)
    N = check_group_size("N", N)
    return _broadcast_eval(mu, tau, N, log=False)


def log_p_tail_miss(mu, tau, N):
    """log P(B_{E,N}), accurate where P(B) itself underflows; -inf where P(B) = 0."""
    mu, tau = _check_mu_tau(mu, tau)
    N = check_group_size("N", N)
    return _broadcast_eval(mu, tau, N, log=True)


def p_active(mu, N):
    """P(A_N) = 1 - mu^N - (1 - mu)^N: the group has mixed rewards (a nonzero GRPO update)."""
    mu = check_probability("mu", mu)
    N = check_group_size("N", N)
    return _broadcast_eval(mu, np.zeros(()), N, log=False)


def log_p_active(mu, N):
    """log P(A_N); -inf where P(A_N) = 0 (N = 1, or mu in {0, 1})."""
    mu = check_probability("mu", mu)
    N = check_group_size("N", N)
    return _broadcast_eval(mu, np.zeros(()), N, log=True)


def p_tail_miss_rho(mu, rho, N):
    """P(B_{E,N}) parameterised by the rare fraction rho = tau / mu, in [0, 1]."""
    mu, tau = _tau_from_rho(mu, rho)
    return p_tail_miss(mu, tau, N)


def log_p_tail_miss_rho(mu, rho, N):
    """log P(B_{E,N}) parameterised by rho = tau / mu."""
    mu, tau = _tau_from_rho(mu, rho)
    return log_p_tail_miss(mu, tau, N)


def p_tail_miss_given_active(mu, tau, N):
    """P(B_{E,N} | A_N) = P(B) / P(A): what a DAPO-style filter of inactive groups sees.

    NaN where P(A_N) = 0 (N = 1, mu in {0, 1}): the conditional is undefined there.
    """
    mu, tau = _check_mu_tau(mu, tau)
    N = check_group_size("N", N)
    log_b = np.asarray(_broadcast_eval(mu, tau, N, log=True))
    log_a = np.asarray(_broadcast_eval(mu, np.zeros(()), N, log=True))
    with np.errstate(invalid="ignore"):
        ratio = np.where(np.isneginf(log_a), np.nan, np.exp(log_b - log_a))
    return _out(ratio)


def expected_tail_miss_count(mu, tau, N):
    """E[#tail-miss prompts] = sum_b P(B_{E_b,N}; mu_b, tau_b) for a batch of B prompts.

    Args:
        mu, tau: per-prompt values, broadcast to one 1-D batch of shape (B,).
        N: group size, any shape S; the result has shape S.
    """
    mu, tau = _check_mu_tau(mu, tau)
    N = check_group_size("N", N)
    mu_b, tau_b = (np.atleast_1d(x).ravel() for x in broadcast(mu=mu, tau=tau))
    p = np.asarray(_broadcast_eval(mu_b, tau_b, N[..., None], log=False))  # S + (B,)
    return _out(np.asarray(p.sum(axis=-1)))


# ----------------------------------------------------------------------------------------------
# the peak in N
# ----------------------------------------------------------------------------------------------


def _log_dP_terms(mu, tau, n1):
    """A quantity with the sign of dP(B)/dN at N = 1 + n1 (positive: P still rising).

    With P = (1 - tau)^N f_N(q): dP/dN = (1 - tau)^N (f' + f log(1 - tau)), and
    f' = -q^N log q - Q^N log Q > 0, so the sign is that of log f' - log f - log(-log(1 - tau)).
    """
    log_a = np.log1p(-tau)
    m = np.minimum(mu - tau, 1.0 - mu)
    q = m / (1.0 - tau)
    log_q = np.log(m) - log_a
    log_Q = np.log1p(-q)
    N = n1 + 1.0
    # log f' = logaddexp(N log q + log(-log q), N log Q + log(-log Q))
    log_fp = np.logaddexp(N * log_q + np.log(-log_q), N * log_Q + np.log(-log_Q))
    f = -(q * np.expm1(n1 * log_q) + (1.0 - q) * np.expm1(n1 * log_Q))
    return log_fp - np.log(f) - np.log(-log_a)


#: Bisection bracket on log(N - 1): N - 1 from e^-60 to e^709 (the float64 limit is e^709.78).
_LOG_N1_LO, _LOG_N1_HI = -60.0, 709.0
_BISECTIONS = 100


def stationary_group_size(mu, tau, *, beyond=None):
    """The continuous N_c > 1 solving dP(B_{E,N})/dN = 0, i.e.

        (1 - tau)^N log(1 - tau) = (mu - tau)^N log(mu - tau) + (1 - mu)^N log(1 - mu).

    dP/dN has at most one real root (its three exponentials carry one sign change), so N_c is
    the unique maximiser of the continuous relaxation. Solved by bisection on log(N - 1) over
    N - 1 in [e^-60, e^709]. Returns +inf where tau = 0 (P(B) = P(A) rises to 1) and NaN where
    P(B) is identically 0 (mu in {0, 1} or tau = mu). A root outside the bracket (tau so small
    that N_c exceeds the float64 range) raises ValueError naming mu and tau: the bracket end is
    never returned as if it were the answer. With ``beyond`` given (e.g. ``math.inf``), such a
    root is reported as ``beyond`` instead.
    """
    mu, tau = _check_mu_tau(mu, tau)
    return _out(_stationary(mu, tau, beyond=beyond))


def _stationary(mu: np.ndarray, tau: np.ndarray, *, beyond) -> np.ndarray:
    """``stationary_group_size`` on checked arrays (peak_group_size with n_max passes
    beyond=+inf: P(B) still rises at N = e^709 > 2^53 >= n_max, so the capped argmax is
    n_max)."""
    mu_b, tau_b = broadcast(mu=mu, tau=tau)
    degenerate = (tau_b >= mu_b) | (mu_b <= 0.0) | (mu_b >= 1.0)
    rising = (tau_b == 0.0) & ~degenerate
    ok = ~degenerate & ~rising
    mu_ok = np.where(ok, mu_b, 0.5)
    tau_ok = np.where(ok, tau_b, 0.25)
    lo = np.full(mu_b.shape, _LOG_N1_LO)
    hi = np.full(mu_b.shape, _LOG_N1_HI)
    with np.errstate(all="ignore"):
        # dP/dN > 0 at N = 1 (it is b log(a/b) + c log(a/c) with a = b + c), so the root is
        # bracketed unless P(B) still rises at the top of the bracket.
        outside = ok & (_log_dP_terms(mu_ok, tau_ok, np.exp(hi)) > 0.0)
        if outside.any() and beyond is None:
            m, t = _first(mu_b, outside), _first(tau_b, outside)
            raise ValueError(
                f"the stationary group size for mu={m}, tau={t} lies above e^709, "
                f"outside what float64 resolves (tau too small next to mu)"
            )
        for _ in range(_BISECTIONS):
            mid = 0.5 * (lo + hi)
            rising_at_mid = _log_dP_terms(mu_ok, tau_ok, np.exp(mid)) > 0.0
            lo = np.where(rising_at_mid, mid, lo)
            hi = np.where(rising_at_mid, hi, mid)
    n_c = 1.0 + np.exp(0.5 * (lo + hi))
    n_c = np.where(rising, np.inf, np.where(degenerate, np.nan, n_c))
    if beyond is not None:
        n_c = np.where(outside, beyond, n_c)
    return np.asarray(n_c)


def _first(x: np.ndarray, where: np.ndarray):
    return np.broadcast_to(x, where.shape)[where].ravel()[0].item()


def peak_group_size(mu, tau, n_max=None):
    """The integer argmax N* of P(B_{E,N}) over N = 1, 2, ... (at most n_max) and P(B) at N*.

    P(B) is unimodal in N, so N* is floor or ceil of the stationary point (capped at n_max);
    ties go to the smaller N. Where P(B) is identically 0, N* = 1 and P* = 0. With tau = 0,
    P(B) = P(A) increases in N, so n_max is required there. A stationary point above e^709
    (see ``stationary_group_size``) raises without n_max; with it, N* = n_max (<= 2^53), since
    P(B) still rises there.

    Returns:
        (N_star, P_star): int64 and float64, numpy scalars for scalar input.
    """
    mu, tau = _check_mu_tau(mu, tau)
    if n_max is not None:
        big = [
            v
            for v in np.ravel(np.asarray(n_max, dtype=object))
            if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 2**53
        ]
        if big:  # before float64 rounds it to 2^53
            raise ValueError(
                f"n_max must be at most 2^53 (larger integers are not exact in float64), "
                f"got n_max={big[0]}"
            )
        n_max = check_group_size("n_max", n_max)
        fractional = n_max != np.floor(n_max)
        if fractional.any():
            raise ValueError(
                f"n_max must be an integer >= 1, got n_max={_first(n_max, fractional)}"
            )
    n_c = _stationary(mu, tau, beyond=None if n_max is None else np.inf)
    cap = np.inf if n_max is None else n_max
    if np.isinf(n_c).any() and n_max is None:
        raise ValueError("tau=0: P(B) = P(A) increases with N without a peak; pass n_max")
    n_c, cap = broadcast(**{"mu and tau": n_c, "n_max": cap})
    beyond = np.nan_to_num(np.minimum(n_c, cap), nan=1.0) > 2.0**53  # integers exact up to 2^53
    if beyond.any():
        mu_b, tau_b = broadcast(mu=mu, tau=tau)
        fix = "pass n_max" if n_max is None else "pass an n_max of at most 2^53"
        raise ValueError(
            f"the peak group size for mu={_first(mu_b, beyond)}, "
            f"tau={_first(tau_b, beyond)} is beyond 2^53; {fix}"
        )
    base = np.where(np.isnan(n_c), 1.0, n_c)
    lower = np.clip(np.floor(base), 1.0, cap)
    upper = np.clip(np.ceil(base), 1.0, cap)
    p_lo = np.asarray(p_tail_miss(mu, tau, lower))
    p_hi = np.asarray(p_tail_miss(mu, tau, upper))
    take_upper = p_hi > p_lo
    N_star = np.where(take_upper, upper, lower).astype(np.int64)
    P_star = np.where(take_upper, p_hi, p_lo)
    return _out(N_star), _out(np.asarray(P_star, dtype=np.float64))


__all__ = [
    "p_active",
    "log_p_active",
    "p_tail_miss",
    "log_p_tail_miss",
    "p_tail_miss_rho",
    "log_p_tail_miss_rho",
    "p_tail_miss_given_active",
    "stationary_group_size",
    "peak_group_size",
    "expected_tail_miss_count",
]
