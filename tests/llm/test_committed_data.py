"""The data behind the README's verdicts, committed under ``docs/data/``: every claim judged
again from the Countdown study's per-unit table (``countdown_study_units.csv``) prints the
interval the README's claims table prints (claim 2's in particular), and the Maze's per-unit
table (``maze_study_units.csv``) gives the README's Maze numbers. The forecast file is the one
the blind cells were trained after (``countdown_forecast_record.json``: its sha256)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from fgrpo_llm.experiments.countdown.study_units import judge_units

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "data"
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: "-0.224 [-0.284, -0.164]": a mean and its interval as the tables print them.
INTERVAL = re.compile(r"[-+]?\d+\.\d+ \[[-+]?\d+\.\d+, [-+]?\d+\.\d+\]")


def _readme_claim_rows() -> dict[int, str]:
    """The README's claims table: {claim number: its row}."""
    rows = {}
    for line in README.splitlines():
        m = re.match(r"\| (\d+)\. ", line)
        if m:
            rows[int(m.group(1))] = line
    return rows


@pytest.fixture(scope="module")
def claims() -> dict:
    return {c["claim"]: c for c in judge_units(DATA / "countdown_study_units.csv")}


def test_claim_two_from_the_committed_units_is_the_readmes(claims):
    row = _readme_claim_rows()[2]
    shown = INTERVAL.findall(row)
    assert shown, row
    assert f"paired difference F-GRPO - GRPO {shown[0]}" in claims[2]["evidence"]
    assert claims[2]["verdict"] in row


def test_every_interval_of_the_readmes_claims_table_is_recomputed(claims):
    """Each interval a README row prints is in the evidence of its claim judged from the CSV,
    and its verdict is the one judged (claim 10 needs the simulator's prediction besides)."""
    rows = _readme_claim_rows()
    assert set(rows) <= set(claims) and len(rows) >= 10
    for k, row in rows.items():
        for iv in INTERVAL.findall(row):
            assert iv in claims[k]["evidence"], (k, iv)
        if k != 10:
            verdict = row.split("|")[2]
            judged = claims[k]["verdict"].split(":")[0].removesuffix(" at this scale")
            assert judged in verdict, (k, verdict)


def test_the_forecast_is_the_one_the_blind_cells_were_trained_after():
    record = json.loads((DATA / "countdown_forecast_record.json").read_text())
    sha = hashlib.sha256((DATA / "forecast.json").read_bytes()).hexdigest()
    assert record and all(entry["sha256"] == sha for entry in record)
    assert all(entry["path"] == "docs/data/forecast.json" for entry in record)


def test_the_readmes_maze_numbers_from_the_committed_units():
    """The README's Maze line: F-GRPO's pass@64 gain over GRPO and over the lr-matched control
    (gamma 1), each as the verdicts judged from the Maze's units.csv alone print it."""
    from fgrpo_llm.experiments.maze.report import verdict_lines
    from fgrpo_llm.experiments.maze.units import study_from_units

    text = "\n".join(verdict_lines(study_from_units(DATA / "maze_study_units.csv")))
    line = next(x for x in README.splitlines() if x.startswith("- **Maze**"))
    para = README[README.index(line) :].split("\n- ")[0]
    shown = INTERVAL.findall(para)
    assert len(shown) >= 2, para
    for iv in shown:
        assert iv in text, iv


def test_the_forecast_verdicts_are_recomputed_from_the_committed_contrasts():
    """``countdown_forecast_score.json`` (``forecast score``'s score.json) holds every paired
    contrast, predicted, measured and the nulls', per (cell, base): each stage's scores (i)-(iv)
    and verdict recomputed from them are the ones it records, and the README prints the blind
    verdict."""
    from fgrpo_llm.experiments.countdown import forecast_score as fs

    recorded = json.loads((DATA / "countdown_forecast_score.json").read_text())
    for stage, st in recorded.items():
        cs = st["contrasts"]
        scores = {
            "sign": fs.sign_score(cs),
            "rank": fs.rank_score(cs),
            "calibration": fs.calibration_score(cs),
            "skill": fs.skill_score(cs),
        }
        for name, score in scores.items():
            assert score["passed"] == st[name]["passed"], (stage, name)
        assert scores["skill"]["mse"] == pytest.approx(st["skill"]["mse"], rel=1e-12)
        trained = sum(state == "trained" for state in st["cells"].values())
        again = fs.verdict(scores, trained=trained, cells=len(st["cells"]), stage=stage)
        assert again == st["verdict"], stage
    assert f"**{recorded['blind']['verdict']}**" in README
