"""Markdown for the evaluation, cross-check and demo reports (``report.md``).

Words only: every section function takes the dicts produced by ``fgrpo_llm.evaluation`` and
``fgrpo_llm.experiments.countdown.cross_check`` (or the demo's objects) and returns markdown
text; the tables come from ``fgrpo_llm.experiments.tables``, the figures from ``plots`` (the
report links their files); :func:`write_report` puts the sections in one file.

    write_demo_report(out, cfg, summary, evals, runs, rare, result)   # OUT/report.md
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from fgrpo_common.files import atomic_write_text
from fgrpo_llm.environment import environment_section
from fgrpo_llm.experiments.countdown.config import EXECUTION_FIELDS
from fgrpo_llm.experiments.countdown.plots import (  # noqa: F401  (plot_*: the notebooks' names)
    plot_pass_at_k_models,
    plot_training_curves,
    save_pass_at_k,
    save_training_curves,
)
from fgrpo_llm.experiments.tables import MISSING, fmt, markdown_table

__all__ = [
    "fmt",
    "markdown_table",
    "pass_at_k_section",
    "tail_miss_section",
    "sweep_section",
    "lr_control_section",
    "coverage_section",
    "exact_mu_tau_text",
    "seed_spread_note",
    "write_report",
    "write_demo_report",
]


def pass_at_k_section(evals: dict[str, dict]) -> str:
    """One table per split: rows are models, columns pass@k."""
    if not evals:
        return "_No evaluation available._"
    parts = []
    any_results = next(iter(evals.values()))
    n = any_results["n"]
    splits = list(any_results["splits"])
    for split in splits:
        ks = any_results["ks"]
        rows = []
        for name, res in evals.items():
            entry = res["splits"].get(split)
            if entry:
                rows.append([name, entry["num_problems"]] + [entry.get(f"pass@{k}") for k in ks])
        role = any_results["splits"][split]["role"].replace("_", "-")
        parts.append(
            f"**{split}** ({role}, n = {n} samples per problem)\n\n"
            + markdown_table(["model", "problems"] + [f"pass@{k}" for k in ks], rows)
        )
    return "\n\n".join(parts)


def tail_miss_section(result: dict) -> str:
    """Observed vs predicted tail-miss frequency per run and N, for each window."""
    parts, sampled = [], False
    for window, runs in result["tail_miss"].items():
        rows = []
        for name, entries in runs.items():
            for r in entries:
                approx = not r.get("exact", True)
                sampled |= approx
                rows.append(
                    [
                        name,
                        r["N"],
                        r["groups"],
                        r["observed_active"],
                        r["predicted_active"],
                        f"{r['observed']:.3f} [{r['observed_lo']:.3f}, {r['observed_hi']:.3f}]",
                        f"{r['predicted']:.3f} [{r['predicted_lo']:.3f}, {r['predicted_hi']:.3f}]",
                        ("yes" if r["agrees"] else "no") + (" (approx.)" if approx else ""),
                    ]
                )
        if rows:
            parts.append(
                f"**{window}**\n\n"
                + markdown_table(
                    [
                        "run",
                        "N",
                        "groups",
                        "active (obs)",
                        "active (Lemma)",
                        "tail miss (obs, Wilson 95%)",
                        "tail miss (Lemma 3.1, 95% range)",
                        "consistent",
                    ],
                    rows,
                )
            )
    if not parts:
        return (
            "_No training group hit a prompt of the rare-correct set, so the tail-miss check has "
            "no data (use more rare-set prompts or more training steps)._"
        )
    if sampled:
        parts.append(
            "_approx.: Lemma 3.1 at (mu, tau) sampled from the base's rollouts. The range includes "
            "their estimation error, not the upward bias of tau for the prompts that enter the "
            "rare set only because E(x) was sampled, so the check is looser than 95%; a rare set "
            "with the exact (mu, tau) (recorded where the task's answers can be enumerated) "
            "avoids both._"
        )
    return "\n\n".join(parts)


def _evaluated_on(row: dict) -> str:
    """The problems behind a row's pass@k (in-domain + OOD) and, where the evaluation recorded
    it, the policy's step, flagged when it is not the run's last."""
    problems = row.get("eval_problems")
    if not problems:
        return "-"
    text = " + ".join(f"{problems[role]}" for role in ("in_domain", "ood") if role in problems)
    text += " problems"
    step, steps = row.get("eval_step"), row.get("steps")
    if step is not None:
        stale = steps is not None and step != steps
        text += f", step {step}" + (f" (**not the run's last, {steps}**)" if stale else "")
    return text


def sweep_section(result: dict) -> str:
    """Our sweep next to the paper's Table 2 (fractions; the paper's are converted from percent)."""
    rows = result["sweep"]
    if not rows:
        return "_No training runs._"
    kmax = next((r["kmax"] for r in rows if r["kmax"]), "k_max")  # k_max: no run evaluated
    keys = ["id_pass1", "id_passk", "ood_pass1", "ood_passk", "delta_nll_rare"]
    headers = [
        "run",
        "in-domain pass@1",
        f"in-domain pass@{kmax}",
        "OOD pass@1",
        f"OOD pass@{kmax}",
        "Delta NLL_rare",
    ]
    ours = [*headers, "evaluated on"]
    table = [[r["label"]] + [r[k] for k in keys] + [_evaluated_on(r)] for r in rows]
    text = "Ours:\n\n" + markdown_table(ours, table)
    controls = result.get("controls") or []
    if controls:
        text += (
            "\n\nRuns that are not points of the sweep (a scaled learning rate, MaxRL, an "
            "entropy bonus or a KL penalty; left out of the orderings below):\n\n"
            + markdown_table(
                ours, [[r["label"]] + [r[k] for k in keys] + [_evaluated_on(r)] for r in controls]
            )
        )
    paper_rows = [
        [r["label"] + (f" (gamma = {r['paper']['gamma']:g})" if r["paper"].get("gamma") else "")]
        + [r["paper"][k] for k in keys]
        for r in rows
        if r.get("paper")
    ]
    if paper_rows:
        text += (
            "\n\nThe paper (Qwen2.5-7B on math, Table 2; in-domain = avg. math, OOD = avg. OOD, "
            "pass@256; not our results):\n\n"
            + markdown_table(
                [
                    "run",
                    "in-domain pass@1",
                    "in-domain pass@256",
                    "OOD pass@1",
                    "OOD pass@256",
                    "Delta NLL_rare",
                ],
                paper_rows,
            )
        )
    elif not result.get("paper_available"):
        text += "\n\n_The paper's results file was not found, so no side-by-side comparison._"
    if result.get("orderings"):
        text += "\n\nOrderings:\n\n" + "\n".join(f"- {s}" for s in result["orderings"])
    return text


def lr_control_section(result: dict) -> str:
    """F-GRPO vs GRPO vs GRPO at lr * m_gamma at the same N
    (``fgrpo_llm.evaluation.sweep.lr_control_comparisons``)."""
    comps = result.get("lr_control") or []
    if not comps:
        return ""
    parts = [
        "The focal weight (1 - mu)^gamma shrinks the average update to about m_gamma = B(3/2, "
        "gamma + 3/2) / B(3/2, 3/2) of GRPO's, so the paper also trains GRPO at lr * m_gamma "
        "(Table 3). If that low-LR GRPO lands near F-GRPO, F-GRPO's difference from GRPO is "
        "explained by the smaller step; if it lands near GRPO, by the focal reweighting."
    ]
    for c in comps:
        kmax = next(
            (r["kmax"] for r in (c["focal"], c["grpo"], c["control"]) if r.get("kmax")), "k_max"
        )
        table = [
            [
                r["label"],
                r["gamma"],
                r.get("lr_scale", 1.0),
                r["id_pass1"],
                r["id_passk"],
                r["delta_nll_rare"],
            ]
            for r in (c["focal"], c["grpo"], c["control"])
        ]
        parts.append(
            f"**N = {c['N']}, gamma = {c['gamma']:g} (m_gamma = {c['lr_scale']:.3f})**\n\n"
            + markdown_table(
                [
                    "run",
                    "gamma",
                    "lr x",
                    "in-domain pass@1",
                    f"in-domain pass@{kmax}",
                    "Delta NLL_rare",
                ],
                table,
            )
            + "\n\n"
            + "\n".join(f"- {s}" for s in c["sentences"])
        )
    return "\n\n".join(parts)


def exact_mu_tau_text(summary: dict) -> str:
    """How far the sampled (mu, tau) of the rare set were from the exact ones
    (``exact_rare_set``)."""

    def v(key, digits=4):
        return fmt(summary.get(key), digits)

    def pct(key):
        return fmt(100 * summary[key], 0) if summary.get(key) is not None else MISSING

    return (
        "How far the sampled estimates (M rollouts per prompt) were off: mu by "
        f"{v('mu_abs_error_mean', 3)} on average (at most {v('mu_abs_error_max', 3)}; the exact mu "
        "lies in the sampled 95% Wilson interval for "
        f"{pct('mu_in_ci95_frac')}% "
        f"of prompts); over the {summary.get('num_with_event')} prompts with E(x), mean tau "
        f"{v('tau_sampled_mean')} sampled against {v('tau_exact_mean')} exact (sampled / exact: "
        f"mean {v('tau_ratio_mean', 2)}, median {v('tau_ratio_median', 2)}; below the exact value "
        "for "
        f"{pct('tau_below_frac')}% "
        "of prompts), the bias of choosing E(x) from the same samples that measure it."
    )


def write_report(path, title: str, sections: list[tuple[str, str]]) -> Path:
    """Write ``# title`` then ``## heading`` + body for each section (atomic)."""
    text = (
        f"# {title}\n\n" + "\n\n".join(f"## {h}\n\n{body.strip()}" for h, body in sections) + "\n"
    )
    return atomic_write_text(path, text)


# ----------------------------------------------------------------------------- the demo report
SPREAD_NAMES = {
    "id_pass1": "in-domain pass@1",
    "id_passk": "in-domain pass@k_max",
    "ood_pass1": "OOD pass@1",
    "ood_passk": "OOD pass@k_max",
    "delta_nll_rare": "Delta NLL_rare",
}


def coverage_section(base_eval: Path, runs) -> str:
    """Per run and split: of the problems, how many the base solves within k samples that the
    run no longer solves, and the reverse (expected counts from the unbiased per-problem pass@k,
    ``evaluation.passk.coverage_against``), k the largest both evaluations allow. "" when the
    base's or the runs' outcome matrices are missing."""
    from fgrpo_llm.evaluation.passk import coverage_against, load_eval  # lazy: torch

    try:
        _, base = load_eval(base_eval)
    except (FileNotFoundError, ValueError):
        return ""
    rows = []
    for run in runs:
        try:
            _, mine = load_eval(Path(run.path) / "eval")
        except (FileNotFoundError, ValueError):
            continue
        for split in sorted(set(base) & set(mine)):
            if base[split].shape[0] != mine[split].shape[0]:
                continue
            k = min(base[split].shape[1], mine[split].shape[1])
            c = coverage_against(base[split], mine[split], k)
            rows.append(
                [run.label, split, k, c["problems"], c["lost"], c["lost_by_sampling"], c["gained"]]
            )
    if not rows:
        return ""
    return (
        "Expected number of problems the base solves within k samples that the run no longer "
        "solves (lost), and the reverse (gained), from each problem's unbiased pass@k. Sampling "
        "alone loses some: a second evaluation of the base itself, each problem at its measured "
        "pass rate, would be expected to lose the count in 'lost by sampling alone', so only a "
        "lost count well above it says that the run lost coverage.\n\n"
        + markdown_table(
            ["run", "split", "k", "problems", "lost", "lost by sampling alone", "gained"], rows
        )
    )


def seed_spread_note(spread: dict | None) -> str:
    """The sentence set beside each single-run comparison: what one run cannot separate. A study
    over several bases (``between_base_sd`` present) gives the spread of one run on a base drawn
    anew, base-to-base and seed-to-seed together; an older one, over RL seeds of one base, gives
    the seed-to-seed spread only, and says so."""
    if not spread:
        return (
            "_One run: a difference smaller than the run-to-run spread cannot be told apart "
            "from it. The spread has not been measured for this configuration: run `fgrpo-llm "
            "study` (README)._"
        )

    def parts(key):
        return (
            ", ".join(
                f"{SPREAD_NAMES.get(k, k)} {v:.3f}" for k, v in spread[key].items() if v is not None
            )
            or "not measured"
        )

    if "between_base_sd" not in spread:
        return (
            "_One seed cannot separate differences smaller than the seed-to-seed spread. Over "
            f"{spread.get('num_seeds')} RL seeds of one base, `{spread.get('command')}` measured a "
            f"standard deviation across seeds of {parts('sd')} (mean over its runs). Another base "
            "(another pretraining seed, or this one pretrained on a CPU of another kernel family) "
            "moves the numbers further; that spread was not measured._"
        )
    return (
        "_One run cannot separate differences smaller than the run-to-run spread, and on another "
        "machine the base itself differs (the CPU's kernels round differently). Over "
        f"{spread.get('num_bases')} bases (both kernel families) x {spread.get('num_seeds')} RL "
        f"seeds, `{spread.get('command')}` measured the standard deviation of one run on a base "
        f"drawn anew as {parts('sd')}; between bases {parts('between_base_sd')}; between RL seeds "
        f"of one base {parts('within_base_sd')} (means over its runs). A number below is one "
        "draw; paired differences (the same base and seed) vary less._"
    )


def _configuration_text(cfg) -> str:
    """The demo's configuration, folded (execution fields left out: they do not change results)."""
    cfg_rows = [
        [k, f"`{v}`"] for k, v in dataclasses.asdict(cfg).items() if k not in EXECUTION_FIELDS
    ]
    return (
        "<details><summary>demo_config.json</summary>\n\n"
        + markdown_table(["field", "value"], cfg_rows)
        + "\n\n</details>"
    )


def _theory_text(out: Path) -> str:
    """Links to the theory figures under OUT/theory and OUT/regimes; "" when there are none."""
    figs = (
        sorted(p for d in ("theory", "regimes") for p in (out / d).glob("*.png"))
        if (out / "theory").exists()
        else []
    )
    if not figs:
        return ""
    return (
        "Closed-form tail-miss probabilities (Lemma 3.1) and the reduced categorical "
        "regime sweep (Fig. 2):\n\n"
        + "\n\n".join(f"![{p.stem}]({p.relative_to(out)})" for p in figs)
    )


def _base_text(base: dict) -> str:
    """The demo report's base-model section: its pretraining summary, without timings."""
    base_lines = [
        f"{k}: {fmt(v) if isinstance(v, float) else v}"
        for k, v in base.items()
        if not k.startswith(("time/", "perf/"))
    ]
    if base.get("stopped_by", "step budget") != "step budget":
        base_lines.append(
            f"**stopped by a {base['stopped_by']}**: this base depends on the machine's speed"
        )
    return (
        "Pretrained on skewed Countdown demonstrations "
        "(`fgrpo_llm.experiments.countdown.base`):\n\n"
        + "\n".join(f"- {line}" for line in base_lines)
    )


def _rare_text(rare) -> str:
    """The rare-correct set (App. M.2): its size and threshold, E(x)'s sources, mean (mu, tau)
    over the prompts with E(x), a few examples and, where recorded, the exact (mu, tau)."""
    ids, mu, tau = rare.mu_tau()
    sources = {}
    for p in rare.prompts.values():
        sources[p["rare_source"]] = sources.get(p["rare_source"], 0) + 1
    rare_text = (
        f"{rare.meta.get('num_prompts')} training prompts x {rare.meta.get('num_rollouts')} base "
        f"rollouts; {rare.meta.get('num_correct_pool')} correct; the top "
        f"{100 * rare.meta.get('top_fraction', 0):g}% by length-normalised NLL gives **{len(rare)} "
        f"rare-correct trajectories** (NLL >= {fmt(rare.meta.get('nll_threshold'))}, mean "
        f"{fmt(rare.mean_base_nll)} vs {fmt(rare.meta.get('pool_mean_nll'))} over all correct "
        f"rollouts).\n\nRare event E(x) per prompt: {sources.get('rare_set', 0)} prompts from the "
        f"rare set, {sources.get('designated', 0)} with a designated rare mode, "
        f"{sources.get('none', 0)} without one. "
        + (
            f"Over the {len(ids)} prompts with E(x): mean mu = {fmt(float(np.mean(mu)))}, "
            f"mean tau = {fmt(float(np.mean(tau)), 4)}, median rho = tau/mu = "
            f"{fmt(float(np.median(tau / np.maximum(mu, 1e-12))))}."
            if ids
            else ""
        )
    )
    if rare.texts:
        rare_text += "\n\nExamples (prompt id: completion, base NLL): " + ", ".join(
            f"`{pid}: {t}` ({fmt(float(v))})"
            for pid, t, v in list(zip(rare.prompt_ids, rare.texts, rare.base_nll, strict=True))[:6]
        )
    if rare.meta.get("exact"):
        rare_text += (
            "\n\nThe means above and the tail-miss predictions below use the exact base (mu, tau) "
            "of each prompt (sequence probabilities summed over its correct answers and over "
            "E(x)). " + exact_mu_tau_text(rare.meta["exact"])
        )
    return rare_text


def _training_text(runs, figure: str) -> str:
    """The training curves' figure and one row per run (N, gamma, lr scale, steps, the final
    Delta NLL_rare)."""
    rows = [
        [r.label, r.N, r.gamma, getattr(r, "lr_scale", 1.0), r.steps, r.delta_nll_rare]
        for r in runs
    ]
    return f"![training curves]({figure})\n\n" + markdown_table(
        ["run", "N", "gamma", "lr x", "steps", "final Delta NLL_rare"], rows
    )


def _tail_miss_text(result: dict) -> str:
    """The cross-check's tail-miss section: what is counted, its figure, the tables."""
    tm = (
        "Per training group: active (0 < X < N)? contained a rare form of E(x)? Observed "
        "tail-miss frequency against Lemma 3.1 at the base estimates (mu, tau) of its prompt. "
        "Only groups of prompts in the rare-set pool count. The policy drifts away from the base "
        f"during training, so the early window (first {result.get('early_steps')} steps) is the "
        "fair test; the whole run shows the drift.\n\n"
    )
    vfig = result.get("figures", {})
    if "tail_miss" in vfig:
        tm += f"![tail-miss check](validate/{vfig['tail_miss']})\n\n"
    return tm + tail_miss_section(result)


def _sweep_text(result: dict, note: str) -> str:
    """The cross-check's sweep beside the paper's Table 2, with its figure and the spread note."""
    vfig = result.get("figures", {})
    sw = ""
    if "delta_nll" in vfig:
        sw = f"![Delta NLL_rare vs N](validate/{vfig['delta_nll']})\n\n"
    return sw + sweep_section(result) + "\n\n" + note


def _control_text(cfg, result: dict, note: str) -> str:
    """The learning-rate-matched control's section; "" when the demo did not plan one."""
    control = lr_control_section(result)
    if control:
        return control + "\n\n" + note
    if getattr(cfg, "lr_matched_control", False) and getattr(cfg, "gamma", 0) > 0:
        return (
            "_The control run or one of the runs it is compared with is missing (not finished?)._"
        )
    return ""


def _intro_text(note: str) -> str:
    return (
        "Everything below was produced by `fgrpo-llm demo` in this directory, one RL seed. "
        "Numbers from the paper are quoted only where labelled as the paper's (Qwen2.5-7B on "
        "math; a very different scale), never as ours. Wall times are in `timings.md`: they "
        "depend on the machine, the results here do not.\n\n" + note
    )


def write_demo_report(
    out,
    cfg,
    summary: dict,
    evals: dict,
    runs,
    rare,
    result: dict,
    *,
    seed_spread: dict | None = None,
) -> Path:
    """OUT/report.md: configuration, theory figures, base, rare set, training curves, pass@k, the
    tail-miss check, the sweep next to the paper and the learning-rate-matched control, each
    comparison with the note of :func:`seed_spread_note`, and the runs' environment. The
    training and pass@k figures are saved here (``plots``). No wall times: the same command on
    the same machine gives the same report."""
    out = Path(out)
    note = seed_spread_note(seed_spread)
    sections = [("Run", _intro_text(note)), ("Configuration", _configuration_text(cfg))]
    theory = _theory_text(out)
    if theory:
        sections.append(("Theory", theory))
    sections.append(("Base model", _base_text(summary.get("base", {}))))
    sections.append(("Rare-correct set (App. M.2)", _rare_text(rare)))
    if runs:
        sections.append(("Training", _training_text(runs, save_training_curves(out, runs))))
    if evals:
        figure = save_pass_at_k(out, evals)
        passk = f"![pass@k]({figure})\n\n" + pass_at_k_section(evals) + "\n\n" + note
        sections.append(("pass@k", passk))
        coverage = coverage_section(out / "base_eval", runs)
        if coverage:
            sections.append(("Coverage against the base (Yue et al.)", coverage))
    sections.append(("Cross-check: tail miss (Lemma 3.1)", _tail_miss_text(result)))
    sections.append(
        ("Cross-check: group-size sweep vs the paper (Table 2)", _sweep_text(result, note))
    )
    control = _control_text(cfg, result, note)
    if control:
        sections.append(("Learning-rate-matched control", control))
    sections.append(("Environment", environment_section({r.label: r.environment for r in runs})))
    return write_report(
        out / "report.md", "F-GRPO demo: theory, rare-correct set, GRPO vs F-GRPO", sections
    )
