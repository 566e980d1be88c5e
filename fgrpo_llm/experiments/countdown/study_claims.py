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

from fgrpo_llm.evaluation.stats import (
    CONTRADICTED,
    HOLDS,
    NOT_RESOLVED,
    Interval,
    base_level_interval,
    combine_verdicts,
    format_interval,
    t_interval,
    verdict_above,
    verdict_below,
    verdict_not_below,
)
from fgrpo_llm.experiments.claims import NOT_RUN, claim

__all__ = [
    "judge_claims",
    "unit_values",
    "interval",
    "paired",
    "ratio",
    "MATCH_MARGIN",
    "METRICS",
    "NOT_RUN",
]


#: How close F-GRPO at N = 8 must come to GRPO at N = 32 at the largest k to "match" it (claim 6).
MATCH_MARGIN = 0.02

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
    return base_level_interval(v) if v else None


def paired(numbers, a, b, metric, metric_b=None) -> Interval | None:
    """Run a minus run b (or metric minus ``metric_b`` of the same run), paired within each
    (base, seed) unit both have, then averaged within bases: the interval over bases."""
    va, vb = unit_values(numbers, a, metric), unit_values(numbers, b, metric_b or metric)
    d = {u: va[u] - vb[u] for u in va.keys() & vb.keys()}
    return base_level_interval(d) if d else None


def ratio(numbers, a, b, metric) -> Interval | None:
    """Run a over run b per (base, seed) unit (both positive), averaged over bases: a scale-free
    view of an effect whose size moves with the base."""
    va, vb = unit_values(numbers, a, metric), unit_values(numbers, b, metric)
    r = {u: va[u] / vb[u] for u in va.keys() & vb.keys() if va[u] > 0 and vb[u] > 0}
    return base_level_interval(r) if r else None


def _bases(iv: Interval | None) -> str:
    return "no base" if iv is None else f"{iv.n} base{'s' if iv.n != 1 else ''}"


# ----------------------------------------------------------------------------- claims
def _iv(iv, signed=False, digits=3) -> str:
    return format_interval(iv, digits, signed=signed)


def judge_claims(numbers: dict, cfg, prediction: dict | None = None) -> list[dict]:
    """The claims of the module docstring, each with its verdict, evidence and rule; claims 8-10
    rest on the extended plan (``prediction``: the simulator's retained positive mass per
    weighting, :func:`fgrpo_llm.experiments.countdown.study.simulator_prediction`)."""
    N = cfg.group_size
    g, f, c = f"grpo_n{N}", f"fgrpo_n{N}", f"grpo_n{N}_lrmatched"
    sweep = sorted({N, *cfg.sweep_group_sizes})
    claims = []

    # 1. non-monotone Delta NLL_rare with an interior peak, on the units every N was trained on
    common = set.intersection(
        *[set(unit_values(numbers, f"grpo_n{n}", "delta_nll_rare")) for n in sweep]
    )
    swept = {
        f"grpo_n{n}": {u: v for u, v in numbers.get(f"grpo_n{n}", {}).items() if u in common}
        for n in sweep
    }
    means = {n: interval(swept, f"grpo_n{n}", "delta_nll_rare") for n in sweep}
    rule1 = (
        "N* = the N with the largest mean over bases. Holds if N* is neither the smallest nor the "
        "largest N and Delta NLL_rare(N*) exceeds both ends' in paired 95% intervals; "
        "contradicted if N* is an end and exceeds every other N's in paired intervals (monotone "
        "towards that end); else not resolved."
    )
    if all(means.values()) and len(sweep) >= 3:
        peak = max(sweep, key=lambda n: means[n].mean)
        diffs = {
            n: paired(swept, f"grpo_n{peak}", f"grpo_n{n}", "delta_nll_rare")
            for n in sweep
            if n != peak
        }
        shown = ", ".join(f"N={n}: {_iv(means[n])}" for n in sweep)
        ends = (sweep[0], sweep[-1])
        if peak not in ends:
            verdict = HOLDS if all(verdict_above(diffs[n]) == HOLDS for n in ends) else NOT_RESOLVED
        else:
            verdict = (
                CONTRADICTED
                if all(verdict_above(d) == HOLDS for d in diffs.values())
                else NOT_RESOLVED
            )
        evidence = (
            f"Delta NLL_rare of GRPO, mean [95% CI] over bases "
            f"({_bases(min(means.values(), key=lambda iv: iv.n))}): {shown}; peak at N = "
            f"{peak} (paper: N = 8); paired differences peak - N: "
            + ", ".join(f"N={n}: {_iv(d, True)}" for n, d in diffs.items())
            + "."
        )
    elif len(sweep) < 3:
        verdict, evidence = (
            NOT_RESOLVED,
            f"the sweep has {len(sweep)} group sizes; an interior peak needs three.",
        )
    else:
        swept_any = any(f"grpo_n{n}" in numbers for n in sweep if n != N)
        verdict, evidence = (
            (NOT_RESOLVED, "a GRPO run of the sweep is missing on every base that has the others.")
            if swept_any
            else (NOT_RUN, "no base trained the group-size sweep (`--sweep-bases`).")
        )
    claims.append(
        claim(
            1,
            "Delta NLL_rare is non-monotone in N, with its peak at an intermediate N "
            "(paper: N = 8)",
            verdict,
            evidence,
            rule1,
        )
    )

    # 2. F-GRPO lowers Delta NLL_rare
    d2 = paired(numbers, f, g, "delta_nll_rare")
    r2 = ratio(numbers, f, g, "delta_nll_rare")
    claims.append(
        claim(
            2,
            f"F-GRPO at N = {N} has a lower Delta NLL_rare than GRPO at N = {N}",
            verdict_below(d2) if d2 else NOT_RESOLVED,
            f"over {_bases(d2)}: paired difference F-GRPO - GRPO {_iv(d2, True)}, ratio "
            f"F-GRPO / GRPO {_iv(r2)} (F-GRPO {_iv(interval(numbers, f, 'delta_nll_rare'))}, "
            f"GRPO {_iv(interval(numbers, g, 'delta_nll_rare'))}).",
            "Judged on the paired difference (its sign does not depend on the base's scale): "
            "holds if its 95% interval over bases lies below 0, contradicted if above 0, else not "
            "resolved.",
        )
    )

    # 3. pass@k_max at least GRPO's, in-domain and OOD
    d3 = {m: paired(numbers, f, g, m) for m in ("id_passk", "ood_passk")}
    v3 = [verdict_above(d) if d else NOT_RESOLVED for d in d3.values()]
    verdict3 = combine_verdicts(v3)
    claims.append(
        claim(
            3,
            f"F-GRPO at N = {N} has pass@k at the largest k at least that of GRPO at N = {N}, "
            f"in-domain and OOD",
            verdict3,
            f"over {_bases(d3['id_passk'])}: paired difference F-GRPO - GRPO: "
            + "; ".join(f"{METRICS[m]}: {_iv(d, True)}" for m, d in d3.items())
            + ".",
            "Holds if both paired 95% intervals lie above 0 (F-GRPO higher in-domain and OOD), "
            "contradicted if either lies below 0, else not resolved (no difference this many "
            "bases can resolve).",
        )
    )

    # 4. pass@1 kept
    d4 = {m: paired(numbers, f, g, m) for m in ("id_pass1", "ood_pass1")}
    v4 = [verdict_not_below(d) if d else NOT_RESOLVED for d in d4.values()]
    verdict4 = combine_verdicts(v4)
    claims.append(
        claim(
            4,
            f"F-GRPO at N = {N} keeps pass@1 (no drop beyond the interval)",
            verdict4,
            f"over {_bases(d4['id_pass1'])}: paired difference F-GRPO - GRPO: "
            + "; ".join(f"{METRICS[m]}: {_iv(d, True)}" for m, d in d4.items())
            + ".",
            "Contradicted if a paired 95% interval lies entirely below 0 (a resolved drop, "
            "in-domain or OOD), else holds.",
        )
    )

    # 5. the lr-matched control does not reproduce the gains
    gains = []
    for m, better in (
        ("delta_nll_rare", verdict_below),
        ("id_passk", verdict_above),
        ("ood_passk", verdict_above),
        ("id_pass1", verdict_above),
        ("ood_pass1", verdict_above),
    ):
        d = paired(numbers, f, g, m)
        if d is not None and better(d) == HOLDS:
            gains.append((m, better))
    if c not in numbers:
        verdict5, evidence5 = NOT_RESOLVED, "the control run is missing."
    elif not gains:
        verdict5 = NOT_RESOLVED
        evidence5 = (
            "F-GRPO has no resolved gain over GRPO here, so there is nothing for the control to "
            "reproduce."
        )
    else:
        parts, kept, reproduced, bases5 = [], 0, 0, []
        for m, better in gains:
            fc = paired(numbers, f, c, m)  # F-GRPO - control
            cg = paired(numbers, c, g, m)  # control - GRPO
            f_wins = fc is not None and better(fc) == HOLDS  # F-GRPO still better than the control
            kept += f_wins
            reproduced += not f_wins and cg is not None and better(cg) == HOLDS
            bases5 += [iv.n for iv in (fc, cg) if iv is not None]
            parts.append(
                f"{METRICS[m]}: F-GRPO - control {_iv(fc, True)}, control - GRPO {_iv(cg, True)}"
            )
        verdict5 = (
            HOLDS
            if kept == len(gains)
            else (CONTRADICTED if reproduced == len(gains) else NOT_RESOLVED)
        )
        evidence5 = (
            f"over {min(bases5, default=0)} bases or more, for each resolved gain of F-GRPO over "
            "GRPO: " + "; ".join(parts) + "."
        )
    claims.append(
        claim(
            5,
            f"the learning-rate-matched control (GRPO at lr x m_{cfg.gamma:g} = "
            f"{_lr_scale(cfg):.3f}) does not reproduce F-GRPO's gains (paper Table 3)",
            verdict5,
            evidence5,
            "Over the metrics where F-GRPO beats GRPO in a paired 95% interval: holds if F-GRPO "
            "also beats the control on every one; contradicted if on every one the control beats "
            "GRPO and F-GRPO does not beat the control; else not resolved.",
        )
    )

    # 6. F-GRPO N=8 matches GRPO N=32 at the largest k
    big = max(sweep)
    d6 = {
        m: paired(numbers, f, f"grpo_n{big}", m) if big > N else None
        for m in ("id_passk", "ood_passk")
    }
    v6 = [verdict_above(d, -MATCH_MARGIN) if d else NOT_RESOLVED for d in d6.values()]
    verdict6 = combine_verdicts(v6) if f"grpo_n{big}" in numbers else NOT_RUN
    claims.append(
        claim(
            6,
            f"F-GRPO at N = {N} matches GRPO at N = {big} at the largest k with "
            f"{N}/{big} of the rollouts",
            verdict6,
            f"over {_bases(d6['id_passk'])}: paired difference F-GRPO N={N} - GRPO N={big}: "
            + "; ".join(f"{METRICS[m]}: {_iv(d, True)}" for m, d in d6.items())
            + ".",
            f"Holds if both paired 95% intervals lie above -{MATCH_MARGIN} (within "
            f"{MATCH_MARGIN:g} or better), contradicted if either lies below -{MATCH_MARGIN}, else "
            "not resolved.",
        )
    )

    # 7. early tail misses against Lemma 3.1
    rows, agree, disagree = [], 0, 0
    for name in [f"grpo_n{n}" for n in sweep] + [f]:
        d = paired(numbers, name, name, "tail_miss_obs", "tail_miss_pred")
        if d is None:
            continue
        agree += not d.excludes(0.0)
        disagree += d.excludes(0.0)
        label = next(iter(numbers[name].values()))["label"]
        rows.append(
            f"{label} ({_bases(d)}): observed {_iv(interval(numbers, name, 'tail_miss_obs'))}, "
            f"predicted {_iv(interval(numbers, name, 'tail_miss_pred'))}, difference "
            f"{_iv(d, True)}"
        )
    if not rows:
        verdict7, evidence7 = NOT_RESOLVED, "no training group hit a prompt with a rare event."
    else:
        verdict7 = (
            HOLDS if disagree == 0 else (CONTRADICTED if disagree > len(rows) / 2 else NOT_RESOLVED)
        )
        evidence7 = f"first {cfg.early_steps} steps: " + "; ".join(rows) + "."
    claims.append(
        claim(
            7,
            "early in training the observed tail-miss frequency agrees with Lemma 3.1",
            verdict7,
            evidence7,
            "Per run, the paired 95% interval over bases of observed - predicted frequency: holds "
            "if it contains 0 for every run, contradicted if it excludes 0 for more than half of "
            "them, else not resolved.",
        )
    )
    claims += _extended_claims(numbers, cfg, prediction)
    return claims


def _lr_scale(cfg) -> float:
    from fgrpo_theory.focal import lr_multiplier

    return float(lr_multiplier(cfg.gamma))


def _extended_claims(numbers: dict, cfg, prediction: dict | None) -> list[dict]:
    """Claims 8-10, on the extended plan (MaxRL, the regularised baselines, other gammas)."""
    N = cfg.group_size
    g, f = f"grpo_n{N}", f"fgrpo_n{N}"
    ent, kl, mx = f"grpo_n{N}_entropy", f"grpo_n{N}_kl", f"maxrl_n{N}"
    claims = []

    # 8. F-GRPO beats the entropy and KL baselines on pass@1 and OOD pass@k (Section 5.6)
    d8 = {(b, m): paired(numbers, f, b, m) for b in (ent, kl) for m in ("id_pass1", "ood_passk")}
    shown = "; ".join(
        f"F-GRPO - {'entropy' if b == ent else 'KL'}, {METRICS[m]}: {_iv(d, True)}"
        for (b, m), d in d8.items()
    )
    claims.append(
        claim(
            8,
            f"F-GRPO at N = {N} beats GRPO with an entropy bonus ({cfg.entropy_coef:g}) and GRPO "
            f"with a KL penalty ({cfg.kl_coef:g}) on in-domain pass@1 and OOD pass@k_max "
            "(paper Section 5.6, Table 3)",
            combine_verdicts(verdict_above(d) if d else NOT_RESOLVED for d in d8.values())
            if any(d8.values())
            else NOT_RUN,
            f"over {min(d.n for d in d8.values() if d is not None)} bases or more: {shown}."
            if any(d8.values())
            else "the extended plan (the entropy and KL baselines) was not trained.",
            "Holds if all four paired 95% intervals lie above 0, contradicted if one lies below "
            "0, else not resolved.",
        )
    )

    # 9. gamma in [0.5, 1] is the good range (Table 6)
    gammas = sorted({float(cfg.gamma), *(float(x) for x in cfg.extended_gammas if x > 0)})
    name = {x: f if x == float(cfg.gamma) else f"fgrpo_n{N}_g{x:g}" for x in gammas}
    good = [x for x in gammas if 0.5 <= x <= 1.0]
    big = [x for x in gammas if x > 1.0]
    rows, verdicts, drops = [], [], []
    for x in gammas:
        dn = paired(numbers, name[x], g, "delta_nll_rare")
        dp = paired(numbers, name[x], g, "id_pass1")
        rows.append(
            f"gamma = {x:g} - GRPO: Delta NLL_rare {_iv(dn, True)}, "
            f"in-domain pass@1 {_iv(dp, True)}"
        )
        if x in good:
            verdicts.append(verdict_below(dn) if dn else NOT_RESOLVED)
            verdicts.append(verdict_not_below(dp) if dp else NOT_RESOLVED)
        elif x in big:
            drops.append(verdict_below(dp) if dp else NOT_RESOLVED)
    if not any(name[x] in numbers for x in gammas if x != float(cfg.gamma)):
        verdict9 = NOT_RUN
    elif not big or not good or not all(name[x] in numbers for x in gammas):
        verdict9 = NOT_RESOLVED
    elif CONTRADICTED in verdicts:
        verdict9 = CONTRADICTED
    elif all(v == HOLDS for v in verdicts) and all(v == HOLDS for v in drops):
        verdict9 = HOLDS
    else:
        verdict9 = NOT_RESOLVED
    claims.append(
        claim(
            9,
            "gamma in [0.5, 1] is the good range: there F-GRPO lowers Delta NLL_rare against GRPO "
            "and keeps pass@1, while a larger gamma loses pass@1 (paper Table 6)",
            verdict9,
            "; ".join(rows) + "." if rows else "no F-GRPO run of the extended plan.",
            "Holds if every gamma in [0.5, 1] lowers Delta NLL_rare and has no resolved pass@1 "
            "drop against GRPO, and every gamma > 1 has a resolved pass@1 drop (paired 95% "
            "intervals); contradicted if a gamma in [0.5, 1] raises Delta NLL_rare or drops "
            "pass@1 (resolved); else not resolved.",
        )
    )

    # 10. F-GRPO against MaxRL, beside the simulator's prediction
    d10 = {m: paired(numbers, f, mx, m) for m in ("delta_nll_rare", "id_pass1", "id_passk")}
    pred, sim_iv = None, None
    if prediction:
        per_seed = prediction["per_seed"]
        m_f, m_x = per_seed.get(f"F-GRPO gamma={float(cfg.gamma):g}"), per_seed.get("MaxRL")
        if m_f and m_x and len(m_f) == len(m_x) >= 2:
            # the simulator's own difference, paired by seed: a direction only when resolved
            sim_iv = t_interval([a - b for a, b in zip(m_f, m_x, strict=True)])
            pred = {HOLDS: "below", CONTRADICTED: "above"}.get(verdict_above(sim_iv))
    d = d10["delta_nll_rare"]
    if mx not in numbers:
        verdict10 = NOT_RUN
    elif d is None or pred is None:
        verdict10 = NOT_RESOLVED
    else:
        verdict10 = verdict_below(d) if pred == "below" else verdict_above(d)
    if sim_iv is None:
        sim = "no simulator prediction"
    else:
        sim = (
            f"the simulator (preset {cfg.prediction_preset}, N = {N}, {sim_iv.n} seeds) retains "
            "M_ret = "
            + ", ".join(f"{k} {v:.3f}" for k, v in prediction["m_ret"].items())
            + f"; F-GRPO - MaxRL {_iv(sim_iv, True, 4)}, so "
            + (
                f"it predicts F-GRPO's Delta NLL_rare {pred} MaxRL's"
                if pred
                else "it does not separate them (no prediction to test)"
            )
        )
    claims.append(
        claim(
            10,
            f"F-GRPO and MaxRL at N = {N} compare on Delta NLL_rare as the categorical simulator "
            "predicts from their retained positive mass (no paper claim: MaxRL, arXiv 2602.02710)",
            verdict10,
            (
                f"over {_bases(d)}: F-GRPO - MaxRL "
                + "; ".join(f"{METRICS[m]}: {_iv(x, True)}" for m, x in d10.items())
                + f"; {sim}."
            )
            if d is not None
            else "MaxRL was not trained.",
            "The simulator predicts a side when its own 95% interval of F-GRPO - MaxRL in M_ret "
            "(paired over its seeds) excludes 0 (more retained mass, less likelihood lost). Holds "
            "if the paired 95% interval of F-GRPO - MaxRL in Delta NLL_rare lies on that side, "
            "contradicted if on the other side, else (or without a prediction) not resolved.",
        )
    )
    return claims
