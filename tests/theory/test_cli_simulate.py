"""``fgrpo-theory simulate``: a tiny end-to-end run and one-line errors with exit status 2."""

from __future__ import annotations

import csv
import json

import matplotlib
import pytest

from fgrpo_theory.cli import main

matplotlib.use("Agg")

TINY = ["--actions", "200", "--correct", "20", "--group-sizes", "2,16", "--gammas", "0,1",
        "--seeds", "0", "--steps", "5", "--no-progress"]


def test_flags_write_the_csv(tmp_path, capsys):
    path = tmp_path / "sub" / "sim.csv"
    assert main(["simulate", *TINY, "--csv", str(path)]) == 0
    rows = list(csv.DictReader(path.open()))
    assert [r["N"] for r in rows] == ["2", "2", "16", "16"]
    assert set(rows[0]) == {"N", "gamma", "seed", "q_pos", "m_ret", "entropy"}
    assert all(0 < float(r["q_pos"]) < 1 and 0 <= float(r["m_ret"]) <= 1 for r in rows)
    assert "Q_pos(g=1)" in capsys.readouterr().out


def test_preset_with_out_writes_figure_csv_records_and_config(tmp_path):
    out = tmp_path / "fig2"
    args = ["simulate", "--preset", "tiny", "--steps", "4", "--workers", "1", "--no-progress", "--out", str(out)]
    assert main(args) == 0
    for name in ("fig2.png", "fig2.csv", "simulation.npz", "simulation_config.json", "metrics.jsonl"):
        assert (out / name).stat().st_size > 0
    cfg = json.loads((out / "simulation_config.json").read_text())
    assert cfg["steps"] == 4 and cfg["actions"] == 1280          # preset value kept, flag applied
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 5 and "m_ret/N=16/gamma=1" in json.loads(lines[-1])
    assert main(args) == 0                                        # cached rerun


@pytest.mark.parametrize("argv,needle", [
    (["--group-sizes", "2,x"], "--group-sizes"),
    (["--group-sizes", "0"], "group_sizes"),
    (["--gammas", "-1"], "gammas"),
    (["--seeds", ""], "--seeds"),
    (["--lr", "-0.1"], "lr"),
    (["--actions", "10", "--correct", "10"], "correct"),
    (["--steps", "0"], "steps"),
    (["--workers", "0"], "workers"),
])
def test_bad_values_exit_2_with_one_line(tmp_path, capsys, argv, needle):
    code = main(["simulate", "--csv", str(tmp_path / "x.csv"), "--no-progress", *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err
    assert not (tmp_path / "x.csv").exists()


def test_missing_destination_is_an_error(capsys):
    assert main(["simulate", *TINY]) == 2
    assert "--out" in capsys.readouterr().err
