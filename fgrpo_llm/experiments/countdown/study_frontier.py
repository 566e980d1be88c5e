"""Claim 5 as an lr frontier: F-GRPO against GRPO at the learning-rate scale that loses as much
rare likelihood (paper Table 3's low-lr control, read as a frontier rather than one point).

Per unit (base, RL seed), GRPO at N = 8 trains at lr scales s (x 1, x 0.9, x 0.75 and the
control's x m_gamma, m_1 = 0.5). D(s), P(s), O(s) are its Delta NLL_rare, in-domain pass@1 and
OOD pass@k_max. D is made non-decreasing in s by pooling adjacent violators (isotonic regression,
weights 1; ``scipy.optimize.isotonic_regression`` where the installed scipy has it, else
:func:`pava`) and interpolated linearly; s* solves D(s*) = D_F, F-GRPO's Delta NLL_rare on the
same unit. A unit whose D_F lies outside D's range is "outside the frontier" and enters no gap.
The gaps G_P = P_F - P(s*) and G_O = O_F - O(s*) (P and O interpolated linearly in s) are
averaged per base, with a t interval over bases, and judged:

- beyond the lr frontier: G_P's interval above 0 and G_O's lower end >= -0.02;
- on the lr frontier: both intervals within +-0.02;
- behind the lr frontier: G_P's interval below 0;
- otherwise not resolved; on fewer than 3 bases, not judged.

    from fgrpo_llm.experiments.countdown.study_frontier import frontier_claim
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fgrpo_llm.evaluation.stats import NOT_RESOLVED, Interval, base_level_interval

__all__ = [
    "BEYOND",
    "ON",
    "BEHIND",
    "FRONTIER_MARGIN",
    "pava",
    "isotonic",
    "crossing",
    "UnitFrontier",
    "unit_frontier",
    "frontier_verdict",
]

BEYOND, ON, BEHIND = "beyond the lr frontier", "on the lr frontier", "behind the lr frontier"

#: The margin of "on the frontier" (equivalence) and of G_O's lower end under "beyond".
FRONTIER_MARGIN = 0.02


def pava(y) -> np.ndarray:
    """The non-decreasing least-squares fit to ``y`` (equal weights) by pooling adjacent
    violators: each block of values that breaks the order is replaced by its mean."""
    blocks: list[list[float]] = []  # [sum, count] per block
    for v in np.asarray(y, dtype=np.float64):
        blocks.append([float(v), 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    return np.concatenate([np.full(int(c), s / c) for s, c in blocks]) if blocks else np.array([])


def isotonic(y) -> np.ndarray:
    """Non-decreasing isotonic regression of ``y``: scipy's where it exists (scipy >= 1.12),
    else :func:`pava`."""
    try:
        from scipy.optimize import isotonic_regression
    except ImportError:  # scipy < 1.12
        return pava(y)
    return np.asarray(isotonic_regression(np.asarray(y, dtype=np.float64)).x)


def crossing(s, d, target: float) -> float | None:
    """s* with d(s*) = ``target`` on the piecewise-linear non-decreasing curve through (s, d)
    (``s`` increasing); the middle of the solutions where the curve is flat at ``target``; None
    when ``target`` lies outside [d[0], d[-1]]."""
    s, d = np.asarray(s, dtype=np.float64), np.asarray(d, dtype=np.float64)
    if not d[0] <= target <= d[-1]:
        return None
    hits = []
    for i in range(len(s) - 1):
        lo, hi = d[i], d[i + 1]
        if lo <= target <= hi:
            if hi == lo:
                hits += [s[i], s[i + 1]]
            else:
                hits.append(s[i] + (target - lo) / (hi - lo) * (s[i + 1] - s[i]))
    if len(s) == 1:
        hits.append(s[0])
    return float((min(hits) + max(hits)) / 2)


@dataclass(frozen=True)
class UnitFrontier:
    """One unit's frontier: s* (None: outside), and the gaps there."""

    s_star: float | None
    g_p: float | None
    g_o: float | None


def unit_frontier(points: dict, f: dict) -> UnitFrontier | None:
    """``points``: ``{s: {"D", "P", "O"}}`` of GRPO on one unit (at least two scales);
    ``f``: F-GRPO's ``{"D", "P", "O"}`` on the same unit. None with fewer than two scales."""
    s = np.array(sorted(points), dtype=np.float64)
    if len(s) < 2:
        return None
    d = isotonic([points[x]["D"] for x in s])
    s_star = crossing(s, d, f["D"])
    if s_star is None:
        return UnitFrontier(None, None, None)

    def at(key):
        ys = [points[x][key] for x in s]
        if f.get(key) is None or any(y is None for y in ys):
            return None
        return float(f[key] - np.interp(s_star, s, ys))

    return UnitFrontier(s_star, at("P"), at("O"))


def frontier_verdict(g_p: Interval | None, g_o: Interval | None, *, min_bases: int) -> str:
    """The frontier verdict from the gaps' intervals over bases (see the module docstring)."""
    if g_p is None or g_o is None:
        return NOT_RESOLVED
    k = min(g_p.n, g_o.n)
    if k < min_bases:
        return f"not judged, {k} base{'s' if k != 1 else ''}"
    if not all(math.isfinite(x) for x in (g_p.lo, g_p.hi, g_o.lo, g_o.hi)):
        return NOT_RESOLVED
    m = FRONTIER_MARGIN
    if g_p.lo > 0 and g_o.lo >= -m:
        return BEYOND
    if -m <= g_p.lo and g_p.hi <= m and -m <= g_o.lo and g_o.hi <= m:
        return ON
    if g_p.hi < 0:
        return BEHIND
    return NOT_RESOLVED


def gap_intervals(units: dict) -> tuple[Interval | None, Interval | None]:
    """``units``: ``{(base, seed): UnitFrontier}`` -> the intervals over bases of G_P and G_O
    (the units inside the frontier only)."""
    gp = {u: r.g_p for u, r in units.items() if r.s_star is not None and r.g_p is not None}
    go = {u: r.g_o for u, r in units.items() if r.s_star is not None and r.g_o is not None}
    return (
        base_level_interval(gp, bounds=(-1.0, 1.0)) if gp else None,
        base_level_interval(go, bounds=(-1.0, 1.0)) if go else None,
    )
