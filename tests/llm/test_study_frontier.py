"""Claim 5 as an lr frontier (``study_frontier``): pooling adjacent violators against scipy and a
hand computation, the crossing s*, and each verdict (beyond, on, behind, not resolved, not
judged) on synthetic per-unit numbers whose verdict follows from the rule by inspection."""

import numpy as np
import pytest

from fgrpo_llm.evaluation.stats import NOT_RESOLVED
from fgrpo_llm.experiments.countdown.config import DemoConfig
from fgrpo_llm.experiments.countdown.study_claims import judge_claims
from fgrpo_llm.experiments.countdown.study_frontier import (
    BEHIND,
    BEYOND,
    ON,
    crossing,
    isotonic,
    pava,
    unit_frontier,
)

# ----------------------------------------------------------------------------- the fit


def test_pava_pools_adjacent_violators_by_hand():
    # 3 > 2 violates: pooled to 2.5; then 5 > 1 > 0 pooled to 2 (mean of 5, 1, 0)
    assert pava([1.0, 3.0, 2.0, 4.0]).tolist() == [1.0, 2.5, 2.5, 4.0]
    assert pava([1.0, 5.0, 1.0, 0.0]).tolist() == [1.0, 2.0, 2.0, 2.0]
    assert pava([0.3, 0.2, 0.1]).tolist() == pytest.approx([0.2, 0.2, 0.2])
    assert pava([0.1, 0.2]).tolist() == [0.1, 0.2]  # already monotone: unchanged


def test_pava_matches_scipys_isotonic_regression():
    from scipy.optimize import isotonic_regression

    rng = np.random.default_rng(0)
    for n in (1, 2, 4, 7, 20):
        y = rng.normal(size=n)
        ref = isotonic_regression(y).x
        np.testing.assert_allclose(pava(y), ref, atol=1e-12)
        np.testing.assert_allclose(isotonic(y), ref, atol=1e-12)
        assert np.all(np.diff(pava(y)) >= -1e-12)


def test_the_crossing_interpolates_and_takes_the_middle_of_a_flat_piece():
    s = [0.5, 0.75, 0.9, 1.0]
    assert crossing(s, [0.1, 0.2, 0.26, 0.3], 0.23) == pytest.approx(0.825)
    assert crossing(s, [0.1, 0.2, 0.2, 0.3], 0.2) == pytest.approx(0.825)  # flat on [0.75, 0.9]
    assert crossing(s, [0.1, 0.2, 0.26, 0.3], 0.1) == pytest.approx(0.5)
    assert crossing(s, [0.1, 0.2, 0.26, 0.3], 0.05) is None  # outside the frontier
    assert crossing(s, [0.1, 0.2, 0.26, 0.3], 0.31) is None


def test_a_unit_frontier_pools_then_reads_the_gaps_at_s_star():
    # D breaks the order at 0.9 (0.28 > 0.26): pooled to 0.27, 0.27; D_F = 0.2 at s* = 0.75
    points = {
        0.5: {"D": 0.10, "P": 0.40, "O": 0.60},
        0.75: {"D": 0.20, "P": 0.42, "O": 0.62},
        0.9: {"D": 0.28, "P": 0.43, "O": 0.63},
        1.0: {"D": 0.26, "P": 0.44, "O": 0.64},
    }
    r = unit_frontier(points, {"D": 0.20, "P": 0.45, "O": 0.61})
    assert r.s_star == pytest.approx(0.75)
    assert r.g_p == pytest.approx(0.03) and r.g_o == pytest.approx(-0.01)
    # between 0.9 and 1 the pooled D is flat at 0.27: s* the middle, 0.95
    assert unit_frontier(points, {"D": 0.27, "P": 0.5, "O": 0.6}).s_star == pytest.approx(0.95)
    assert unit_frontier(points, {"D": 0.5, "P": 0.5, "O": 0.6}).s_star is None
    assert unit_frontier({1.0: points[1.0]}, {"D": 0.2, "P": 0.5, "O": 0.6}) is None


# ----------------------------------------------------------------------------- the verdicts
SCALES = {"grpo_n8_lrmatched": 0.5, "grpo_n8_lr0.75": 0.75, "grpo_n8_lr0.9": 0.9, "grpo_n8": 1.0}
CURVE = {0.5: (0.10, 0.40, 0.60), 0.75: (0.20, 0.42, 0.62), 0.9: (0.26, 0.43, 0.63),
         1.0: (0.30, 0.44, 0.64)}  # fmt: skip


def _frontier_numbers(g_p, g_o, *, bases=4, d_f=0.20, scatter=0.0) -> dict:
    """GRPO's curve CURVE on every unit (bases x 2 seeds), F-GRPO at D_F = ``d_f`` (s* = 0.75 at
    0.20) with in-domain pass@1 and OOD pass@k_max ``g_p``, ``g_o`` above GRPO's at s*; a
    per-base shift of +-``scatter`` on F-GRPO's pass@1, and a tiny per-unit noise."""
    units = [(b, s) for b in range(bases) for s in (0, 1)]
    rng = np.random.default_rng(1)
    numbers = {}
    for name, x in SCALES.items():
        d, p, o = CURVE[x]
        numbers[name] = {
            u: {"delta_nll_rare": d, "id_pass1": p, "ood_passk": o, "label": name} for u in units
        }
    p_star, o_star = 0.42, 0.62
    numbers["fgrpo_n8"] = {
        u: {
            "delta_nll_rare": d_f,
            "id_pass1": p_star + g_p + scatter * (-1) ** u[0] + rng.normal(0, 1e-4),
            "ood_passk": o_star + g_o + rng.normal(0, 1e-4),
            "focal_weight": 0.58 + rng.normal(0, 1e-3),
            "label": "fgrpo_n8",
        }
        for u in units
    }
    return numbers


def _claim5(numbers) -> dict:
    return {c["claim"]: c for c in judge_claims(numbers, DemoConfig())}[5]


@pytest.mark.parametrize(
    "g_p, g_o, scatter, verdict",
    [
        (0.03, 0.0, 0.0, BEYOND),  # pass@1 higher at the same rare loss, OOD kept
        (0.03, -0.01, 0.0, BEYOND),  # G_O's lower end above -0.02
        (0.0, 0.0, 0.0, ON),  # both gaps within +-0.02
        (-0.03, 0.0, 0.0, BEHIND),  # lower pass@1 at the same rare loss
        (0.03, -0.05, 0.0, NOT_RESOLVED),  # pass@1 above, but OOD pass@k lost
        (0.0, 0.0, 0.05, NOT_RESOLVED),  # F-GRPO's bases scatter: G_P's interval wide
    ],
)
def test_each_frontier_verdict_follows_its_rule(g_p, g_o, scatter, verdict):
    claim = _claim5(_frontier_numbers(g_p, g_o, scatter=scatter))
    assert claim["verdict"] == verdict, claim["evidence"]
    ev = claim["evidence"]
    assert "0 outside the frontier" in ev and "median s* = 0.750" in ev, ev
    assert "realised mean focal weight of F-GRPO over active groups 0.58" in ev
    assert "the paper's control (GRPO lr x m_gamma), F-GRPO - control" in ev


def test_units_outside_the_frontier_are_counted_and_enter_no_gap():
    numbers = _frontier_numbers(0.03, 0.0)
    for u in [(0, 0), (0, 1)]:  # base 0: F-GRPO loses less than GRPO at lr x 0.5
        numbers["fgrpo_n8"][u]["delta_nll_rare"] = 0.05
    claim = _claim5(numbers)
    assert "2 outside the frontier" in claim["evidence"] and "over 3 bases" in claim["evidence"]
    assert claim["verdict"] == BEYOND
    numbers = _frontier_numbers(0.03, 0.0, d_f=0.01)  # every unit outside
    assert _claim5(numbers)["verdict"] == NOT_RESOLVED


def test_fewer_than_three_bases_are_not_judged():
    claim = _claim5(_frontier_numbers(0.03, 0.0, bases=2))
    assert claim["verdict"] == "not judged, 2 bases", claim["evidence"]


def test_without_a_second_lr_scale_there_is_no_frontier():
    numbers = _frontier_numbers(0.03, 0.0)
    for name in ("grpo_n8_lrmatched", "grpo_n8_lr0.75", "grpo_n8_lr0.9"):
        del numbers[name]
    assert _claim5(numbers)["verdict"] == "not run"
