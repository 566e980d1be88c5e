"""Intervals over seeds, paired differences, and verdicts on claims.

A study trains every run of its plan once per RL seed s = 1..S from one base and evaluates all of
them on the same problems. Per run and metric the seeds give S values x_1..x_S; we report

    mean  x_bar = (1/S) sum_s x_s,   sd = sqrt(sum_s (x_s - x_bar)^2 / (S - 1)),
    95% interval  x_bar -/+ t_{0.975, S-1} * sd / sqrt(S)        (Student t over seeds)

(:func:`t_interval`). A difference between two runs is *paired*: d_s = x_s(A) - x_s(B) for the
same seed, base and evaluation problems, and its interval is the t interval of the d_s
(:func:`paired_difference`): seed-to-seed variation that both runs share cancels.

A claim gets one of three verdicts from an interval (:func:`verdict_above` and friends):
``holds`` when the whole interval supports it, ``contradicted`` when the whole interval
contradicts it, ``not resolved`` otherwise (the interval straddles the boundary: this many seeds
cannot tell at this scale).

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
    "HOLDS",
    "CONTRADICTED",
    "NOT_RESOLVED",
    "verdict_above",
    "verdict_below",
    "verdict_not_below",
    "combine_verdicts",
    "format_interval",
    "wilson_interval",
    "Z95",
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


def t_interval(values, *, confidence: float = 0.95) -> Interval:
    """Mean and Student-t interval over seeds: x_bar -/+ t_{(1+c)/2, S-1} sd / sqrt(S).

    One value gives its mean with an undefined interval (lo = hi = nan): one seed cannot say how far
    to trust it. Equal values give a zero-width interval.
    """
    from scipy.stats import t as student_t

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got confidence={confidence!r}")
    x = _values("values", values)
    S = x.size
    mean = float(x.mean())
    if S == 1:
        return Interval(mean, math.nan, math.nan, 1, math.nan, confidence)
    sd = float(x.std(ddof=1))
    half = float(student_t.ppf(0.5 + confidence / 2, S - 1)) * sd / math.sqrt(S)
    return Interval(mean, mean - half, mean + half, S, sd, confidence)


def paired_difference(a, b, *, confidence: float = 0.95) -> Interval:
    """The t interval of the per-seed differences d_s = a_s - b_s (same seed, base and problems)."""
    a, b = _values("a", a), _values("b", b)
    if a.shape != b.shape:
        raise ValueError(
            f"a paired difference needs one value per seed on both sides, got {a.size} and {b.size}"
        )
    return t_interval(a - b, confidence=confidence)


def verdict_above(iv: Interval, threshold: float = 0.0) -> str:
    """Claim "the quantity is above ``threshold``": holds if lo > threshold, contradicted if
    hi < threshold."""
    if not (math.isfinite(iv.lo) and math.isfinite(iv.hi)):
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


def verdict_not_below(iv: Interval, threshold: float = 0.0) -> str:
    """Claim "no drop below ``threshold`` beyond the interval": contradicted only if
    hi < threshold."""
    if not (math.isfinite(iv.lo) and math.isfinite(iv.hi)):
        return NOT_RESOLVED
    return CONTRADICTED if iv.hi < threshold else HOLDS


def combine_verdicts(verdicts) -> str:
    """A claim over several parts (splits, cells): holds if it holds in every part, contradicted
    if it is contradicted in at least one, not resolved otherwise (and when there is no part)."""
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
