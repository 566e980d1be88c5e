"""The forecast's two step sizes fitted to measured LLM runs, and the three null models it is
scored against (the rules of the forecast study: fit on GRPO at N = 8 and lr x 1 only).

The model's free parameters are s_theta and s_phi, the step sizes of the per-prompt and shared
tables in units of the LLM's learning rate (``fgrpo_theory.forecast.train``). Over fit units u
(one per base: its inputs and the measured numbers) the fit minimises

    L(s_theta, s_phi) = sum_u (D_pred,u - D_meas,u)^2 + c (P1_pred,u - P1_meas,u)^2

(D = Delta NLL_rare, P1 = pass@1, c = ``pass1_weight``, 0 by default) first on a log grid, then by
bounded scalar refinements of one log step size at a time around the grid's best (the draws are
seeded per unit, so L is a deterministic function: common random numbers).

Nulls:

- **constant**: every cell of a unit predicted as the unit's GRPO N = 8 lr x 1 measurement;
- **lr-only**: Delta NLL_rare = k * lr_scale * w_bar (w_bar the cell's realised mean weight over
  active groups), k fitted by least squares on the fit cells;
- **untied**: the same model with no shared part (s_phi = 0: phi stays 0, each prompt is the
  per-prompt categorical model of Eq. 5), s_theta fitted the same way.

    >>> round(fit_lr_only([1.0, 1.0], [1.0, 0.5], [0.2, 0.1]), 6)
    0.2
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize_scalar

from fgrpo_theory.forecast.train import ForecastBase, RunSchedule, forecast, gathered_steps

__all__ = [
    "FitUnit",
    "FitResult",
    "fit_step_sizes",
    "fit_untied",
    "fit_lr_only",
    "predict_lr_only",
    "predict_constant",
    "predict_cells",
    "DEFAULT_GRID",
]

#: The log grid of step sizes (multiples of the LLM's lr): 10^0 .. 10^5, half-decades.
DEFAULT_GRID = tuple(10.0 ** (k / 2) for k in range(11))


@dataclass(frozen=True)
class FitUnit:
    """One base's fit cell: the base, the run it replays, and what the LLM measured."""

    name: str
    """The base's name."""
    base: ForecastBase
    run: RunSchedule
    measured: dict
    """{"delta_nll_rare": D, optionally "pass@1": P1}."""
    steps: list = field(default=None, compare=False, repr=False)
    """The gathered steps (filled on construction)."""

    def __post_init__(self):
        if not math.isfinite(float(self.measured.get("delta_nll_rare", math.nan))):
            raise ValueError(f"unit {self.name!r}: measured needs a finite 'delta_nll_rare'")
        if self.steps is None:
            object.__setattr__(self, "steps", gathered_steps(self.base, self.run))


@dataclass(frozen=True)
class FitResult:
    """The fitted step sizes and the loss surface seen on the way."""

    lr_theta_scale: float
    lr_phi_scale: float
    loss: float
    trials: list
    """[(s_theta, s_phi, loss), ...] in the order evaluated (grid, then refinement)."""
    predictions: dict
    """{unit name: the fitted model's predictions (``Forecast.as_dict``)}."""


def _loss(units, s_theta, s_phi, *, seed, replicates, pass1_weight) -> tuple[float, dict]:
    total, preds = 0.0, {}
    for i, u in enumerate(units):
        f = forecast(
            u.base,
            u.run,
            lr_theta_scale=s_theta,
            lr_phi_scale=s_phi,
            seed=seed + i,
            replicates=replicates,
            steps=u.steps,
        )
        preds[u.name] = f.as_dict()
        total += (f.delta_nll_rare - u.measured["delta_nll_rare"]) ** 2
        if pass1_weight and "pass@1" in u.measured:
            total += pass1_weight * (f.pass_at[1] - u.measured["pass@1"]) ** 2
    return total, preds


def fit_step_sizes(
    units: Sequence[FitUnit],
    *,
    grid: Sequence[float] = DEFAULT_GRID,
    phi_grid: Sequence[float] | None = None,
    seed: int = 0,
    replicates: int = 1,
    pass1_weight: float = 0.0,
    refine_rounds: int = 2,
) -> FitResult:
    """(s_theta, s_phi) minimising L (module docstring): the grid ``grid`` x ``phi_grid``
    (default the same; ``phi_grid=(0.0,)`` fits the untied model), then ``refine_rounds`` rounds
    of bounded scalar minimisation of each log step size within one grid step of the best."""
    units = list(units)
    if not units:
        raise ValueError("fit_step_sizes needs at least one fit unit")
    grid = sorted(float(s) for s in grid)
    phi_grid = grid if phi_grid is None else sorted(float(s) for s in phi_grid)
    if not grid or grid[0] <= 0 or (phi_grid and phi_grid[0] < 0):
        raise ValueError(f"grids must hold positive step sizes, got {grid} and {phi_grid}")
    trials, cache = [], {}

    def L(st, sp):
        key = (st, sp)
        if key not in cache:
            cache[key] = _loss(
                units, st, sp, seed=seed, replicates=replicates, pass1_weight=pass1_weight
            )
            trials.append((st, sp, cache[key][0]))
        return cache[key][0]

    best = min(((st, sp) for st in grid for sp in phi_grid), key=lambda p: L(*p))
    st, sp = best
    for _ in range(refine_rounds):
        st = _refine(lambda s, sp=sp: L(s, sp), st, grid)
        if sp > 0 and len(phi_grid) > 1:
            sp = _refine(lambda s, st=st: L(st, s), sp, phi_grid)
    loss, preds = cache[(st, sp)]
    return FitResult(st, sp, loss, trials, preds)


def _refine(f, s0: float, grid: list) -> float:
    """The minimiser of f(s) over log s within one grid step of s0 (s0 if nothing is better)."""
    i = grid.index(s0) if s0 in grid else int(np.argmin([abs(math.log(g / s0)) for g in grid]))
    lo = math.log(grid[max(i - 1, 0)])
    hi = math.log(grid[min(i + 1, len(grid) - 1)])
    if hi <= lo:
        return s0
    res = minimize_scalar(
        lambda x: f(math.exp(x)), bounds=(lo, hi), method="bounded", options={"xatol": 0.05}
    )
    s = math.exp(res.x)
    return s if f(s) < f(s0) else s0


def fit_untied(units: Sequence[FitUnit], **kwargs) -> FitResult:
    """The untied null: the same fit with s_phi = 0 (no shared part)."""
    return fit_step_sizes(units, phi_grid=(0.0,), **kwargs)


def fit_lr_only(lr_scale, mean_weight, delta_nll_rare) -> float:
    """k of the lr-only null D = k * lr_scale * w_bar, least squares through 0 over fit cells."""
    x = np.asarray(lr_scale, dtype=float) * np.asarray(mean_weight, dtype=float)
    D = np.asarray(delta_nll_rare, dtype=float)
    if x.shape != D.shape or x.size == 0 or not np.isfinite(x).all() or not (x @ x) > 0:
        raise ValueError("fit_lr_only needs matching, finite fit cells with lr_scale * w > 0")
    return float(x @ D / (x @ x))


def predict_lr_only(k: float, lr_scale: float, mean_weight: float) -> float:
    """The lr-only null's Delta NLL_rare of a cell: k * lr_scale * w_bar."""
    return float(k * lr_scale * mean_weight)


def predict_constant(reference: dict) -> dict:
    """The constant null: the unit's GRPO N = 8 lr x 1 measurement, for every cell."""
    return dict(reference)


def predict_cells(cells, fitted: FitResult, *, seed: int = 0, replicates: int = 1) -> list:
    """The fitted model's predictions of ``cells`` [(cell name, base name, ForecastBase,
    RunSchedule), ...] as ``write_forecast`` takes them: [{"cell", "base", "predicted"}]."""
    out = []
    for cell, base_name, base, run in cells:
        f = forecast(
            base,
            run,
            lr_theta_scale=fitted.lr_theta_scale,
            lr_phi_scale=fitted.lr_phi_scale,
            seed=seed,
            replicates=replicates,
        )
        out.append({"cell": cell, "base": base_name, "predicted": f.as_dict()})
    return out
