"""The forecast's fit of its two step sizes, its null models and forecast.json
(fgrpo_theory.forecast.fit, .report)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fgrpo_theory.forecast import (
    MODEL,
    FitResult,
    FitUnit,
    ForecastBase,
    Optimizer,
    RunSchedule,
    fit_lr_only,
    fit_step_sizes,
    fit_untied,
    forecast,
    predict_cells,
    predict_constant,
    predict_lr_only,
    read_forecast,
    write_forecast,
)
from fgrpo_theory.forecast.synthetic import countdown_like
from fgrpo_theory.weighting import parse_weighting


def _unit(i, measured=None, *, share=None):
    ps = countdown_like(10, np.random.default_rng(10 + i), prefix=f"b{i}p")
    rare = [(pa.prompt_id, pa.answers[int(np.flatnonzero(pa.correct)[0])]) for pa in ps[:6]]
    kw = {} if share is None else {"share": share}
    base = ForecastBase(ps[:8], ps[8:], rare, **kw)
    order = [[f"b{i}p{(3 * t + j) % 8}" for j in range(4)] for t in range(8)]
    run = RunSchedule(
        order=order,
        group_size=8,
        weighting=parse_weighting("none"),
        lr=1e-3,
        optimizer=Optimizer("adam"),
    )
    return FitUnit(f"base{i}", base, run, measured or {"delta_nll_rare": 0.0})


GRID = tuple(10.0**k for k in (1.0, 1.5, 2.0, 2.5))


def test_fit_recovers_the_step_sizes_that_made_the_measurements():
    truth = (10.0**2.0, 10.0**1.5)
    units = []
    for i in range(2):
        u = _unit(i)
        f = forecast(u.base, u.run, lr_theta_scale=truth[0], lr_phi_scale=truth[1], seed=i)
        units.append(FitUnit(u.name, u.base, u.run, {"delta_nll_rare": f.delta_nll_rare}))
        assert abs(f.delta_nll_rare) > 1e-3  # the measurements carry a signal
    fit = fit_step_sizes(units, grid=GRID, seed=0, refine_rounds=1)
    assert (fit.lr_theta_scale, fit.lr_phi_scale) == truth
    assert fit.loss == 0.0
    assert len(fit.trials) >= len(GRID) ** 2
    assert set(fit.predictions) == {"base0", "base1"}


def test_untied_null_is_the_model_without_its_shared_part():
    tied, free = _unit(0), _unit(0, share="none")
    a = forecast(tied.base, tied.run, lr_theta_scale=100.0, lr_phi_scale=0.0, seed=3)
    b = forecast(free.base, free.run, lr_theta_scale=100.0, lr_phi_scale=50.0, seed=3)
    np.testing.assert_allclose(a.delta_nll_per_rare, b.delta_nll_per_rare, atol=1e-12)
    fit = fit_untied([FitUnit("u", tied.base, tied.run, {"delta_nll_rare": 0.05})], grid=GRID)
    assert fit.lr_phi_scale == 0.0 and fit.lr_theta_scale > 0
    assert all(sp == 0.0 for _, sp, _ in fit.trials)


def test_lr_only_and_constant_nulls():
    k = fit_lr_only([1.0, 1.0], [0.6, 0.5], [0.3, 0.25])
    assert k == pytest.approx(0.5)
    assert predict_lr_only(k, 0.5, 0.6) == pytest.approx(0.15)
    ref = {"delta_nll_rare": 0.1, "pass@1": 0.4, "pass@64": 0.8}
    assert predict_constant(ref) == ref and predict_constant(ref) is not ref
    with pytest.raises(ValueError, match="fit_lr_only"):
        fit_lr_only([1.0], [0.0], [0.3])


def test_bad_fit_inputs():
    u = _unit(0)
    with pytest.raises(ValueError, match="delta_nll_rare"):
        FitUnit("x", u.base, u.run, {"pass@1": 0.3})
    with pytest.raises(ValueError, match="at least one"):
        fit_step_sizes([])
    with pytest.raises(ValueError, match="positive"):
        fit_step_sizes([u], grid=(0.0, 1.0))


def test_forecast_json_holds_the_model_the_fit_and_the_cells(tmp_path):
    fit = FitResult(120.0, 30.0, 1e-4, [], {})
    cells = [
        {
            "cell": "grpo_n8_lr0.9",
            "base": 2,
            "predicted": {"delta_nll_rare": 0.1, "pass@1": 0.4, "pass@64": 0.8},
        }
    ]
    path = write_forecast(
        tmp_path / "d" / "forecast.json",
        fitted=fit,
        fit_cells=["grpo_n8"],
        cells=cells,
        commit="abc123",
        extra={"nulls": {"lr_only_k": 0.2}},
    )
    doc = read_forecast(path)
    assert doc["model"] == json.loads(json.dumps(MODEL))
    assert doc["fitted"]["lr_theta_scale"] == 120.0 and doc["fitted"]["lr_phi_scale"] == 30.0
    assert doc["cells"] == cells and doc["fit_cells"] == ["grpo_n8"]
    assert doc["code_commit"] == "abc123" and doc["created"].endswith("+00:00")
    assert doc["nulls"] == {"lr_only_k": 0.2}
    bad = [{"cell": "x", "base": 0, "predicted": {"delta_nll_rare": 0.1}}]
    with pytest.raises(ValueError, match="pass@1"):
        write_forecast(tmp_path / "f.json", fitted=fit, fit_cells=[], cells=bad, commit="a")
    nan = [
        {
            "cell": "x",
            "base": 0,
            "predicted": {"delta_nll_rare": float("nan"), "pass@1": 0.1, "pass@64": 0.2},
        }
    ]
    with pytest.raises(ValueError, match="finite"):
        write_forecast(tmp_path / "f.json", fitted=fit, fit_cells=[], cells=nan, commit="a")
    (tmp_path / "g.json").write_text("[]")
    with pytest.raises(ValueError, match="g.json"):
        read_forecast(tmp_path / "g.json")


def test_predict_cells_are_the_fitted_models_forecasts():
    u = _unit(1)
    fit = FitResult(100.0, 10.0, 0.0, [], {})
    [cell] = predict_cells([("grpo_n8", 1, u.base, u.run)], fit, seed=2)
    f = forecast(u.base, u.run, lr_theta_scale=100.0, lr_phi_scale=10.0, seed=2)
    assert cell == {"cell": "grpo_n8", "base": 1, "predicted": f.as_dict()}
    assert set(cell["predicted"]) == {"delta_nll_rare", "pass@1", "pass@64"}
