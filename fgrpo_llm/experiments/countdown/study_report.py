"""The study's numbers per run, its tables (intervals over bases, variance components, the kernel
family's effect) and report (``OUT/report.md``, ``OUT/study.json``); the figures are drawn by
``plots`` and linked here. Each report section is a function from :class:`StudyData` to text.

    write_study_outputs(out, cfg, design, numbers, bases, claims, command=..., spread_file=None,
                        timing={})
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fgrpo_common.files import write_json
from fgrpo_llm.environment import environment_differences, environment_section
from fgrpo_llm.evaluation.runs import split_pass_at
from fgrpo_llm.evaluation.stats import (
    Interval,
    by_base,
    format_interval,
    informative,
    variance_components,
    welch_difference,
)
from fgrpo_llm.evaluation.tail_miss import tail_miss_records
from fgrpo_llm.experiments.claims import family_verdict
from fgrpo_llm.experiments.countdown.plots import save_study_figures
from fgrpo_llm.experiments.countdown.report import write_report
from fgrpo_llm.experiments.countdown.study_claims import (
    FRONTIER_METRICS,
    METRICS,
    StudyNumbers,
    frontier_curves,
    interval,
    mechanism_arm,
    paired,
    unit_values,
)
from fgrpo_llm.experiments.countdown.study_numbers import iv_text as _iv
from fgrpo_llm.experiments.countdown.study_tuning import tuning_text
from fgrpo_llm.experiments.countdown.study_units import unit_rows, write_units
from fgrpo_llm.experiments.tables import MISSING, cell, markdown_table

__all__ = ["run_numbers", "write_study_outputs", "component_rows", "family_rows"]

#: Metrics whose spread the demo quotes beside a single run.
SPREAD_METRICS = ("id_pass1", "id_passk", "ood_pass1", "ood_passk", "delta_nll_rare")


# ----------------------------------------------------------------------------- per-run numbers
def run_numbers(run, rare, *, early_steps: int, exact: bool) -> dict:
    """The study's metrics of one finished run (see ``METRICS``) plus its pass@k curves."""
    rec = tail_miss_records(run.groups, rare, max_step=early_steps, exact=exact)
    res = run.eval
    return {
        "id_pass1": split_pass_at(res, "in_domain", 1),
        "id_passk": split_pass_at(res, "in_domain", "max"),
        "ood_pass1": split_pass_at(res, "ood", 1),
        "ood_passk": split_pass_at(res, "ood", "max"),
        "delta_nll_rare": run.delta_nll_rare,
        "tail_miss_obs": float(rec["tail_miss"].mean()) if len(rec["N"]) else None,
        "tail_miss_pred": float(rec["p_tail_miss"].mean()) if len(rec["N"]) else None,
        "tail_miss_groups": int(len(rec["N"])),
        "passk": {
            split: {f"pass@{k}": e[f"pass@{k}"] for k in res["ks"]}
            for split, e in res["splits"].items()
        },
        "kmax": max(res["ks"]),
    }


def _sd(x: float) -> str:
    return cell(x)


def _effects(cfg) -> list[tuple[str, str, str]]:
    """The paired effects the claims rest on: (label, run a, run b), a - b."""
    N = cfg.group_size
    g, f, c = f"grpo_n{N}", f"fgrpo_n{N}", f"grpo_n{N}_lrmatched"
    return [("F-GRPO - GRPO", f, g), ("control - GRPO", c, g), ("F-GRPO - control", f, c)]


def _effect_values(numbers, a, b, metric) -> dict:
    va, vb = unit_values(numbers, a, metric), unit_values(numbers, b, metric)
    return {u: va[u] - vb[u] for u in va.keys() & vb.keys()}


# ----------------------------------------------------------------------------- tables
def component_rows(numbers: dict, cfg) -> list[dict]:
    """Variance components (between bases, between RL seeds within a base) of every run's
    metrics and of the paired effects, per metric; a run no base trained twice (the extended
    plan, the sweep: one RL seed each) cannot split them and is left out."""
    rows = []
    items = [(next(iter(runs.values()))["label"], name, None) for name, runs in numbers.items()]
    items += [(label, a, b) for label, a, b in _effects(cfg)]
    for label, a, b in items:
        for m in SPREAD_METRICS:
            vals = unit_values(numbers, a, m) if b is None else _effect_values(numbers, a, b, m)
            if not vals or not any(
                sum(1 for u in vals if u[0] == base) > 1 for base in {u[0] for u in vals}
            ):
                continue
            vc = variance_components(vals)
            rows.append({"what": label, "metric": m, "effect": b is not None, **vc.to_dict()})
    return rows


def family_rows(numbers: dict, cfg, bases: dict) -> list[dict]:
    """Per quantity (a run's metric or a paired effect): the difference of base means between the
    kernel families, other - default, with Welch's 95% interval."""
    fam = {b: info["family"] for b, info in bases.items()}
    N = cfg.group_size
    quantities = [
        (f"{METRICS[m]}, {name}", unit_values(numbers, name, m))
        for name in (f"grpo_n{N}", f"fgrpo_n{N}")
        for m in SPREAD_METRICS
    ] + [
        (f"{METRICS[m]}, {label}", _effect_values(numbers, a, b, m))
        for label, a, b in _effects(cfg)[:1]
        for m in SPREAD_METRICS
    ]
    rows = []
    for what, vals in quantities:
        means = {b: float(np.mean(xs)) for b, xs in by_base(vals).items()}
        groups = {f: [v for b, v in means.items() if fam.get(b) == f] for f in ("default", "other")}
        if not groups["default"] or not groups["other"]:
            continue
        d = welch_difference(groups["other"], groups["default"])
        rows.append(
            {
                "what": what,
                "default": float(np.mean(groups["default"])),
                "other": float(np.mean(groups["other"])),
                "difference": d.to_dict(),
                "bases": [len(groups["default"]), len(groups["other"])],
                "resolved": informative(d) and d.excludes(0.0),
            }
        )
    return rows


def summary_rows(numbers: dict) -> list[dict]:
    """Per run (plan order): label, units, and per metric the interval over bases."""
    rows = []
    for name, runs in numbers.items():
        first = next(iter(runs.values()))
        rows.append(
            {
                "name": name,
                "label": first["label"],
                "N": first["N"],
                "gamma": first["gamma"],
                "units": sorted(runs),
                "bases": len({b for b, _ in runs}),
                **{m: interval(numbers, name, m) for m in METRICS},
            }
        )
    return rows


def spread(components: list[dict], design, command: str) -> dict:
    """What one run cannot separate, per metric, averaged over the runs (not the effects) whose
    two components are both known (bases with two seeds): the sd of one run on a base drawn anew
    (``sd``) and its two parts, each an average over the same runs."""
    out = {"command": command, "num_bases": len(design.bases), "num_seeds": len(design.seeds)}
    fields = {"sd": "total_sd", "between_base_sd": "between_sd", "within_base_sd": "within_sd"}
    for key in fields:
        out[key] = {}
    for m in SPREAD_METRICS:
        rows = [
            r
            for r in components
            if r["metric"] == m
            and not r["effect"]
            and all(math.isfinite(r[f]) for f in fields.values())
        ]
        for key, f in fields.items():
            out[key][m] = float(np.mean([r[f] for r in rows])) if rows else None
    return out


# ----------------------------------------------------------------------------- report
def _design_text(cfg, design, bases: dict, command: str) -> str:
    from fgrpo_llm.evaluation.passk import default_ks  # lazy: torch

    fams = {f: [b for b in design.bases if design.family(b) == f] for f in ("default", "other")}
    return (
        f"`{command}`: {len(design.bases)} base models (pretraining seeds "
        f"{', '.join(map(str, design.bases))}; {len(bases)} prepared), bases "
        f"{', '.join(map(str, fams['default'])) or 'none'} under this CPU's default kernels and "
        f"{', '.join(map(str, fams['other'])) or 'none'} under the other kernel family. On every "
        f"base: GRPO and F-GRPO at N = {cfg.group_size} and the lr-matched control for RL seeds "
        f"{', '.join(map(str, design.seeds))}; on bases "
        f"{', '.join(map(str, design.sweep_bases)) or 'none'} also GRPO at N in "
        f"{sorted(set(cfg.sweep_group_sizes) - {cfg.group_size})} at RL seed {design.seeds[0]}"
        + (
            f"; on bases {', '.join(map(str, design.extended_bases))} the extended plan at RL "
            f"seed {design.seeds[0]}: MaxRL, GRPO + entropy bonus {cfg.entropy_coef:g}, GRPO + KL "
            f"penalty {cfg.kl_coef:g}, F-GRPO at gamma "
            f"{', '.join(f'{g:g}' for g in cfg.extended_gammas)}"
            if design.extended_bases
            else ""
        )
        + ". "
        f"{cfg.steps} RL steps per run; every run evaluated on "
        f"{cfg.eval_max_problems or 'all'} problems per split with n = {cfg.eval_n} "
        f"(k_max = {max(default_ks(cfg.eval_n))}); the configuration is in `study_config.json`, "
        "one row per run in `units.csv` (`fgrpo-llm study --from-units units.csv` judges every "
        "claim again from it). The runs fall in three cells: fit (GRPO at N = "
        f"{cfg.group_size}, lr x 1, RL seed {design.seeds[0]}, every base), published (the rest "
        "of the plan above) and blind (GRPO at lr x "
        f"{', '.join(f'{x:g}' for x in cfg.lr_frontier) or '–'} on every base and seed; at the "
        f"first seed the sweep on every base, F-GRPO at gamma "
        f"{', '.join(f'{g:g}' for g in cfg.blind_gammas) or '–'}, and the revisit arm), trained "
        "only after a forecast file is committed (`forecast_record.json`).\n\n"
        "**Intervals take the base as the unit**: each value is averaged over a base's RL seeds, "
        "then the mean and 95% Student-t interval are over the K base means (K - 1 degrees of "
        "freedom). Differences are paired within (base, RL seed) before that. Delta NLL_rare's "
        "scale moves with the base, so its claims are judged on paired differences; the ratio "
        "F-GRPO / GRPO is shown beside them. A claim that rests on fewer bases says so."
    )


def _bases_table(bases: dict, numbers: dict, cfg) -> str:
    N = cfg.group_size
    rows = []
    for b, info in bases.items():
        env = info["environment"] or {}
        cells = []
        for name in (f"grpo_n{N}", f"fgrpo_n{N}", f"grpo_n{N}_lrmatched"):
            xs = [
                v for (bb, _), v in unit_values(numbers, name, "delta_nll_rare").items() if bb == b
            ]
            cells.append(f"{np.mean(xs):.3f}" if xs else MISSING)
        base_pass1 = next(
            (
                e.get("pass@1")
                for e in info["base_eval"]["splits"].values()
                if e.get("role") == "in_domain"
            ),
            None,
        )
        rows.append(
            [
                b,
                info["family"],
                env.get("torch_cpu_capability", "?"),
                f"{base_pass1:.3f}" if base_pass1 is not None else MISSING,
                info["rare_trajectories"],
                info["rare_prompts"],
                *cells,
            ]
        )
    return markdown_table(
        [
            "base",
            "kernels",
            "torch capability",
            "base in-domain pass@1",
            "rare trajectories",
            "prompts with E(x)",
            f"Delta NLL_rare GRPO N={N}",
            f"F-GRPO N={N}",
            "lr-matched",
        ],
        rows,
    )


@dataclass(frozen=True)
class StudyData:
    """Everything the study's report is written from: the configuration and design, the per-unit
    numbers, the bases, the claims' verdicts, the summary, variance-component and kernel-family
    rows, the figures' file names, the command and the tuning (or None)."""

    cfg: object
    design: object
    numbers: dict
    bases: dict
    claims: list
    rows: list
    comps: list
    fams: list
    figs: list
    command: str
    tuning: dict | None = None


def _verdicts_text(d: StudyData) -> str:
    verdicts = markdown_table(
        ["#", "claim", "verdict", "numbers"],
        [[c["claim"], c["text"], f"**{c['verdict']}**", c["evidence"]] for c in d.claims],
    )
    rules = "\n".join(f"- Claim {c['claim']}: {c['rule']}" for c in d.claims)
    return verdicts + "\n\nHow each verdict is decided:\n\n" + rules


def _runs_text(d: StudyData) -> str:
    runs_table = markdown_table(
        ["run", "bases", "units", *[METRICS[m] for m in METRICS]],
        [[r["label"], r["bases"], len(r["units"]), *[_iv(r[m]) for m in METRICS]] for r in d.rows],
    )
    return "".join(f"![{p}]({p})\n\n" for p in d.figs) + runs_table


def _components_text(d: StudyData) -> str:
    comp_table = markdown_table(
        [
            "run or paired effect",
            "metric",
            "bases",
            "units",
            "sd between bases",
            "sd between seeds within a base",
        ],
        [
            [
                c["what"],
                METRICS[c["metric"]],
                c["bases"],
                c["units"],
                _sd(c["between_sd"]),
                _sd(c["within_sd"]),
            ]
            for c in d.comps
        ],
    )
    return (
        "One-way random effects per quantity "
        "(`fgrpo_llm.evaluation.stats.variance_components`):"
        " the sd of the base effect and of the RL seed within a base.\n\n" + comp_table
    )


def _family_text(d: StudyData) -> str:
    resolved = [r["what"] for r in d.fams if r["resolved"]]
    return (
        "Difference of base means, other kernel family - default, with Welch's 95% interval "
        "(bases default / other in the last column). "
        + family_verdict(d.fams, resolved)
        + "\n\n"
        + markdown_table(
            ["quantity", "default", "other", "other - default", "bases"],
            [
                [
                    r["what"],
                    f"{r['default']:.3f}",
                    f"{r['other']:.3f}",
                    format_interval(_interval_from(r["difference"]), 3, signed=True),
                    "/".join(map(str, r["bases"])),
                ]
                for r in d.fams
            ],
        )
    )


def _environment_text(d: StudyData) -> str:
    envs = {f"base {b}": info["environment"] for b, info in d.bases.items()}
    return (
        "The bases differ in kernel family by design; the runs compared as a pair share one "
        "base and one environment (a difference would be printed as a warning). "
        + environment_section(envs)
    )


def _report(out: Path, d: StudyData) -> Path:
    """OUT/report.md from the study's data, one section function each."""
    sections = [
        ("Study", _design_text(d.cfg, d.design, d.bases, d.command)),
        ("Verdicts", _verdicts_text(d)),
        ("Bases", _bases_table(d.bases, d.numbers, d.cfg)),
        ("The lr frontier (claim 5)", frontier_table(d.numbers, d.cfg)),
        ("The mechanism per rare trajectory (claims 11, 12)", mechanism_table(d.numbers)),
        ("Runs: mean [95% CI] over bases", _runs_text(d)),
        ("Variance components", _components_text(d)),
        ("Kernel family", _family_text(d)),
        *([("Tuning of the regularised baselines", tuning_text(d.tuning))] if d.tuning else []),
        ("Environment", _environment_text(d)),
    ]
    return write_report(
        out / "report.md", "F-GRPO study: bases, seeds, intervals and verdicts", sections
    )


def frontier_table(numbers: dict, cfg) -> str:
    """GRPO at N = ``group_size`` per lr scale (the paper's control, lr x m_gamma, one of its
    rows) and F-GRPO: Delta NLL_rare, in-domain pass@1 and OOD pass@k_max, mean [95% CI] over
    bases, and F-GRPO minus each row paired within units; per unit s* is in claim 5's
    evidence. Units: ``OUT/units.csv``."""
    study = StudyNumbers(numbers, cfg)
    curves = frontier_curves(study)
    if not curves or study.fgrpo not in numbers:
        return f"GRPO at N = {cfg.group_size} and F-GRPO were not both trained."
    ms = list(FRONTIER_METRICS.values())
    rows = []
    for x, name in curves.items():
        what = "the paper's control, lr x m_gamma" if name.endswith("_lrmatched") else "GRPO"
        rows.append(
            [f"{what} (x {x:.3g})", len({u[0] for u in numbers[name]})]
            + [_iv(interval(numbers, name, m)) for m in ms]
            + [_iv(paired(numbers, study.fgrpo, name, m), True) for m in ms]
        )
    rows.append(
        [f"F-GRPO (gamma {cfg.gamma:g}, x 1)", len({u[0] for u in numbers[study.fgrpo]})]
        + [_iv(interval(numbers, study.fgrpo, m)) for m in ms]
        + ["", "", ""]
    )
    heads = [METRICS[m] for m in ms]
    return markdown_table(
        ["run (lr scale)", "bases", *heads, *[f"F-GRPO - row: {h}" for h in heads]], rows
    )


def _mechanism_row(numbers: dict, name: str, v: dict, reference: str | None = None) -> list:
    """One row of :func:`mechanism_table`: run ``name``'s verdict ``v`` (``mechanism_arm``)."""
    label = next(iter(numbers[name].values()))["label"]
    label += f", U from {reference} (post hoc)" if reference else ""
    cls = [
        f"{e['count']}: "
        + (MISSING if e["mean"] is None else f"{e['mean']:+.3f}")
        + (f" [{e['interval'][0]:+.3f}, {e['interval'][1]:+.3f}]" if e["interval"] else "")
        for e in v["classes"].values()
    ]
    d = v["d"] and _interval_from(v["d"])
    return [label, v["bases"], *cls, _iv(d, signed=True), v["verdict"]]


def mechanism_table(numbers: dict) -> str:
    """Per run with the mechanism's columns (``study_units.mechanism_columns``): each class's
    trajectory count over units and its mean exact Delta NLL per token [95% CI over bases],
    mean(B) - mean(U) and the verdict (``fgrpo_llm.evaluation.mechanism``)."""
    rows, post_hoc = [], []
    for name in sorted(numbers):
        v = mechanism_arm(numbers, name)
        if v is None:
            continue
        rows.append(_mechanism_row(numbers, name, v))
        # an arm that trains every rare prompt (the revisit arm) has no U: a row beside it with
        # U from the one-visit run of the same unit (a comparison chosen after the arm was seen)
        reference = name.split("_pool")[0]
        if "_pool" in name and not v["classes"]["U"]["count"] and reference in numbers:
            alt = mechanism_arm(numbers, name, reference)
            post_hoc.append(_mechanism_row(numbers, name, alt, reference))
    rows += post_hoc
    if not rows:
        return "No run has a group log and exact evaluations of its rare trajectories."
    return (
        "Each rare trajectory's exact Delta NLL per token, classed by what training did to its "
        "prompt: U never trained, B trained in an active group that missed its answer (Lemma "
        "3.1's event), S its answer sampled, I inactive groups only. Per class: trajectories "
        "over all units, and the mean over bases of the per-unit class means.\n\n"
        + markdown_table(["run", "bases", "U", "B", "S", "I", "mean(B) - mean(U)", "verdict"], rows)
    )


def _interval_from(d: dict):
    return Interval(**d)


def write_study_outputs(
    out: Path, cfg, design, numbers, bases, claims, *, command, spread_file, timing, tuning=None
) -> dict:
    """Tables, figures, OUT/report.md, OUT/study.json, OUT/units.csv (``study_units``) and
    OUT/seed_spread.json; the result."""
    for b, s in sorted({u for runs in numbers.values() for u in runs}):
        paired_envs = {
            name: runs[(b, s)].get("environment")
            for name, runs in numbers.items()
            if (b, s) in runs
        }
        for line in environment_differences(paired_envs):  # pairs must share their kernels
            print(
                f"fgrpo-llm study: warning: paired runs of base {b} seed {s}: {line}",
                file=sys.stderr,
            )
    rows = summary_rows(numbers)
    comps = component_rows(numbers, cfg)
    fams = family_rows(numbers, cfg, bases)
    figs = save_study_figures(out, numbers, cfg, bases) if numbers else []
    data = StudyData(cfg, design, numbers, bases, claims, rows, comps, fams, figs, command, tuning)
    report = _report(out, data)
    spread_ = spread(comps, design, command)
    result = {
        "command": command,
        "design": design.to_dict(),
        "runs": [
            {
                **{k: v for k, v in r.items() if k not in METRICS},
                **{m: (r[m].to_dict() if r[m] else None) for m in METRICS},
            }
            for r in rows
        ],
        "per_unit": [
            {"name": name, "base": b, "seed": s, **vals}
            for name, runs in numbers.items()
            for (b, s), vals in sorted(runs.items())
        ],
        "bases": {str(b): info for b, info in bases.items()},
        "claims": claims,
        "variance_components": comps,
        "kernel_family": fams,
        "seed_spread": spread_,
        "timing": timing,
        "tuning": tuning,
    }
    write_json(out / "study.json", result)
    write_units(out / "units.csv", unit_rows(numbers, bases))
    write_json(out / "seed_spread.json", spread_)
    if spread_file:
        write_json(Path(spread_file), spread_)
    print(f"[study] wrote {report}", file=sys.stderr)
    return result
