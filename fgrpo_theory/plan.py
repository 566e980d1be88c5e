"""Which group size N, and which weighting, for a model's own pass rates (paper Lemma 3.1,
Section 4): the expected fraction of groups that carry signal, the expected tail-miss rate
(the rare correct mode unsampled in an active group) over the prompts, where it peaks, and the
share of the update that each weighting sends to hard prompts.

Per prompt p with success rate mu_p and rare-mode mass tau_p = rho mu_p, at group size N:

    P(active)   = 1 - mu^N - (1 - mu)^N,
    P(B_{E,N})  = Lemma 3.1 (``fgrpo_theory.tail_miss.p_tail_miss``),
    U_p(w)      = E_{X ~ Bin(N, mu_p)} [ w(X/N) * 2 N sqrt(m (1 - m)) ],   m = X / N,

U_p being the expected L1 mass of the group's advantages (GRPO's, population std, eps -> 0:
sum_i |A_i| = 2 N sqrt(m (1 - m))) under weighting w. The share of prompt set H is
sum_{p in H} U_p / sum_p U_p; "hard" prompts are those with mu_p < 1/2.

Pass rates measured from n samples (c correct) are uncertain: ``plan`` redraws each mu_p from
its Jeffreys posterior Beta(c + 1/2, n - c + 1/2) ``draws`` times and reports the median of the
prompt-averaged tail-miss rate with its 2.5% and 97.5% quantiles, and the median of the
prompt-averaged active fraction. (The plug-in mu_p = c / n would give a prompt never solved in
n samples a tail-miss rate of exactly 0, though its true mu_p may well be positive: that
estimate can fall outside its own range.) A tail miss needs an active group, so in every draw
the tail-miss rate is at most the active fraction, and so are their medians. The hard prompts
and the shares of the update use the plug-in mu_p = c / n.

    >>> res = plan([0.2, 0.5, 0.9], rho=0.1, group_sizes=[2, 8, 32])
    >>> [round(r["active"], 3) for r in res["rows"]]
    [0.333, 0.798, 0.988]
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.special import logsumexp

from fgrpo_common.checks import check_integer, check_probability
from fgrpo_theory.tail_miss import log_p_active, p_tail_miss
from fgrpo_theory.weighting import Weighting, parse_weighting

__all__ = ["plan", "update_mass", "HARD_BELOW"]

#: A prompt is "hard" when its success rate is below this.
HARD_BELOW = 0.5
#: The largest group size the calculator takes (U_p sums over X = 0..N for every prompt).
MAX_GROUP = 1 << 16
#: At most this many posterior pass rates drawn in all (draws x prompts: 400 MB of float64).
MAX_POSTERIOR = 50_000_000
#: At most this many binomial terms in the update shares, prompts x sum of (N + 1) over the
#: group sizes (about 6 million a second: a plan at the limit takes a few minutes).
MAX_TERMS = 1_000_000_000


def update_mass(mu, N: int, weighting: Weighting) -> np.ndarray:
    """U_p(w) for every mu_p (P,) at group size N: the expected sum of |advantages| of a group,
    E_{X ~ Bin(N, mu)} [w(X/N) 2 N sqrt(m (1 - m))]."""
    return _update_masses(mu, N, [weighting])[0]


def _update_masses(mu, N: int, weightings) -> list[np.ndarray]:
    """``update_mass`` for several weightings, with Bin(N, mu_p) tabulated once."""
    mu = np.atleast_1d(np.asarray(mu, dtype=np.float64))
    X = np.arange(N + 1)
    m = X / N
    l1 = 2.0 * N * np.sqrt(m * (1.0 - m))  # (N + 1,) sum of |A|, 0 at X = 0 and N
    per_x = np.stack([w(m) * l1 for w in weightings], axis=1)  # (N + 1, W)
    rows = max(1, (1 << 22) // (N + 1))  # prompts per block: (rows, N + 1) stays ~32 MB
    U = np.concatenate(
        [_binom_pmf(X[None, :], N, mu[i : i + rows, None]) @ per_x
         for i in range(0, mu.size, rows)]
    )  # fmt: skip  # (P, W)
    return list(U.T)


def _binom_pmf(X: np.ndarray, N: int, mu: np.ndarray) -> np.ndarray:
    """Bin(N, mu) probabilities of X; through the log-pmf where scipy's pmf raises an
    OverflowError (Boost's ibeta_derivative at mu near 1e-305 with N >= 1024)."""
    try:
        return stats.binom.pmf(X, N, mu)
    except OverflowError:
        return np.exp(stats.binom.logpmf(X, N, mu))


def _log_mean(log_x: np.ndarray, axis: int = -1) -> np.ndarray:
    """log of the mean of x over ``axis`` from log x (a logsumexp): no underflow of x itself."""
    return logsumexp(log_x, axis=axis) - np.log(log_x.shape[axis])


def _log_median(log_x: np.ndarray) -> float:
    """log of the median of x (1-D) from log x: the mean of the two middle values when their
    number is even, as ``np.median`` takes it."""
    s = np.sort(log_x)
    k = s.size // 2
    if s.size % 2:
        return float(s[k])
    return float(np.logaddexp(s[k - 1], s[k]) - np.log(2.0))


def plan(
    mu,
    *,
    rho: float,
    group_sizes,
    n=None,
    c=None,
    weightings=("none", "focal:1", "maxrl"),
    prompts_per_step: int = 32,
    draws: int = 200,
    seed: int = 0,
) -> dict:
    """The table of :mod:`fgrpo_theory.plan` for pass rates ``mu`` (P,) (or counts c of n, which
    give mu = c / n and the uncertainty), rare fraction ``rho`` = tau / mu, the ``group_sizes``
    and ``weightings`` (``parse_weighting`` texts or ``Weighting``). Returns ``{"rows": [...],
    "peak_N": ..., "prompts": P, "hard_prompts": ..., ...}``; each row: N, rollouts_per_step,
    active and tail_miss (with counts, posterior medians), log_active (the active fraction's
    log, from log P(A_N) by a logsumexp over the prompts: exact where the fraction itself is
    subnormal or 0), tail_miss_lo, tail_miss_hi (None
    without counts), hard_share per weighting label. ``peak_N`` is the N of the largest
    tail-miss rate, None where it is 0 at every N (every pass rate 0 or 1, or rho = 1);
    ``peak_N_range`` the group sizes where the peak may lie: with counts, ``peak_N`` and every N
    where at least 2.5% of the posterior draws peak (the pass rates' uncertainty can leave
    neighbouring N undecided), else ``[peak_N]`` ([] without a peak)."""
    rho = float(check_probability("rho", rho))
    Ns = [int(v) for v in np.atleast_1d(check_integer("group_sizes", group_sizes, minimum=1))]
    if not Ns or max(Ns) > MAX_GROUP:
        raise ValueError(f"group_sizes must be 1 ... {MAX_GROUP}, got {Ns}")
    prompts_per_step = int(check_integer("prompts_per_step", prompts_per_step, minimum=1))
    draws = int(check_integer("draws", draws, minimum=1))
    seed = int(check_integer("seed", seed, minimum=0))
    if (n is None) != (c is None):
        given, missing = ("n", "c") if c is None else ("c", "n")
        raise ValueError(f"{given} is given without {missing}: give both (counts c of n) or mu")
    if c is not None and mu is not None:
        raise ValueError("give mu or the counts (n, c), not both")
    if c is not None:
        n_arr = np.atleast_1d(check_integer("n", n, minimum=1))
        c_arr = np.atleast_1d(check_integer("c", c, minimum=0))
        if n_arr.shape != c_arr.shape or np.any(c_arr > n_arr):
            raise ValueError("n and c must have one entry per prompt with 0 <= c <= n")
        mu = c_arr / n_arr
        if draws * mu.size > MAX_POSTERIOR:
            raise ValueError(
                f"draws x prompts must be at most {MAX_POSTERIOR:,}, got draws={draws} x "
                f"{mu.size} prompts; give fewer draws"
            )
    mu = np.atleast_1d(np.asarray(check_probability("mu", mu), dtype=np.float64))
    if mu.size == 0:
        raise ValueError("give at least one prompt's pass rate")
    terms = mu.size * sum(N + 1 for N in Ns)
    if terms > MAX_TERMS:
        raise ValueError(
            f"prompts x sum of (N + 1) must be at most {MAX_TERMS:,}, got {mu.size} prompts and "
            f"group_sizes={Ns} ({terms:,} binomial terms); give fewer prompts or smaller N"
        )
    ws = [w if isinstance(w, Weighting) else parse_weighting(w) for w in weightings]
    hard = mu < HARD_BELOW
    post = None
    if c is not None:
        rng = np.random.default_rng(seed)
        post = rng.beta(c_arr + 0.5, n_arr - c_arr + 0.5, size=(draws, mu.size))  # (D, P)
    rows, per_draw = [], []
    for N in Ns:
        tm = p_tail_miss(mu, rho * mu, N)  # (P,)
        log_active = float(_log_mean(np.atleast_1d(log_p_active(mu, N))))
        row = {
            "N": N,
            "rollouts_per_step": N * prompts_per_step,
            "active": float(np.exp(log_active)),
            "log_active": log_active,
            "tail_miss": float(np.mean(tm)),
            "tail_miss_lo": None,
            "tail_miss_hi": None,
            "hard_share": {},
        }
        if post is not None:
            means = np.mean(p_tail_miss(post, rho * post, N), axis=1)  # (D,)
            per_draw.append(means)
            lo, mid, hi = np.quantile(means, [0.025, 0.5, 0.975])
            row["tail_miss"], row["tail_miss_lo"], row["tail_miss_hi"] = (
                float(mid),
                float(lo),
                float(hi),
            )
            log_a = _log_median(_log_mean(log_p_active(post, N), axis=1))  # over (D,)
            row["active"], row["log_active"] = float(np.exp(log_a)), log_a
        for w, U in zip(ws, _update_masses(mu, N, ws), strict=True):
            total = float(U.sum())
            row["hard_share"][w.label] = float(U[hard].sum() / total) if total > 0 else None
        rows.append(row)
    top = max(rows, key=lambda r: r["tail_miss"])
    peak = top["N"] if top["tail_miss"] > 0.0 else None
    peaks = [peak] if peak is not None else []
    if peak is not None and per_draw:  # the N where each posterior draw peaks
        at = np.asarray(Ns)[np.argmax(np.stack(per_draw, axis=1), axis=1)]  # (D,)
        peaks = sorted({peak} | {N for N in Ns if np.mean(at == N) >= 0.025})
    return {
        "prompts": int(mu.size),
        "hard_prompts": int(hard.sum()),
        "mean_mu": float(mu.mean()),
        "rho": rho,
        "weightings": [w.label for w in ws],
        "peak_N": peak,
        "peak_N_range": peaks,
        "rows": rows,
    }
