"""The Fig. 2 picture (``fgrpo_theory.plots_categorical``): its panels draw what they say."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fgrpo_theory.plots_categorical import plot_fig2  # noqa: E402
from fgrpo_theory.sim import config_from_preset, run_sweep  # noqa: E402


def test_the_final_value_panels_draw_the_seed_mean_and_its_min_max_band():
    """Bottom panels (final Q_pos, M_ret against N): a line per gamma at the mean over seeds,
    a band from the smallest to the largest seed, and a title that says so."""
    res = run_sweep(config_from_preset("tiny", steps=5, seeds=(0, 1, 2)), engine="sparse")
    fig = plot_fig2(res)
    for ax, key in ((fig.axes[2], "q_pos"), (fig.axes[3], "m_ret")):
        assert ax.get_title() == "mean over 3 seed(s); band: min to max"
        final = res.records[key][:, 0, :, -1]  # (nN, nS), first gamma
        assert np.allclose(ax.lines[0].get_ydata(), final.mean(axis=1))
        band = ax.collections[0].get_paths()[0].vertices[:, 1]
        assert np.isclose(band.min(), final.min()) and np.isclose(band.max(), final.max())
    plt.close(fig)
