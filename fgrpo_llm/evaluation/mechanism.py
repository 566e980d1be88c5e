"""The forgetting mechanism traced per rare trajectory (paper Lemma 3.1's event B).

Lemma 3.1 (Section 3) says a group of N rollouts whose correct ones all miss a prompt's rare
correct answers (event B_{E,N}: 0 < X < N, no rollout in E(x)) pushes mass away from them. A run's
group log (``groups.jsonl``: per sampled group its prompt, N, X and the solution form of each
correct rollout; our trainer's, or TRL's and verl's records in the same form,
``fgrpo_llm.integrations.records``) says for each rare-correct trajectory (x, y) of App. M.2 what
training did to its prompt. Over the groups the update used (``trained`` true, or unrecorded):

- **U** never trained: no trained group of x;
- **S** y's answer sampled: some trained group of x has form(y) among its correct forms;
- **B** tail-missed: not S, and some trained group of x was active (0 < X < N);
- **I** trained only in inactive groups (X = 0 or X = N), never with y sampled.

Answers are compared by solution form (``fgrpo_llm.tasks.base.solution_form``, what the group
log records). With Delta NLL(x, y) = log pi_base(y | x) - log pi_run(y | x) per trajectory (exact,
``fgrpo_llm.evaluation.exact_eval``), the classes split the run's Delta NLL_rare exactly:

    Delta NLL_rare = (1/S) sum_(x,y) Delta NLL(x, y) = sum_c (n_c / S) mean_c
                   = sum_c contribution_c,
    share_c = sum_{(x,y) in c} Delta NLL(x, y) / sum_(x,y) Delta NLL(x, y).

The verdict over bases (:func:`mechanism_verdict`): the excess d = mean(B) - mean(U) per unit
(base, RL seed), averaged per base, with a 95% Student t interval over bases;

- "tail misses drive the forgetting": d > 0 with its interval above 0, and the excess d * n_B
  at least 25% of the summed Delta NLL over the rare set (both averaged over bases);
- "drift, not tail misses": the interval of d within +-0.05 nats;
- otherwise "not resolved at this scale"; with fewer than 3 bases "not judged, k bases".

    fgrpo-llm mechanism runs/demo/grpo_n8 --rare-set runs/demo/rare_set.json
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fgrpo_llm.evaluation.stats import (
    NOT_RESOLVED,
    Interval,
    base_level_interval,
    informative,
    t_interval,
)

__all__ = [
    "CLASSES",
    "MIN_BASES",
    "DRIFT_MARGIN",
    "EXCESS_SHARE",
    "classify_trajectories",
    "MechanismReport",
    "ClassTotals",
    "mechanism_report",
    "mechanism_verdict",
]

#: The classes, in the order reported.
CLASSES = ("U", "B", "S", "I")
#: Fewer bases than this: no verdict.
MIN_BASES = 3
#: "drift, not tail misses": mean(B) - mean(U) within +-this many nats.
DRIFT_MARGIN = 0.05
#: "tail misses drive the forgetting": the excess at least this share of the summed Delta NLL.
EXCESS_SHARE = 0.25

TAIL_MISSES = "tail misses drive the forgetting"
DRIFT = "drift, not tail misses"


def classify_trajectories(prompt_ids, forms, groups) -> list[str]:
    """The class (U, B, S or I; module docstring) of each trajectory (prompt_ids[i], forms[i])
    from the group records ``groups`` (dicts with prompt_id, N, num_correct, forms and
    optionally trained). A trajectory without a form (None) is never S."""
    if len(prompt_ids) != len(forms):
        raise ValueError(
            f"prompt_ids and forms differ in length: {len(prompt_ids)} vs {len(forms)}"
        )
    trained: dict[str, dict] = {}  # prompt -> {"active": bool, "forms": set}
    for g in groups:
        if not g.get("trained", True):
            continue
        seen = trained.setdefault(str(g["prompt_id"]), {"active": False, "forms": set()})
        seen["active"] |= 0 < g["num_correct"] < g["N"]
        seen["forms"].update(f for f in (g.get("forms") or []) if f is not None)
    out = []
    for pid, form in zip(prompt_ids, forms, strict=True):
        seen = trained.get(str(pid))
        if seen is None:
            out.append("U")
        elif form is not None and str(form) in seen["forms"]:
            out.append("S")
        elif seen["active"]:
            out.append("B")
        else:
            out.append("I")
    return out


@dataclass(frozen=True)
class MechanismReport:
    """One run's classes and Delta NLL per rare trajectory, and the per-class summary."""

    classes: tuple[str, ...]
    """(S,) each trajectory's class."""
    delta: np.ndarray
    """(S,) Delta NLL(x, y) = log pi_base - log pi_run."""

    @property
    def delta_nll_rare(self) -> float:
        """The run's Delta NLL_rare: the mean of ``delta``."""
        return math.fsum(self.delta) / len(self.delta)

    @property
    def total(self) -> float:
        """The summed Delta NLL over the rare trajectories."""
        return math.fsum(self.delta)

    def count(self, c: str) -> int:
        return sum(k == c for k in self.classes)

    def values(self, c: str) -> np.ndarray:
        return self.delta[np.array([k == c for k in self.classes], dtype=bool)]

    def mean(self, c: str) -> float:
        """mean_c (nan for an empty class)."""
        v = self.values(c)
        return float(np.mean(v)) if v.size else math.nan

    def summary(self) -> dict:
        """Per class: count, mean with its t interval over the class's trajectories, sum,
        contribution (sum / S: the contributions add up to Delta NLL_rare) and share of the
        summed Delta NLL; and the total."""
        S, total = len(self.delta), math.fsum(self.delta)
        out = {}
        for c in CLASSES:
            v = self.values(c)
            iv: Interval | None = t_interval(v) if v.size else None
            out[c] = {
                "count": int(v.size),
                "mean": float(np.mean(v)) if v.size else None,
                "interval": None if iv is None or v.size < 2 else [iv.lo, iv.hi],
                "sum": math.fsum(v),
                "contribution": math.fsum(v) / S,
                "share": math.fsum(v) / total if total != 0 else None,
            }
        return {"trajectories": S, "delta_nll_rare": total / S, "sum": total, "classes": out}

    def totals(self) -> ClassTotals:
        """Per class its count and summed Delta NLL (what the verdict reads)."""
        return ClassTotals(
            counts={c: self.count(c) for c in CLASSES},
            sums={c: math.fsum(self.values(c)) for c in CLASSES},
        )


@dataclass(frozen=True)
class ClassTotals:
    """Per class the count n_c and the summed Delta NLL of one run's rare trajectories: all that
    :func:`mechanism_verdict` reads (a study's units.csv holds them as ``mech_<c>_n`` and
    ``mech_<c>_sum``)."""

    counts: dict
    """{class: n_c}."""
    sums: dict
    """{class: sum of Delta NLL over the class}."""

    @property
    def total(self) -> float:
        return math.fsum(self.sums[c] for c in CLASSES)

    def count(self, c: str) -> int:
        return int(self.counts[c])

    def mean(self, c: str) -> float:
        """mean_c (nan for an empty class)."""
        return self.sums[c] / self.counts[c] if self.counts[c] else math.nan

    def columns(self) -> dict:
        """``{"mech_<c>_n": n_c, "mech_<c>_sum": sum_c}`` for every class."""
        out = {}
        for c in CLASSES:
            out[f"mech_{c}_n"], out[f"mech_{c}_sum"] = self.count(c), float(self.sums[c])
        return out

    @classmethod
    def from_columns(cls, row: dict) -> ClassTotals | None:
        """The totals of a ``columns()`` row; None when the row has none."""
        if any(row.get(f"mech_{c}_n") is None for c in CLASSES):
            return None
        return cls(
            counts={c: int(row[f"mech_{c}_n"]) for c in CLASSES},
            sums={c: float(row[f"mech_{c}_sum"]) for c in CLASSES},
        )


def mechanism_report(rare_prompt_ids, rare_forms, groups, delta) -> MechanismReport:
    """Classes (:func:`classify_trajectories`) and Delta NLL of a run's rare trajectories; every
    Delta NLL finite (a trajectory the run cannot emit has no finite loss)."""
    delta = np.asarray(delta, dtype=np.float64)
    if delta.shape != (len(rare_prompt_ids),) or delta.size == 0:
        raise ValueError(
            f"delta must hold one value per rare trajectory ({len(rare_prompt_ids)}), got shape "
            f"{delta.shape}"
        )
    if not np.isfinite(delta).all():
        bad = int(np.flatnonzero(~np.isfinite(delta))[0])
        raise ValueError(f"Delta NLL of rare trajectory {bad} is not finite ({delta[bad]})")
    classes = classify_trajectories(rare_prompt_ids, rare_forms, groups)
    return MechanismReport(classes=tuple(classes), delta=delta)


def mechanism_verdict(reports: dict, reference_u: dict | None = None) -> dict:
    """The verdict (module docstring) over ``{(base, seed): MechanismReport or ClassTotals}`` of
    one arm; with ``reference_u`` (``{(base, seed): report}``), d = mean(B) - the reference's
    mean(U) of the same unit (an arm that trains every rare prompt has no U of its own).

    Units without both a B and a U trajectory give no d and are left out (counted). Returns the
    verdict, the number of bases judged, d's interval over bases, the excess share and per class
    the mean over bases of its per-unit mean with a t interval over bases."""
    d, excess, total = {}, {}, {}
    for unit, rep in reports.items():
        ref = rep if reference_u is None else reference_u.get(unit)
        if rep.count("B") and ref is not None and ref.count("U"):
            d[unit] = rep.mean("B") - ref.mean("U")
            excess[unit] = d[unit] * rep.count("B")
            total[unit] = rep.total
    bases = sorted({b for b, _ in d})
    out = {
        "units": len(reports),
        "units_without_B_or_U": len(reports) - len(d),
        "bases": len(bases),
        "classes": _class_means(reports),
    }
    if len(bases) < MIN_BASES:
        return {
            **out,
            "verdict": f"not judged, {len(bases)} bases",
            "d": None,
            "excess_share": None,
        }
    iv = base_level_interval(d)
    ex, tot = base_level_interval(excess).mean, base_level_interval(total).mean
    share = ex / tot if tot > 0 else math.nan
    if not informative(iv):  # tied values: a zero-width interval is not a 95% interval
        verdict = NOT_RESOLVED
    elif iv.mean > 0 and iv.lo > 0 and share >= EXCESS_SHARE:
        verdict = TAIL_MISSES
    elif -DRIFT_MARGIN <= iv.lo and iv.hi <= DRIFT_MARGIN:
        verdict = DRIFT
    else:
        verdict = NOT_RESOLVED
    return {**out, "verdict": verdict, "d": iv.to_dict(), "excess_share": share}


def _class_means(reports: dict) -> dict:
    """Per class: its count summed over units and the t interval over bases of its mean."""
    out = {}
    for c in CLASSES:
        means = {u: r.mean(c) for u, r in reports.items() if r.count(c)}
        iv = base_level_interval(means) if means else None
        out[c] = {
            "count": sum(r.count(c) for r in reports.values()),
            "mean": None if iv is None else iv.mean,
            "interval": None if iv is None or not math.isfinite(iv.lo) else [iv.lo, iv.hi],
        }
    return out
