"""Claims as data (``fgrpo_llm.experiments.claims.Claim``): a claim is its key, the paper's
statement, the rule and a judge; both studies list theirs, and their records come from that list."""

import re

import pytest

from fgrpo_llm.evaluation.stats import CONTRADICTED, HOLDS, NOT_RESOLVED, Interval
from fgrpo_llm.experiments.claims import NOT_RUN, Claim, control_verdict
from fgrpo_llm.experiments.countdown import study_claims
from fgrpo_llm.experiments.countdown.config import DemoConfig
from fgrpo_llm.experiments.maze import report as maze_report
from fgrpo_llm.experiments.maze import study as maze_study

VERDICTS = {HOLDS, CONTRADICTED, NOT_RESOLVED, NOT_RUN}


def test_a_claims_record_is_its_judges_verdict_with_text_and_rule_filled_in():
    seen = []

    def judge(study):
        seen.append(study)
        return HOLDS, f"{study['d']:+.2f}"

    c = Claim(3, "F-GRPO at N = {N} wins", "holds if the interval at N = {N} lies above 0", judge)
    rec = c.record({"d": 0.25}, N=8)
    assert seen == [{"d": 0.25}]
    assert rec == {
        "claim": 3,
        "text": "F-GRPO at N = 8 wins",
        "verdict": HOLDS,
        "evidence": "+0.25",
        "rule": "holds if the interval at N = 8 lies above 0",
    }
    with pytest.raises(KeyError, match="N"):  # a field the study does not give
        c.record({"d": 0.0})


def test_the_countdown_study_lists_claims_one_to_twelve_and_judges_each_from_the_list():
    assert [c.key for c in study_claims.CLAIMS] == list(range(1, 13))
    cfg = DemoConfig()
    records = study_claims.judge_claims({}, cfg)  # no run at all
    assert [r["claim"] for r in records] == list(range(1, 13))
    for c, r in zip(study_claims.CLAIMS, records, strict=True):
        assert r["verdict"] in VERDICTS
        assert not re.search(r"[{}]", r["text"] + r["rule"]), r  # every field filled
        assert r["text"].startswith(c.text.split("{")[0])
    by = {r["claim"]: r for r in records}
    assert f"N = {cfg.group_size}" in by[2]["text"] and f"{cfg.entropy_coef:g}" in by[8]["text"]
    assert by[8]["verdict"] == NOT_RUN and by[10]["verdict"] == NOT_RUN


def test_replacing_a_claims_judge_changes_that_record_only(monkeypatch):
    cfg = DemoConfig()
    before = study_claims.judge_claims({}, cfg)
    claims = list(study_claims.CLAIMS)
    claims[1] = Claim(2, claims[1].text, claims[1].rule, lambda s: (CONTRADICTED, "stub"))
    monkeypatch.setattr(study_claims, "CLAIMS", tuple(claims))
    after = study_claims.judge_claims({}, cfg)
    assert after[1]["verdict"] == CONTRADICTED and after[1]["evidence"] == "stub"
    assert after[:1] + after[2:] == before[:1] + before[2:]


def test_the_maze_study_lists_claims_a_to_d_and_its_report_states_their_rules():
    assert [c.key for c in maze_study.CLAIMS] == ["a", "b", "c", "d"]
    from fgrpo_llm.experiments.maze.config import MazeConfig

    lines = maze_report._rule_text(MazeConfig())
    for c in maze_study.CLAIMS:
        assert f"- ({c.key}) {c.rule}" in lines


def _iv(lo: float, hi: float) -> Interval:
    """A 95% interval [lo, hi] over 4 bases (its mean the midpoint, an sd that carries a
    verdict)."""
    return Interval((lo + hi) / 2, lo, hi, 4, 0.05)


GAIN = _iv(0.06, 0.14)  # F-GRPO - GRPO: a resolved gain of 0.10 (direction "above")


def test_the_control_reproduces_a_gain_within_half_of_it_or_by_beating_f_grpo():
    """``control_verdict`` (Countdown claim 5, Maze claim (d)) on one gain of 0.10: the control
    beats GRPO (cg above 0) and F-GRPO - control lies within +-0.05 (REPRODUCED_SHARE = 0.5 of
    the gain): reproduced, contradicted; within +-0.08 but not +-0.05: not resolved; the control
    beating F-GRPO by far (fc below -0.05): reproduced too; fc within +-0.05 while the control
    does not beat GRPO (cg contains 0): not reproduced. F-GRPO beating the control: kept."""
    cg = _iv(0.05, 0.15)
    assert control_verdict([("above", GAIN, _iv(-0.04, 0.04), cg)]) == CONTRADICTED
    assert control_verdict([("above", GAIN, _iv(-0.07, 0.07), cg)]) == NOT_RESOLVED
    assert control_verdict([("above", GAIN, _iv(-0.30, -0.20), _iv(0.25, 0.35))]) == CONTRADICTED
    assert control_verdict([("above", GAIN, _iv(-0.04, 0.04), _iv(-0.01, 0.2))]) == NOT_RESOLVED
    assert control_verdict([("above", GAIN, _iv(0.02, 0.06), cg)]) == HOLDS
    # a gain "below" (Delta NLL_rare): the same, mirrored; the margin is half of |gain|
    gain_below = _iv(-0.14, -0.06)
    assert control_verdict([("below", gain_below, _iv(-0.04, 0.04), _iv(-0.15, -0.05))]) == (
        CONTRADICTED
    )


def test_the_control_verdict_needs_every_gain_kept_or_every_gain_reproduced():
    """Two gains, one kept (F-GRPO beats the control) and one reproduced (the control comes
    within half the gain): neither holds nor is contradicted; both kept: holds; both
    reproduced: contradicted."""
    kept = ("above", GAIN, _iv(0.02, 0.06), _iv(-0.02, 0.08))
    reproduced = ("above", GAIN, _iv(-0.04, 0.04), _iv(0.05, 0.15))
    assert control_verdict([kept, reproduced]) == NOT_RESOLVED
    assert control_verdict([reproduced, kept]) == NOT_RESOLVED
    assert control_verdict([kept, kept]) == HOLDS
    assert control_verdict([reproduced, reproduced]) == CONTRADICTED
    assert control_verdict([]) == NOT_RESOLVED
