"""Success-rate weightings of group advantages, w(mu_hat), side by side (paper Section 4,
Eq. 11-13; MaxRL, arXiv 2602.02710).

A group of N rollouts with X correct, mu_hat = X / N, gets GRPO's advantages times one scalar
w(mu_hat):

- ``none`` (GRPO): w = 1;
- ``focal(gamma)`` (F-GRPO, Eq. 11): w = (1 - mu_hat)^gamma;
- ``maxrl``: w = sqrt((1 - mu_hat) / mu_hat) (0 at mu_hat = 0). For 0/1 rewards MaxRL's
  advantage is (r - mu_hat) / mu_hat, GRPO's (population std, eps -> 0) is
  (r - mu_hat) / sqrt(mu_hat (1 - mu_hat)); their ratio is this w: a focal weight with
  gamma = 1/2 times a mu_hat^(-1/2) boost for hard prompts.

Groups with X = 0 or X = N have zero advantage whatever w is.

    >>> w = parse_weighting("focal:1")
    >>> float(w(0.25)), float(parse_weighting("maxrl")(0.25)), float(parse_weighting("none")(0.25))
    (0.75, 1.7320508075688772, 1.0)
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from fgrpo_common.checks import broadcast, check_nonnegative, check_probability
from fgrpo_theory.focal import focal_weight

__all__ = ["Weighting", "focal", "maxrl", "none", "parse_weighting", "WEIGHTINGS"]

#: The weightings by name (``parse_weighting`` reads "focal:GAMMA", "maxrl", "none").
WEIGHTINGS = ("none", "focal", "maxrl")


@dataclass(frozen=True)
class Weighting:
    """w(mu_hat): ``kind`` in WEIGHTINGS, ``gamma`` for focal."""

    kind: str
    gamma: float = 0.0

    def __post_init__(self):
        if self.kind not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {self.kind!r}")
        if isinstance(self.gamma, bool) or not isinstance(self.gamma, numbers.Real):
            raise TypeError(f"gamma must be a real number, got gamma={self.gamma!r}")
        check_nonnegative("gamma", self.gamma)
        if self.kind != "focal" and self.gamma != 0:
            raise ValueError(
                f"gamma is focal's exponent; {self.kind!r} takes none, got gamma={self.gamma!r}"
            )
        object.__setattr__(self, "gamma", float(self.gamma))

    def __call__(self, mu_hat):
        """w at mu_hat in [0, 1] (scalar or array)."""
        mu = check_probability("mu_hat", mu_hat)
        if self.kind == "none":
            out = np.ones_like(mu, dtype=np.float64)
        elif self.kind == "focal":
            out = np.asarray(focal_weight(mu, self.gamma), dtype=np.float64)
        else:
            out = np.where(mu > 0, _sqrt_odds(1.0 - mu, mu), 0.0)
        out = np.asarray(out, dtype=np.float64)
        return out[()] if out.ndim == 0 else out

    @property
    def label(self) -> str:
        """ "GRPO", "F-GRPO (gamma=1)" or "MaxRL"."""
        return {"none": "GRPO", "maxrl": "MaxRL"}.get(self.kind, f"F-GRPO (gamma={self.gamma:g})")

    def magnitudes(self, mu):
        """w-scaled advantage magnitudes (pos, neg) of correct and incorrect rollouts of a group
        whose success rate equals mu in (0, 1) (paper Fig. 4 for any weighting): GRPO's
        |A+| = sqrt((1 - mu) / mu) and |A-| = sqrt(mu / (1 - mu)) times w(mu)."""
        mu = check_probability("mu", mu, open_low=True, open_high=True)
        w = self(mu)
        mu, w = broadcast(mu=mu, w=w)
        pos, neg = w * _sqrt_odds(1.0 - mu, mu), w * _sqrt_odds(mu, 1.0 - mu)
        return (pos[()] if pos.ndim == 0 else pos), (neg[()] if neg.ndim == 0 else neg)


def _sqrt_odds(a, b):
    """sqrt(a / b) for a, b in [0, 1] (b > 0 where it matters): as sqrt(a) / sqrt(b) where a / b
    would overflow (b subnormal), so 1 / 5e-324 does not turn sqrt's 4.5e161 into inf."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.where(b >= np.finfo(np.float64).tiny, np.sqrt(a / b), np.sqrt(a) / np.sqrt(b))


def focal(gamma: float) -> Weighting:
    return Weighting("focal", gamma)


def maxrl() -> Weighting:
    return Weighting("maxrl")


def none() -> Weighting:
    return Weighting("none")


def parse_weighting(text: str) -> Weighting:
    """ "none" | "grpo", "maxrl", or "focal:GAMMA" (also "focal" for gamma = 1); a ValueError
    naming the text otherwise (a TypeError for anything but a string)."""
    if not isinstance(text, str):
        raise TypeError(f"a weighting is a string such as 'focal:1', got {text!r}")
    t = text.strip().lower()
    if t in ("none", "grpo"):
        return none()
    if t == "maxrl":
        return maxrl()
    if t == "focal":
        return focal(1.0)
    if t.startswith("focal:"):
        try:
            gamma = float(t.split(":", 1)[1])
        except ValueError:
            gamma = float("nan")
        if not np.isfinite(gamma) or gamma < 0:
            raise ValueError(f"focal:GAMMA needs a number gamma >= 0, got {text!r}")
        return focal(gamma)
    raise ValueError(f"a weighting is 'none', 'maxrl' or 'focal:GAMMA', got {text!r}")
