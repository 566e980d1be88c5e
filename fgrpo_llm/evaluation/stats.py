"""Intervals over seeds, paired differences, and verdicts on claims.

A study trains every run of its plan once per RL seed s = 1..S from one base and evaluates all of
them on the same problems. Per run and metric the seeds give S values x_1..x_S; we report

    mean  x_bar = (1/S) sum_s x_s,   sd = sqrt(sum_s (x_s - x_bar)^2 / (S - 1)),
    95% interval  x_bar -/+ t_{0.975, S-1} * sd / sqrt(S)        (Student t over seeds)

(:func:`t_interval`; cut to the range of a bounded metric, :func:`clipped`). A difference
between two runs is *paired*: d_s = x_s(A) - x_s(B) for the same seed, base and evaluation
problems, and its interval is the t interval of the d_s (:func:`paired_difference`):
seed-to-seed variation that both runs share cancels.

When the base model is a random factor too (a study over K bases, S_b RL seeds on base b), the
base is the unit: the values x_{b,s} are averaged within each base, x_b = (1/S_b) sum_s x_{b,s},
and the interval is the t interval of the K base means (:func:`base_level_interval`, K - 1 degrees
of freedom); a paired effect is averaged the same way from its per-(base, seed) differences. How
the variation splits between bases and between seeds within a base is the one-way random-effects
decomposition of :func:`variance_components`.

A claim gets one of three verdicts from an interval (:func:`verdict_above` and friends):
``holds`` when the whole interval supports it, ``contradicted`` when the whole interval
contradicts it, ``not resolved`` otherwise (the interval straddles the boundary: this many seeds
cannot tell at this scale). An interval that says nothing about the spread is not resolved either:
one value (undefined), or values that all tie (sd ~ 0, a zero-width interval: a discrete metric
such as pass@k over a few problems can tie across a few seeds, and a t interval of width 0 is not
a 95% interval of anything).

    iv = paired_difference(fgrpo_delta_nll, grpo_delta_nll)      # arrays over seeds
    verdict_below(iv, 0.0)                                        # "holds" if F-GRPO is lower
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

__all__ = [
    "Interval",
    "t_interval",
    "paired_difference",
    "clipped",
    "HOLDS",
    "CONTRADICTED",
    "NOT_RESOLVED",
    "informative",
    "verdict_above",
    "verdict_below",
    "verdict_not_below",
    "verdict_within",
    "widen",
    "combined_verdict",
    "combine_verdicts",
    "format_interval",
    "wilson_interval",
    "Z95",
    "by_base",
    "base_level_interval",
    "VarianceComponents",
    "variance_components",
    "welch_difference",
]

#: The two-sided 95% normal quantile.
Z95 = 1.959963984540054


def wilson_interval(successes, trials, *, z: float = Z95):
    """The Wilson score interval of a binomial proportion, successes of trials (scalars or
    arrays, elementwise; (0, 1) where there are no trials):

        centre = (p + z^2 / 2n) / (1 + z^2 / n),
        half   = z sqrt(p (1 - p) / n + z^2 / 4n^2) / (1 + z^2 / n),   p = successes / n,

    clipped to [0, 1] (0 successes: lower bound 0; all: upper bound 1). Scalars in give floats
    out."""
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / n
        denom = 1.0 + z * z / n
        centre = (p + z * z / (2.0 * n)) / denom
        half = z * np.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n)) / denom
    empty = n <= 0  # and the bounds that are exactly 0 or 1, free of rounding:
    lo = np.where(empty | (k <= 0), 0.0, np.clip(centre - half, 0.0, 1.0))
    hi = np.where(empty | (k >= n), 1.0, np.clip(centre + half, 0.0, 1.0))
    if lo.ndim == 0:
        return float(lo), float(hi)
    return lo, hi


HOLDS, CONTRADICTED, NOT_RESOLVED = "holds", "contradicted", "not resolved at this scale"


@dataclass(frozen=True)
class Interval:
    """A mean over ``n`` seeds with its two-sided t interval at ``confidence``."""

    mean: float
    lo: float
    hi: float
    n: int
    sd: float
    confidence: float = 0.95

    def to_dict(self) -> dict:
        return asdict(self)

    def excludes(self, value: float) -> bool:
        """Whether ``value`` lies outside the interval (False when the interval is undefined)."""
        return bool(
            math.isfinite(self.lo) and math.isfinite(self.hi) and not self.lo <= value <= self.hi
        )


def _values(name: str, x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64).ravel()
    if a.size == 0:
        raise ValueError(f"{name} must hold at least one value, got an empty sequence")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite, got {name}={a.tolist()}")
    return a


def t_interval(values, *, confidence: float = 0.95, bounds=None) -> Interval:
    """Mean and Student-t interval over seeds: x_bar -/+ t_{(1+c)/2, S-1} sd / sqrt(S), clipped
    to ``bounds`` when given (:func:`clipped`).

    One value gives its mean with an undefined interval (lo = hi = nan): one seed cannot say how far
    to trust it. Equal values give a zero-width interval, which no verdict accepts
    (:func:`informative`).
    """
    from scipy.stats import t as student_t

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got confidence={confidence!r}")
    x = _values("values", values)
    S = x.size
    mean = float(x.mean())
    if S == 1:
        return clipped(Interval(mean, math.nan, math.nan, 1, math.nan, confidence), bounds)
    sd = float(x.std(ddof=1))
    half = float(student_t.ppf(0.5 + confidence / 2, S - 1)) * sd / math.sqrt(S)
    return clipped(Interval(mean, mean - half, mean + half, S, sd, confidence), bounds)


def clipped(iv: Interval, bounds) -> Interval:
    """The interval cut to ``bounds`` = (low, high), the range its mean cannot leave: (0, 1) for
    a fraction such as pass@k, (-1, 1) for the difference of two. A t interval does not know that
    the values are bounded, and over two or three units it can reach past the range (an observed
    frequency of 0.297 [-0.512, 1.106] over two bases); the true mean lies in the range, so the
    cut interval covers it whenever the uncut one does. Mean and sd are kept; a verdict against a
    threshold inside the range is the same on either (:func:`widen` recomputes the uncut
    interval). With ``bounds=None``, or for an undefined interval (one value), it is returned as
    it is; bad ``bounds`` are a ValueError either way."""
    if bounds is None:
        return iv
    try:
        low, high = (float(b) for b in bounds)
    except (TypeError, ValueError):
        low = high = math.nan
    if not low < high:
        raise ValueError(f"bounds must be (low, high) with low < high, got bounds={bounds!r}")
    if not (math.isfinite(iv.lo) and math.isfinite(iv.hi)):
        return iv
    return Interval(
        iv.mean, min(max(iv.lo, low), high), max(min(iv.hi, high), low), iv.n, iv.sd, iv.confidence
    )


def paired_difference(a, b, *, confidence: float = 0.95, bounds=None) -> Interval:
    """The t interval of the per-seed differences d_s = a_s - b_s (same seed, base and problems),
    clipped to ``bounds`` when given."""
    a, b = _values("a", a), _values("b", b)
    if a.shape != b.shape:
        raise ValueError(
            f"a paired difference needs one value per seed on both sides, got {a.size} and {b.size}"
        )
    return t_interval(a - b, confidence=confidence, bounds=bounds)


#: An sd at most this (times max(1, |mean|)) is a tie: equal values, or values equal up to the
#: rounding of the differences that made them.
TIE_SD = 1e-12


def informative(iv: Interval) -> bool:
    """Whether the interval can carry a verdict: finite bounds and a spread measured above 0.
    One seed (undefined) cannot, nor can seeds that all gave the same value (sd <= ``TIE_SD``
    x max(1, |mean|)): tied values do not show that the spread is 0, only that the metric is
    discrete (pass@k over a few problems moves in steps)."""
    finite = math.isfinite(iv.lo) and math.isfinite(iv.hi) and math.isfinite(iv.sd)
    return finite and iv.sd > TIE_SD * max(1.0, abs(iv.mean))


def verdict_above(iv: Interval, threshold: float = 0.0) -> str:
    """Claim "the quantity is above ``threshold``": holds if lo > threshold, contradicted if
    hi < threshold; not resolved otherwise and when the interval is not :func:`informative`."""
    if not informative(iv):
        return NOT_RESOLVED
    if iv.lo > threshold:
        return HOLDS
    if iv.hi < threshold:
        return CONTRADICTED
    return NOT_RESOLVED


def verdict_below(iv: Interval, threshold: float = 0.0) -> str:
    """Claim "the quantity is below ``threshold``": holds if hi < threshold, contradicted if
    lo > threshold."""
    flipped = Interval(-iv.mean, -iv.hi, -iv.lo, iv.n, iv.sd, iv.confidence)
    return verdict_above(flipped, -threshold)


def verdict_not_below(iv: Interval, margin: float) -> str:
    """Claim "no drop of more than ``margin``" (non-inferiority): holds if lo > -margin,
    contradicted if hi < -margin, else not resolved. An interval that merely contains 0 does
    not make it hold: absence of a resolved drop is not evidence of no drop."""
    return verdict_above(iv, -margin)


def verdict_within(iv: Interval, margin: float) -> str:
    """Claim "the quantity is 0 within +-``margin``" (equivalence): holds if the interval lies
    inside (-margin, margin), contradicted if it lies wholly outside it (lo > margin or
    hi < -margin), else not resolved (also when the interval is not :func:`informative`). An
    interval that merely contains 0 is not agreement."""
    if not informative(iv):
        return NOT_RESOLVED
    if -margin < iv.lo and iv.hi < margin:
        return HOLDS
    if iv.lo > margin or iv.hi < -margin:
        return CONTRADICTED
    return NOT_RESOLVED


def widen(iv: Interval, confidence: float) -> Interval:
    """The t interval of the same values at another ``confidence`` (mean, sd and n kept; df =
    n - 1); one value stays undefined."""
    from scipy.stats import t as student_t

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got confidence={confidence!r}")
    if iv.n < 2 or not math.isfinite(iv.sd):
        return Interval(iv.mean, math.nan, math.nan, iv.n, iv.sd, confidence)
    half = float(student_t.ppf(0.5 + confidence / 2, iv.n - 1)) * iv.sd / math.sqrt(iv.n)
    return Interval(iv.mean, iv.mean - half, iv.mean + half, iv.n, iv.sd, confidence)


def combined_verdict(parts) -> str:
    """A claim over several parts (splits, cells, rows), each a ``(judge, interval)`` pair
    (``judge``: :func:`verdict_above`, ...; a missing interval is None): holds if every part
    holds in its own interval (every part must, so no correction is needed); contradicted if
    at least one part is contradicted in its interval widened to the Bonferroni level for m
    parts (confidence 1 - (1 - c) / m), so that m parts do not give m chances of a false
    "contradicted"; not resolved otherwise, and when there is no part."""
    parts = list(parts)
    if not parts:
        return NOT_RESOLVED
    if all(iv is not None and judge(iv) == HOLDS for judge, iv in parts):
        return HOLDS
    for judge, iv in parts:
        if iv is None:
            continue
        level = 1.0 - (1.0 - iv.confidence) / len(parts)
        if judge(widen(iv, level)) == CONTRADICTED:
            return CONTRADICTED
    return NOT_RESOLVED


def combine_verdicts(verdicts) -> str:
    """Verdicts already reached, one per part: holds if every part holds, contradicted if at
    least one is (no correction for the number of parts: :func:`combined_verdict` makes one
    when the intervals are at hand), not resolved otherwise (and when there is no part)."""
    verdicts = list(verdicts)
    if verdicts and all(v == HOLDS for v in verdicts):
        return HOLDS
    if CONTRADICTED in verdicts:
        return CONTRADICTED
    return NOT_RESOLVED


def format_interval(iv: Interval | None, digits: int = 3, *, signed: bool = False) -> str:
    """``0.412 [0.398, 0.426]`` (``+0.012 [...]`` when ``signed``); one seed: the mean alone."""
    if iv is None:
        return "–"
    f = f"{{:+.{digits}f}}" if signed else f"{{:.{digits}f}}"
    if not (math.isfinite(iv.lo) and math.isfinite(iv.hi)):
        return f.format(iv.mean)
    return f"{f.format(iv.mean)} [{f.format(iv.lo)}, {f.format(iv.hi)}]"


# ---------------------------------------------------------------- the base as a random factor
def by_base(values) -> dict:
    """``{(base, seed): x}`` -> ``{base: [x over its seeds, seed order]}``."""
    groups: dict = {}
    for (base, _seed), x in sorted(values.items(), key=lambda kv: kv[0]):
        groups.setdefault(base, []).append(float(x))
    return groups


def base_level_interval(values, *, confidence: float = 0.95, bounds=None) -> Interval:
    """The base as the unit: x_b = mean over base b's seeds of x_{b,s}, then the Student-t
    interval over the K base means, x_bar -/+ t_{(1+c)/2, K-1} sd_b / sqrt(K) (``n`` = K).

    ``values`` maps (base, seed) to a value; for a paired effect, pass the per-(base, seed)
    differences. Seed-to-seed noise enters through the base means; a base with more seeds counts
    once, like any other. ``bounds``: the range of the mean (:func:`clipped`)."""
    if not values:
        raise ValueError("values must hold at least one (base, seed) value, got none")
    groups = by_base(values)
    means = [float(np.mean(_values(f"values of base {b}", xs))) for b, xs in groups.items()]
    return t_interval(means, confidence=confidence, bounds=bounds)


@dataclass(frozen=True)
class VarianceComponents:
    """One-way random-effects decomposition x_{b,s} = m + u_b + e_{b,s} over K bases."""

    between_sd: float
    """sigma_base: the sd of u_b (nan with one base, or when no base has two seeds)."""
    within_sd: float
    """sigma_seed: the sd of e_{b,s} within a base (nan when no base has two seeds)."""
    bases: int
    units: int
    total_sd: float
    """The spread of one run on a base drawn anew: sqrt(sigma_base^2 + sigma_seed^2); with one seed
    per base (the parts confounded) the plain sd of the values."""

    def to_dict(self) -> dict:
        return asdict(self)


def variance_components(values) -> VarianceComponents:
    """Method-of-moments estimates of the two variance components, for unequal seeds per base:

        sigma_seed^2 = sum_b sum_s (x_{b,s} - x_b)^2 / sum_b (S_b - 1)      (pooled within bases)
        sigma_base^2 = max(0, var_b(x_b) - sigma_seed^2 * mean_b(1 / S_b))

    var_b is the sample variance of the K base means (ddof 1): a base mean varies by sigma_base^2
    plus sigma_seed^2 / S_b, so the second term takes the seeds' share out. With no base holding
    two seeds both parts are nan (they cannot be told apart) and ``total_sd`` is the sd of the
    values."""
    groups = {b: _values(f"values of base {b}", xs) for b, xs in by_base(values).items()}
    if not groups:
        raise ValueError("values must hold at least one (base, seed) value, got none")
    dof = sum(x.size - 1 for x in groups.values())
    ss = sum(float(((x - x.mean()) ** 2).sum()) for x in groups.values())
    within = ss / dof if dof > 0 else math.nan
    means = np.array([x.mean() for x in groups.values()])
    if means.size < 2 or dof == 0:  # no base with two seeds: the two parts are confounded
        between = math.nan
    else:
        inverse_seeds = float(np.mean([1.0 / x.size for x in groups.values()]))
        between = max(0.0, float(means.var(ddof=1)) - within * inverse_seeds)
    units = np.concatenate(list(groups.values()))
    total = (
        math.sqrt(between + within)
        if math.isfinite(between) and math.isfinite(within)
        else (float(units.std(ddof=1)) if dof == 0 and units.size > 1 else math.nan)
    )
    return VarianceComponents(
        math.sqrt(between), math.sqrt(within), len(groups), int(units.size), total
    )


def welch_difference(a, b, *, confidence: float = 0.95) -> Interval:
    """mean(a) - mean(b) for two independent samples with Welch's t interval:
    se^2 = s_a^2 / n_a + s_b^2 / n_b, Welch-Satterthwaite degrees of freedom. ``n`` is n_a + n_b;
    undefined (nan bounds) when either side has one value. ``sd`` is the standard error."""
    from scipy.stats import t as student_t

    a, b = _values("a", a), _values("b", b)
    mean = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return Interval(mean, math.nan, math.nan, a.size + b.size, math.nan, confidence)
    va, vb = float(a.var(ddof=1)) / a.size, float(b.var(ddof=1)) / b.size
    se = math.sqrt(va + vb)
    if se == 0.0:
        return Interval(mean, mean, mean, a.size + b.size, 0.0, confidence)
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = float(student_t.ppf(0.5 + confidence / 2, df)) * se
    return Interval(mean, mean - half, mean + half, a.size + b.size, se, confidence)
