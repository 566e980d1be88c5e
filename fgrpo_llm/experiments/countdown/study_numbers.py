"""The study's numbers and their intervals, with the base model as the unit: the metrics, the
per-unit values of a run, a run's interval over bases, a paired difference or ratio of two runs,
and :class:`StudyNumbers`, what every claim's judge (``study_claims``) reads.

The study (``fgrpo_llm.experiments.countdown.study``) gives, per run name and metric, one value per
(base, RL seed) unit: ``numbers[name][(base, seed)][metric]``. Every interval here is over bases
(``fgrpo_llm.evaluation.stats.base_level_interval``: the values averaged within each base, then a
Student t interval over the K base means), and every difference is paired within (base, seed)
before it is averaged: same base, same RL seed, same evaluation problems.

    interval(numbers, "fgrpo_n8", "id_pass1")            # mean [95% CI] over bases
    paired(numbers, "fgrpo_n8", "grpo_n8", "delta_nll_rare")
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fgrpo_llm.evaluation.stats import Interval, base_level_interval, format_interval

__all__ = [
    "StudyNumbers",
    "unit_values",
    "interval",
    "paired",
    "ratio",
    "not_judged",
    "shared_units",
    "MATCH_MARGIN",
    "TAIL_MISS_MARGIN",
    "MIN_BASES",
    "METRICS",
    "METRIC_RANGE",
]


#: How close F-GRPO at N = 8 must come to GRPO at N = 32 at the largest k to "match" it (claim 6),
#: and how much pass@1 F-GRPO may lose and still "keep" it (claims 4 and 9): non-inferiority.
MATCH_MARGIN = 0.02

#: How close the observed early tail-miss frequency must come to Lemma 3.1's to "agree" with it
#: (claim 7: equivalence, the interval of observed - predicted within +-TAIL_MISS_MARGIN).
TAIL_MISS_MARGIN = 0.02

#: The fewest bases a verdict rests on (claims 1 and 6, and each run of claim 7): with 2, the t
#: interval has one degree of freedom, and two close values make it narrow by chance.
MIN_BASES = 3

#: Per-run metrics of the study tables (fractions; Delta NLL_rare in nats per token).
METRICS = {
    "id_pass1": "in-domain pass@1",
    "id_passk": "in-domain pass@k_max",
    "ood_pass1": "OOD pass@1",
    "ood_passk": "OOD pass@k_max",
    "delta_nll_rare": "Delta NLL_rare",
    "tail_miss_obs": "early tail miss (obs)",
    "tail_miss_pred": "early tail miss (Lemma 3.1)",
}

#: The range of each bounded metric's mean (the fractions; Delta NLL_rare has none): intervals are
#: cut to it (``stats.clipped``), a difference of two to (low - high, high - low).
METRIC_RANGE = {m: (0.0, 1.0) for m in METRICS if m != "delta_nll_rare"}


def _difference_range(metric: str, metric_b: str | None = None):
    a, b = METRIC_RANGE.get(metric), METRIC_RANGE.get(metric_b or metric)
    return None if a is None or b is None else (a[0] - b[1], a[1] - b[0])


# ----------------------------------------------------------------------------- unit values
def unit_values(numbers: dict, name: str, metric: str) -> dict:
    """``{(base, seed): value}`` of one run and metric, finite values only."""
    out = {}
    for unit, vals in numbers.get(name, {}).items():
        v = vals.get(metric)
        if v is not None and math.isfinite(v):
            out[unit] = float(v)
    return out


def interval(numbers, name, metric) -> Interval | None:
    """Mean over bases with its t interval over bases (None when no unit has the value)."""
    v = unit_values(numbers, name, metric)
    return base_level_interval(v, bounds=METRIC_RANGE.get(metric)) if v else None


def paired(numbers, a, b, metric, metric_b=None) -> Interval | None:
    """Run a minus run b (or metric minus ``metric_b`` of the same run), paired within each
    (base, seed) unit both have, then averaged within bases: the interval over bases."""
    va, vb = unit_values(numbers, a, metric), unit_values(numbers, b, metric_b or metric)
    d = {u: va[u] - vb[u] for u in va.keys() & vb.keys()}
    return base_level_interval(d, bounds=_difference_range(metric, metric_b)) if d else None


def ratio(numbers, a, b, metric) -> Interval | None:
    """Run a over run b per (base, seed) unit (both positive; a unit where either is not is
    left out, and the evidence then names the ratio's own base count), averaged over bases: a
    scale-free view of an effect whose size moves with the base."""
    va, vb = unit_values(numbers, a, metric), unit_values(numbers, b, metric)
    r = {u: va[u] / vb[u] for u in va.keys() & vb.keys() if va[u] > 0 and vb[u] > 0}
    return base_level_interval(r, bounds=(0.0, math.inf)) if r else None


def not_judged(k: int) -> str:
    """The verdict of a claim resting on fewer than :data:`MIN_BASES` bases."""
    return f"not judged, {k} base{'s' if k != 1 else ''}"


def shared_units(numbers: dict, names, metric: str) -> dict:
    """``numbers`` cut to the units every run of ``names`` has ``metric`` on (the runs that no
    unit has are left out), so that every contrast among them rests on the same units."""
    have = [set(unit_values(numbers, n, metric)) for n in names if n in numbers]
    common = set.intersection(*have) if have else set()
    return {n: {u: v for u, v in numbers[n].items() if u in common} for n in names if n in numbers}


def bases_text(iv: Interval | None) -> str:
    """``K bases`` an interval rests on."""
    return "no base" if iv is None else f"{iv.n} base{'s' if iv.n != 1 else ''}"


def own_bases_text(iv: Interval | None, of: Interval | None) -> str:
    """`` (over K bases)`` when ``iv`` rests on other bases than ``of`` (a ratio that left units
    out), else ""."""
    return "" if iv is None or of is None or iv.n == of.n else f" (over {bases_text(iv)})"


def iv_text(iv, signed=False, digits=3) -> str:
    """``mean [lo, hi]`` of an interval (``stats.format_interval``)."""
    return format_interval(iv, digits, signed=signed)


@dataclass(frozen=True)
class StudyNumbers:
    """What every claim's judge reads: the per-unit numbers, the plan, the simulator's
    prediction (claim 10), and the run names they compare."""

    numbers: dict
    cfg: Any
    prediction: dict | None = None

    @property
    def N(self) -> int:
        return self.cfg.group_size

    @property
    def grpo(self) -> str:
        return f"grpo_n{self.N}"

    @property
    def fgrpo(self) -> str:
        return f"fgrpo_n{self.N}"

    @property
    def sweep(self) -> list[int]:
        """N and the sweep's group sizes some unit trained (what the units hold decides, so a
        claim judged from ``units.csv`` alone is the study's)."""
        sizes = (n for n in self.cfg.sweep_group_sizes if f"grpo_n{n}" in self.numbers)
        return sorted({self.N, *sizes})

    @property
    def big(self) -> int:
        """The group size F-GRPO at N must match with a quarter of the rollouts (claim 6)."""
        return 4 * self.N

    def paired(self, a, b, metric, metric_b=None) -> Interval | None:
        return paired(self.numbers, a, b, metric, metric_b)

    def interval(self, name, metric) -> Interval | None:
        return interval(self.numbers, name, metric)
