"""The Countdown experiments' figures: the demo's training curves and pass@k, the cross-check's
tail miss (Lemma 3.1) and Delta NLL_rare against N (Table 2), and the study's per-base panels of
the core runs (and of the extended plan), the group-size sweep (claim 1, Table 2) and the lr
frontier (claim 5, Table 3's control). The reports (``report``, ``study_report``) only link the
files saved here; this is the one module of the package that imports matplotlib (Agg).

In the study's figures every point is a mean over bases with its 95% t interval over bases
(``study_numbers.interval``), a probability's interval cut to [0, 1]; the number of bases behind
each point is written beside it; every marker is in a legend, placed below the panels so that it
covers no data; axes say what they show and in which unit. Each panel function takes ``ax`` and
returns its artists; :func:`study_figures` returns the figures and :func:`save_study_figures`
saves them.

    names = save_study_figures(out, numbers, cfg, bases)   # OUT/study_*.png
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from fgrpo_common.files import save_figure
from fgrpo_llm.evaluation.sweep import legend_if_labelled, plot_delta_nll
from fgrpo_llm.evaluation.tail_miss import plot_predicted_vs_observed, plot_tail_miss_vs_N
from fgrpo_llm.experiments.countdown.study_claims import frontier_curves
from fgrpo_llm.experiments.countdown.study_numbers import (
    METRIC_RANGE,
    METRICS,
    StudyNumbers,
    interval,
    unit_values,
)

__all__ = [
    "errorbar",
    "per_base_panel",
    "sweep_panel",
    "frontier_panel",
    "study_figures",
    "save_study_figures",
    "plot_training_curves",
    "plot_pass_at_k_models",
    "save_training_curves",
    "save_pass_at_k",
    "save_cross_check_figures",
]

#: What each metric's axis says: the quantity and its unit.
UNITS = {m: "fraction of problems" for m in METRICS}
UNITS["delta_nll_rare"] = "nats per token"
UNITS["tail_miss_obs"] = UNITS["tail_miss_pred"] = "fraction of groups"

_FAMILY_COLORS = {"default": "tab:blue", "other": "tab:orange"}


def axis_label(metric: str) -> str:
    return f"{METRICS[metric]} ({UNITS[metric]})"


def errorbar(ax, x: float, iv, metric: str, *, label=None, **kw):
    """One mean with its interval at ``x``, the interval cut to the metric's range (a
    probability's to [0, 1]) and the number of bases written beside it; the artists."""
    lo_b, hi_b = METRIC_RANGE.get(metric, (-math.inf, math.inf))
    lo = min(max(iv.lo, lo_b), hi_b) if math.isfinite(iv.lo) else iv.mean
    hi = max(min(iv.hi, hi_b), lo_b) if math.isfinite(iv.hi) else iv.mean
    bar = ax.errorbar(
        [x], [iv.mean], yerr=[[iv.mean - lo], [hi - iv.mean]], capsize=3, label=label, **kw
    )
    text = ax.annotate(
        f"{iv.n}", (x, iv.mean), xytext=(5, -2), textcoords="offset points", fontsize=6
    )
    return [bar, text]


def per_base_panel(ax, numbers: dict, runs: list, metric: str, bases: dict) -> list:
    """One line per base (its mean over its RL seeds, coloured by kernel family) across
    ``runs`` (``[(name, label)]``), and beside each run the mean with its 95% interval over
    bases; the artists."""
    artists, labelled = [], set()
    for b, info in bases.items():
        ys = []
        for name, _ in runs:
            xs = [v for (bb, _s), v in unit_values(numbers, name, metric).items() if bb == b]
            ys.append(float(np.mean(xs)) if xs else np.nan)
        if all(np.isnan(ys)):
            continue
        fam = info["family"]
        label = f"one base ({fam} kernels)" if fam not in labelled else None
        labelled.add(fam)
        artists += ax.plot(
            range(len(runs)), ys, "o-", color=_FAMILY_COLORS[fam], alpha=0.6, lw=1, label=label
        )
    first = True
    for i, (name, _) in enumerate(runs):
        iv = interval(numbers, name, metric)
        if iv is not None:
            label = "mean, 95% CI over bases (n: bases)" if first else None
            artists += errorbar(ax, i + 0.15, iv, metric, fmt="ks", ms=6, label=label)
            first = False
    ax.set_xticks(range(len(runs)), [label for _, label in runs], fontsize=7)
    ax.set_xlabel("run")
    ax.set_ylabel(axis_label(metric), fontsize=8)
    ax.grid(alpha=0.3)
    return artists


def sweep_panel(ax, numbers: dict, cfg, metric: str) -> list:
    """GRPO's mean over bases per group size N with F-GRPO at N = ``group_size`` beside it."""
    N = cfg.group_size
    artists, first = [], True
    for n in sorted({N, *cfg.sweep_group_sizes}):
        iv = interval(numbers, f"grpo_n{n}", metric)
        if iv is not None:
            label = "GRPO: mean, 95% CI over bases (n: bases)" if first else None
            artists += errorbar(ax, n, iv, metric, fmt="o", color="tab:blue", label=label)
            first = False
    iv = interval(numbers, f"fgrpo_n{N}", metric)
    if iv is not None:
        artists += errorbar(ax, N * 1.08, iv, metric, fmt="*", ms=11, color="tab:red",
                            label=f"F-GRPO (gamma {cfg.gamma:g}) at N = {N}")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_xlabel("group size N (log scale)")
    ax.set_ylabel(axis_label(metric), fontsize=8)
    ax.grid(alpha=0.3)
    return artists


def frontier_panel(ax, numbers: dict, cfg, metric: str) -> list:
    """GRPO's mean over bases per lr scale (the lr frontier) and F-GRPO's mean as a line with
    its interval as a band."""
    curves = frontier_curves(StudyNumbers(numbers, cfg))
    artists, first = [], True
    for x, name in curves.items():
        iv = interval(numbers, name, metric)
        if iv is not None:
            label = "GRPO: mean, 95% CI over bases (n: bases)" if first else None
            artists += errorbar(ax, x, iv, metric, fmt="o", color="tab:blue", label=label)
            first = False
    iv = interval(numbers, f"fgrpo_n{cfg.group_size}", metric)
    if iv is not None:
        label = f"F-GRPO (gamma {cfg.gamma:g}, lr x 1): mean, 95% CI over {iv.n} bases"
        artists.append(ax.axhline(iv.mean, color="tab:red", lw=1, label=label))
        lo_b, hi_b = METRIC_RANGE.get(metric, (-math.inf, math.inf))
        if math.isfinite(iv.lo) and math.isfinite(iv.hi):
            artists.append(
                ax.axhspan(max(iv.lo, lo_b), min(iv.hi, hi_b), color="tab:red", alpha=0.12, lw=0)
            )
    ax.set_xlabel("GRPO lr scale s (x the plan's lr)")
    ax.set_ylabel(axis_label(metric), fontsize=8)
    ax.grid(alpha=0.3)
    return artists


def _legend_below(fig, axes) -> None:
    """One legend for the figure, below its panels (it covers no data)."""
    seen: dict = {}
    for ax in np.ravel(axes):
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, h)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=min(len(seen), 3),
                   fontsize=7, frameon=False)  # fmt: skip
        fig.tight_layout(rect=(0, 0.06 + 0.04 * math.ceil(len(seen) / 3), 1, 1))
    else:
        fig.tight_layout()


def _pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def study_figures(numbers: dict, cfg, bases: dict) -> dict:
    """``{file name: Figure}`` of the study's figures (matplotlib, Agg)."""
    plt = _pyplot()

    N = cfg.group_size
    figs = {}
    runs = [(f"grpo_n{N}", "GRPO"), (f"fgrpo_n{N}", f"F-GRPO (gamma {cfg.gamma:g})"),
            (f"grpo_n{N}_lrmatched", "GRPO, lr-matched")]  # fmt: skip
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.4))
    for ax, metric in zip(axes, ("delta_nll_rare", "id_pass1", "ood_passk"), strict=True):
        per_base_panel(ax, numbers, runs, metric, bases)
    fig.suptitle("Per base, mean over its RL seeds; black: mean and 95% CI over bases", fontsize=9)
    _legend_below(fig, axes)
    figs["study_bases.png"] = fig

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.4))
    for ax, metric in zip(axes, ("delta_nll_rare", "ood_passk"), strict=True):
        sweep_panel(ax, numbers, cfg, metric)
    fig.suptitle("GRPO's group-size sweep (paper Table 2), mean and 95% CI over bases", fontsize=9)
    _legend_below(fig, axes)
    figs["study_sweep.png"] = fig

    if len(frontier_curves(StudyNumbers(numbers, cfg))) >= 2:
        fig, axes = plt.subplots(1, 3, figsize=(14, 4.4))
        for ax, metric in zip(axes, ("delta_nll_rare", "id_pass1", "ood_passk"), strict=True):
            frontier_panel(ax, numbers, cfg, metric)
        fig.suptitle(
            f"GRPO at N = {N} over lr scales (the lr frontier, claim 5) against F-GRPO",
            fontsize=9,
        )
        _legend_below(fig, axes)
        figs["study_frontier.png"] = fig

    if f"maxrl_n{N}" in numbers:  # the extended plan, on the units it was trained on
        units = set(numbers[f"maxrl_n{N}"])
        ext = {name: {u: v for u, v in r.items() if u in units} for name, r in numbers.items()}
        runs = [(f"grpo_n{N}", "GRPO")]
        runs += [
            (f"fgrpo_n{N}" if g == cfg.gamma else f"fgrpo_n{N}_g{g:g}", f"F-GRPO {g:g}")
            for g in sorted({float(cfg.gamma), *(float(g) for g in cfg.extended_gammas)})
            if g > 0
        ]
        runs += [(f"maxrl_n{N}", "MaxRL"), (f"grpo_n{N}_entropy", "+entropy"),
                 (f"grpo_n{N}_kl", "+KL")]  # fmt: skip
        runs = [(name, label) for name, label in runs if ext.get(name)]
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
        for ax, metric in zip(axes, ("delta_nll_rare", "id_pass1", "ood_passk"), strict=True):
            per_base_panel(ax, ext, runs, metric, bases)
        fig.suptitle(
            f"The extended plan at N = {N} on the {len({u[0] for u in units})} bases that trained "
            "it (RL seed " + ", ".join(sorted({str(u[1]) for u in units})) + "): per base; "
            "black: mean and 95% CI over bases",
            fontsize=9,
        )
        _legend_below(fig, axes)
        figs["study_extended.png"] = fig
    return figs


def save_study_figures(out: Path, numbers: dict, cfg, bases: dict) -> list[str]:
    """Save the study's figures (:func:`study_figures`) under OUT; their file names."""
    plt = _pyplot()
    names = []
    for name, fig in study_figures(numbers, cfg, bases).items():
        save_figure(fig, out / name, dpi=110)
        plt.close(fig)
        names.append(name)
    return names


# ----------------------------------------------------------------------------- the demo's figures
def plot_training_curves(axes, runs) -> None:
    """Delta NLL_rare and the training pass rate against the step, one line per run (two axes)."""
    for run in runs:
        path = Path(run.path) / "metrics.jsonl"
        if not path.is_file():
            continue
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        steps = [r["step"] for r in rows if "step" in r]
        rate = [r.get("reward/pass_rate") for r in rows if "step" in r]
        delta = [(0, 0.0)] + [
            (r["step"], r["rare/delta_nll"]) for r in rows if r.get("rare/delta_nll") is not None
        ]
        axes[0].plot([s for s, _ in delta], [d for _, d in delta], "o-", ms=3, label=run.label)
        axes[1].plot(steps, rate, lw=1, label=run.label)
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("Delta NLL_rare")
    axes[0].axhline(0, color="k", lw=0.5)
    axes[1].set_xlabel("step")
    axes[1].set_ylabel("training pass rate")
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)


def plot_pass_at_k_models(axes, evals: dict[str, dict]) -> None:
    """pass@k against k, one axis per split, one line per model."""
    first = next(iter(evals.values()))
    for ax, split in zip(axes, first["splits"], strict=True):
        for name, res in evals.items():
            if split in res["splits"]:
                ax.plot(
                    res["ks"],
                    [res["splits"][split][f"pass@{k}"] for k in res["ks"]],
                    "o-",
                    ms=3,
                    label=name,
                )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k")
        ax.set_ylabel("pass@k")
        ax.set_title(f"{split} ({first['splits'][split]['role'].replace('_', '-')})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)


def save_training_curves(out: Path, runs) -> str:
    """OUT/training_curves.png (:func:`plot_training_curves`); its file name."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    plot_training_curves(axes, runs)
    fig.tight_layout()
    save_figure(fig, out / "training_curves.png", dpi=120)
    plt.close(fig)
    return "training_curves.png"


def save_pass_at_k(out: Path, evals: dict[str, dict]) -> str:
    """OUT/passk.png (:func:`plot_pass_at_k_models`, one panel per split); its file name."""
    plt = _pyplot()
    first = next(iter(evals.values()))
    fig, axes = plt.subplots(
        1, len(first["splits"]), figsize=(5 * len(first["splits"]), 3.8), squeeze=False
    )
    plot_pass_at_k_models(axes[0], evals)
    fig.tight_layout()
    save_figure(fig, out / "passk.png", dpi=120)
    plt.close(fig)
    return "passk.png"


# ----------------------------------------------------------------------------- the cross-check's
def save_cross_check_figures(out: Path, early: str, tail: dict, calib, curve, rows, controls):
    """OUT/tail_miss_check.png (observed tail misses per N against Lemma 3.1's curve, predicted
    against observed) and, when a run has a finite Delta NLL_rare, OUT/delta_nll_rare.png
    (against N, Table 2); ``{"tail_miss": name, "delta_nll": name}`` of those written."""
    plt = _pyplot()
    figures = {}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    plot_tail_miss_vs_N(axes[0], curve, tail[early])
    axes[0].set_title(f"tail miss per N ({early})")
    legend_if_labelled(axes[0])
    points = [
        dict(r, label=f"{name}, N={r['N']}") for name, rows_ in tail[early].items() for r in rows_
    ]
    plot_predicted_vs_observed(axes[1], points)
    if calib:
        axes[1].plot(
            [c["predicted"] for c in calib],
            [c["observed"] for c in calib],
            "s--",
            color="grey",
            label="per-group bins (pooled)",
        )
    legend_if_labelled(axes[1])
    axes[1].set_title("predicted vs observed (95% intervals)")
    fig.tight_layout()
    save_figure(fig, out / "tail_miss_check.png", dpi=120)
    plt.close(fig)
    figures["tail_miss"] = "tail_miss_check.png"
    if any(
        r["delta_nll_rare"] is not None and np.isfinite(r["delta_nll_rare"]) and r["N"]
        for r in rows + controls
    ):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        plot_delta_nll(ax, rows, controls)
        fig.tight_layout()
        save_figure(fig, out / "delta_nll_rare.png", dpi=120)
        plt.close(fig)
        figures["delta_nll"] = "delta_nll_rare.png"
    return figures
