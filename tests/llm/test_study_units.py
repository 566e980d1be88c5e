"""The per-unit table (``study_units``): units.csv round-trips the study's numbers, every claim
judged from the file alone equals the claim judged from the study's numbers (claim 2's interval
in particular), the realised focal weight and the exact columns by hand."""

import json

import numpy as np
import pytest

from fgrpo_llm.evaluation.stats import format_interval
from fgrpo_llm.experiments.countdown.config import DemoConfig
from fgrpo_llm.experiments.countdown.study_claims import judge_claims, paired
from fgrpo_llm.experiments.countdown.study_units import (
    COLUMNS,
    exact_columns,
    exact_metrics,
    judge_units,
    mechanism_columns,
    read_units,
    realised_weight,
    unit_rows,
    write_units,
)

RUNS = {  # name: (N, gamma, lr scale, weighting, mean Delta NLL_rare, in-domain pass@1)
    "grpo_n8": (8, 0.0, 1.0, "focal", 0.40, 0.44),
    "fgrpo_n8": (8, 1.0, 1.0, "focal", 0.30, 0.45),
    "grpo_n8_lrmatched": (8, 0.0, 0.5, "focal", 0.20, 0.41),
    "grpo_n8_lr0.9": (8, 0.0, 0.9, "focal", 0.36, 0.44),
    "grpo_n8_lr0.75": (8, 0.0, 0.75, "focal", 0.30, 0.43),
    "grpo_n2": (2, 0.0, 1.0, "focal", 0.20, 0.43),
    "grpo_n4": (4, 0.0, 1.0, "focal", 0.30, 0.44),
    "grpo_n16": (16, 0.0, 1.0, "focal", 0.35, 0.44),
    "grpo_n32": (32, 0.0, 1.0, "focal", 0.30, 0.45),
    "fgrpo_n8_g0.5": (8, 0.5, 1.0, "focal", 0.33, 0.45),
    "fgrpo_n8_g3": (8, 3.0, 1.0, "focal", 0.25, 0.40),
    "maxrl_n8": (8, 0.0, 1.0, "maxrl", 0.32, 0.44),
}
UNITS = [(b, s) for b in range(4) for s in (0, 1)]


def _numbers() -> dict:
    rng = np.random.default_rng(7)
    numbers = {}
    for name, (N, gamma, lr, weighting, d, p) in RUNS.items():
        numbers[name] = {}
        for u in UNITS:
            if name not in ("grpo_n8", "fgrpo_n8") and u[1] == 1:
                continue  # the rest on the first seed only, as the study trains them
            numbers[name][u] = {
                "delta_nll_rare": d + rng.normal(0, 0.02),
                "id_pass1": p + rng.normal(0, 0.005),
                "id_passk": 0.9 + rng.normal(0, 0.01),
                "ood_pass1": 0.1 + rng.normal(0, 0.005),
                "ood_passk": 0.6 + rng.normal(0, 0.01),
                "tail_miss_obs": 0.5 + rng.normal(0, 0.01),
                "tail_miss_pred": 0.5 + rng.normal(0, 0.01),
                "tail_miss_groups": 40,
                "tail_miss_steps": 50,
                "kmax": 64,
                "focal_weight": 0.58 if gamma else 1.0,
                "label": f"{name}, run",
                "cell": "published",
                "N": N,
                "gamma": gamma,
                "lr_scale": lr,
                "weighting": weighting,
                "environment": {"not": "written"},
            }
    return numbers


def test_the_csv_round_trips_every_number_the_claims_read(tmp_path):
    numbers = _numbers()
    bases = {b: {"family": "default" if b % 2 == 0 else "other"} for b in range(4)}
    path = write_units(tmp_path / "units.csv", unit_rows(numbers, bases))
    header = path.read_text().splitlines()[0].split(",")
    assert tuple(header) == COLUMNS
    back = read_units(path)
    assert set(back) == set(numbers)
    for name, runs in numbers.items():
        assert set(back[name]) == set(runs)
        for u, vals in runs.items():
            for key, v in vals.items():
                if key != "environment":
                    assert back[name][u][key] == v, (name, u, key)
            assert back[name][u]["family"] == bases[u[0]]["family"]


def test_every_claim_from_the_csv_alone_equals_the_studys(tmp_path):
    """Claim 2's interval recomputed from units.csv is the study's, digit for digit; so is every
    other claim's verdict and evidence (claim 10 without the simulator's prediction in both)."""
    numbers = _numbers()
    path = write_units(tmp_path / "units.csv", unit_rows(numbers, {}))
    cfg = DemoConfig(extended_gammas=(0.5,), blind_gammas=(3.0,))
    study = {c["claim"]: c for c in judge_claims(numbers, cfg)}
    again = {c["claim"]: c for c in judge_units(path)}
    d = paired(numbers, "fgrpo_n8", "grpo_n8", "delta_nll_rare")
    shown = f"paired difference F-GRPO - GRPO {format_interval(d, 3, signed=True)}"
    assert shown in study[2]["evidence"] and shown in again[2]["evidence"]
    assert d.n == 4
    for k in study:
        assert (again[k]["verdict"], again[k]["evidence"]) == (
            study[k]["verdict"],
            study[k]["evidence"],
        ), k


def test_the_cli_judges_a_units_file(tmp_path, capsys):
    from fgrpo_llm.cli import main

    path = write_units(tmp_path / "units.csv", unit_rows(_numbers(), {}))
    assert main(["study", "--from-units", str(path)]) == 0
    printed = capsys.readouterr().out
    study = judge_claims(_numbers(), DemoConfig(extended_gammas=(0.5,), blind_gammas=(3.0,)))
    for c in study:
        assert f"claim {c['claim']}: {c['verdict']}: " in printed
    assert study[1]["evidence"] in printed


def test_a_file_without_the_studys_columns_is_refused(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a study's units.csv"):
        read_units(bad)


def test_the_realised_weight_is_the_mean_over_trained_active_groups():
    groups = [
        {"num_correct": 2, "N": 8},  # (1 - 1/4)^1 = 0.75
        {"num_correct": 6, "N": 8},  # 0.25
        {"num_correct": 0, "N": 8},  # inactive
        {"num_correct": 8, "N": 8},  # inactive
        {"num_correct": 4, "N": 8, "trained": False},  # not trained
    ]
    assert realised_weight(groups, gamma=1.0) == pytest.approx(0.5)
    assert realised_weight(groups, gamma=2.0) == pytest.approx((0.75**2 + 0.25**2) / 2)
    assert realised_weight(groups, gamma=0.0) == 1.0
    maxrl = (np.sqrt(0.75 / 0.25) + np.sqrt(0.25 / 0.75)) / 2
    assert realised_weight(groups, gamma=0.0, weighting="maxrl") == pytest.approx(maxrl)
    assert realised_weight(groups[2:4], gamma=1.0) is None


def test_the_exact_columns_by_hand(tmp_path):
    run, base = tmp_path / "run.json", tmp_path / "base.json"
    assert exact_columns(run, base) == {}
    rare = {"trajectories": 3, "prompt_ids": ["p", "p", "q"], "answers": ["1+2", "2+1", "3*1"],
            "lengths": [4, 4, 2]}  # fmt: skip
    base.write_text(json.dumps({"format": 1, "splits": {}, "rare": {**rare, "logp": [-1, -2, -3]}}))
    splits = {
        "test": {"problems": 2, "pass@k": {"1": 0.4, "8": 0.7, "64": 0.9}, "malformed_mass": 0.0},
        "ood": {"problems": 2, "pass@k": {"1": 0.1, "64": 0.5}, "malformed_mass": 0.1},
    }
    logp = {**rare, "logp": [-1.5, -3.0, -3.0]}
    run.write_text(json.dumps({"format": 1, "splits": splits, "rare": logp}))
    cols = exact_columns(run, base)
    assert cols["exact_delta_nll_rare"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert cols["exact_delta_nll_rare_per_token"] == pytest.approx((0.5 / 4 + 1.0 / 4) / 3)
    assert cols["exact_rare_trajectories"] == 3
    assert cols["exact_id_pass64"] == 0.9 and cols["exact_ood_pass1"] == 0.1
    assert cols["exact_ood_pass8"] is None
    assert "exact_delta_nll_rare" not in exact_columns(run, tmp_path / "none.json")
    # the claims' pass@k are the exact ones where a run has them (k_max among the ks)
    cols = exact_columns(run, base, ks=(1, 8, 64))
    assert exact_metrics(cols, 64) == {
        "id_pass1": 0.4, "id_passk": 0.9, "id_pass8": 0.7,
        "ood_pass1": 0.1, "ood_passk": 0.5, "ood_pass8": None,
    }  # fmt: skip
    assert exact_metrics({}, 64) == {}
    empty = {"trajectories": 0, "prompt_ids": [], "answers": [], "lengths": [], "logp": []}
    run.write_text(json.dumps({"format": 1, "splits": splits, "rare": empty}))
    base.write_text(json.dumps({"format": 1, "splits": {}, "rare": empty}))
    cols = exact_columns(run, base)  # an empty rare set: pass@k, no Delta NLL_rare
    assert cols["exact_id_pass1"] == 0.4 and "exact_delta_nll_rare" not in cols


def test_the_mechanism_columns_by_hand(tmp_path):
    """Three rare trajectories: p's "1+2" sampled (S), p's "2+1" tail-missed (B, p trained in an
    active group), q's never trained (U); the class sums add up to the summed Delta NLL per
    token."""
    from types import SimpleNamespace

    run, base = tmp_path / "run.json", tmp_path / "base.json"
    rare_json = {"trajectories": 3, "prompt_ids": ["p", "p", "q"], "answers": ["1+2", "2+1", "3*1"],
                 "lengths": [4, 4, 2]}  # fmt: skip
    base.write_text(
        json.dumps({"format": 1, "splits": {}, "rare": {**rare_json, "logp": [-1, -2, -3]}})
    )
    run.write_text(
        json.dumps({"format": 1, "splits": {}, "rare": {**rare_json, "logp": [-1.5, -3.0, -2.0]}})
    )
    rare = SimpleNamespace(prompt_ids=["p", "p", "q"], forms=["1+2", "2+1", "3*1"])
    groups = [{"step": 1, "prompt_id": "p", "N": 4, "num_correct": 1, "forms": ["1+2"]}]
    assert mechanism_columns([], rare, run, base) == {}
    assert mechanism_columns(groups, rare, run, tmp_path / "none.json") == {}
    cols = mechanism_columns(groups, rare, run, base)
    assert (cols["mech_S_n"], cols["mech_B_n"], cols["mech_U_n"], cols["mech_I_n"]) == (1, 1, 1, 0)
    assert cols["mech_S_sum"] == pytest.approx(0.5 / 4)
    assert cols["mech_B_sum"] == pytest.approx(1.0 / 4)
    assert cols["mech_U_sum"] == pytest.approx(-1.0 / 2)
    total = sum(cols[f"mech_{c}_sum"] for c in "UBSI") / 3
    assert total == pytest.approx(exact_columns(run, base)["exact_delta_nll_rare_per_token"])
    other = SimpleNamespace(prompt_ids=["x", "p", "q"], forms=rare.forms)
    with pytest.raises(ValueError, match="rare set"):
        mechanism_columns(groups, other, run, base)
