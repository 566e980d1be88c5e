"""The forecast's scores and verdicts (fgrpo_llm.experiments.countdown.forecast_score) on
hand-made numbers: every score passes; the lr-only null wins (fails); a forecast of the right
signs and ranks but a third of the size (partly); blind cells missing (not resolved)."""

import json

import numpy as np
import pytest

from fgrpo_llm.experiments.countdown.forecast_score import (
    calibration_score,
    contrasts,
    score_forecast,
    score_table,
    sign_score,
)

BASES = [f"base{b}" for b in range(5)]
#: measured contrasts of Delta NLL_rare, pass@1, pass@64 of each blind cell against GRPO N = 8
TRUE = {"lr0.75": (-0.10, -0.02, 0.03), "n32": (0.12, 0.03, -0.02), "g3": (-0.20, -0.03, 0.05),
        "g0.25": (-0.04, -0.01, 0.01), "pool": (0.25, 0.04, -0.04)}  # fmt: skip
Q = ("delta_nll_rare", "pass@1", "pass@64")


def _rows(model=lambda c: c, lr_only=lambda c, rng: 0.0, untied=lambda c: 0.5 * c, drop=()):
    """Rows of 5 bases: the fit cell, the blind cells TRUE and one published cell; measured =
    TRUE + base noise; predicted = model(TRUE) (per quantity) + small noise."""
    rng = np.random.default_rng(0)
    rows = []
    for b in BASES:
        ref = {"delta_nll_rare": 0.3, "pass@1": 0.4, "pass@64": 0.8}
        rows.append(
            {
                "cell": "grpo_n8",
                "base": b,
                "stage": "fit",
                "measured": ref,
                "predicted": dict(ref),
                "nulls": {"lr_only": 0.3, "untied": dict(ref)},
            }
        )
        for cell, (d, p1, p64) in {**TRUE, "g1": (-0.15, -0.02, 0.04)}.items():
            true = dict(zip(Q, (d, p1, p64), strict=True))
            meas = {q: ref[q] + v + rng.normal(0, 0.004) for q, v in true.items()}
            pred = {q: ref[q] + model(v) + rng.normal(0, 0.002) for q, v in true.items()}
            un = {q: ref[q] + untied(v) for q, v in true.items()}
            rows.append({
                "cell": cell, "base": b, "stage": "published" if cell == "g1" else "blind",
                "measured": None if cell in drop else meas, "predicted": pred,
                "nulls": {"lr_only": 0.3 + lr_only(meas["delta_nll_rare"] - 0.3, rng),
                          "untied": un},
            })  # fmt: skip
    return rows


def test_every_score_passes_when_the_forecast_is_the_measurement():
    s = score_forecast(_rows(), n_boot=300)
    blind = s["blind"]
    assert blind["verdict"] == "the theory forecasts the LLM"
    assert blind["sign"]["share"] == 1.0 and blind["sign"]["judged"] == 15
    assert blind["rank"]["rho"] == pytest.approx(1.0) and blind["rank"]["lo"] > 0
    assert blind["calibration"]["lo"] <= 1 <= blind["calibration"]["hi"]
    assert all(v["passed"] for v in blind["skill"]["nulls"].values())
    assert set(blind["cells"]) == set(TRUE) and s["published"]["cells"] == {"g1": "trained"}


def test_the_score_table_shows_each_stage_s_scores_and_verdict():
    perfect = score_forecast(_rows(), n_boot=300)
    lines = score_table(perfect).splitlines()
    assert lines[0] == "| score | blind cells | published cells |" and len(lines) == 8
    blind = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1] for line in lines[2:]}
    assert blind["(i) sign, pass at >= 0.8"] == "15 of 15 resolved contrasts agree: passes"
    assert blind["(ii) rank, Spearman rho >= 0.7 with its interval above 0"].startswith("1.00 [")
    assert blind["verdict"] == "**the theory forecasts the LLM**"
    assert "beats constant, lr-only, untied" in lines[5]
    assert blind["cells trained"].startswith(f"{len(TRUE)} of {len(TRUE)}: ")
    rows = _rows(model=lambda c: 0.5 * c + 0.05, lr_only=lambda c, rng: c + rng.normal(0, 1e-4))
    failing = score_table(score_forecast(rows, n_boot=300))
    assert "loses to lr-only" in failing and "**the theory fails" in failing


def test_the_theory_fails_when_the_lr_only_null_forecasts_better():
    rows = _rows(model=lambda c: 0.5 * c + 0.05, lr_only=lambda c, rng: c + rng.normal(0, 1e-4))
    blind = score_forecast(rows, n_boot=300)["blind"]
    assert blind["skill"]["nulls"]["lr_only"]["loses"]
    assert blind["verdict"].startswith("the theory fails")


def test_right_signs_and_ranks_at_a_third_of_the_size_is_partly():
    rows = _rows(model=lambda c: c / 3, lr_only=lambda c, rng: rng.normal(0, 0.3))
    blind = score_forecast(rows, n_boot=300)["blind"]
    assert blind["sign"]["passed"] and blind["rank"]["passed"]
    assert not blind["calibration"]["passed"] and blind["calibration"]["lo"] > 1
    assert blind["verdict"].startswith("partly: ") and "calibration" not in blind["verdict"]
    assert "sign" in blind["verdict"] and "rank" in blind["verdict"]


def test_missing_blind_cells_leave_the_verdict_not_resolved():
    s = score_forecast(_rows(drop=("n32", "pool")), n_boot=100)
    json.dumps(s)  # plain Python numbers: score.json is written as it is
    assert s["blind"]["verdict"] == "not resolved: 3 of 5 blind cells trained"
    assert s["blind"]["cells"]["n32"] == "not trained"
    assert s["published"]["cells"] == {"g1": "trained"}  # scored apart, resolved
    assert not s["published"]["verdict"].startswith("not resolved")
    only_fit = [r for r in _rows() if r["stage"] == "fit"]
    assert (
        score_forecast(only_fit, n_boot=10)["blind"]["verdict"] == "no blind cells in the forecast"
    )


def test_contrasts_are_paired_with_the_fit_run_of_the_same_base():
    rows = _rows()
    cs = contrasts(rows, "blind")
    assert len(cs) == 25
    r = next(r for r in rows if r["cell"] == "g3" and r["base"] == "base2")
    f = next(r for r in rows if r["stage"] == "fit" and r["base"] == "base2")
    c = next(c for c in cs if c["cell"] == "g3" and c["base"] == "base2")
    assert c["measured"]["pass@1"] == r["measured"]["pass@1"] - f["measured"]["pass@1"]
    assert c["nulls"]["constant"] == 0.0


def test_a_contrast_counts_for_the_sign_only_when_its_interval_excludes_zero():
    cs = [{"cell": "x", "base": b, "measured": {q: v for q in Q}, "predicted": {q: -1.0 for q in Q}}
          for b, v in zip(BASES, (0.1, -0.1, 0.2, -0.2, 0.05), strict=True)]  # fmt: skip
    s = sign_score(cs)
    assert s["judged"] == 0 and not s["passed"]
    assert not calibration_score(cs[:1], n_boot=50)["passed"]
