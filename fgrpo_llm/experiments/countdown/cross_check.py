"""The theory-vs-LLM cross-check of finished runs: tail misses against Lemma 3.1, the sweep table.

``fgrpo-llm validate`` and the demo call :func:`cross_check` on run directories of any engine
(``fgrpo_llm.evaluation.runs``): it pools each run's group log into the tail-miss check
(``fgrpo_llm.evaluation.tail_miss``) early in training and over the whole run, builds the
group-size sweep and learning-rate-control rows (``fgrpo_llm.evaluation.sweep``) beside the
paper's Table 2 (``fgrpo_llm.experiments.paper``), and writes the figures and
``validation.json``.

    fgrpo-llm validate --rare-set runs/demo/rare_set.json --run runs/demo/grpo_n8 \\
        --run runs/demo/fgrpo_n8 --out runs/demo/validate
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fgrpo_common.files import atomic_write_text, strict_json
from fgrpo_llm.evaluation.runs import RunInfo
from fgrpo_llm.evaluation.sweep import (
    control_rows,
    lr_control_comparisons,
    ordering_sentences,
    sweep_rows,
)
from fgrpo_llm.evaluation.tail_miss import (
    calibration_bins,
    predicted_curve,
    summarise_tail_miss,
    tail_miss_records,
)
from fgrpo_llm.experiments.countdown.plots import save_cross_check_figures

__all__ = ["cross_check"]


def _check_arguments(runs: list[RunInfo], early_steps) -> None:
    """A ValueError for an ``early_steps`` that is not an integer >= 1, or two runs of one label
    (every table is keyed by label: they would merge)."""
    if isinstance(early_steps, bool) or not isinstance(early_steps, int) or early_steps < 1:
        raise ValueError(f"early_steps must be an integer >= 1, got early_steps={early_steps!r}")
    seen = {}
    for run in runs:
        if run.label in seen:
            raise ValueError(
                f"two runs have the label {run.label!r} ({seen[run.label]} and {run.path}); "
                "give each its own (--label)"
            )
        seen[run.label] = run.path


def _tail_miss_by_window(runs: list[RunInfo], rare_set, early_steps: int) -> tuple[dict, dict]:
    """``(tail, pooled)`` per window of steps, the early one first (the first ``early_steps``,
    then all; one window when the runs have no more steps): each run's tail-miss summary by
    label, and the records of all runs."""
    last = max((int(g["step"]) for run in runs for g in run.groups), default=0)
    if last > early_steps:
        windows = {f"first {early_steps} steps": early_steps, "all steps": None}
    else:  # the early window holds every step the runs have
        windows = {f"all {last} steps (the early window is {early_steps})": None}
    tail = {w: {} for w in windows}
    pooled = {w: [] for w in windows}
    for w, max_step in windows.items():
        for run in runs:
            if not run.groups:
                continue
            rec = tail_miss_records(run.groups, rare_set, max_step=max_step)
            tail[w][run.label] = summarise_tail_miss(rec)
            pooled[w].append(rec)
    return tail, pooled


def cross_check(
    runs: list[RunInfo],
    rare_set,
    out_dir,
    *,
    early_steps: int = 10,
    paper: dict | None,
    rng: np.random.Generator,
    Ns_curve=(1, 2, 4, 8, 16, 32, 64, 128),
    noise: dict[str, float] | None = None,
) -> dict:
    """Run the tail-miss check and the sweep table; write figures and ``validation.json`` to
    ``out_dir``.

    ``paper`` is ``fgrpo_llm.experiments.paper.load_paper_results()`` (the paper's rows beside
    ours), or None to leave them out. Returns a dict with ``tail_miss`` (per window, per run: rows
    by N), ``calibration``, ``curve``, ``sweep`` (rows of the group-size sweep), ``controls`` (rows
    of runs at a scaled lr), ``lr_control`` (:func:`lr_control_comparisons`), ``orderings``
    (sentences) and ``figures`` (paths relative to ``out_dir``). ``noise``
    (``fgrpo_llm.evaluation.sweep.difference_noise``): the run-to-run noise of a difference, within
    which the orderings and the lr control call a difference unresolved; None: read every sign.
    """
    _check_arguments(runs, early_steps)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tail, pooled = _tail_miss_by_window(runs, rare_set, early_steps)
    early = list(tail)[0]
    calib = []
    if pooled[early]:
        merged = {k: np.concatenate([r[k] for r in pooled[early]]) for k in pooled[early][0]}
        calib = calibration_bins(merged)
    observed_Ns = sorted({r["N"] for rows in tail[early].values() for r in rows})
    Ns = sorted(set(int(n) for n in Ns_curve) | set(observed_Ns))
    curve = predicted_curve(rare_set, Ns, rng=rng)

    rows = sweep_rows(runs, paper)
    controls = control_rows(runs)
    sentences = ordering_sentences(rows, noise) if paper else []
    figures = save_cross_check_figures(out, early, tail, calib, curve, rows, controls)
    result = {
        "tail_miss": tail,
        "calibration": calib,
        "curve": {k: np.asarray(v).tolist() for k, v in curve.items()},
        "sweep": rows,
        "controls": controls,
        "lr_control": lr_control_comparisons(rows, controls, noise),
        "orderings": sentences,
        "paper_available": paper is not None,
        "figures": figures,
        "early_steps": early_steps,
    }
    atomic_write_text(out / "validation.json", strict_json(result, indent=1, default=str))
    return result
