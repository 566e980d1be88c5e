"""The theory part of ``make demo``: paper Figs. 1(a), 3, 4, 5, the table of peaks and a reduced
Fig. 2 regime sweep of the categorical simulator.

    fgrpo-theory demo --out runs/demo [--fast]

``run_theory_demo`` writes under ``<out>/theory/``: ``fig1a_tail_miss.png``,
``fig3_tail_miss_grid.png``, ``fig4_focal_magnitudes.png``, ``fig5_large_group.png``,
``peaks.csv`` and ``peaks.md`` (the integer peak N*, P(B) there and the stationary point N_c for
each curve of Figs. 1(a) and 3). ``regime_sweep_demo`` writes ``regimes.csv``, ``regimes.png``
and the cached records under the folder it is given (Section 5.1, Fig. 2).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from fgrpo_common.files import save_figure
from fgrpo_theory.plots import (
    FIG1A,
    FIG3,
    FIG5,
    plot_focal_magnitudes,
    plot_large_group,
    plot_tail_miss_curves,
)
from fgrpo_theory.plots_categorical import plot_fig2
from fgrpo_theory.sim import PRESETS, run_cached
from fgrpo_theory.tail_miss import peak_group_size, stationary_group_size


def _figure(*shape, width=4.2, height=3.2):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(*shape, figsize=(width * shape[1], height * shape[0]), squeeze=False)
    return fig, axes[0]


def _save(fig, path: Path, dpi: int) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    save_figure(fig, path, dpi=dpi)
    plt.close(fig)
    return path


def peak_table(curves) -> list[dict]:
    """One row per (figure, mu, rho, n_max): N*, P(B) at N* and the stationary point N_c."""
    rows = []
    for figure, mu, rho, n_max in curves:
        tau = rho * mu
        n_star, p_star = peak_group_size(mu, tau, n_max=n_max)
        rows.append(
            {
                "figure": figure,
                "mu": mu,
                "rho": rho,
                "tau": tau,
                "n_max": n_max,
                "N_star": int(n_star),
                "P_star": float(p_star),
                "N_stationary": float(stationary_group_size(mu, tau)),
            }
        )
    return rows


def _write_tables(rows: list[dict], out: Path) -> list[Path]:
    csv_path, md_path = out / "peaks.csv", out / "peaks.md"
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "| figure | mu | rho | tau | N* | P(B) at N* | N_c (continuous) |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['figure']} | {r['mu']:g} | {r['rho']:g} | {r['tau']:.4g} | {r['N_star']} | "
        f"{r['P_star']:.4f} | {r['N_stationary']:.2f} |"
        for r in rows
    ]
    md_path.write_text("\n".join(lines) + "\n")
    return [csv_path, md_path]


def save_readme_figure(path, *, dpi: int = 90) -> Path:
    """The README figure (docs/figures/tail_miss.png): Fig. 1(a) next to the mu = 0.5 panel of
    Fig. 3.

        python -c "from fgrpo_theory.demo import save_readme_figure; \
            save_readme_figure('docs/figures/tail_miss.png')"
    """
    fig, axes = _figure(1, 2, width=4.0, height=3.0)
    plot_tail_miss_curves(
        axes[0],
        mu=FIG1A["mu"],
        rhos=FIG1A["rhos"],
        N=range(1, FIG1A["n_max"] + 1),
        show_active=True,
    )
    plot_tail_miss_curves(axes[1], mu=0.5, rhos=FIG3["rhos"], N=range(1, FIG3["n_max"] + 1))
    axes[1].set_xscale("log", base=2)
    return _save(fig, Path(path), dpi)


def run_theory_demo(out_dir, *, fast: bool = False) -> dict:
    """Reproduce the closed-form figures and the peak table under ``out_dir/theory/``.

    Args:
        out_dir: the demo's output directory (created if missing).
        fast: smaller grids and lower resolution (for tests).

    Returns:
        {"figures": [paths], "tables": [paths], "peaks": [rows of peaks.csv]}.
    """
    out = Path(out_dir) / "theory"
    out.mkdir(parents=True, exist_ok=True)
    dpi = 60 if fast else 120
    n_max_1a, n_max_3 = (64, 128) if fast else (FIG1A["n_max"], FIG3["n_max"])
    figures = []

    print("theory: Fig. 1(a) tail-miss curves", flush=True)
    fig, (ax,) = _figure(1, 1)
    plot_tail_miss_curves(
        ax, mu=FIG1A["mu"], rhos=FIG1A["rhos"], N=range(1, n_max_1a + 1), show_active=True
    )
    figures.append(_save(fig, out / "fig1a_tail_miss.png", dpi))

    print("theory: Fig. 3 peaks across mu and rho", flush=True)
    fig, axes = _figure(1, len(FIG3["mus"]))
    for ax, mu in zip(axes, FIG3["mus"], strict=True):
        plot_tail_miss_curves(ax, mu=mu, rhos=FIG3["rhos"], N=range(1, n_max_3 + 1))
        ax.set_xscale("log", base=2)
    figures.append(_save(fig, out / "fig3_tail_miss_grid.png", dpi))

    print("theory: Fig. 4 focal-scaled advantage magnitudes", flush=True)
    fig, axes = _figure(1, 2)
    plot_focal_magnitudes(axes[0], which="pos")
    plot_focal_magnitudes(axes[1], which="neg")
    for ax in axes:
        ax.set_ylim(0, 3)  # |A| diverges at mu -> 0 (correct) and mu -> 1 (incorrect)
    figures.append(_save(fig, out / "fig4_focal_magnitudes.png", dpi))

    print("theory: Fig. 5 large groups at tiny tau", flush=True)
    fig, (ax,) = _figure(1, 1)
    plot_large_group(ax, log2_n_max=12 if fast else FIG5["log2_n_max"])
    figures.append(_save(fig, out / "fig5_large_group.png", dpi))

    curves = [("1a", FIG1A["mu"], rho, n_max_1a) for rho in FIG1A["rhos"]]
    curves += [("3", mu, rho, n_max_3) for mu in FIG3["mus"] for rho in FIG3["rhos"]]
    rows = peak_table(curves)
    tables = _write_tables(rows, out)
    print(f"theory: wrote {len(figures)} figures and {len(tables)} tables under {out}", flush=True)
    return {"figures": [str(p) for p in figures], "tables": [str(p) for p in tables], "peaks": rows}


def regime_sweep_demo(out_dir, *, fast: bool = False) -> dict:
    """A reduced Fig. 2 sweep for ``make demo``: the 'small' preset (or 'tiny' when fast),
    writing ``regimes.csv``, ``regimes.png`` and the cached records under ``out_dir``.
    Returns a summary dict (paths and final mean M_ret per (gamma, N))."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = PRESETS["tiny" if fast else "small"]
    out = Path(out_dir)
    res = run_cached(
        cfg, out, workers=1 if fast else min(2, os.cpu_count() or 1), progress=not fast
    )
    csv_path = res.write_csv(out / "regimes.csv")
    fig = plot_fig2(res)
    png = out / "regimes.png"
    save_figure(fig, png, dpi=90)
    plt.close(fig)
    m = res.records["m_ret"][..., -1].mean(axis=2)  # (nN, nG)
    return {
        "csv": str(csv_path),
        "figure": str(png),
        "final_m_ret": {
            f"gamma={g:g}": dict(zip(cfg.group_sizes, m[:, j].round(4).tolist(), strict=True))
            for j, g in enumerate(cfg.gammas)
        },
    }


__all__ = ["run_theory_demo", "peak_table", "regime_sweep_demo", "save_readme_figure"]
