"""``fgrpo-theory simulate``: a tiny end-to-end run, the engines, and one-line errors with exit
status 2 for hostile input (bad lists, huge values, unwritable outputs, bad devices)."""

from __future__ import annotations

import csv
import json
import os

import matplotlib
import pytest

from fgrpo_theory.cli import main
from tests.theory.csv_compare import assert_csv_close

matplotlib.use("Agg")

TINY = [
    "--actions",
    "200",
    "--correct",
    "20",
    "--group-size",
    "2,16",
    "--gamma",
    "0,1",
    "--seeds",
    "0",
    "--steps",
    "5",
    "--no-progress",
]


def test_flags_write_the_csv(tmp_path, capsys):
    path = tmp_path / "sub" / "sim.csv"
    assert main(["simulate", *TINY, "--csv", str(path)]) == 0
    rows = list(csv.DictReader(path.open()))
    assert [r["N"] for r in rows] == ["2", "2", "16", "16"]
    assert set(rows[0]) == {"N", "gamma", "seed", "q_pos", "m_ret", "entropy"}
    assert all(0 < float(r["q_pos"]) < 1 and 0 <= float(r["m_ret"]) <= 1 for r in rows)
    assert "Q_pos(g=1)" in capsys.readouterr().out
    assert sorted(p.name for p in path.parent.iterdir()) == ["sim.csv"]  # no partial/ left


def test_a_maxrl_sweep_is_labelled_maxrl_not_gamma_0(tmp_path, capsys):
    """MaxRL's weighting takes no gamma: its CSV says so in a column, its table and per-step
    records name it instead of the ignored gamma."""
    flags = [*TINY[: TINY.index("--gamma")], "--gamma", "0", *TINY[TINY.index("--seeds") :]]
    out = tmp_path / "mx"
    assert main(["simulate", *flags, "--weighting", "maxrl", "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "fig2.csv").open()))
    assert rows and all(r["weighting"] == "maxrl" for r in rows)
    head = capsys.readouterr().out.splitlines()[0]
    assert "Q_pos(maxrl)" in head and "g=0" not in head
    keys = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert "q_pos/N=2/maxrl" in keys and not any("gamma" in k for k in keys)


def test_preset_with_out_writes_figure_csv_records_and_config(tmp_path):
    out = tmp_path / "fig2"
    args = [
        "simulate",
        "--preset",
        "tiny",
        "--steps",
        "4",
        "--workers",
        "1",
        "--no-progress",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    for name in (
        "fig2.png",
        "fig2.csv",
        "simulation.npz",
        "simulation_config.json",
        "metrics.jsonl",
    ):
        assert (out / name).stat().st_size > 0
    cfg = json.loads((out / "simulation_config.json").read_text())
    assert cfg["steps"] == 4 and cfg["actions"] == 1280  # preset value kept, flag applied
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 5 and "m_ret/N=16/gamma=1" in json.loads(lines[-1])
    assert main(args) == 0  # cached rerun


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--group-size", "2,x"], "--group-size"),
        (["--group-size", "0"], "group_sizes"),
        (["--group-size", ",,"], "--group-size"),
        (["--group-size", "2,2"], "group_sizes"),
        (["--group-size", str(2**40)], "group_sizes"),
        (["--group-size", str(2**70)], "group_sizes"),
        (["--gamma", "-1"], "gammas"),
        (["--gamma", "nan"], "gammas"),
        (["--gamma", "inf"], "gammas"),
        (["--seeds", ""], "--seeds"),
        (["--seeds", "-1"], "seeds"),
        (["--seeds", "1.5"], "--seeds"),
        (["--lr", "-0.1"], "lr"),
        (["--lr", "inf"], "lr"),
        (["--lr", "nan"], "lr"),
        (["--actions", "10", "--correct", "10"], "correct"),
        (["--actions", str(10**12)], "actions"),
        (["--steps", "0"], "steps"),
        (["--steps", str(10**12)], "steps"),
        (["--workers", "0"], "workers"),
        (["--workers", "-3"], "workers"),
        (["--workers", str(10**9)], "workers"),
        (["--engine", "sparse", "--surrogate", "prob"], "sparse"),
        (["--gamma", "1,1.0000001"], "gammas must differ"),
        (["--device", "cpu"], "--engine torch only"),
    ],
)
def test_bad_values_exit_2_with_one_line(tmp_path, capsys, argv, needle):
    code = main(["simulate", "--csv", str(tmp_path / "x.csv"), "--no-progress", *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err
    assert not (tmp_path / "x.csv").exists()


def test_missing_destination_is_an_error(capsys):
    assert main(["simulate", *TINY]) == 2
    assert "--out" in capsys.readouterr().err


def _fails_with_one_line(capsys, argv) -> str:
    code = main(["simulate", *TINY, *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_a_file_where_the_output_folder_should_be_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert "--out" in _fails_with_one_line(capsys, ["--out", str(blocker)])
    assert "--out" in _fails_with_one_line(capsys, ["--out", str(blocker / "sub")])
    assert "--csv" in _fails_with_one_line(capsys, ["--csv", str(blocker / "x.csv")])


def test_a_directory_as_the_csv_is_one_line(tmp_path, capsys):
    assert "--csv" in _fails_with_one_line(capsys, ["--csv", str(tmp_path)])
    same = str(tmp_path / "run")  # the --out folder, not there yet: refused before any run
    assert "--out directory" in _fails_with_one_line(capsys, ["--out", same, "--csv", same])


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_output_folder_is_one_line(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert "--out" in _fails_with_one_line(capsys, ["--out", str(locked / "run")])
    finally:
        locked.chmod(0o700)


def test_engines_give_the_same_csv(tmp_path):
    paths = {}
    for engine in ("dense", "sparse", "compiled"):
        paths[engine] = tmp_path / f"{engine}.csv"
        assert (
            main(
                [
                    "simulate",
                    *TINY,
                    "--engine",
                    engine,
                    "--workers",
                    "1",
                    "--csv",
                    str(paths[engine]),
                ]
            )
            == 0
        )
    texts = {k: p.read_text() for k, p in paths.items()}
    assert_csv_close(texts["dense"], texts["sparse"])  # the same draws, sums in another order
    assert_csv_close(texts["compiled"], texts["sparse"])  # the same draws, exp to an ulp


def test_split_engine_takes_one_worker_by_default(tmp_path, capsys):
    """--engine split runs each run on two cores, so its default is one worker; two workers
    are refused in one line."""
    from fgrpo_theory.sim import split

    if split.unavailable_reason() is not None:
        pytest.skip(f"split engine: {split.unavailable_reason()}")
    path = tmp_path / "s.csv"
    assert main(["simulate", *TINY, "--engine", "split", "--csv", str(path)]) == 0
    assert len(path.read_text().splitlines()) == 1 + 4
    capsys.readouterr()
    assert main(["simulate", *TINY, "--engine", "split", "--workers", "2", "--csv", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "workers=2" in err[0], err


def test_torch_engine_flag_runs_on_cpu(tmp_path):
    pytest.importorskip("torch")
    path = tmp_path / "t.csv"
    assert (
        main(["simulate", *TINY, "--engine", "torch", "--device", "cpu", "--csv", str(path)]) == 0
    )
    assert len(path.read_text().splitlines()) == 1 + 4


def test_bad_torch_device_is_one_line(tmp_path, capsys):
    pytest.importorskip("torch")
    err = _fails_with_one_line(
        capsys,
        ["--engine", "torch", "--device", "no-such-device", "--csv", str(tmp_path / "t.csv")],
    )
    assert "device" in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_csv_only_sweep_resumes_from_its_partial_folder(tmp_path, monkeypatch):
    """Without --out, finished runs wait in CSV.partial/; a rerun after a crash reuses them."""
    import fgrpo_theory.sim.sweep as sweep

    path = tmp_path / "sim.csv"
    real, calls = sweep.simulate_runs, []

    def crash_after_two(*args, **kwargs):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep, "simulate_runs", crash_after_two)
    assert main(["simulate", *TINY, "--workers", "1", "--csv", str(path)]) == 130
    assert len(list((tmp_path / "sim.csv.partial").glob("N*.npz"))) == 2
    monkeypatch.setattr(sweep, "simulate_runs", real)
    assert main(["simulate", *TINY, "--workers", "1", "--csv", str(path)]) == 0
    assert path.exists() and not (tmp_path / "sim.csv.partial").exists()
