"""The study's claims, each judged with the base model as the unit.

The study (``fgrpo_llm.experiments.countdown.study``) gives, per run name and metric, one value per
(base, RL seed) unit: ``numbers[name][(base, seed)][metric]``. Every interval here is over bases
(``fgrpo_llm.evaluation.stats.base_level_interval``: the values averaged within each base, then a
Student t interval over the K base means), and every difference is paired within (base, seed)
before it is averaged: same base, same RL seed, same evaluation problems. Delta NLL_rare's scale
moves with the base, so its claims are judged on paired differences (whose sign does not depend on
the scale); the ratio F-GRPO / GRPO is shown beside them. Each claim says how many bases it rests
on. The claims:

1. Delta NLL_rare is non-monotone in N with its peak at an intermediate N (paper: N = 8; Table 2);
2. F-GRPO at N = 8 has a lower Delta NLL_rare than GRPO at N = 8;
3. F-GRPO at N = 8 has pass@k at the largest k at least that of GRPO at N = 8, in-domain and OOD;
4. F-GRPO at N = 8 keeps pass@1 (no drop beyond the interval);
5. the learning-rate-matched control does not reproduce F-GRPO's gains (Table 3);
6. F-GRPO at N = 8 matches GRPO at N = 32 at the largest k with a quarter of the rollouts;
7. early in training the observed tail-miss frequency agrees with Lemma 3.1;

and on the extended plan (MaxRL, the regularised baselines, other gammas):

8. F-GRPO beats GRPO with an entropy bonus and GRPO with a KL penalty on pass@1 and OOD pass@k
   (Section 5.6, Table 3);
9. gamma in [0.5, 1] is the good range: lower Delta NLL_rare, pass@1 kept; a larger gamma loses
   pass@1 (Table 6);
10. F-GRPO and MaxRL compare on Delta NLL_rare as the categorical simulator predicts from their
    retained positive mass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fgrpo_llm.evaluation.stats import (
    CONTRADICTED,
    HOLDS,
    NOT_RESOLVED,
    Interval,
    base_level_interval,
    combined_verdict,
    format_interval,
    t_interval,
    verdict_above,
    verdict_below,
    verdict_not_below,
    verdict_within,
    widen,
)
from fgrpo_llm.experiments.claims import (
    NOT_RUN,
    REPRODUCED_SHARE,
    Claim,
    control_verdict,
    directional_verdict,
)

__all__ = [
    "CLAIMS",
    "StudyNumbers",
    "judge_claims",
    "unit_values",
    "interval",
    "paired",
    "ratio",
    "MATCH_MARGIN",
    "TAIL_MISS_MARGIN",
    "MIN_BASES",
    "METRICS",
    "METRIC_RANGE",
    "NOT_RUN",
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


def _bases(iv: Interval | None) -> str:
    return "no base" if iv is None else f"{iv.n} base{'s' if iv.n != 1 else ''}"


def _own_bases(iv: Interval | None, of: Interval | None) -> str:
    """`` (over K bases)`` when ``iv`` rests on other bases than ``of`` (a ratio that left units
    out), else ""."""
    return "" if iv is None or of is None or iv.n == of.n else f" (over {_bases(iv)})"


# ----------------------------------------------------------------------------- claims
def _iv(iv, signed=False, digits=3) -> str:
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
        return sorted({self.N, *self.cfg.sweep_group_sizes})

    def paired(self, a, b, metric, metric_b=None) -> Interval | None:
        return paired(self.numbers, a, b, metric, metric_b)

    def interval(self, name, metric) -> Interval | None:
        return interval(self.numbers, name, metric)


def _nonmonotone(s: StudyNumbers) -> tuple[str, str]:
    """Claim 1, on the units every N of the sweep was trained on."""
    sweep, numbers = s.sweep, s.numbers
    common = set.intersection(
        *[set(unit_values(numbers, f"grpo_n{n}", "delta_nll_rare")) for n in sweep]
    )
    swept = {
        f"grpo_n{n}": {u: v for u, v in numbers.get(f"grpo_n{n}", {}).items() if u in common}
        for n in sweep
    }
    means = {n: interval(swept, f"grpo_n{n}", "delta_nll_rare") for n in sweep}
    if len(sweep) < 3:
        return (
            NOT_RESOLVED,
            f"the sweep has {len(sweep)} group sizes; an interior peak needs three.",
        )
    if not all(means.values()):
        if any(f"grpo_n{n}" in numbers for n in sweep if n != s.N):
            return (
                NOT_RESOLVED,
                "a GRPO run of the sweep is missing on every base that has the others.",
            )
        return NOT_RUN, "no base trained the group-size sweep (`--sweep-bases`)."
    few = min(iv.n for iv in means.values())
    peak = max(sweep, key=lambda n: means[n].mean)
    diffs = {
        n: paired(swept, f"grpo_n{peak}", f"grpo_n{n}", "delta_nll_rare")
        for n in sweep
        if n != peak
    }
    ends = (sweep[0], sweep[-1])
    # The peak is chosen on the same numbers it is then tested on: among c candidates (the
    # interior N for "holds", the two ends for "contradicted") its differences are judged at the
    # Bonferroni level 1 - 0.05 / c, so picking the largest mean does not inflate the error.
    candidates = len(sweep) - 2 if peak not in ends else 2
    level = 1.0 - (1.0 - 0.95) / candidates
    beats = {n: verdict_above(widen(d, level)) == HOLDS for n, d in diffs.items()}
    if few < MIN_BASES:  # a t interval over 2 bases has 1 degree of freedom: no verdict
        verdict = NOT_RESOLVED
    elif peak not in ends:
        verdict = HOLDS if all(beats[n] for n in ends) else NOT_RESOLVED
    else:
        verdict = CONTRADICTED if all(beats.values()) else NOT_RESOLVED
    shown = ", ".join(f"N={n}: {_iv(means[n])}" for n in sweep)
    evidence = (
        f"Delta NLL_rare of GRPO, mean [95% CI] over bases "
        f"({_bases(min(means.values(), key=lambda iv: iv.n))}): {shown}; peak at N = "
        f"{peak} (paper: N = 8); paired differences peak - N: "
        + ", ".join(f"N={n}: {_iv(d, True)}" for n, d in diffs.items())
        + f" (judged at {100 * level:.4g}%: the peak is one of {candidates} candidates)."
    )
    return verdict, evidence


def _lower_nll(s: StudyNumbers) -> tuple[str, str]:
    """Claim 2."""
    f, g = s.fgrpo, s.grpo
    d = s.paired(f, g, "delta_nll_rare")
    r = ratio(s.numbers, f, g, "delta_nll_rare")
    return verdict_below(d) if d else NOT_RESOLVED, (
        f"over {_bases(d)}: paired difference F-GRPO - GRPO {_iv(d, True)}, ratio "
        f"F-GRPO / GRPO {_iv(r)}{_own_bases(r, d)} (F-GRPO {_iv(s.interval(f, 'delta_nll_rare'))}, "
        f"GRPO {_iv(s.interval(g, 'delta_nll_rare'))})."
    )


def _paired_metrics(s: StudyNumbers, metrics, judge) -> tuple[str, str]:
    """F-GRPO - GRPO on each metric, ``judge`` per interval, the verdicts combined (claims 3, 4)."""
    d = {m: s.paired(s.fgrpo, s.grpo, m) for m in metrics}
    verdict = combined_verdict((judge, iv) for iv in d.values())
    return verdict, (
        f"over {_bases(d[metrics[0]])}: paired difference F-GRPO - GRPO: "
        + "; ".join(f"{METRICS[m]}: {_iv(iv, True)}" for m, iv in d.items())
        + "."
    )


def _passk_kept(s: StudyNumbers) -> tuple[str, str]:
    """Claim 3."""
    return _paired_metrics(s, ("id_passk", "ood_passk"), verdict_above)


def _pass1_kept(s: StudyNumbers) -> tuple[str, str]:
    """Claim 4."""
    return _paired_metrics(
        s, ("id_pass1", "ood_pass1"), lambda iv: verdict_not_below(iv, MATCH_MARGIN)
    )


def _control(s: StudyNumbers) -> tuple[str, str]:
    """Claim 5: over the metrics where F-GRPO beats GRPO, does the control beat GRPO too?"""
    f, g, c = s.fgrpo, s.grpo, f"grpo_n{s.N}_lrmatched"
    gains = []
    for m, direction in (
        ("delta_nll_rare", "below"),
        ("id_passk", "above"),
        ("ood_passk", "above"),
        ("id_pass1", "above"),
        ("ood_pass1", "above"),
    ):
        d = s.paired(f, g, m)
        if directional_verdict(d, direction) == HOLDS:
            gains.append((m, direction, d))
    if c not in s.numbers:
        return NOT_RESOLVED, "the control run is missing."
    if not gains:
        return NOT_RESOLVED, (
            "F-GRPO has no resolved gain over GRPO here, so there is nothing for the control to "
            "reproduce."
        )
    parts, judged, bases = [], [], []
    for m, direction, d in gains:
        fc = s.paired(f, c, m)  # F-GRPO - control
        cg = s.paired(c, g, m)  # control - GRPO
        judged.append((direction, d, fc, cg))
        bases += [iv.n for iv in (fc, cg) if iv is not None]
        parts.append(
            f"{METRICS[m]}: F-GRPO - control {_iv(fc, True)}, control - GRPO {_iv(cg, True)} "
            f"(gain {_iv(d, True)})"
        )
    verdict = control_verdict(judged)
    return verdict, (
        f"over {min(bases, default=0)} bases or more, for each resolved gain of F-GRPO over "
        "GRPO: " + "; ".join(parts) + "."
    )


def _matches_larger_group(s: StudyNumbers) -> tuple[str, str]:
    """Claim 6."""
    big, N = max(s.sweep), s.N
    d = {
        m: s.paired(s.fgrpo, f"grpo_n{big}", m) if big > N else None
        for m in ("id_passk", "ood_passk")
    }
    v = combined_verdict((lambda iv: verdict_above(iv, -MATCH_MARGIN), iv) for iv in d.values())
    if any(iv is not None and iv.n < MIN_BASES for iv in d.values()):
        v = NOT_RESOLVED  # a t interval over 2 bases has 1 degree of freedom: no verdict
    return v if f"grpo_n{big}" in s.numbers else NOT_RUN, (
        f"over {_bases(d['id_passk'])}: paired difference F-GRPO N={N} - GRPO N={big}: "
        + "; ".join(f"{METRICS[m]}: {_iv(iv, True)}" for m, iv in d.items())
        + "."
    )


def _tail_miss(s: StudyNumbers) -> tuple[str, str]:
    """Claim 7: per run, observed - predicted early tail-miss frequency (equivalence within
    TAIL_MISS_MARGIN, judged on the runs with at least MIN_BASES bases)."""
    rows, judged = [], []
    for name in [f"grpo_n{n}" for n in s.sweep] + [s.fgrpo]:
        d = s.paired(name, name, "tail_miss_obs", "tail_miss_pred")
        if d is None:
            continue
        if d.n >= MIN_BASES:
            judged.append(d)
        label = next(iter(s.numbers[name].values()))["label"]
        rows.append(
            f"{label} ({_bases(d)}{'' if d.n >= MIN_BASES else ', not judged'}): observed "
            f"{_iv(s.interval(name, 'tail_miss_obs'))}, predicted "
            f"{_iv(s.interval(name, 'tail_miss_pred'))}, difference {_iv(d, True)}"
        )
    if not rows:
        return NOT_RESOLVED, "no training group hit a prompt with a rare event."
    verdict = combined_verdict((lambda iv: verdict_within(iv, TAIL_MISS_MARGIN), d) for d in judged)
    return verdict, f"first {s.cfg.early_steps} steps: " + "; ".join(rows) + "."


def _beats_regularisers(s: StudyNumbers) -> tuple[str, str]:
    """Claim 8 (Section 5.6)."""
    ent, kl = f"grpo_n{s.N}_entropy", f"grpo_n{s.N}_kl"
    d = {(b, m): s.paired(s.fgrpo, b, m) for b in (ent, kl) for m in ("id_pass1", "ood_passk")}
    if not any(d.values()):
        return NOT_RUN, "the extended plan (the entropy and KL baselines) was not trained."
    shown = "; ".join(
        f"F-GRPO - {'entropy' if b == ent else 'KL'}, {METRICS[m]}: {_iv(iv, True)}"
        for (b, m), iv in d.items()
    )
    return (
        combined_verdict((verdict_above, iv) for iv in d.values()),
        f"over {min(iv.n for iv in d.values() if iv is not None)} bases or more: {shown}.",
    )


def _gamma_range(s: StudyNumbers) -> tuple[str, str]:
    """Claim 9 (Table 6)."""
    cfg, N, g = s.cfg, s.N, s.grpo
    gammas = sorted({float(cfg.gamma), *(float(x) for x in cfg.extended_gammas if x > 0)})
    name = {x: s.fgrpo if x == float(cfg.gamma) else f"fgrpo_n{N}_g{x:g}" for x in gammas}
    good = [x for x in gammas if 0.5 <= x <= 1.0]
    big = [x for x in gammas if x > 1.0]
    rows, parts, drops = [], [], []
    for x in gammas:
        dn = s.paired(name[x], g, "delta_nll_rare")
        dp = s.paired(name[x], g, "id_pass1")
        rows.append(
            f"gamma = {x:g} - GRPO: Delta NLL_rare {_iv(dn, True)}, "
            f"in-domain pass@1 {_iv(dp, True)}"
        )
        if x in good:
            parts.append((verdict_below, dn))
            parts.append((lambda iv: verdict_not_below(iv, MATCH_MARGIN), dp))
        elif x in big:
            drops.append(verdict_below(dp) if dp else NOT_RESOLVED)
    good_range = combined_verdict(parts)
    if not any(name[x] in s.numbers for x in gammas if x != float(cfg.gamma)):
        verdict = NOT_RUN
    elif good_range == CONTRADICTED:  # one resolved part contradicts, whatever else is missing
        verdict = CONTRADICTED
    elif big and good_range == HOLDS and all(v == HOLDS for v in drops):
        verdict = HOLDS  # (a missing run is a None part or a not-resolved drop: no HOLDS)
    else:
        verdict = NOT_RESOLVED
    return verdict, "; ".join(rows) + "." if rows else "no F-GRPO run of the extended plan."


def _against_maxrl(s: StudyNumbers) -> tuple[str, str]:
    """Claim 10: F-GRPO - MaxRL on Delta NLL_rare, on the side the simulator predicts."""
    cfg, mx = s.cfg, f"maxrl_n{s.N}"
    d10 = {m: s.paired(s.fgrpo, mx, m) for m in ("delta_nll_rare", "id_pass1", "id_passk")}
    pred, sim_iv = None, None
    if s.prediction:
        per_seed = s.prediction["per_seed"]
        m_f, m_x = per_seed.get(f"F-GRPO gamma={float(cfg.gamma):g}"), per_seed.get("MaxRL")
        if m_f and m_x and len(m_f) == len(m_x) >= 2:
            # the simulator's own difference, paired by seed: a direction only when resolved
            sim_iv = t_interval([a - b for a, b in zip(m_f, m_x, strict=True)], bounds=(-1.0, 1.0))
            pred = {HOLDS: "below", CONTRADICTED: "above"}.get(verdict_above(sim_iv))
    d = d10["delta_nll_rare"]
    if mx not in s.numbers:
        verdict = NOT_RUN
    elif d is None or pred is None:
        verdict = NOT_RESOLVED
    else:
        verdict = verdict_below(d) if pred == "below" else verdict_above(d)
    if d is None:
        return verdict, "MaxRL was not trained."
    if sim_iv is None:
        sim = "no simulator prediction"
    else:
        sim = (
            f"the simulator (preset {cfg.prediction_preset}, N = {s.N}, {sim_iv.n} seeds) retains "
            "M_ret = "
            + ", ".join(f"{k} {v:.3f}" for k, v in s.prediction["m_ret"].items())
            + f"; F-GRPO - MaxRL {_iv(sim_iv, True, 4)}, so "
            + (
                f"it predicts F-GRPO's Delta NLL_rare {pred} MaxRL's"
                if pred
                else "it does not separate them (no prediction to test)"
            )
        )
    return verdict, (
        f"over {_bases(d)}: F-GRPO - MaxRL "
        + "; ".join(f"{METRICS[m]}: {_iv(x, True)}" for m, x in d10.items())
        + f"; {sim}."
    )


#: The study's claims, in order: the paper's statement and the rule ({N}, {gamma}, ... are the
#: plan's settings, :func:`judge_claims`), and the judge that reads the numbers.
CLAIMS = (
    Claim(
        1,
        "Delta NLL_rare is non-monotone in N, with its peak at an intermediate N (paper: N = 8)",
        "N* = the N with the largest mean over bases. Holds if N* is neither the smallest nor the "
        "largest N and Delta NLL_rare(N*) exceeds both ends' in paired intervals at the "
        "Bonferroni level for the number of interior N (N* is picked on the same numbers); "
        "contradicted if N* is an end and exceeds every other N's in paired intervals at the "
        "Bonferroni level for the two ends (monotone towards that end); else, and on fewer than "
        "{min_bases} bases, not resolved.",
        _nonmonotone,
    ),
    Claim(
        2,
        "F-GRPO at N = {N} has a lower Delta NLL_rare than GRPO at N = {N}",
        "Judged on the paired difference (its sign does not depend on the base's scale): "
        "holds if its 95% interval over bases lies below 0, contradicted if above 0, else not "
        "resolved.",
        _lower_nll,
    ),
    Claim(
        3,
        "F-GRPO at N = {N} has pass@k at the largest k at least that of GRPO at N = {N}, "
        "in-domain and OOD",
        "Holds if both paired 95% intervals lie above 0 (F-GRPO higher in-domain and OOD), "
        "contradicted if either lies below 0 at the Bonferroni level for the 2 parts (97.5% "
        "intervals), else not resolved (no difference this many bases can resolve).",
        _passk_kept,
    ),
    Claim(
        4,
        "F-GRPO at N = {N} keeps pass@1 (loses at most {margin:g})",
        "Non-inferiority: holds if both paired 95% intervals (in-domain, OOD) lie above "
        "-{margin:g}, contradicted if either lies below -{margin:g} at the Bonferroni level "
        "for the 2 parts, else not resolved (an interval that merely contains 0 is not "
        "enough).",
        _pass1_kept,
    ),
    Claim(
        5,
        "the learning-rate-matched control (GRPO at lr x m_{gamma:g} = {lr_scale:.3f}) does not "
        "reproduce F-GRPO's gains (paper Table 3)",
        "Over the metrics where F-GRPO beats GRPO in a paired 95% interval (its gain): holds if "
        "F-GRPO also beats the control on every one; contradicted if on every one the control "
        "beats GRPO and comes within {share:g} of the gain of F-GRPO (F-GRPO - control within "
        "+-{share:g} x gain) or beats it; else not resolved (an F-GRPO - control interval that "
        "merely contains 0 reproduces nothing).",
        _control,
    ),
    Claim(
        6,
        "F-GRPO at N = {N} matches GRPO at N = {big} at the largest k with {N}/{big} of the "
        "rollouts",
        "Holds if both paired 95% intervals lie above -{margin:g} (within {margin:g} or "
        "better), contradicted if either lies below -{margin:g} at the Bonferroni level for "
        "the 2 parts, else, and on fewer than {min_bases} bases, not resolved.",
        _matches_larger_group,
    ),
    Claim(
        7,
        "early in training the observed tail-miss frequency agrees with Lemma 3.1",
        "Equivalence: per run with at least {min_bases} bases, the paired 95% interval over "
        "bases of observed - predicted frequency. Holds if it lies within +-{tail_margin:g} "
        "for every such run, contradicted if it lies wholly outside +-{tail_margin:g} for one "
        "of them at the Bonferroni level for their number, else not resolved (an interval "
        "that merely contains 0 is not agreement).",
        _tail_miss,
    ),
    Claim(
        8,
        "F-GRPO at N = {N} beats GRPO with an entropy bonus ({entropy_coef:g}) and GRPO with a KL "
        "penalty ({kl_coef:g}) on in-domain pass@1 and OOD pass@k_max (paper Section 5.6, "
        "Table 3)",
        "Holds if all four paired 95% intervals lie above 0, contradicted if one lies below "
        "0 at the Bonferroni level for the 4 parts (98.75% intervals), else not resolved.",
        _beats_regularisers,
    ),
    Claim(
        9,
        "gamma in [0.5, 1] is the good range: there F-GRPO lowers Delta NLL_rare against GRPO "
        "and keeps pass@1, while a larger gamma loses pass@1 (paper Table 6)",
        "Holds if every gamma in [0.5, 1] lowers Delta NLL_rare and keeps pass@1 (loses at "
        "most {margin:g}: the interval above -{margin:g}) against GRPO, and every gamma > 1 has "
        "a resolved pass@1 drop (paired 95% intervals); contradicted if a gamma in [0.5, 1] "
        "raises Delta NLL_rare or drops pass@1 by more than {margin:g} (at the Bonferroni "
        "level for those parts); else not resolved.",
        _gamma_range,
    ),
    Claim(
        10,
        "F-GRPO and MaxRL at N = {N} compare on Delta NLL_rare as the categorical simulator "
        "predicts from their retained positive mass (no paper claim: MaxRL, arXiv 2602.02710)",
        "The simulator predicts a side when its own 95% interval of F-GRPO - MaxRL in M_ret "
        "(paired over its seeds) excludes 0 (more retained mass, less likelihood lost). Holds "
        "if the paired 95% interval of F-GRPO - MaxRL in Delta NLL_rare lies on that side, "
        "contradicted if on the other side, else (or without a prediction) not resolved.",
        _against_maxrl,
    ),
)


def judge_claims(numbers: dict, cfg, prediction: dict | None = None) -> list[dict]:
    """The records of :data:`CLAIMS`, each with its verdict, evidence and rule; claims 8-10 rest
    on the extended plan (``prediction``: the simulator's retained positive mass per weighting,
    :func:`fgrpo_llm.experiments.countdown.study.simulator_prediction`)."""
    from fgrpo_theory.focal import lr_multiplier  # lazy: scipy

    study = StudyNumbers(numbers, cfg, prediction)
    values = {
        "N": cfg.group_size,
        "gamma": cfg.gamma,
        "lr_scale": float(lr_multiplier(cfg.gamma)),
        "big": max(study.sweep),
        "margin": MATCH_MARGIN,
        "share": REPRODUCED_SHARE,
        "tail_margin": TAIL_MISS_MARGIN,
        "min_bases": MIN_BASES,
        "entropy_coef": cfg.entropy_coef,
        "kl_coef": cfg.kl_coef,
    }
    return [c.record(study, **values) for c in CLAIMS]
