"""The Maze study's per-unit table (``maze.units``): units.csv gives back every number the claims
read, bit for bit; every claim judged from the file alone equals the claim judged from the
study's results (one SFT model, and pooled over SFT models); ``fgrpo-llm maze --from-units``
prints them and refuses a bad file in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fgrpo_llm.evaluation.stats import CONTRADICTED, HOLDS
from fgrpo_llm.experiments.maze.config import make_config, method_name, plan
from fgrpo_llm.experiments.maze.study import _value, sft_units, study, unit
from fgrpo_llm.experiments.maze.units import (
    COLUMNS,
    config_from_units,
    judge_units,
    read_units,
    results_from_units,
    study_from_units,
    unit_rows,
    write_units,
)

K = 8
CFG = make_config(
    "reduced", rl_seeds=(0, 1, 2), group_sizes=(4, 8), gammas=(0.0, 0.5, 1.0), eval_k_max=K
)
GRPO, FGRPO, CONTROL = method_name(0.0), method_name(1.0), method_name(0.0, 1.0)
FAMILIES = {0: "default", 1: "other", 2: "default", 3: "other"}


def _results(bases=None, seed=3) -> dict:
    """Synthetic results with full-precision fractions: F-GRPO gamma = 1 ahead on pass@1 at
    N = 4 and behind at N = 8, the control close to F-GRPO on pass@K; ``bases``: pooled over
    those SFT models (``maze.bases``' layout), else one SFT model."""
    rng = np.random.default_rng(seed)
    runs, sft = {}, {}
    for b in bases or [0]:
        shift = rng.normal(0, 0.05)
        for run in plan(CFG):
            noise = shift + rng.normal(0, 0.01)
            p1 = 0.4 + noise + (0.05 if run.N == 4 else -0.05) * (run.method == FGRPO)
            pk = 0.7 + noise + 0.06 * (run.method in (FGRPO, CONTROL))
            r = {
                "method": run.method,
                "gamma": run.gamma,
                "lr_match_gamma": run.lr_match_gamma,
                "N": run.N,
                "seed": run.seed,
                "lr": 5e-4 * (0.5 if run.lr_match_gamma else 1.0),
                "final": {"eval/test/pass@1": p1, f"eval/test/pass@{K}": pk},
                "dips": {f"dip/pass@{K}": abs(rng.normal(0.1, 0.03))},
                "curve": [{"step": 0}],  # (not a number the claims read: not in units.csv)
            }
            if bases:
                runs[f"base{b}/{run.key}"] = {**r, "base": b}
            else:
                runs[run.key] = r
        for s in CFG.rl_seeds:
            e = {"eval/test/pass@1": 0.3 + rng.normal(0, 0.01), f"eval/test/pass@{K}": 0.8}
            sft[f"{b}/{s}" if bases else str(s)] = e
    results = {"sft": sft, "runs": runs}
    if bases:
        results["bases"] = {str(b): FAMILIES[b] for b in bases}
    return results


def _by_run(results: dict) -> dict:
    return {(*unit(r), r["method"], r["N"]): r for r in results["runs"].values()}


@pytest.mark.parametrize("bases", [None, [0, 1, 2, 3]], ids=["one-model", "pooled"])
def test_the_csv_gives_back_every_number_the_claims_read(tmp_path, bases):
    results = _results(bases)
    rows = unit_rows(CFG, results)
    path = write_units(tmp_path / "units.csv", rows)
    assert tuple(path.read_text().splitlines()[0].split(",")) == COLUMNS
    assert read_units(path) == rows
    back = results_from_units(read_units(path))
    assert ("bases" in back) == bool(bases) and back.get("bases") == results.get("bases")
    old, new = _by_run(results), _by_run(back)
    assert set(old) == set(new) and len(old) == len(plan(CFG)) * len(bases or [0])
    for key, r in old.items():
        for metric in ("pass@1", f"pass@{K}", "dip"):
            assert _value(CFG, new[key], metric) == _value(CFG, r, metric), (key, metric)
        for field in ("gamma", "lr_match_gamma", "lr"):
            assert new[key][field] == r[field], (key, field)
    assert sft_units(back) == sft_units(results)


@pytest.mark.parametrize("bases", [None, [0, 1, 2, 3]], ids=["one-model", "pooled"])
def test_every_claim_from_the_csv_alone_equals_the_studys(tmp_path, bases):
    results = _results(bases)
    path = write_units(tmp_path / "units.csv", unit_rows(CFG, results))
    claims = study(CFG, results)["claims"]
    verdicts = {c["verdict"] for c in claims.values()}
    assert CONTRADICTED in verdicts or HOLDS in verdicts  # a study with something to judge
    assert judge_units(path) == claims
    assert judge_units(path, CFG) == claims
    assert study_from_units(path)["differences"] == study(CFG, results)["differences"]
    assert config_from_units(read_units(path)).gammas == CFG.gammas


def test_a_plan_cell_without_rows_is_judged_as_the_study_judges_it(tmp_path):
    """With the study's settings, a group size that has no run leaves its cells unresolved, as
    in the study; without them, the file's own plan (no such N) is judged."""
    results = _results()
    path = write_units(tmp_path / "units.csv", unit_rows(CFG, results))
    wider = make_config(
        "reduced",
        rl_seeds=(0, 1, 2),
        group_sizes=(4, 8, 16),
        gammas=(0.0, 0.5, 1.0),
        eval_k_max=K,
    )
    assert judge_units(path, wider) == study(wider, results)["claims"]
    assert judge_units(path, wider) != judge_units(path)
    with pytest.raises(ValueError, match="pass@8.*pass@64"):
        judge_units(path, make_config("reduced", eval_k_max=64))


def test_the_family_column_says_the_intervals_are_over_bases(tmp_path):
    """Every paired interval from the file is the study's; the same rows without a kernel
    family read as one SFT model's and give intervals over the (base, seed) units instead."""
    results = _results([0, 1, 2, 3])
    rows = unit_rows(CFG, results)
    pooled = write_units(tmp_path / "pooled.csv", rows)
    flat = write_units(tmp_path / "flat.csv", [{**r, "family": None} for r in rows])
    differences = study(CFG, results)["differences"]
    assert study_from_units(pooled)["differences"] == differences
    d = {(x["a"], x["b"], x["N"], x["metric"]): x["difference"] for x in differences}
    (cell,) = [x for x in study_from_units(flat)["differences"]
               if (x["a"], x["b"], x["N"], x["metric"]) == (FGRPO, GRPO, 4, "pass@1")]  # fmt: skip
    assert cell["difference"]["n"] == 12 and d[(FGRPO, GRPO, 4, "pass@1")]["n"] == 4
    mixed = write_units(tmp_path / "mixed.csv", [rows[0], {**rows[1], "family": None}])
    with pytest.raises(ValueError, match="mix"):
        judge_units(mixed)
    twice = write_units(tmp_path / "twice.csv", [rows[0], rows[0]])
    with pytest.raises(ValueError, match="twice"):
        judge_units(twice)


def test_the_cli_prints_the_verdicts_and_their_json(tmp_path, capsys):
    from fgrpo_llm.cli import main

    results = _results([0, 1, 2, 3])
    path = write_units(tmp_path / "units.csv", unit_rows(CFG, results))
    claims = study(CFG, results)["claims"]
    assert main(["maze", "--from-units", str(path)]) == 0
    printed = capsys.readouterr().out
    for key, c in claims.items():
        assert f"**({key}) {c['claim']}: {c['verdict']}.**" in printed
    assert "F-GRPO - GRPO" in printed  # each cell's paired interval
    assert main(["maze", "--from-units", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["claims"] == claims and data["units"] == str(path)
    assert not (tmp_path / "out").exists()


def _write(path, text: str):
    path.write_text(text)
    return path


def test_bad_files_are_refused_with_the_file_and_the_column(tmp_path):
    with pytest.raises(ValueError, match=r"x\.csv is not a Maze units\.csv: no column 'base'"):
        read_units(_write(tmp_path / "x.csv", "a,b\n1,2\n"))
    good = write_units(tmp_path / "u.csv", unit_rows(CFG, _results()))
    header, first, *rest = good.read_text().splitlines()
    no_dip = header.replace("dip_passK", "dip")
    with pytest.raises(ValueError, match="no column 'dip_passK'"):
        read_units(_write(tmp_path / "y.csv", "\n".join([no_dip, first, *rest])))
    text = first.replace(",4,", ",four,", 1)
    with pytest.raises(ValueError, match=r"z\.csv:2: a number column holds text"):
        read_units(_write(tmp_path / "z.csv", "\n".join([header, text])))
    cells = first.split(",")
    cells[COLUMNS.index("final_pass1")] = ""
    with pytest.raises(ValueError, match="z.csv:2: no value in column 'final_pass1'"):
        read_units(_write(tmp_path / "z.csv", "\n".join([header, ",".join(cells)])))
    cells = first.split(",")
    cells[COLUMNS.index("gamma")] = "0.5"  # a GRPO row that says gamma = 0.5
    with pytest.raises(ValueError, match="method 'GRPO' is not that of gamma=0.5"):
        read_units(_write(tmp_path / "z.csv", "\n".join([header, ",".join(cells)])))
    with pytest.raises(ValueError, match="without rows"):
        judge_units(_write(tmp_path / "h.csv", header + "\n"))


@pytest.mark.parametrize(
    "argv, word",
    [
        (["--from-units", "{tmp}/none.csv"], "none.csv"),
        (["--from-units", "{tmp}/bad.csv"], "no column 'base'"),
        (["--from-units", "{tmp}"], "directory"),
        (["--from-units", "{tmp}/bad.csv", "--out", "{tmp}/o"], "--out"),
        (["--no-progress"], "--out is required"),
    ],
)
def test_the_cli_refuses_a_bad_units_file_in_one_line(tmp_path, capsys, argv, word):
    from fgrpo_llm.cli import main

    (tmp_path / "bad.csv").write_bytes(b"a,b\n1,2\n")
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert main(["maze", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and word in err[0] and "Traceback" not in err[0], err
    assert not (tmp_path / "o").exists()
