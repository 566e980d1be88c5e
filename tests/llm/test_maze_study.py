"""Tests of the Maze study's statistics: intervals over seeds, paired differences and the verdicts
on the paper's Table 4 claims, on synthetic per-seed results whose answer is known by hand; and the
reproduce command written into the report."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from fgrpo_llm.evaluation.stats import CONTRADICTED, HOLDS, NOT_RESOLVED, combine_verdicts
from fgrpo_llm.experiments.maze.config import make_config, method_name, methods, plan
from fgrpo_llm.experiments.maze.study import study

K = 8
CFG = make_config(
    "reduced", rl_seeds=(0, 1, 2), group_sizes=(4, 8), gammas=(0.0, 1.0), eval_k_max=K
)


def _results(cfg, value):
    """Synthetic results: ``value(method, N, seed) -> (pass@1, pass@K, dip)`` as fractions."""
    runs = {}
    for run in plan(cfg):
        p1, pk, dip = value(run.method, run.N, run.seed)
        runs[run.key] = {
            "method": run.method,
            "N": run.N,
            "seed": run.seed,
            "final": {"eval/test/pass@1": p1, f"eval/test/pass@{K}": pk},
            "dips": {f"dip/pass@{K}": dip},
        }
    sft = {
        str(s): {"eval/test/pass@1": 0.3 + 0.01 * s, f"eval/test/pass@{K}": 0.8}
        for s in cfg.rl_seeds
    }
    return {"sft": sft, "runs": runs}


GRPO, FGRPO, CONTROL = method_name(0.0), method_name(1.0), method_name(0.0, 1.0)
NOISE = {0: 0.0, 1: 0.01, 2: -0.02}  # a per-seed shift every method shares (cancels when paired)


def _cell(report, a, b, N, metric):
    (d,) = [
        d
        for d in report["differences"]
        if (d["a"], d["b"], d["N"], d["metric"]) == (a, b, N, metric)
    ]
    return d


def test_intervals_and_paired_differences_match_a_hand_computation():
    gains = {0: 0.05, 1: 0.07, 2: 0.04}

    def value(method, N, s):
        base = 0.4 + NOISE[s]
        return (base + (gains[s] if method == FGRPO else 0.0), 0.7, 0.1)

    report = study(CFG, _results(CFG, value))
    row = [r for r in report["runs"] if r["method"] == FGRPO and r["N"] == 4][0]
    x = np.array([100 * (0.4 + NOISE[s] + gains[s]) for s in (0, 1, 2)])
    half = sps.t.ppf(0.975, 2) * x.std(ddof=1) / math.sqrt(3)
    assert row["pass@1"]["mean"] == pytest.approx(x.mean())
    assert row["pass@1"]["lo"] == pytest.approx(x.mean() - half)
    assert row["pass@1"]["hi"] == pytest.approx(x.mean() + half)
    assert row["pass@1 per seed"] == pytest.approx(list(x))
    d = np.array([100 * gains[s] for s in (0, 1, 2)])  # the shared noise cancels
    half_d = sps.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    cell = _cell(report, FGRPO, GRPO, 4, "pass@1")
    assert cell["difference"]["mean"] == pytest.approx(d.mean())
    assert cell["difference"]["lo"] == pytest.approx(d.mean() - half_d)
    assert cell["verdict"] == HOLDS  # 5.3 -/- 3.8 > 0
    assert report["sft"]["pass@1"]["mean"] == pytest.approx(31.0)


def test_verdicts_when_fgrpo_wins_everywhere_and_the_control_does_not():
    def value(method, N, s):
        p1, pk, dip = 0.4 + NOISE[s], 0.7 + NOISE[s], 0.10
        if method == FGRPO:
            return p1 + 0.05 + 0.01 * s, pk + 0.08 - 0.01 * s, dip - 0.05 - 0.01 * s
        if method == CONTROL:
            return p1 + 0.012 * s, pk + 0.001 * s, dip - 0.001 * s
        return p1, pk, dip

    claims = study(CFG, _results(CFG, value))["claims"]
    assert [claims[c]["verdict"] for c in "abcd"] == [HOLDS] * 4
    assert claims["d"]["per_gamma"]["1"]["gains"] == 2 * 3  # every N, every metric


def test_one_n_against_fgrpo_contradicts_the_every_n_claim():
    def value(method, N, s):
        p1 = 0.4 + NOISE[s]
        if method == FGRPO:
            p1 += (0.05 if N == 4 else -0.05) + 0.01 * s
        return p1, 0.7 + NOISE[s] + 0.01 * s * (method == FGRPO), 0.1

    report = study(CFG, _results(CFG, value))
    assert _cell(report, FGRPO, GRPO, 4, "pass@1")["verdict"] == HOLDS
    assert _cell(report, FGRPO, GRPO, 8, "pass@1")["verdict"] == CONTRADICTED
    claims = report["claims"]
    assert claims["b"]["verdict"] == CONTRADICTED
    assert claims["b"]["per_gamma"]["1"]["cells"] == {"4": HOLDS, "8": CONTRADICTED}
    assert claims["c"]["verdict"] == NOT_RESOLVED  # 0, 1, 2 points: the interval holds 0
    assert claims["a"]["verdict"] == NOT_RESOLVED  # equal dips: a zero-width interval at 0


def test_a_tie_of_every_seed_carries_no_verdict(tmp_path):
    """F-GRPO 4 held-out mazes ahead in pass@64 on every seed (a discrete metric): the paired
    difference has zero width, which is not a 95% interval, so the cell is not resolved, and
    the report marks it."""
    from fgrpo_llm.experiments.maze.report import write_report

    def value(method, N, s):
        pk = 0.7 + NOISE[s] + 4 / 64 * (method == FGRPO)
        return 0.4 + NOISE[s], pk, 0.1

    report = study(CFG, _results(CFG, value))
    cell = _cell(report, FGRPO, GRPO, 8, f"pass@{K}")
    assert cell["difference"]["mean"] == pytest.approx(6.25)
    assert cell["difference"]["lo"] == pytest.approx(cell["difference"]["hi"])
    assert cell["verdict"] == NOT_RESOLVED
    text = write_report(CFG, report, tmp_path).read_text()
    assert "+6.2 [+6.2, +6.2]* (?)" in text and "carries no verdict" in text


def test_a_cell_just_against_fgrpo_at_95_percent_does_not_contradict_two_cells():
    """The N = 8 cell -3 [-5.5, -0.5] is contradicted alone, but the claim has 2 cells: at the
    Bonferroni level (97.5%) it reads [-6.6, +0.6], so the claim is not resolved."""

    def value(method, N, s):
        p1 = 0.4 + NOISE[s]
        if method == FGRPO:
            p1 += (0.05 if N == 4 else -0.04) + 0.01 * s
        return p1, 0.7, 0.1

    report = study(CFG, _results(CFG, value))
    assert _cell(report, FGRPO, GRPO, 8, "pass@1")["verdict"] == CONTRADICTED
    assert report["claims"]["b"]["verdict"] == NOT_RESOLVED


def test_control_that_matches_or_beats_fgrpo_reproduces_its_gains():
    """Claim (d) is contradicted when the control beats F-GRPO or comes within half its gain
    (and beats GRPO) in every gain cell; an F-GRPO - control interval that merely contains 0
    reproduces nothing."""

    def beats(method, N, s):
        p1 = (
            0.4
            + NOISE[s]
            + (0.05 + 0.01 * s) * (method == FGRPO)
            + (0.08 + 0.013 * s) * (method == CONTROL)
        )
        return p1, 0.7, 0.1

    claims = study(CFG, _results(CFG, beats))["claims"]
    assert claims["b"]["verdict"] == HOLDS and claims["d"]["verdict"] == CONTRADICTED
    assert set(claims["d"]["per_gamma"]["1"]["cells"]) == {"N=4 pass@1", "N=8 pass@1"}

    def matches(method, N, s):
        p1 = (
            0.4
            + NOISE[s]
            + (0.05 + 0.01 * s) * (method in (FGRPO, CONTROL))
            + 0.003 * (s - 1) * (method == CONTROL)
        )
        return p1, 0.7, 0.1

    # a control within half of F-GRPO's gain (and above GRPO) reproduces it too
    assert study(CFG, _results(CFG, matches))["claims"]["d"]["verdict"] == CONTRADICTED

    def unclear(method, N, s):  # the control scatters by 0.08 between seeds around F-GRPO
        p1 = (
            0.4
            + NOISE[s]
            + (0.05 + 0.01 * s) * (method in (FGRPO, CONTROL))
            + 0.08 * (s - 1) * (method == CONTROL)
        )
        return p1, 0.7, 0.1

    assert study(CFG, _results(CFG, unclear))["claims"]["d"]["verdict"] == NOT_RESOLVED


def test_no_gain_over_grpo_leaves_d_unresolved_and_says_why(tmp_path):
    from fgrpo_llm.experiments.maze.report import write_report

    report = study(CFG, _results(CFG, lambda m, N, s: (0.4 + NOISE[s], 0.7, 0.1)))
    assert report["claims"]["d"]["verdict"] == NOT_RESOLVED
    assert report["claims"]["d"]["per_gamma"]["1"]["gains"] == 0
    text = write_report(CFG, report, tmp_path).read_text()
    assert "nothing for the control to reproduce" in text
    assert f"largest pass@{K} dip" in text and "Student-t" in text


def test_one_seed_resolves_nothing():
    cfg = make_config("reduced", rl_seeds=(0,), group_sizes=(4,), gammas=(0.0, 1.0), eval_k_max=K)
    report = study(cfg, _results(cfg, lambda m, N, s: (0.4 + 0.2 * (m == FGRPO), 0.7, 0.1)))
    assert all(c["verdict"] == NOT_RESOLVED for c in report["claims"].values())
    assert math.isnan(report["runs"][0]["pass@1"]["lo"])


def test_partial_studies_pair_only_the_seeds_both_runs_finished():
    results = _results(
        CFG, lambda m, N, s: (0.4 + NOISE[s] + 0.05 * (m == FGRPO) * (s + 1), 0.7, 0.1)
    )
    del results["runs"]["seed2/grpo_N4"]
    report = study(CFG, results)
    cell = _cell(report, FGRPO, GRPO, 4, "pass@1")
    assert cell["difference"]["n"] == 2 and cell["difference"]["mean"] == pytest.approx(7.5)
    assert [r["seeds"] for r in report["runs"] if r["method"] == GRPO and r["N"] == 4] == [[0, 1]]


def test_combine_verdicts():
    assert combine_verdicts([HOLDS, HOLDS]) == HOLDS
    assert combine_verdicts([HOLDS, NOT_RESOLVED]) == NOT_RESOLVED
    assert combine_verdicts([HOLDS, CONTRADICTED, NOT_RESOLVED]) == CONTRADICTED
    assert combine_verdicts([]) == NOT_RESOLVED


def test_reproduce_command_gives_back_the_config():
    import shlex

    from fgrpo_llm.cli import build_parser
    from fgrpo_llm.cli.maze import _HELP, _LISTS
    from fgrpo_llm.experiments.maze.config import command_for

    for cfg in (
        CFG,
        make_config("reduced"),
        make_config("full", rl_seeds=(3, 4), lr_matched_gammas=(), threads=2),
    ):
        command = command_for(cfg)
        args = build_parser().parse_args(shlex.split(command)[1:])
        values = {d: getattr(args, d) for d in {**_HELP, **_LISTS} if getattr(args, d) is not None}
        assert make_config(args.preset, **values) == cfg, command
    assert "--seeds 0,1,2" in command_for(CFG) and "--workers" not in command_for(CFG)
    assert [m for m in methods(CFG)] == [(0.0, None), (1.0, None), (0.0, 1.0)]


def test_intervals_are_cut_to_percentage_points():
    """A dip of 0 or 30 points over three seeds: the t interval reaches below 0, the study's stops
    at 0 (``stats.clipped``); its mean and the paired differences are unchanged."""

    def value(method, N, s):
        return (0.4, 0.7, 0.3 if s == 0 else 0.0)

    report = study(CFG, _results(CFG, value))
    row = [r for r in report["runs"] if r["method"] == GRPO and r["N"] == 4][0]
    assert row["dip"]["mean"] == pytest.approx(10.0)
    assert row["dip"]["lo"] == 0.0 and row["dip"]["hi"] == pytest.approx(
        10.0 + sps.t.ppf(0.975, 2) * np.std([30.0, 0.0, 0.0], ddof=1) / math.sqrt(3)
    )
