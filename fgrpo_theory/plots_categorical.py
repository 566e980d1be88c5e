"""Plots of the categorical simulation (paper Fig. 2, Section 5.1) and of Proposition 3.2.

Each ``plot_*`` helper draws on a given matplotlib ``ax`` and returns its artists; nothing here
calls ``plt.show()``. ``plot_fig2`` assembles the four Fig. 2 panels into a new figure.

    >>> import matplotlib; matplotlib.use("Agg")
    >>> from fgrpo_theory.sim import SimConfig, run_sweep
    >>> from fgrpo_theory.plots_categorical import plot_fig2
    >>> fig = plot_fig2(run_sweep(SimConfig(actions=300, correct=30, group_sizes=(2, 64),
    ...                                     steps=5), progress=False))
"""

from __future__ import annotations

import numpy as np

_STYLES = {0: "-", 1: "--"}


def _style(j: int) -> str:
    return _STYLES.get(j, ":")


def _series(res, j: int) -> str:
    """The j-th series' name: "gamma=<g>", or the weighting's label ("MaxRL") for one without
    an exponent."""
    w = res.config.weightings()[j]
    return res.weighting_label(j) if w.rule.takes_gamma else w.label


def plot_metric_vs_step(ax, res, key: str, *, gamma_index: int = 0, label: str | None = None):
    """Seed-mean ``key`` (q_pos, m_ret, entropy, tau) against step, one line per N (coloured
    from small N, light, to large N, dark)."""
    import matplotlib.pyplot as plt

    cfg = res.config
    cmap = plt.get_cmap("viridis")
    lines = []
    for i, N in enumerate(cfg.group_sizes):
        y = res.records[key][i, gamma_index].mean(axis=0)
        colour = cmap(i / max(1, len(cfg.group_sizes) - 1))
        lines += ax.plot(
            np.arange(y.size),
            y,
            color=colour,
            lw=1.0,
            ls=_style(gamma_index),
            label=f"N={N}" if len(cfg.group_sizes) <= 8 else None,
        )
    ax.set_xlabel("step")
    ax.set_ylabel(label or key)
    ax.set_title(f"{label or key}, {_series(res, gamma_index)}")
    return lines


def plot_final_vs_group_size(ax, res, key: str, *, label: str | None = None):
    """Final ``key`` against N (log2 axis), seed mean with min-max band, one line per gamma."""
    cfg = res.config
    N = np.asarray(cfg.group_sizes)
    artists = []
    for j in range(len(cfg.gammas)):
        final = res.records[key][:, j, :, -1]  # (nN, nS)
        artists += ax.plot(
            N, final.mean(axis=1), marker="o", ms=3, ls=_style(j), label=_series(res, j)
        )
        artists.append(ax.fill_between(N, final.min(axis=1), final.max(axis=1), alpha=0.2))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("group size N")
    ax.set_ylabel(f"final {label or key}")
    seeds = res.records[key].shape[2]
    ax.set_title(f"mean over {seeds} seed(s); band: min to max", fontsize=9)
    ax.legend(fontsize=8)
    return artists


def plot_fig2(res, *, figsize=(11, 7)):
    """Fig. 2: Q_pos and M_ret against step (gamma = first value) and final Q_pos / M_ret
    against N for every gamma. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    fig, axes = plt.subplots(2, 2, figsize=figsize, constrained_layout=True)
    plot_metric_vs_step(axes[0, 0], res, "q_pos", label="Q_pos")
    plot_metric_vs_step(axes[0, 1], res, "m_ret", label="M_ret")
    plot_final_vs_group_size(axes[1, 0], res, "q_pos", label="Q_pos")
    plot_final_vs_group_size(axes[1, 1], res, "m_ret", label="M_ret")
    sizes = res.config.group_sizes
    if len(sizes) > 1:
        sm = plt.cm.ScalarMappable(cmap="viridis", norm=LogNorm(min(sizes), max(sizes)))
        fig.colorbar(sm, ax=axes[0, :], label="group size N", shrink=0.8)
    cfg = res.config
    fig.suptitle(
        f"categorical policy: K={cfg.actions}, |P|={cfg.correct}, "
        f"{cfg.optimizer} lr={cfg.lr:g}, "
        f"{cfg.surrogate} surrogate, {cfg.advantage} advantage"
        f"{_weighting_note(cfg)}, {cfg.steps} steps, "
        f"{len(cfg.seeds)} seed(s)",
        fontsize=9,
    )
    return fig


def _weighting_note(cfg) -> str:
    """ ", MaxRL weighting" for a weighting without an exponent (the gammas name the focal ones)."""
    w = cfg.weightings()[0]
    return "" if w.rule.takes_gamma else f", {w.label} weighting"


def plot_one_step_masses(ax, eta, dq_pos, dq_u_pos, *, predicted=None):
    """Proposition 3.2 picture: change of total correct mass and of unsampled-correct mass after
    one step, against the step size eta; ``predicted`` = (dq_pos, dq_u_pos) first-order lines."""
    artists = ax.plot(eta, dq_pos, "o", label="Delta Q_pos (softmax step)")
    artists += ax.plot(eta, dq_u_pos, "s", label="Delta Q_u,pos (softmax step)")
    if predicted is not None:
        artists += ax.plot(eta, predicted[0], "-", label="Eq. 17")
        artists += ax.plot(eta, predicted[1], "--", label="Prop. 3.2")
    ax.axhline(0.0, color="grey", lw=0.5)
    ax.set_xlabel("eta")
    ax.set_ylabel("one-step change")
    ax.legend(fontsize=8)
    return artists
