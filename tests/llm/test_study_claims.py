"""The study's verdicts (``fgrpo_llm.experiments.countdown.study_claims.judge_claims``) on hand-made
per-(base, seed) numbers, where each claim's verdict follows from its rule by inspection."""

import numpy as np

from fgrpo_llm.evaluation.stats import CONTRADICTED, HOLDS, NOT_RESOLVED
from fgrpo_llm.experiments.countdown.config import DemoConfig, run_specs
from fgrpo_llm.experiments.countdown.study_claims import (
    NOT_RUN,
    interval,
    judge_claims,
    paired,
    ratio,
)

UNITS = [(0, 0), (0, 1), (1, 0), (2, 0), (2, 1), (3, 0)]  # 4 bases, 1 or 2 RL seeds each
NOISE = np.array([-0.003, 0.001, 0.002, 0.0, -0.001, 0.001])  # a per-unit shift


def _noise(j: int, metric: str = "") -> np.ndarray:
    """Run j's per-unit shift of ``metric``: NOISE scaled by 1 + j / 20 + k / 40 (k: the
    metric's place in BASE), so that a paired difference of two runs, or of two metrics of a
    run, keeps a tiny spread (sd ~1e-4): tied units would carry no verdict."""
    k = list(BASE).index(metric) if metric in BASE else 0
    return NOISE * (1 + j / 20 + k / 40)


def _numbers(cfg: DemoConfig, base: dict, per_run: dict) -> dict:
    numbers = {}
    for j, spec in enumerate(run_specs(cfg)):
        vals = {**base, **per_run.get(spec.name, {})}
        numbers[spec.name] = {
            u: {**{m: v + _noise(j, m)[i] for m, v in vals.items()}, "label": spec.name}
            for i, u in enumerate(UNITS)
        }
    return numbers


BASE = {
    "id_pass1": 0.45,
    "ood_pass1": 0.10,
    "id_passk": 0.92,
    "ood_passk": 0.65,
    "delta_nll_rare": 0.30,
    "tail_miss_obs": 0.50,
    "tail_miss_pred": 0.50,
}


def test_the_verdicts_follow_their_rules():
    cfg = DemoConfig()
    per_run = {
        "grpo_n2": {"delta_nll_rare": 0.10},
        "grpo_n4": {"delta_nll_rare": 0.20},
        "grpo_n8": {"delta_nll_rare": 0.40},  # interior peak at N = 8
        "grpo_n16": {"delta_nll_rare": 0.30},
        "grpo_n32": {"delta_nll_rare": 0.20, "id_passk": 0.95, "ood_passk": 0.70},
        # F-GRPO: lower Delta NLL_rare, higher pass@k both ways, pass@1 a resolved drop OOD,
        # pass@k within 0.02 of GRPO N = 32; its early tail misses far from the prediction
        "fgrpo_n8": {
            "delta_nll_rare": 0.15,
            "id_passk": 0.96,
            "ood_passk": 0.69,
            "ood_pass1": 0.05,
            "tail_miss_obs": 0.80,
        },
        # the control has none of F-GRPO's gains
        "grpo_n8_lrmatched": {"delta_nll_rare": 0.40},
    }
    claims = {c["claim"]: c for c in judge_claims(_numbers(cfg, BASE, per_run), cfg)}
    assert claims[1]["verdict"] == HOLDS
    assert claims[2]["verdict"] == HOLDS
    assert claims[3]["verdict"] == HOLDS
    assert claims[4]["verdict"] == CONTRADICTED
    # F-GRPO loses less rare likelihood than GRPO at every lr scale: outside the frontier
    assert claims[5]["verdict"] == NOT_RESOLVED
    assert "6 outside the frontier" in claims[5]["evidence"]
    assert claims[6]["verdict"] == HOLDS
    # F-GRPO's early tail misses 0.3 above the prediction, resolved even at the Bonferroni
    # level for the 6 runs: it does not agree (the others, within 0.02, would)
    assert claims[7]["verdict"] == CONTRADICTED


def test_the_opposite_numbers_reverse_the_verdicts():
    cfg = DemoConfig()
    per_run = {
        "grpo_n2": {"delta_nll_rare": 0.10},
        "grpo_n4": {"delta_nll_rare": 0.20},
        "grpo_n8": {"delta_nll_rare": 0.30},
        "grpo_n16": {"delta_nll_rare": 0.40},
        "grpo_n32": {"delta_nll_rare": 0.50, "id_passk": 0.95},  # monotone: the peak at an end
        "fgrpo_n8": {"delta_nll_rare": 0.35, "id_passk": 0.90, "tail_miss_obs": 0.80},
        "grpo_n8_lrmatched": {"tail_miss_obs": 0.80},
    }
    numbers = _numbers(cfg, BASE, per_run)
    for n in (2, 4, 16, 32):
        for u in UNITS:
            numbers[f"grpo_n{n}"][u]["tail_miss_obs"] = 0.80
    claims = {c["claim"]: c for c in judge_claims(numbers, cfg)}
    assert claims[1]["verdict"] == CONTRADICTED
    assert claims[2]["verdict"] == CONTRADICTED
    assert claims[3]["verdict"] == CONTRADICTED
    assert claims[4]["verdict"] == HOLDS  # in-domain and OOD pass@1 unchanged
    assert claims[5]["verdict"] == NOT_RESOLVED  # F-GRPO above GRPO's flat frontier: outside
    assert claims[6]["verdict"] == CONTRADICTED  # 0.05 below GRPO N = 32 in-domain
    assert claims[7]["verdict"] == CONTRADICTED  # every run 0.3 above the prediction


def test_the_peak_is_tested_at_the_bonferroni_level_for_its_candidates():
    """Claim 1 picks N* as the largest mean, then tests it on the same numbers, so its
    differences are judged at 1 - 0.05 / 3 (three interior N). N = 8 above N = 32 by 0.10 with
    a base sd of 0.05 (4 bases: t = 4.0) is resolved at 95% (t_{0.975,3} = 3.18) but not at
    98.3% (t = 4.86): not resolved; by 0.15 (t = 6.0) it holds."""
    others = {"grpo_n2": 0.10, "grpo_n4": 0.20, "grpo_n16": 0.25, "grpo_n32": 0.30}
    for gap, verdict in ((0.10, NOT_RESOLVED), (0.15, HOLDS)):
        claim = _claim1(others, "grpo_n8", 0.30 + gap)
        assert claim["verdict"] == verdict, claim["evidence"]
        assert "judged at 98.33%: the peak is one of 3 candidates" in claim["evidence"]


#: A per-base shift of sd 0.05 over bases 0-3
_SD_005 = {0: -0.0433, 1: 0.0433, 2: -0.0433, 3: 0.0433}


def _claim1(others: dict, peak: str, level: float) -> dict:
    """Claim 1 of the default plan: Delta NLL_rare of each run in ``others`` as given, of
    ``peak`` at ``level`` plus the per-base shift ``_SD_005``."""
    cfg = DemoConfig()
    numbers = _numbers(cfg, BASE, {r: {"delta_nll_rare": v} for r, v in others.items()})
    for u in numbers[peak]:
        numbers[peak][u]["delta_nll_rare"] = level + _SD_005[u[0]]
    return {c["claim"]: c for c in judge_claims(numbers, cfg)}[1]


def _three_bases(numbers: dict) -> dict:
    """The study on bases 0-2 only (base 3 left out)."""
    return {name: {u: v for u, v in units.items() if u[0] != 3} for name, units in numbers.items()}


def test_an_interior_peak_on_three_group_sizes_and_three_bases_holds():
    """Claim 1 at its smallest resolvable design: three group sizes (N = 2, 8, 32: one interior
    candidate, judged at 95%) on three bases (MIN_BASES). Two group sizes cannot show an interior
    peak: not resolved, whatever the numbers."""
    import dataclasses

    cfg = dataclasses.replace(DemoConfig(), sweep_group_sizes=(2, 32))
    per_run = {
        "grpo_n2": {"delta_nll_rare": 0.10},
        "grpo_n8": {"delta_nll_rare": 0.40},
        "grpo_n32": {"delta_nll_rare": 0.20},
    }
    numbers = _three_bases(_numbers(cfg, BASE, per_run))
    claim = {c["claim"]: c for c in judge_claims(numbers, cfg)}[1]
    assert claim["verdict"] == HOLDS, claim["evidence"]
    assert "(3 bases)" in claim["evidence"] and "judged at 95%" in claim["evidence"]
    # the peak must beat the two ends only: N = 4, close to N = 8 and scattered (base sd 0.05),
    # does not have to be beaten
    cfg = DemoConfig()
    per_run = {
        f"grpo_n{n}": {"delta_nll_rare": v}
        for n, v in ((2, 0.10), (4, 0.38), (8, 0.40), (16, 0.30), (32, 0.10))
    }
    numbers = _numbers(cfg, BASE, per_run)
    shift = {0: -0.0433, 1: 0.0433, 2: -0.0433, 3: 0.0433}
    for u in numbers["grpo_n4"]:
        numbers["grpo_n4"][u]["delta_nll_rare"] += shift[u[0]]
    claim = {c["claim"]: c for c in judge_claims(numbers, cfg)}[1]
    assert claim["verdict"] == HOLDS and "N=4: +0.020 [" in claim["evidence"], claim["evidence"]
    two = dataclasses.replace(DemoConfig(), sweep_group_sizes=(2,))  # N = 2, 8: the peak an end
    numbers = _numbers(two, BASE, {"grpo_n2": {"delta_nll_rare": 0.10}})
    claim = {c["claim"]: c for c in judge_claims(numbers, two)}[1]
    assert claim["verdict"] == NOT_RESOLVED and "needs three" in claim["evidence"]


def test_a_peak_at_an_end_is_tested_at_the_bonferroni_level_for_the_two_ends():
    """Monotone towards N = 32 contradicts claim 1 only when N = 32 beats every other N at
    1 - 0.05 / 2 (either end could have been picked). N = 32 above N = 16 by 0.10 with a base sd
    of 0.05 (4 bases: t = 4.0) is resolved at 95% (t_{0.975,3} = 3.18) but not at 97.5%
    (t_{0.9875,3} = 4.18), though it beats N = 2, 4 and 8 by far: not resolved; by 0.15 (t = 6.0)
    it is contradicted."""
    others = {"grpo_n2": 0.10, "grpo_n4": 0.15, "grpo_n8": 0.20, "grpo_n16": 0.30}
    for gap, verdict in ((0.10, NOT_RESOLVED), (0.15, CONTRADICTED)):
        claim = _claim1(others, "grpo_n32", 0.30 + gap)
        assert claim["verdict"] == verdict, claim["evidence"]
        assert "peak at N = 32" in claim["evidence"]
        assert "judged at 97.5%: the peak is one of 2 candidates" in claim["evidence"]


def test_the_tail_miss_claim_is_equivalence_on_runs_with_three_bases_or_more():
    """Claim 7 holds when every run with >= 3 bases has observed - predicted within 0.02; a run
    on 2 bases is shown but not judged, however far off; a run 0.02 off (its interval across
    the margin) leaves it not resolved, one 0.05 off (wholly outside) contradicts it."""
    cfg = DemoConfig()
    numbers = _numbers(cfg, BASE, {"grpo_n8": {"tail_miss_obs": 0.505}})
    for n in (2, 4, 16, 32):  # the sweep on two bases, far off the prediction
        numbers[f"grpo_n{n}"] = {
            u: {**v, "tail_miss_obs": 0.9}
            for u, v in numbers[f"grpo_n{n}"].items()
            if u in ((0, 0), (1, 0))
        }
    claim = {c["claim"]: c for c in judge_claims(numbers, cfg)}[7]
    assert claim["verdict"] == HOLDS, claim["evidence"]
    assert claim["evidence"].count("not judged") == 4
    spread = dict(zip(UNITS, 4 * NOISE, strict=True))  # sd ~0.007 across the units
    for shift, verdict in ((0.02, NOT_RESOLVED), (0.03, CONTRADICTED)):  # 0.02, then 0.05 off
        for u in numbers["fgrpo_n8"]:
            numbers["fgrpo_n8"][u]["tail_miss_obs"] += shift + spread[u]
        assert {c["claim"]: c for c in judge_claims(numbers, cfg)}[7]["verdict"] == verdict


def test_partial_numbers_leave_claims_unresolved_without_failing():
    """F-GRPO beats GRPO, but the control was trained on no unit of theirs (a partial study): claim
    5 is not resolved; claim 1 compares the sweep on the units every N has, not on more units
    for N = 8 than for the other group sizes."""
    cfg = DemoConfig()
    per_run = {"fgrpo_n8": {"delta_nll_rare": 0.15}, "grpo_n8": {"delta_nll_rare": 0.40}}
    numbers = _numbers(cfg, BASE, per_run)
    numbers["grpo_n8_lrmatched"] = {(9, 0): {**BASE, "label": "control"}}  # another base only
    for n in (2, 4, 16, 32):  # the sweep on two bases: there N = 16 is the largest
        numbers[f"grpo_n{n}"] = {
            u: {**v, "delta_nll_rare": 0.1 * n**0.5}
            for u, v in numbers[f"grpo_n{n}"].items()
            if u in ((0, 0), (1, 0))
        }
    for u in ((0, 0), (1, 0)):
        numbers["grpo_n8"][u]["delta_nll_rare"] = 0.6  # the peak, on the swept units
    claims = {c["claim"]: c for c in judge_claims(numbers, cfg)}
    assert claims[2]["verdict"] == HOLDS
    assert claims[5]["verdict"] == NOT_RESOLVED
    assert "peak at N = 8" in claims[1]["evidence"] and "2 bases" in claims[1]["evidence"]
    # a clear interior peak, but on 2 bases (1 degree of freedom): no verdict; likewise claim 6
    assert claims[1]["verdict"] == "not judged, 2 bases"
    assert claims[6]["verdict"] == "not judged, 2 bases"
    assert "not judged, 2 bases; at 98.33%" in claims[1]["evidence"]
    assert "95% CI (not judged)" in claims[6]["evidence"]


def test_a_bases_kernel_family_is_kept(tmp_path):
    import pytest

    from fgrpo_llm.environment import pin_kernel_family

    pin_kernel_family(tmp_path / "base3", "other")
    pin_kernel_family(tmp_path / "base3", "other")  # the same: fine
    with pytest.raises(ValueError, match="base3 was drawn under the 'other' kernel family"):
        pin_kernel_family(tmp_path / "base3", "default")


def test_the_extended_claims_follow_their_rules():
    """Claims 8-10 on hand-made numbers: F-GRPO above both regularised baselines, gammas 0.5 and
    1 good and gamma 2 losing pass@1, F-GRPO below MaxRL in Delta NLL_rare as the simulator
    (more retained mass for F-GRPO) predicts; then the opposite numbers."""

    cfg = DemoConfig()
    per_run = {
        "grpo_n8": {"delta_nll_rare": 0.40},
        "fgrpo_n8": {"delta_nll_rare": 0.20, "id_pass1": 0.50, "ood_passk": 0.70},
        "fgrpo_n8_g0.5": {"delta_nll_rare": 0.25},
        "fgrpo_n8_g2": {"delta_nll_rare": 0.15, "id_pass1": 0.30},
        "maxrl_n8": {"delta_nll_rare": 0.30},
    }
    numbers = _extended_numbers(cfg, per_run)

    def sim(f_grpo, maxrl):  # the simulator's M_ret per seed
        per_seed = {"GRPO": [0.1, 0.1, 0.1], "F-GRPO gamma=1": f_grpo, "MaxRL": maxrl}
        return {"m_ret": {k: sum(v) / len(v) for k, v in per_seed.items()}, "per_seed": per_seed}

    prediction = sim([0.30, 0.31, 0.29], [0.20, 0.22, 0.21])
    claims = {c["claim"]: c for c in judge_claims(numbers, cfg, prediction)}
    assert claims[8]["verdict"] == HOLDS
    assert claims[9]["verdict"] == HOLDS
    assert (
        claims[10]["verdict"] == HOLDS
        and "predicts F-GRPO's Delta NLL_rare below" in (claims[10]["evidence"])
    )
    # the simulator predicting the other way contradicts it; no prediction, or a simulator
    # whose own seeds do not separate the two, leaves it open
    flipped = judge_claims(numbers, cfg, sim([0.30, 0.31, 0.29], [0.50, 0.52, 0.51]))
    assert {c["claim"]: c for c in flipped}[10]["verdict"] == CONTRADICTED
    assert {c["claim"]: c for c in judge_claims(numbers, cfg)}[10]["verdict"] == NOT_RESOLVED
    tied = {c["claim"]: c for c in judge_claims(numbers, cfg, sim([0.30, 0.20], [0.21, 0.28]))}
    assert tied[10]["verdict"] == NOT_RESOLVED
    assert "does not separate them" in tied[10]["evidence"]
    # gamma 0.5 raising Delta NLL_rare above GRPO's contradicts claim 9
    for i, u in enumerate(UNITS):
        numbers["fgrpo_n8_g0.5"][u]["delta_nll_rare"] = 0.6 + _noise(3, "delta_nll_rare")[i]
    assert {c["claim"]: c for c in judge_claims(numbers, cfg)}[9]["verdict"] == CONTRADICTED
    # without the extended runs: not resolved, saying so
    core = {k: v for k, v in numbers.items() if k in {s.name for s in run_specs(cfg)}}
    claims = {c["claim"]: c for c in judge_claims(core, cfg)}
    assert all(claims[k]["verdict"] == NOT_RUN for k in (8, 9, 10))
    assert "not trained" in claims[8]["evidence"] and "not trained" in claims[10]["evidence"]


def test_claims_without_their_runs_are_not_run():
    cfg = DemoConfig()
    numbers = _numbers(cfg, BASE, {})
    core = {k: v for k, v in numbers.items() if k in ("grpo_n8", "fgrpo_n8", "grpo_n8_lrmatched")}
    claims = {c["claim"]: c for c in judge_claims(core, cfg)}
    assert claims[1]["verdict"] == NOT_RUN and "--sweep-bases" in claims[1]["evidence"]
    assert claims[6]["verdict"] == NOT_RUN
    assert claims[2]["verdict"] != NOT_RUN


def test_a_ratio_that_leaves_a_base_out_says_so():
    """Claim 2's ratio F-GRPO / GRPO needs both values positive: a base where F-GRPO's Delta
    NLL_rare is negative leaves the ratio, and the evidence names the ratio's own base count."""
    cfg = DemoConfig()
    numbers = _numbers(cfg, BASE, {"fgrpo_n8": {"delta_nll_rare": 0.15}})
    for u in ((3, 0),):  # base 3's only unit
        numbers["fgrpo_n8"][u]["delta_nll_rare"] = -0.05
    evidence = {c["claim"]: c for c in judge_claims(numbers, cfg)}[2]["evidence"]
    assert "over 4 bases: paired difference" in evidence and "(over 3 bases)" in evidence


def test_a_kernel_family_difference_from_tied_bases_is_not_resolved():
    """Welch's interval of two families whose bases all tie has zero width: no verdict rests on
    it (the family rows, as the claims); a real spread resolves."""
    from fgrpo_llm.experiments.countdown.study_report import family_rows

    cfg = DemoConfig()
    numbers = _numbers(cfg, BASE, {})
    bases = {b: {"family": "other" if b % 2 else "default"} for b in range(4)}
    for u in numbers["grpo_n8"]:
        numbers["grpo_n8"][u]["delta_nll_rare"] = 0.4 if u[0] % 2 else 0.3
    rows = {r["what"]: r for r in family_rows(numbers, cfg, bases)}
    tied = rows["Delta NLL_rare, grpo_n8"]
    assert abs(tied["difference"]["hi"] - tied["difference"]["lo"]) < 1e-12
    assert tied["resolved"] is False
    for u in numbers["grpo_n8"]:  # the same gap with a spread between bases: resolved
        numbers["grpo_n8"][u]["delta_nll_rare"] += 0.002 * u[0]
    rows = {r["what"]: r for r in family_rows(numbers, cfg, bases)}
    assert rows["Delta NLL_rare, grpo_n8"]["resolved"] is True


def test_each_metric_of_a_two_metric_claim_can_decide_it():
    """Claims 3, 4 and 6 each rest on an in-domain and an OOD metric: a resolved failure in
    either one alone contradicts the claim (a claim reading only one of them would hold)."""
    cfg = DemoConfig()
    cases = {  # claim -> (run, metric pair, a value that fails the claim in that metric)
        3: ("fgrpo_n8", ("id_passk", "ood_passk"), -0.05),  # F-GRPO below GRPO
        4: ("fgrpo_n8", ("id_pass1", "ood_pass1"), -0.05),  # a drop of 0.05 > 0.02
        6: ("grpo_n32", ("id_passk", "ood_passk"), +0.05),  # GRPO N = 32 ahead by 0.05
    }
    for claim, (run, metrics, shift) in cases.items():
        for bad, good in (metrics, metrics[::-1]):
            per_run = {run: {bad: BASE[bad] + shift, good: BASE[good] - shift}}
            verdicts = {
                c["claim"]: c["verdict"] for c in judge_claims(_numbers(cfg, BASE, per_run), cfg)
            }
            assert verdicts[claim] == CONTRADICTED, (claim, bad)


def test_intervals_of_fractions_are_cut_to_their_range_and_delta_nll_is_not():
    """Over two bases a t interval of a fraction reaches past [0, 1]: the study prints it cut
    (``stats.clipped``), a difference of two fractions to [-1, 1]; Delta NLL_rare has no range."""
    units = {(0, 0): 0.1, (1, 0): 0.9}
    numbers = {
        "a": {
            u: dict.fromkeys(("tail_miss_obs", "delta_nll_rare", "id_pass1"), v)
            for u, v in units.items()
        },
        "b": {u: {"tail_miss_obs": 1 - v, "id_pass1": 0.5} for u, v in units.items()},
    }
    iv = interval(numbers, "a", "tail_miss_obs")
    assert (iv.lo, iv.hi) == (0.0, 1.0)
    nll = interval(numbers, "a", "delta_nll_rare")
    assert nll.lo < 0.0 and nll.hi > 1.0
    d = paired(numbers, "a", "b", "tail_miss_obs")  # -0.8, +0.8: t_{0.975, 1} takes it past 1
    assert (d.lo, d.hi) == (-1.0, 1.0)
    r = ratio(numbers, "a", "b", "id_pass1")  # 0.2 and 1.8: cut at 0 below, not above
    assert r.lo == 0.0 and r.hi > 2.0


def test_a_run_on_exactly_three_bases_is_judged_for_the_tail_miss_claim():
    """Claim 7 judges a run with MIN_BASES = 3 bases (not only more): F-GRPO's early tail misses
    0.3 above the prediction on bases 0-2 contradict it (the evidence shows observed -
    predicted). On 4 bases, 0.015 above (tight intervals) is within TAIL_MISS_MARGIN = 0.02,
    0.025 above is not."""
    cfg = DemoConfig()
    numbers = _three_bases(_numbers(cfg, BASE, {"fgrpo_n8": {"tail_miss_obs": 0.80}}))
    claim = {c["claim"]: c for c in judge_claims(numbers, cfg)}[7]
    assert claim["verdict"] == CONTRADICTED, claim["evidence"]
    assert "not judged" not in claim["evidence"] and "(3 bases)" in claim["evidence"]
    assert "difference +0.300 [" in claim["evidence"]
    for off, verdict in ((0.015, HOLDS), (0.025, CONTRADICTED)):
        numbers = _numbers(cfg, BASE, {"fgrpo_n8": {"tail_miss_obs": 0.50 + off}})
        claim = {c["claim"]: c for c in judge_claims(numbers, cfg)}[7]
        assert claim["verdict"] == verdict, claim["evidence"]


def _extended_numbers(cfg, per_run: dict) -> dict:
    """``_numbers`` for the plan and the extended plan."""
    from fgrpo_llm.experiments.countdown.config import extended_specs

    numbers = _numbers(cfg, BASE, per_run)
    for j, spec in enumerate(extended_specs(cfg), start=len(numbers)):
        vals = {**BASE, **per_run.get(spec.name, {})}
        numbers[spec.name] = {
            u: {**{m: v + _noise(j, m)[i] for m, v in vals.items()}, "label": spec.name}
            for i, u in enumerate(UNITS)
        }
    return numbers


def test_each_of_the_four_parts_of_the_regulariser_claim_can_decide_it():
    """Claim 8: F-GRPO above both baselines on in-domain pass@1 and OOD pass@k_max (no margin);
    one baseline ahead by 0.01 on one of those metrics alone contradicts it. With the KL
    baseline not trained, the entropy one is still judged: not resolved, not "not run"."""
    cfg = DemoConfig()
    fgrpo = {"fgrpo_n8": {"id_pass1": 0.50, "ood_passk": 0.70}}
    assert {c["claim"]: c for c in judge_claims(_extended_numbers(cfg, fgrpo), cfg)}[8][
        "verdict"
    ] == HOLDS
    for baseline in ("grpo_n8_entropy", "grpo_n8_kl"):
        for metric in ("id_pass1", "ood_passk"):
            per_run = {**fgrpo, baseline: {metric: fgrpo["fgrpo_n8"][metric] + 0.01}}
            verdicts = {
                c["claim"]: c["verdict"] for c in judge_claims(_extended_numbers(cfg, per_run), cfg)
            }
            assert verdicts[8] == CONTRADICTED, (baseline, metric)
    numbers = _extended_numbers(cfg, fgrpo)
    del numbers["grpo_n8_kl"]
    claim = {c["claim"]: c for c in judge_claims(numbers, cfg)}[8]
    assert claim["verdict"] == NOT_RESOLVED and "over 4 bases or more" in claim["evidence"]


def test_the_gamma_claim_judges_gamma_one_and_needs_a_larger_gamma_that_drops_pass1():
    """Claim 9: gamma = 1 (the plan's own F-GRPO) is in the good range [0.5, 1]: its Delta
    NLL_rare above GRPO's contradicts the claim. Every gamma > 1 needs a resolved pass@1 drop
    (0.01 is enough: the margin is for keeping pass@1, not for losing it); one of two that keeps
    pass@1, or a plan without a gamma > 1, leaves it not resolved. A gamma of 0 in
    ``extended_gammas`` is GRPO, not trained and not judged."""
    import dataclasses

    good = {
        "grpo_n8": {"delta_nll_rare": 0.40},
        "fgrpo_n8": {"delta_nll_rare": 0.20},
        "fgrpo_n8_g0.5": {"delta_nll_rare": 0.25},
        "fgrpo_n8_g2": {"delta_nll_rare": 0.15, "id_pass1": 0.44},  # a drop of 0.01
        "fgrpo_n8_g3": {"id_pass1": 0.30},
    }

    def claim9(cfg, per_run):
        numbers = _extended_numbers(cfg, per_run)
        return {c["claim"]: c for c in judge_claims(numbers, cfg)}[9]["verdict"]

    cfg = DemoConfig()
    assert claim9(cfg, good) == HOLDS
    assert claim9(cfg, {**good, "fgrpo_n8": {"delta_nll_rare": 0.60}}) == CONTRADICTED
    assert claim9(dataclasses.replace(cfg, extended_gammas=(0.0, 0.5, 2.0)), good) == HOLDS
    assert claim9(dataclasses.replace(cfg, extended_gammas=(0.5,)), good) == NOT_RESOLVED
    three = dataclasses.replace(cfg, extended_gammas=(0.5, 2.0, 3.0))
    assert claim9(three, good) == HOLDS
    assert claim9(three, {**good, "fgrpo_n8_g2": {"delta_nll_rare": 0.15}}) == NOT_RESOLVED
    # a contradiction needs no more than its own runs: with no gamma > 1 in the plan, or the
    # gamma = 2 run missing, gamma = 1 raising Delta NLL_rare still contradicts the claim
    worse = {**good, "fgrpo_n8": {"delta_nll_rare": 0.60}}
    assert claim9(dataclasses.replace(cfg, extended_gammas=(0.5,)), worse) == CONTRADICTED
    for per_run, verdict in ((worse, CONTRADICTED), (good, NOT_RESOLVED)):
        numbers = _extended_numbers(cfg, per_run)
        del numbers["fgrpo_n8_g2"]
        assert {c["claim"]: c for c in judge_claims(numbers, cfg)}[9]["verdict"] == verdict


def test_the_maxrl_claim_reads_the_simulators_seeds_at_the_plans_gamma():
    """Claim 10: two simulator seeds are enough for a prediction when they separate F-GRPO from
    MaxRL (t interval with 1 degree of freedom); one seed, or seed lists of unequal lengths, give
    none. The F-GRPO entry read is the plan's gamma (0.5 here), not another one."""
    import dataclasses

    def sim(per_seed):
        return {"m_ret": {k: sum(v) / len(v) for k, v in per_seed.items()}, "per_seed": per_seed}

    def claim10(cfg, prediction):
        numbers = _extended_numbers(
            cfg, {"fgrpo_n8": {"delta_nll_rare": 0.20}, "maxrl_n8": {"delta_nll_rare": 0.30}}
        )
        return {c["claim"]: c for c in judge_claims(numbers, cfg, prediction)}[10]

    cfg = DemoConfig()
    two = claim10(cfg, sim({"F-GRPO gamma=1": [0.30, 0.31], "MaxRL": [0.20, 0.22]}))
    assert two["verdict"] == HOLDS and "2 seeds" in two["evidence"], two["evidence"]
    one = claim10(cfg, sim({"F-GRPO gamma=1": [0.30], "MaxRL": [0.20]}))
    assert one["verdict"] == NOT_RESOLVED and "no simulator prediction" in one["evidence"]
    unequal = claim10(cfg, sim({"F-GRPO gamma=1": [0.30, 0.31, 0.29], "MaxRL": [0.20, 0.22]}))
    assert unequal["verdict"] == NOT_RESOLVED and "no simulator prediction" in unequal["evidence"]
    half = dataclasses.replace(cfg, gamma=0.5)
    prediction = sim(
        {
            "F-GRPO gamma=0.5": [0.30, 0.31, 0.29],  # more retained mass: F-GRPO predicted lower
            "F-GRPO gamma=1": [0.10, 0.11, 0.09],
            "MaxRL": [0.20, 0.22, 0.21],
        }
    )
    assert claim10(half, prediction)["verdict"] == HOLDS


def test_claim_one_prints_its_differences_at_the_level_it_judges():
    """Claim 1 tests the peak at 1 - 0.05 / 3 (three interior candidates): the differences it
    prints are those intervals (wider than the 95% ones), not the 95% intervals."""
    from fgrpo_llm.evaluation.stats import format_interval, widen

    others = {"grpo_n2": 0.10, "grpo_n4": 0.20, "grpo_n16": 0.25, "grpo_n32": 0.30}
    claim = _claim1(others, "grpo_n8", 0.45)
    cfg = DemoConfig()
    numbers = _numbers(cfg, BASE, {r: {"delta_nll_rare": v} for r, v in others.items()})
    for u in numbers["grpo_n8"]:
        numbers["grpo_n8"][u]["delta_nll_rare"] = 0.45 + _SD_005[u[0]]
    d = paired(numbers, "grpo_n8", "grpo_n32", "delta_nll_rare")
    judged = format_interval(widen(d, 1 - 0.05 / 3), 3, signed=True)
    assert f"N=32: {judged}" in claim["evidence"], claim["evidence"]
    assert f"N=32: {format_interval(d, 3, signed=True)}" not in claim["evidence"]


def test_claim_six_prints_the_bonferroni_interval_when_it_contradicts():
    cfg = DemoConfig()
    per_run = {"grpo_n32": {"id_passk": 0.95}, "fgrpo_n8": {"id_passk": 0.90}}
    claim = {c["claim"]: c for c in judge_claims(_numbers(cfg, BASE, per_run), cfg)}[6]
    assert claim["verdict"] == CONTRADICTED and "97.5% CI" in claim["evidence"]
    per_run["fgrpo_n8"]["id_passk"] = 0.94  # within 0.02 of GRPO N = 32: holds, at 95%
    claim = {c["claim"]: c for c in judge_claims(_numbers(cfg, BASE, per_run), cfg)}[6]
    assert claim["verdict"] == HOLDS and "95% CI" in claim["evidence"]


def test_every_gamma_is_compared_on_the_units_all_gammas_share():
    """gamma = 1 on every (base, seed), the other gammas on the first seed of three bases: each
    gamma - GRPO contrast rests on those three units, gamma = 1's too (its extra units, where it
    would look better, are left out)."""
    cfg = DemoConfig()
    numbers = _numbers(cfg, BASE, {"fgrpo_n8": {"delta_nll_rare": 0.20}})
    shared = [(0, 0), (1, 0), (2, 0)]
    for g in (0.5, 2.0):
        numbers[f"fgrpo_n8_g{g:g}"] = {
            u: {**numbers["fgrpo_n8"][u], "delta_nll_rare": 0.25 + 0.001 * u[0]} for u in shared
        }
    for u in numbers["fgrpo_n8"]:
        if u not in shared:  # the units only gamma = 1 has: far lower Delta NLL_rare
            numbers["fgrpo_n8"][u]["delta_nll_rare"] = -1.0
    claim = {c["claim"]: c for c in judge_claims(numbers, cfg)}[9]
    assert "on the 3 units (3 bases) every gamma shares" in claim["evidence"], claim["evidence"]
    assert "gamma = 1 - GRPO: Delta NLL_rare -0.100" in claim["evidence"], claim["evidence"]


def _mech(b_mean: float, u_mean: float, *, n_b: int = 30, n_u: int = 10, other: float = 0.0):
    """Per unit the mechanism's columns: B and U means (a tiny per-unit spread), S holding
    ``other`` nats in all."""
    return {
        u: {
            "mech_B_n": n_b,
            "mech_B_sum": n_b * (b_mean + NOISE[i]),
            "mech_U_n": n_u,
            "mech_U_sum": n_u * (u_mean - NOISE[i] / 2),
            "mech_S_n": 5,
            "mech_S_sum": other,
            "mech_I_n": 0,
            "mech_I_sum": 0.0,
        }
        for i, u in enumerate(UNITS)
    }


def _with_mech(numbers: dict, name: str, mech: dict) -> dict:
    numbers[name] = {u: {**numbers.get(name, {}).get(u, {"label": name}), **mech[u]} for u in UNITS}
    return numbers


def test_the_mechanism_claims_follow_their_rules():
    """Claim 11 (the plan's GRPO runs) and 12 (the revisit arm): B losing more than U, with most
    of the sum, holds; B and U alike is "drift" (contradicted); no mechanism columns, not run."""
    cfg = DemoConfig()
    numbers = _numbers(cfg, BASE, {})
    verdicts = {c["claim"]: c for c in judge_claims(numbers, cfg)}
    assert verdicts[11]["verdict"] == NOT_RUN and verdicts[12]["verdict"] == NOT_RUN
    _with_mech(numbers, "grpo_n8", _mech(0.6, 0.1))
    _with_mech(numbers, "grpo_n8_pool1200", _mech(0.3, 0.3))
    _with_mech(numbers, "fgrpo_n8", _mech(0.2, 0.1))
    verdicts = {c["claim"]: c for c in judge_claims(numbers, cfg)}
    assert verdicts[11]["verdict"] == HOLDS
    assert "grpo_n8: tail misses drive the forgetting" in verdicts[11]["evidence"]
    assert "fgrpo_n8:" in verdicts[11]["evidence"]  # F-GRPO's arm beside
    assert verdicts[12]["verdict"] == CONTRADICTED
    assert "drift, not tail misses" in verdicts[12]["evidence"]
    from fgrpo_llm.experiments.countdown.study_report import mechanism_table

    table = mechanism_table(numbers)  # the report's section: one row per run with the columns
    assert table.count("| tail misses drive the forgetting |") == 2  # GRPO and F-GRPO
    assert "| drift, not tail misses |" in table and "| 180: +0.600" in table
    # the revisit arm trains every rare prompt (no U): not judged by the rule as written; beside
    # it, U from the one-visit run of the same unit (post hoc) finds the excess over it
    _with_mech(numbers, "grpo_n8_pool1200", _mech(0.9, 0.0, n_u=0))
    c12 = {c["claim"]: c for c in judge_claims(numbers, cfg)}[12]
    assert c12["verdict"] == "not judged, 0 bases"
    post_hoc = c12["evidence"].split("With U taken from the plan's one-visit run")[1]
    assert "grpo_n8_pool1200: tail misses drive the forgetting" in post_hoc
    assert "U from grpo_n8 (post hoc)" in mechanism_table(numbers)
    # B above U, but S holds most of the sum: not resolved
    _with_mech(numbers, "grpo_n8", _mech(0.6, 0.1, other=1000.0))
    assert {c["claim"]: c for c in judge_claims(numbers, cfg)}[11]["verdict"] == NOT_RESOLVED
