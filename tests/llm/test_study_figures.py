"""The study's figures (``countdown.plots.study_figures``) read from their artists: every
probability interval drawn lies in [0, 1] (also where the t interval over bases reaches past
it), every kind of marker is in the figure's legend, the legend lies below the panels, axes are
labelled with units, and each point says how many bases it rests on. The Maze figures' legends
likewise."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402

from fgrpo_llm.experiments.countdown.config import DemoConfig  # noqa: E402
from fgrpo_llm.experiments.countdown.plots import study_figures  # noqa: E402
from fgrpo_llm.experiments.countdown.study_claims import interval  # noqa: E402

RUNS = {"grpo_n8": (8, 1.0), "fgrpo_n8": (8, 1.0), "grpo_n8_lrmatched": (8, 0.5),
        "grpo_n8_lr0.9": (8, 0.9), "grpo_n8_lr0.75": (8, 0.75), "grpo_n2": (2, 1.0),
        "grpo_n32": (32, 1.0), "maxrl_n8": (8, 1.0), "fgrpo_n8_g0.5": (8, 1.0)}  # fmt: skip


def _numbers() -> dict:
    """Two bases whose pass@k sits near 1 and 0 with a wide spread: a t interval over two bases
    (12.7 x the sd) reaches far past [0, 1]."""
    numbers = {}
    for j, name in enumerate(RUNS):
        numbers[name] = {
            (b, s): {
                "delta_nll_rare": 0.3 + 0.2 * b + 0.01 * j,
                "id_pass1": 0.02 + 0.1 * b,
                "ood_passk": 0.97 - 0.15 * b + 0.001 * s,
                "label": name,
            }
            for b in (0, 1)
            for s in (0, 1)
        }
    return numbers


BASES = {0: {"family": "default"}, 1: {"family": "other"}}


def _interval_ys(ax) -> list[float]:
    """Every y an interval of ``ax`` reaches: error bars' ends and bands' edges."""
    ys = []
    for c in ax.containers:
        if isinstance(c, ErrorbarContainer):
            for coll in c.lines[2]:
                for seg in coll.get_segments():
                    ys += list(np.asarray(seg)[:, 1])
    for patch in ax.patches:  # axhspan bands
        ys += list(patch.get_path().transformed(patch.get_patch_transform()).vertices[:, 1])
    return ys


def test_every_probability_interval_drawn_lies_in_zero_one():
    numbers = _numbers()
    iv = interval(numbers, "grpo_n8", "ood_passk")
    assert iv.hi == 1.0  # the interval is cut...
    from fgrpo_llm.evaluation.stats import widen

    assert widen(iv, 0.95).hi > 1.0  # ...from one that reaches past 1
    figs = study_figures(numbers, DemoConfig(), BASES)
    assert set(figs) == {"study_bases.png", "study_sweep.png", "study_frontier.png",
                         "study_extended.png"}  # fmt: skip
    checked = 0
    for name, fig in figs.items():
        for ax in fig.axes:
            ys = _interval_ys(ax)
            assert ys, (name, ax.get_ylabel())
            if "fraction" in ax.get_ylabel():
                assert min(ys) >= 0.0 and max(ys) <= 1.0, (name, ax.get_ylabel(), min(ys), max(ys))
                checked += 1
            else:
                assert "nats per token" in ax.get_ylabel()
    assert checked == 7  # the pass@k panels: bases 2, sweep 1, frontier 2, extended 2


@pytest.mark.parametrize("name", ["study_bases.png", "study_sweep.png", "study_frontier.png"])
def test_every_marker_is_in_a_legend_below_the_panels_and_axes_say_their_units(name):
    fig = study_figures(_numbers(), DemoConfig(), BASES)[name]
    assert len(fig.legends) == 1
    legend = fig.legends[0]
    labels = {t.get_text() for t in legend.get_texts()}
    for ax in fig.axes:
        assert ax.get_xlabel() and "(" in ax.get_ylabel()  # a quantity and its unit
        assert ax.get_legend() is None  # no legend inside a panel
        drawn = {c.get_label() for c in ax.containers if not c.get_label().startswith("_")}
        drawn |= {a.get_label() for a in ax.lines if not a.get_label().startswith("_")}
        assert drawn <= labels, drawn - labels
        # each point says on how many bases it rests
        assert {t.get_text() for t in ax.texts} == {"2"}
    fig.canvas.draw()
    box = legend.get_window_extent()
    assert all(box.y1 <= ax.get_window_extent().y0 for ax in fig.axes)  # below every panel
    if name == "study_sweep.png":
        assert any(lab.startswith("F-GRPO") for lab in labels)
    if name == "study_bases.png":
        assert {"one base (default kernels)", "one base (other kernels)"} <= labels


def test_the_maze_figures_legends_lie_outside_the_panels(tmp_path):
    from fgrpo_llm.experiments.maze import plots
    from fgrpo_llm.experiments.maze.config import MazeConfig, method_name, methods

    cfg = MazeConfig()
    ks = [1, cfg.eval_k_max, max(k for k in cfg.ks if k <= 256)]
    runs = {}
    for i, (gamma, matched) in enumerate(methods(cfg)):
        for N in cfg.group_sizes:
            for seed in (0, 1):
                point = {f"eval/test/pass@{k}": 0.5 + 0.01 * i + 0.02 * seed for k in ks}
                runs[f"{i}-{N}-{seed}"] = {
                    "method": method_name(gamma, matched),
                    "N": N,
                    "curve": [{"step": 0, **point}, {"step": 10, **point}],
                    "final": point,
                }
    results = {"runs": runs, "sft": {"0": {f"eval/test/pass@{k}": 0.4 for k in ks}}}
    paths = plots.write_figures(cfg, results, None, tmp_path)
    assert all(p.is_file() for p in paths)
    import matplotlib.pyplot as plt

    for fig_fn in (plots.curves_figure, plots.final_figure):
        fig = fig_fn(cfg, results, None)
        assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)
        fig.canvas.draw()
        box = fig.legends[0].get_window_extent()
        assert all(box.y1 <= ax.get_window_extent().y0 for ax in fig.axes)
        assert all("(" in ax.get_ylabel() for ax in fig.axes if ax.get_ylabel())
        plt.close(fig)
