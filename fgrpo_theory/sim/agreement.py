"""Whether two engines' sweeps agree in distribution (paper Section 5.1, App. J): the contract
between the simulator's engines.

Every engine is deterministic for a given (config, seed, machine). Across engines and machines,
the numbers of one seed may differ (another exp, another order of a sum, another random stream),
but the distribution over seeds of each run's final Q_pos and M_ret must not. Per (N, gamma,
quantity), with S_a and S_b runs (independent seeds) and their means and sample variances,

    t = (mean_a - mean_b) / se,   se^2 = var_a / S_a + var_b / S_b   (Welch),

and the pair agrees when |t| <= t*, the two-sided Student-t quantile at alpha / m for the
Welch-Satterthwaite degrees of freedom, m the number of comparisons (Bonferroni). Where both
engines have the same distribution (and a run's final value is close to normal over seeds),
a check fails with probability at most alpha, whatever m: the false-alarm rate. A difference of
means below ``atol`` (1e-6 by default: rounding, far below anything the sweep resolves) counts
as agreement whatever the spread, which also covers cells where every run ends at the same
value (se = 0).

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> a = {"q_pos": rng.normal(0.5, 0.1, (1, 1, 16, 2))}
    >>> b = {"q_pos": rng.normal(0.5, 0.1, (1, 1, 16, 2))}
    >>> compare(a, b, (4,), (1.0,), keys=("q_pos",)).ok
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

#: The quantities compared: each run's final value.
KEYS = ("q_pos", "m_ret")
#: The family-wise false-alarm rate of one ``compare``.
ALPHA = 1e-4


@dataclass(frozen=True)
class Cell:
    """One comparison: a quantity's final value at one (N, gamma)."""

    N: int
    gamma: float
    key: str
    mean_a: float
    mean_b: float
    se: float
    t: float
    limit: float
    ok: bool

    @property
    def excess(self) -> float:
        """|t| / t* (0 where the means differ by less than ``atol``, inf where every run ends
        at one value and they do not agree)."""
        if self.ok and abs(self.t) > self.limit:  # agreement by the atol floor
            return 0.0
        if self.limit > 0:
            return abs(self.t) / self.limit
        return 0.0 if self.ok else float("inf")


@dataclass(frozen=True)
class Agreement:
    """The cells of a comparison, and whether all agree."""

    cells: tuple[Cell, ...]
    alpha: float

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.cells)

    @property
    def worst(self) -> Cell:
        """The cell with the largest |t| / t*."""
        return max(self.cells, key=lambda c: c.excess)

    def summary(self) -> str:
        """One line: agreement or not, the cell count, the worst |t| against its limit."""
        w = self.worst
        verdict = "agree" if self.ok else "DISAGREE"
        return (
            f"{verdict} in distribution ({len(self.cells)} comparisons, family-wise false-alarm "
            f"rate {self.alpha:g}); worst: {w.key} at N = {w.N}, gamma = {w.gamma:g}: "
            f"{w.mean_a:.4g} vs {w.mean_b:.4g}, |t| = {abs(w.t):.2f} (limit {w.limit:.2f})"
        )


def compare(
    a: dict,
    b: dict,
    group_sizes,
    gammas,
    *,
    keys=KEYS,
    alpha: float = ALPHA,
    atol: float = 1e-6,
) -> Agreement:
    """Compare two sweeps' records, ``a[key]`` and ``b[key]`` of shape (N's, gammas, seeds,
    steps + 1) (``SweepResult.records``), on each run's final value. The two seed sets should
    be disjoint (runs of one seed share their draws between the numpy engines)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got alpha={alpha!r}")
    m = len(group_sizes) * len(gammas) * len(keys)
    cells = []
    for key in keys:
        xa, xb = np.asarray(a[key])[..., -1], np.asarray(b[key])[..., -1]  # (nN, nG, S)
        if xa.shape[:2] != (len(group_sizes), len(gammas)) or xa.shape[:2] != xb.shape[:2]:
            raise ValueError(
                f"{key}: records of shape {xa.shape} and {xb.shape} do not match "
                f"{len(group_sizes)} group sizes x {len(gammas)} gammas"
            )
        na, nb = xa.shape[2], xb.shape[2]
        if min(na, nb) < 2:
            raise ValueError(f"need at least 2 seeds per engine, got {na} and {nb}")
        for i, N in enumerate(group_sizes):
            for j, gamma in enumerate(gammas):
                ra, rb = xa[i, j], xb[i, j]
                va, vb = ra.var(ddof=1) / na, rb.var(ddof=1) / nb
                se = float(np.sqrt(va + vb))
                gap = float(ra.mean() - rb.mean())
                if se > 0:
                    with np.errstate(all="ignore"):
                        df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
                    if not np.isfinite(df):  # variances too small to square: the normal limit
                        df = np.inf
                    limit = float(stats.t.ppf(1.0 - alpha / (2 * m), df))
                    t = gap / se
                    ok = abs(t) <= limit or abs(gap) <= atol
                else:
                    limit, t = 0.0, 0.0 if gap == 0 else np.inf * np.sign(gap)
                    ok = abs(gap) <= atol
                cells.append(
                    Cell(
                        int(N),
                        float(gamma),
                        key,
                        float(ra.mean()),
                        float(rb.mean()),
                        se,
                        float(t),
                        limit,
                        bool(ok),
                    )  # fmt: skip
                )
    return Agreement(tuple(cells), alpha)


def compare_sweeps(res_a, res_b, **kw) -> Agreement:
    """``compare`` for two ``SweepResult`` of the same group sizes and gammas."""
    ca, cb = res_a.config, res_b.config
    if (ca.group_sizes, ca.gammas) != (cb.group_sizes, cb.gammas):
        raise ValueError("the two sweeps have different group sizes or gammas")
    return compare(res_a.records, res_b.records, ca.group_sizes, ca.gammas, **kw)
