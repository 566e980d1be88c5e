"""Figures of the Maze study (paper Section 5.2, Table 4): pass@k over RL steps, final pass@k vs N.

Lines are means over the RL seeds; bands and error bars are 95% Student-t intervals over seeds
(``fgrpo_llm.evaluation.stats.t_interval``, cut to [0, 1]; none with one seed). The lr-matched
controls are dashed; one legend per figure, below its panels (it covers no data). Written by
``maze.study.summarize`` to OUT/maze_curves.png and OUT/maze_final.png.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fgrpo_common.files import save_figure
from fgrpo_llm.evaluation.stats import t_interval
from fgrpo_llm.experiments.maze.config import MazeConfig, method_name, methods


def _band(values: list[float]) -> tuple[float, float, float]:
    iv = t_interval(values, bounds=(0.0, 1.0))  # pass@k: a fraction
    return iv.mean, iv.lo, iv.hi


def _style(i: int, matched) -> dict:
    return {"color": f"C{i}", "ls": "--" if matched is not None else "-"}


def plot_curves(axes, cfg: MazeConfig, results: dict, k: int) -> None:
    """pass@k against RL step, one panel per N (``axes`` a sequence), one line per method."""
    key = f"eval/test/pass@{k}"
    for ax, N in zip(axes, cfg.group_sizes, strict=False):
        for i, (gamma, matched) in enumerate(methods(cfg)):
            method = method_name(gamma, matched)
            curves = [
                r["curve"]
                for r in results["runs"].values()
                if r["method"] == method and r["N"] == N
            ]
            if not curves:
                continue
            steps = [c["step"] for c in curves[0]]
            stats = [_band([cv[j][key] for cv in curves if len(cv) > j]) for j in range(len(steps))]
            mean, lo, hi = (np.array(x) for x in zip(*stats, strict=True))
            ax.plot(steps, mean, marker="o", ms=3, label=method, **_style(i, matched))
            if np.isfinite(lo).all():
                ax.fill_between(steps, lo, hi, color=f"C{i}", alpha=0.12, lw=0)
        ax.set_title(f"N = {N}", fontsize=9)
        ax.set_xlabel("RL step")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"held-out pass@{k} (fraction of mazes)")


def plot_final(ax, cfg: MazeConfig, results: dict, paper: dict | None, k: int) -> None:
    """Final pass@k against N (mean and 95% interval over seeds) and, when k is in Table 4, the
    paper's (dotted crosses, same colour)."""
    key = f"eval/test/pass@{k}"
    M = len(methods(cfg))
    for i, (gamma, matched) in enumerate(methods(cfg)):
        method = method_name(gamma, matched)
        shift = 2 ** (0.04 * (i - (M - 1) / 2))  # side by side at each N (log axis)
        Ns, means, errs = [], [], []
        for N in cfg.group_sizes:
            values = [
                r["final"][key]
                for r in results["runs"].values()
                if r["method"] == method and r["N"] == N
            ]
            if values:
                mean, lo, hi = _band(values)
                Ns.append(N)
                means.append(mean)
                errs.append((mean - lo, hi - mean) if np.isfinite(lo) else (0.0, 0.0))
        if Ns:
            ax.errorbar(
                [N * shift for N in Ns],
                means,
                yerr=np.array(errs).T,
                marker="o",
                capsize=3,
                label=f"ours {method}",
                **_style(i, matched),
            )
        values = (paper or {}).get(f"pass@{k}", {}).get(method) if matched is None else None
        if values:
            ax.plot(
                paper["N"],
                [v / 100 for v in values],
                ls=":",
                marker="x",
                color=f"C{i}",
                label=f"paper {method}",
            )
    sft = [e[key] for e in results["sft"].values()]
    if sft:
        ax.axhline(float(np.mean(sft)), color="grey", ls=":", label="ours, SFT model (step 0)")
    in_paper = bool((paper or {}).get(f"pass@{k}"))
    ax.set_title(
        f"pass@{k}: ours" + (", paper Table 4 (dotted)" if in_paper else " (not in Table 4)"),
        fontsize=8,
    )
    ax.set_xscale("log", base=2)
    ticks = sorted(set(cfg.group_sizes) | (set(paper["N"]) if in_paper else set()))
    ax.set_xticks(ticks, [str(N) for N in ticks])
    ax.set_xlabel("group size N")
    ax.set_ylabel(f"final held-out pass@{k} (fraction of mazes)")
    ax.grid(alpha=0.3)


def _legend_below(fig, axes) -> None:
    """One legend for the figure, below its panels, so that it covers no data."""
    seen: dict = {}
    for ax in np.ravel(axes):
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, h)
    rows = -(-len(seen) // 4) if seen else 0
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=min(len(seen), 4),
                   fontsize=7, frameon=False)  # fmt: skip
    fig.tight_layout(rect=(0, 0.02 + 0.05 * rows, 1, 1))


def curves_figure(cfg: MazeConfig, results: dict, paper: dict | None):
    """pass@1 (top) and pass@k_max (bottom) over RL steps, one panel per N."""
    import matplotlib.pyplot as plt

    nN, S = len(cfg.group_sizes), len(cfg.rl_seeds)
    fig, axes = plt.subplots(2, nN, figsize=(2.8 * nN + 0.6, 5.6), squeeze=False, sharey="row")
    plot_curves(axes[0], cfg, results, 1)
    plot_curves(axes[1], cfg, results, cfg.eval_k_max)
    fig.suptitle(
        f"Maze {cfg.grid_size}x{cfg.grid_size}: held-out pass@1 (top), "
        f"pass@{cfg.eval_k_max} (bottom); mean of {S} seed(s), 95% t band",
        fontsize=9,
    )
    _legend_below(fig, axes)
    return fig


def final_figure(cfg: MazeConfig, results: dict, paper: dict | None):
    """Final pass@1 and pass@k against N, ours beside the paper's Table 4."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2))
    plot_final(axes[0], cfg, results, paper, 1)
    plot_final(axes[1], cfg, results, paper, max(k for k in cfg.ks if k <= 256))
    _legend_below(fig, axes)
    return fig


def write_figures(cfg: MazeConfig, results: dict, paper: dict | None, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for name, make in (("maze_curves.png", curves_figure), ("maze_final.png", final_figure)):
        fig = make(cfg, results, paper)
        paths.append(out / name)
        save_figure(fig, paths[-1], dpi=110)
        plt.close(fig)
    return paths
