"""The study's runs by cell, staged so that a forecast can be committed before the runs it
predicts: ``fit`` (what the forecast is fitted on), ``published`` (the runs the study had before
the forecast) and ``blind`` (the runs trained only after it).

- fit: GRPO at N = ``group_size``, lr x 1, the first RL seed, on every base;
- published: the rest of the core (GRPO and F-GRPO at N = 8 and the lr x m_gamma control, every
  RL seed), the group-size sweep on the ``sweep_bases`` (without ``blind_group_sizes``), the
  extended plan and the tuning runs;
- blind: GRPO at every lr scale of ``lr_frontier`` (every base and RL seed); the group-size sweep
  on the other bases and ``blind_group_sizes`` on every base; F-GRPO at ``blind_gammas``; the
  revisit arm (GRPO and F-GRPO on a pool each prompt is visited about ``revisit_visits`` times
  in; ``config.blind_specs``); each at the first RL seed unless said otherwise.

A blind run is trained only after the forecast file is committed in git
(:func:`committed_forecast`: its path, sha256 and commit are recorded in
``OUT/forecast_record.json`` before training, so the order can be checked).

    fgrpo-llm study --out runs/study --cells fit,published
    fgrpo-llm study --out runs/study --cells blind --forecast docs/data/forecast.json
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from fgrpo_llm.experiments.countdown.config import (
    DemoConfig,
    RunSpec,
    blind_specs,
    extended_specs,
    run_specs,
)

__all__ = ["CELLS", "parse_cells", "cell_specs", "cell_of", "committed_forecast"]

#: The study's stages, in training order.
CELLS = ("fit", "published", "blind")


def parse_cells(text: str) -> tuple[str, ...]:
    """``"fit,published"`` or ``"all"`` -> the cells, in :data:`CELLS` order; a ValueError naming
    an unknown one."""
    names = [c.strip() for c in str(text).split(",") if c.strip()]
    if not names:
        raise ValueError(f"--cells must name a cell among {', '.join(CELLS)} or all, got {text!r}")
    if "all" in names:
        return CELLS
    bad = [c for c in names if c not in CELLS]
    if bad:
        raise ValueError(f"--cells must be among {', '.join(CELLS)} or all, got {bad[0]!r}")
    return tuple(c for c in CELLS if c in names)


def cell_specs(cfg: DemoConfig, design, base: int, *, extended: bool = True) -> dict:
    """``{cell: [RunSpec]}`` of one base (``design``: a ``study.StudyDesign``); without
    ``extended``, the published cell leaves out the extended plan (it trains after the tuning)."""
    N, s0 = cfg.group_size, design.seeds[0]
    pre0 = f"seed{s0}/"
    core = [
        spec
        for s in design.seeds
        for spec in run_specs(cfg, seed=s, prefix=f"seed{s}/")
        if spec.N == N
    ]
    sweep = [spec for spec in run_specs(cfg, seed=s0, prefix=pre0) if spec.N != N]
    fit = [spec for spec in core if spec.name == f"grpo_n{N}" and spec.seed == s0]
    published = [spec for spec in core if spec not in fit]
    published += [
        spec for spec in sweep if base in design.sweep_bases and spec.N not in cfg.blind_group_sizes
    ]
    ext = extended_specs(cfg, seed=s0, prefix=pre0) if base in design.extended_bases else []
    if extended:
        published += ext
    blind = [spec for spec in sweep if spec not in published]
    for s in design.seeds:  # the lr frontier on every RL seed, the rest on the first
        blind += [
            spec
            for spec in blind_specs(cfg, seed=s, prefix=f"seed{s}/")
            if spec.lr_scale != 1.0 or s == s0
        ]
    taken = {spec.path for spec in fit + published + ext}  # a blind gamma the plan already had
    blind = [spec for spec in blind if spec.path not in taken]
    return {"fit": fit, "published": published, "blind": blind}


def cell_of(cfg: DemoConfig, design, base: int, spec: RunSpec) -> str:
    """The cell a run of base ``base`` belongs to ("published" for a run of no cell: tuning)."""
    for cell, specs in cell_specs(cfg, design, base).items():
        if any(s.path == spec.path for s in specs):
            return cell
    return "published"


def committed_forecast(path) -> dict:
    """``{"path", "sha256", "commit"}`` of a forecast file committed in git as it is now; a
    ValueError when it is missing, outside a git work tree, not tracked, or changed since its
    last commit (a blind run trained before its forecast is committed proves nothing)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"forecast file not found: {path}")

    def git(*args) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["git", "-C", str(path.parent.resolve()), *args], capture_output=True, text=True
        )

    name = path.resolve().name
    if git("ls-files", "--error-unmatch", "--", name).returncode != 0:
        raise ValueError(
            f"the forecast {path} is not committed in git: commit it before training blind cells"
        )
    if git("diff", "--quiet", "HEAD", "--", name).returncode != 0:
        raise ValueError(
            f"the forecast {path} differs from its last commit: commit it before training blind "
            "cells"
        )
    commit = git("log", "-1", "--format=%H", "--", name).stdout.strip()
    return {
        "path": str(path),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "commit": commit or None,
    }
