"""``fgrpo-llm study``: the plan (the demo's and GRPO at N = 32) for several RL seeds, intervals,
and a verdict per claim.

From one base and one rare-correct set (``fgrpo_llm.experiments.plan``) it trains, for each RL seed
s in ``seeds``, GRPO at N in {2, 4, 8, 16, 32}, F-GRPO at N = 8 and the learning-rate-matched GRPO
control at N = 8 (``OUT/seed<s>/<run>/``), evaluates every run on the same problems, and reports
per run the mean over seeds with a 95% Student-t interval over seeds
(``fgrpo_llm.evaluation.stats``) for pass@k in-domain and OOD, Delta NLL_rare and the early
tail-miss frequency. Differences that the paper's claims rest on are paired (same seed, same base,
same evaluation problems): their interval is the t interval of the per-seed differences. Each claim
then gets a verdict (holds, contradicted, not resolved at this scale) with the numbers behind it and
the rule that decided it:

1. Delta NLL_rare is non-monotone in N with its peak at an intermediate N (paper: N = 8; Table 2);
2. F-GRPO at N = 8 has a lower Delta NLL_rare than GRPO at N = 8;
3. F-GRPO at N = 8 has pass@k at the largest k at least that of GRPO at N = 8, in-domain and OOD;
4. F-GRPO at N = 8 keeps pass@1 (no drop beyond the interval);
5. the learning-rate-matched control does not reproduce F-GRPO's gains (Table 3);
6. F-GRPO at N = 8 matches GRPO at N = 32 at the largest k with a quarter of the rollouts;
7. early in training the observed tail-miss frequency agrees with Lemma 3.1.

Stages resume like the demo's (every finished run is kept); the report is rebuilt each time.
``seed_spread.json`` records the seed-to-seed standard deviation the demo quotes.

    fgrpo-llm study --out runs/study --seeds 0,1,2,3,4
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from pathlib import Path

import numpy as np

from fgrpo_llm.evaluation.stats import (
    CONTRADICTED,
    HOLDS,
    NOT_RESOLVED,
    Interval,
    combine_verdicts,
    format_interval,
    paired_difference,
    t_interval,
    verdict_above,
    verdict_below,
    verdict_not_below,
)
from fgrpo_llm.experiments.plan import (
    DemoConfig,
    RunSpec,
    evaluate_stage,
    map_runs,
    pretrain_base,
    rare_set_stage,
    run_done,
    run_specs,
    task_for,
    write_json,
)
from fgrpo_theory.plots import save_figure

__all__ = ["run_study", "MATCH_MARGIN", "METRICS"]

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


# ----------------------------------------------------------------------------- per-run numbers
def _split_value(results: dict, role: str, k) -> float | None:
    ks = results["ks"]
    kk = max(ks) if k == "max" else int(k)
    vals = [
        e[f"pass@{kk}"]
        for e in results["splits"].values()
        if e["role"] == role and f"pass@{kk}" in e
    ]
    return float(np.mean(vals)) if vals else None


def _run_numbers(run, rare, *, early_steps: int, exact: bool) -> dict:
    """The study's metrics of one finished run (see :data:`METRICS`) plus its pass@k curves."""
    from fgrpo_llm.evaluation.tail_miss import tail_miss_records

    # exact (mu, tau) if known
    rec = tail_miss_records(run.groups, rare, max_step=early_steps, exact=exact)
    res = run.eval
    out = {
        "id_pass1": _split_value(res, "in_domain", 1),
        "id_passk": _split_value(res, "in_domain", "max"),
        "ood_pass1": _split_value(res, "ood", 1),
        "ood_passk": _split_value(res, "ood", "max"),
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
    return out


def _collect(out: Path, cfg: DemoConfig, seeds, rare, *, exact: bool) -> dict:
    """``numbers[name][seed] = _run_numbers(...)`` for every finished and evaluated run."""
    from fgrpo_llm.evaluation.runs import load_run

    numbers: dict = {}
    for s in seeds:
        for spec in run_specs(cfg, seed=s, prefix=f"seed{s}/"):
            if not run_done(out, spec):
                continue
            run = load_run(out / spec.path)
            numbers.setdefault(spec.name, {})[s] = {
                **_run_numbers(run, rare, early_steps=cfg.early_steps, exact=exact),
                "label": run.label,
                "environment": run.environment,
                "N": spec.N,
                "gamma": spec.gamma,
                "lr_match_gamma": spec.lr_match_gamma,
            }
    return numbers


def _values(numbers: dict, name: str, metric: str, seeds) -> np.ndarray | None:
    """One value per seed, or None when a run of some seed is missing or lacks the metric."""
    runs = numbers.get(name, {})
    vals = [runs.get(s, {}).get(metric) for s in seeds]
    return (
        None
        if any(v is None or not math.isfinite(v) for v in vals)
        else np.array(vals, dtype=np.float64)
    )


def _interval(numbers, name, metric, seeds) -> Interval | None:
    v = _values(numbers, name, metric, seeds)
    return None if v is None else t_interval(v)


def _paired(numbers, a, b, metric, seeds) -> Interval | None:
    va, vb = _values(numbers, a, metric, seeds), _values(numbers, b, metric, seeds)
    return None if va is None or vb is None else paired_difference(va, vb)


# ----------------------------------------------------------------------------- claims
def _claim(number: int, text: str, verdict: str, evidence: str, rule: str) -> dict:
    return {"claim": number, "text": text, "verdict": verdict, "evidence": evidence, "rule": rule}


def _iv(iv, signed=False, digits=3) -> str:
    return format_interval(iv, digits, signed=signed)


def judge_claims(numbers: dict, cfg: DemoConfig, seeds) -> list[dict]:
    """The seven claims of the module docstring, each with its verdict, evidence and rule."""
    N = cfg.group_size
    g, f, c = f"grpo_n{N}", f"fgrpo_n{N}", f"grpo_n{N}_lrmatched"
    sweep = sorted({N, *cfg.sweep_group_sizes})
    claims = []

    # 1. non-monotone Delta NLL_rare with an interior peak
    means = {n: _interval(numbers, f"grpo_n{n}", "delta_nll_rare", seeds) for n in sweep}
    rule1 = (
        "N* = the N with the largest mean over seeds. Holds if N* is neither the smallest nor the "
        "largest N and Delta NLL_rare(N*) exceeds both ends' in paired 95% intervals; "
        "contradicted if N* is an end and exceeds every other N's in paired intervals (monotone "
        "towards that end); else not resolved."
    )
    if all(means.values()) and len(sweep) >= 3:
        peak = max(sweep, key=lambda n: means[n].mean)
        diffs = {
            n: _paired(numbers, f"grpo_n{peak}", f"grpo_n{n}", "delta_nll_rare", seeds)
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
            f"Delta NLL_rare of GRPO, mean [95% CI] over {len(seeds)} seeds: {shown}; peak at N = "
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
        verdict, evidence = NOT_RESOLVED, "a GRPO run of the sweep is missing."
    claims.append(
        _claim(
            1,
            "Delta NLL_rare is non-monotone in N, with its peak at an intermediate N "
            "(paper: N = 8)",
            verdict,
            evidence,
            rule1,
        )
    )

    # 2. F-GRPO lowers Delta NLL_rare
    d2 = _paired(numbers, f, g, "delta_nll_rare", seeds)
    claims.append(
        _claim(
            2,
            f"F-GRPO at N = {N} has a lower Delta NLL_rare than GRPO at N = {N}",
            verdict_below(d2) if d2 else NOT_RESOLVED,
            f"paired difference F-GRPO - GRPO: {_iv(d2, True)} (F-GRPO "
            f"{_iv(_interval(numbers, f, 'delta_nll_rare', seeds))}, GRPO "
            f"{_iv(_interval(numbers, g, 'delta_nll_rare', seeds))}).",
            "Holds if the paired 95% interval lies below 0, contradicted if above 0, else not "
            "resolved.",
        )
    )

    # 3. pass@k_max at least GRPO's, in-domain and OOD
    d3 = {m: _paired(numbers, f, g, m, seeds) for m in ("id_passk", "ood_passk")}
    v3 = [verdict_above(d) if d else NOT_RESOLVED for d in d3.values()]
    verdict3 = combine_verdicts(v3)
    claims.append(
        _claim(
            3,
            f"F-GRPO at N = {N} has pass@k at the largest k at least that of GRPO at N = {N}, "
            f"in-domain and OOD",
            verdict3,
            "paired difference F-GRPO - GRPO: "
            + "; ".join(f"{METRICS[m]}: {_iv(d, True)}" for m, d in d3.items())
            + ".",
            "Holds if both paired 95% intervals lie above 0 (F-GRPO higher in-domain and OOD), "
            "contradicted if either lies below 0, else not resolved (no difference this many "
            "seeds can resolve).",
        )
    )

    # 4. pass@1 kept
    d4 = {m: _paired(numbers, f, g, m, seeds) for m in ("id_pass1", "ood_pass1")}
    v4 = [verdict_not_below(d) if d else NOT_RESOLVED for d in d4.values()]
    verdict4 = combine_verdicts(v4)
    claims.append(
        _claim(
            4,
            f"F-GRPO at N = {N} keeps pass@1 (no drop beyond the interval)",
            verdict4,
            "paired difference F-GRPO - GRPO: "
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
        d = _paired(numbers, f, g, m, seeds)
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
        parts, kept, reproduced = [], 0, 0
        for m, better in gains:
            fc = _paired(numbers, f, c, m, seeds)  # F-GRPO - control
            cg = _paired(numbers, c, g, m, seeds)  # control - GRPO
            kept += better(fc) == HOLDS  # F-GRPO still better than the control
            reproduced += better(fc) != HOLDS and better(cg) == HOLDS
            parts.append(
                f"{METRICS[m]}: F-GRPO - control {_iv(fc, True)}, control - GRPO {_iv(cg, True)}"
            )
        verdict5 = (
            HOLDS
            if kept == len(gains)
            else (CONTRADICTED if reproduced == len(gains) else NOT_RESOLVED)
        )
        evidence5 = "for each resolved gain of F-GRPO over GRPO: " + "; ".join(parts) + "."
    claims.append(
        _claim(
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
        m: _paired(numbers, f, f"grpo_n{big}", m, seeds) if big > N else None
        for m in ("id_passk", "ood_passk")
    }
    v6 = [verdict_above(d, -MATCH_MARGIN) if d else NOT_RESOLVED for d in d6.values()]
    verdict6 = combine_verdicts(v6)
    claims.append(
        _claim(
            6,
            f"F-GRPO at N = {N} matches GRPO at N = {big} at the largest k with "
            f"{N}/{big} of the rollouts",
            verdict6,
            f"paired difference F-GRPO N={N} - GRPO N={big}: "
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
        obs, pred = (
            _values(numbers, name, "tail_miss_obs", seeds),
            _values(numbers, name, "tail_miss_pred", seeds),
        )
        if obs is None or pred is None:
            continue
        d = paired_difference(obs, pred)
        agree += not d.excludes(0.0)
        disagree += d.excludes(0.0)
        rows.append(
            f"{numbers[name][seeds[0]]['label']}: observed {_iv(t_interval(obs))}, predicted "
            f"{_iv(t_interval(pred))}, difference {_iv(d, True)}"
        )
    if not rows:
        verdict7, evidence7 = NOT_RESOLVED, "no training group hit a prompt with a rare event."
    else:
        verdict7 = (
            HOLDS if disagree == 0 else (CONTRADICTED if disagree > len(rows) / 2 else NOT_RESOLVED)
        )
        evidence7 = f"first {cfg.early_steps} steps: " + "; ".join(rows) + "."
    claims.append(
        _claim(
            7,
            "early in training the observed tail-miss frequency agrees with Lemma 3.1",
            verdict7,
            evidence7,
            "Per run, the paired 95% interval over seeds of observed - predicted frequency: holds "
            "if it contains 0 for every run, contradicted if it excludes 0 for more than half of "
            "them, else not resolved.",
        )
    )
    return claims


def _lr_scale(cfg: DemoConfig) -> float:
    from fgrpo_theory.focal import lr_multiplier

    return float(lr_multiplier(cfg.gamma))


# --------------------------------------------------------------------------- tables, spread, report
def summary_rows(numbers: dict, seeds) -> list[dict]:
    """Per run (plan order): label and, per metric, the interval over seeds
    (None when incomplete)."""
    rows = []
    for name, runs in numbers.items():
        first = runs[min(runs)]
        rows.append(
            {
                "name": name,
                "label": first["label"],
                "N": first["N"],
                "gamma": first["gamma"],
                "seeds": sorted(runs),
                "complete": all(s in runs for s in seeds),
                **{m: _interval(numbers, name, m, seeds) for m in METRICS},
            }
        )
    return rows


def seed_spread(rows: list[dict], seeds, command: str) -> dict:
    """The mean over runs of the standard deviation across seeds, per metric (what one seed cannot
    separate)."""
    sd = {}
    for m in ("id_pass1", "id_passk", "ood_pass1", "ood_passk", "delta_nll_rare"):
        vals = [r[m].sd for r in rows if r[m] is not None and math.isfinite(r[m].sd)]
        sd[m] = float(np.mean(vals)) if vals else None
    return {"command": command, "num_seeds": len(seeds), "sd": sd}


def _plot(out: Path, numbers: dict, cfg: DemoConfig, seeds) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep = sorted({cfg.group_size, *cfg.sweep_group_sizes})
    figs = []
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for ax, metric in zip(axes, ("delta_nll_rare", "id_passk", "ood_passk"), strict=True):
        pts = [(n, _interval(numbers, f"grpo_n{n}", metric, seeds)) for n in sweep]
        pts = [(n, iv) for n, iv in pts if iv is not None]
        if pts:
            ax.errorbar(
                [n for n, _ in pts],
                [iv.mean for _, iv in pts],
                yerr=[
                    [iv.mean - iv.lo if math.isfinite(iv.lo) else 0 for _, iv in pts],
                    [iv.hi - iv.mean if math.isfinite(iv.hi) else 0 for _, iv in pts],
                ],
                fmt="o-",
                capsize=3,
                label="GRPO",
            )
        for name, marker, label in (
            (f"fgrpo_n{cfg.group_size}", "*", f"F-GRPO (gamma {cfg.gamma:g})"),
            (f"grpo_n{cfg.group_size}_lrmatched", "^", "GRPO, lr-matched"),
        ):
            iv = _interval(numbers, name, metric, seeds)
            if iv is not None:
                ax.errorbar(
                    [cfg.group_size * (1.08 if marker == "*" else 0.92)],
                    [iv.mean],
                    yerr=[[iv.mean - iv.lo], [iv.hi - iv.mean]] if math.isfinite(iv.lo) else None,
                    fmt=marker,
                    ms=11,
                    capsize=3,
                    label=label,
                )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("group size N")
        ax.set_title(f"{METRICS[metric]} (mean, 95% CI over {len(seeds)} seeds)", fontsize=9)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out / "study_sweep.png", dpi=110)
    plt.close(fig)
    figs.append("study_sweep.png")
    return figs


def _report(
    out: Path, cfg: DemoConfig, seeds, rows, claims, spread, rare_summary, figs, command, envs
) -> Path:
    from fgrpo_llm.experiments.report import markdown_table, write_report

    table = [
        [r["label"], len(r["seeds"])]
        + [
            _iv(r[m])
            for m in (
                "id_pass1",
                "id_passk",
                "ood_pass1",
                "ood_passk",
                "delta_nll_rare",
                "tail_miss_obs",
                "tail_miss_pred",
            )
        ]
        for r in rows
    ]
    from fgrpo_llm.evaluation.passk import default_ks

    kmax = max(default_ks(cfg.eval_n))
    intro = (
        f"`{command}`: the plan ({len(run_specs(cfg))} runs, the configuration in "
        f"`study_config.json`) trained for {len(seeds)} RL seeds "
        f"({', '.join(map(str, seeds))}) from one base and one rare-correct set, every run "
        f"evaluated on the same {cfg.eval_max_problems or 'all'} problems per split with n = "
        f"{cfg.eval_n} samples (k_max = {kmax}). Intervals: mean over seeds and 95% Student-t "
        "interval over seeds; differences are paired by seed (same base, same problems). Nothing "
        "here depends on wall time, worker count or finishing order."
    )
    verdicts = markdown_table(
        ["#", "claim", "verdict", "numbers"],
        [[c["claim"], c["text"], f"**{c['verdict']}**", c["evidence"]] for c in claims],
    )
    rules = "\n".join(f"- Claim {c['claim']}: {c['rule']}" for c in claims)
    sections = [
        ("Study", intro),
        ("Verdicts", verdicts + "\n\nHow each verdict is decided:\n\n" + rules),
        (
            "Runs: mean [95% CI] over seeds",
            "".join(f"![{p}]({p})\n\n" for p in figs)
            + markdown_table(
                [
                    "run",
                    "seeds",
                    "in-domain pass@1",
                    "in-domain pass@k_max",
                    "OOD pass@1",
                    "OOD pass@k_max",
                    "Delta NLL_rare",
                    "early tail miss (obs)",
                    "early tail miss (Lemma 3.1)",
                ],
                table,
            ),
        ),
        (
            "Seed-to-seed spread",
            "Standard deviation across seeds, averaged over the runs (quoted by "
            "`fgrpo-llm demo` beside each single-seed comparison): "
            + ", ".join(
                f"{METRICS.get(k, k)} {v:.3f}" for k, v in spread["sd"].items() if v is not None
            )
            + ".",
        ),
        ("Rare-correct set and (mu, tau)", rare_summary),
    ]
    from fgrpo_llm.environment import environment_section

    sections.append(("Environment", environment_section(envs)))
    return write_report(out / "report.md", "F-GRPO study: seeds, intervals and verdicts", sections)


def _rare_summary(rare, exact_summary: dict | None) -> str:
    ids, mu, tau = rare.mu_tau()
    text = (
        f"{rare.meta.get('num_prompts')} prompts x {rare.meta.get('num_rollouts')} base rollouts, "
        f"{len(rare)} rare-correct trajectories, {len(ids)} prompts with a rare event E(x)."
    )
    if exact_summary:
        from fgrpo_llm.experiments.report import exact_mu_tau_text

        text += (
            " The tail-miss predictions use the exact base (mu, tau) of each prompt (the sum of "
            "the base's sequence probabilities over its correct answers and over E(x), "
            "`fgrpo_llm.evaluation.exact`). " + exact_mu_tau_text(exact_summary)
        )
    else:
        text += " The tail-miss predictions use the sampled (mu, tau) of the rare-set rollouts."
    return text


def run_study(
    out_dir, cfg: DemoConfig, *, seeds, command: str = "fgrpo-llm study", spread_file=None
) -> dict:
    """Run (or resume) the study; write OUT/report.md, OUT/study.json and OUT/seed_spread.json."""
    import torch

    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ValueError(f"seeds must be distinct integers >= 0, got seeds={seeds}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "study_config.json", {"seeds": seeds, "plan": dataclasses.asdict(cfg)})
    torch.set_num_threads(cfg.threads)
    t0 = time.perf_counter()
    base = pretrain_base(out, cfg)
    rare = rare_set_stage(out, cfg)
    exact_summary = _exact_stage(out, cfg, rare)
    task = task_for(out / "base")
    evaluate_stage(out / "base", out / "base_eval", cfg, task=task)
    specs: list[RunSpec] = [
        spec for s in seeds for spec in run_specs(cfg, seed=s, prefix=f"seed{s}/")
    ]
    todo = [spec for spec in specs if not run_done(out, spec)]
    print(
        f"[study] {len(specs) - len(todo)} of {len(specs)} runs done; training {len(todo)} on "
        f"{cfg.workers} worker(s)",
        file=sys.stderr,
        flush=True,
    )
    from tqdm import tqdm

    with tqdm(
        total=len(specs),
        initial=len(specs) - len(todo),
        desc="study runs",
        unit="run",
        file=sys.stderr,
    ) as bar:
        for spec, _seconds in map_runs(out, cfg, todo):
            bar.update(1)
            bar.set_postfix_str(f"{spec.path}", refresh=True)
    numbers = _collect(out, cfg, seeds, rare, exact=exact_summary is not None)
    rows = summary_rows(numbers, seeds)
    claims = judge_claims(numbers, cfg, seeds)
    spread = seed_spread(rows, seeds, command)
    figs = _plot(out, numbers, cfg, seeds)
    envs = {
        f"{name} seed {s}": v.get("environment")
        for name, per in numbers.items()
        for s, v in per.items()
    }
    from fgrpo_llm.environment import environment_differences

    for s in seeds:  # runs paired within a seed must share the kernels that round them
        paired = {k: v for k, v in envs.items() if k.endswith(f" seed {s}")}
        for line in environment_differences(paired):
            print(f"fgrpo-llm study: warning: paired runs of seed {s}: {line}", file=sys.stderr)
    report = _report(
        out,
        cfg,
        seeds,
        rows,
        claims,
        spread,
        _rare_summary(rare, exact_summary),
        figs,
        command,
        envs,
    )
    result = {
        "command": command,
        "seeds": seeds,
        "base": {k: v for k, v in base.items() if not k.startswith("time/")},
        "runs": [
            {
                **{k: v for k, v in r.items() if k not in METRICS},
                **{m: (r[m].to_dict() if r[m] else None) for m in METRICS},
            }
            for r in rows
        ],
        "per_seed": numbers,
        "claims": claims,
        "seed_spread": spread,
        "exact_mu_tau": exact_summary,
    }
    write_json(out / "study.json", result)
    write_json(out / "seed_spread.json", spread)
    if spread_file:
        write_json(Path(spread_file), spread)
    from fgrpo_llm.files import atomic_write_text

    atomic_write_text(
        out / "timings.md",
        f"# Wall time of the last `fgrpo-llm study` invocation\n\n"
        f"{(time.perf_counter() - t0) / 60:.1f} min (finished runs were kept).\n",
    )
    print(f"[study] wrote {report}", file=sys.stderr)
    return result


def _exact_stage(out: Path, cfg: DemoConfig, rare) -> dict | None:
    """Exact base (mu, tau) per prompt (Countdown), recorded in OUT/rare_set.json when a rare set
    built before they existed lacks them; their summary (how far the sampled estimates were off),
    or None for a task that cannot list its correct answers."""
    if rare.has_exact:
        return rare.meta.get("exact")
    from fgrpo_llm.evaluation.rare import save_rare_set
    from fgrpo_llm.experiments.plan import record_exact_mu_tau
    from fgrpo_llm.model import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(out / "base", device=cfg.device)
    task = task_for(out / "base")
    summary = record_exact_mu_tau(
        model, tok, task, task.problems("train")[: cfg.rare_prompts], rare
    )
    if summary is not None:
        save_rare_set(rare, out / "rare_set.json")
    return summary
