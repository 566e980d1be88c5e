"""Plot helpers for the closed forms (paper Figs. 1(a), 3, 4 and 5).

Every helper draws on the ``ax`` it is given and returns the artists it made; none calls
``plt.show()``. Scripts and tests use the Agg backend.

    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> lines = plot_tail_miss_curves(ax, mu=0.3, rhos=[0.05, 0.1, 0.2], N=range(1, 129))
"""

from __future__ import annotations

import numpy as np

from fgrpo_theory.focal import focal_advantage_magnitudes
from fgrpo_theory.tail_miss import p_active, p_tail_miss, peak_group_size

#: Paper figure set-ups (Figs. 1(a), 3, 4 and 5).
FIG1A = {"mu": 0.3, "rhos": (0.05, 0.1, 0.2), "n_max": 128}
FIG3 = {"mus": (0.8, 0.5, 0.2), "rhos": (0.01, 0.05, 0.1, 0.2), "n_max": 512}
FIG4 = {"gammas": (0.0, 0.5, 1.0)}
FIG5 = {"mu": 0.64, "tau": 6.3e-5, "log2_n_max": 17}


def plot_tail_miss_curves(
    ax, *, mu: float, rhos, N, mark_peak: bool = True, show_active: bool = False
):
    """P(B_{E,N}) against N for one mu and several rho = tau/mu (Figs. 1(a), 3); stars at N*.

    Returns the list of artists (lines and peak markers).
    """
    N = np.asarray(list(N), dtype=float)
    artists = []
    if show_active:
        artists += ax.plot(N, p_active(mu, N), color="0.6", ls="--", lw=1, label=r"$P(A_N)$")
    for rho in rhos:
        tau = rho * mu
        (line,) = ax.plot(N, p_tail_miss(mu, tau, N), lw=1.6, label=rf"$\rho={rho:g}$")
        artists.append(line)
        if mark_peak:
            n_star, p_star = peak_group_size(mu, tau, n_max=int(N.max()))
            artists += ax.plot(
                [n_star],
                [p_star],
                marker="*",
                ms=11,
                color=line.get_color(),
                mec="k",
                mew=0.5,
                ls="none",
            )
    ax.set_xlabel("group size $N$")
    ax.set_ylabel(r"$P(\mathcal{B}_{E,N})$")
    ax.set_title(rf"tail-miss probability, $\mu={mu:g}$")
    ax.set_ylim(0, 1.02)
    ax.legend(frameon=False, fontsize=8)
    return artists


def plot_focal_magnitudes(ax, *, which: str, gammas=FIG4["gammas"], mu=None):
    """g * |A| against mu for correct (``which="pos"``) or incorrect (``"neg"``) rollouts
    (Fig. 4)."""
    if which not in ("pos", "neg"):
        raise ValueError(f"which must be 'pos' or 'neg', got which={which!r}")
    mu = np.linspace(0.02, 0.98, 193) if mu is None else np.asarray(mu, dtype=float)
    artists = []
    for gamma in gammas:
        pos, neg = focal_advantage_magnitudes(mu, gamma)
        artists += ax.plot(mu, pos if which == "pos" else neg, lw=1.6, label=rf"$\gamma={gamma:g}$")
    ax.set_xlabel(r"success probability $\mu$")
    ax.set_ylabel(r"$g\,|A^{+}|$" if which == "pos" else r"$g\,|A^{-}|$")
    ax.set_title("correct rollouts" if which == "pos" else "incorrect rollouts")
    ax.legend(frameon=False, fontsize=8)
    return artists


def plot_large_group(
    ax, *, mu: float = FIG5["mu"], tau: float = FIG5["tau"], log2_n_max: int = FIG5["log2_n_max"]
):
    """P(B) and P(A) for N = 2^0 .. 2^log2_n_max at a tiny tau (Fig. 5), log2 x-axis."""
    N = 2.0 ** np.arange(log2_n_max + 1)
    artists = ax.plot(
        N,
        p_tail_miss(mu, tau, N),
        marker="o",
        ms=3,
        lw=1.6,
        label=rf"$P(\mathcal{{B}})$, $\tau={tau:g}$",
    )
    artists += ax.plot(N, p_active(mu, N), color="0.6", ls="--", lw=1, label=r"$P(A_N)$")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("group size $N$")
    ax.set_ylabel("probability")
    ax.set_title(rf"large groups, $\mu={mu:g}$")
    ax.set_ylim(0, 1.02)
    ax.legend(frameon=False, fontsize=8)
    return artists


__all__ = [
    "FIG1A",
    "FIG3",
    "FIG4",
    "FIG5",
    "plot_tail_miss_curves",
    "plot_focal_magnitudes",
    "plot_large_group",
]
