"""``fgrpo-theory tail-miss | peak | pass-at-k | demo``: output, JSON, and exit status 2 on bad input."""

import json
import subprocess
import sys

import numpy as np
import pytest

from fgrpo_theory.cli import main
from fgrpo_theory.passk import pass_at_k_unbiased
from fgrpo_theory.tail_miss import p_active, p_tail_miss, peak_group_size


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_tail_miss_table_and_peaks(capsys, tmp_path):
    plot = tmp_path / "out.png"
    code, out, _ = run(capsys, "tail-miss", "--mu", "0.3", "--rho", "0.05,0.1,0.2", "--n-max", "128",
                       "--plot", str(plot))
    assert code == 0 and plot.stat().st_size > 1000
    lines = out.splitlines()
    row8 = next(line for line in lines if line.split() and line.split()[0] == "8")
    values = [float(v) for v in row8.split()[1:]]
    want = [p_active(0.3, 8)] + [p_tail_miss(0.3, rho * 0.3, 8) for rho in (0.05, 0.1, 0.2)]
    np.testing.assert_allclose(values, want, atol=1e-6)
    n_star, _ = peak_group_size(0.3, 0.015, n_max=128)
    assert any(line.startswith("peak") and f"N*={n_star}" in line for line in lines)
    assert sum(line.startswith("peak") for line in lines) == 3


def test_tail_miss_json(capsys):
    code, out, _ = run(capsys, "tail-miss", "--mu", "0.3", "--tau", "0.015,0.03", "--n", "1,2,8", "--json")
    rows = json.loads(out)
    assert code == 0 and len(rows) == 6
    assert set(rows[0]) == {"N", "mu", "tau", "p_active", "p_tail_miss"}
    for r in rows:
        assert r["p_tail_miss"] == p_tail_miss(r["mu"], r["tau"], r["N"])
        assert r["p_active"] == p_active(r["mu"], r["N"])


def test_peak_and_pass_at_k(capsys):
    code, out, _ = run(capsys, "peak", "--mu", "0.3", "--rho", "0.05", "--json")
    (row,) = json.loads(out)
    assert code == 0 and row["N_star"] == int(peak_group_size(0.3, 0.015)[0])
    code, out, _ = run(capsys, "pass-at-k", "--n", "16", "--c", "0,3,16", "--k", "1,4", "--json")
    rows = json.loads(out)
    per_problem = [r for r in rows if r["c"] != "mean"]
    assert code == 0 and len(per_problem) == 6
    assert all(r["pass_at_k"] == pass_at_k_unbiased(16, r["c"], r["k"]) for r in per_problem)
    code, out, _ = run(capsys, "pass-at-k", "--p", "0.1", "--k", "2")
    assert code == 0 and "0.190000" in out


@pytest.mark.parametrize(
    "argv, word",
    [
        (["tail-miss", "--mu", "0.3", "--tau", "0.5"], "tau"),
        (["tail-miss", "--mu", "1.3", "--rho", "0.1"], "mu"),
        (["tail-miss", "--mu", "0.3", "--rho", "0.1", "--n", "0"], "--n"),
        (["tail-miss", "--mu", "0.3", "--rho", "0.1", "--n-max", "0"], "--n-max"),
        (["tail-miss", "--mu", "nan", "--rho", "0.1"], "--mu"),
        (["tail-miss", "--mu", "", "--rho", "0.1"], "--mu"),
        (["tail-miss", "--mu", "0.3", "--rho", "-0.1"], "--rho"),
        (["peak", "--mu", "0.3", "--tau", "0"], "--n-max"),
        (["pass-at-k", "--n", "8", "--c", "9", "--k", "1"], "--c"),
        (["pass-at-k", "--p", "0.1", "--k", "0"], "--k"),
        (["tail-miss", "--mu", "0.3", "--rho", "0.1", "--plot", "/no/such/dir/x.png"], "--plot"),
    ],
)
def test_bad_input_one_line_exit_2(capsys, argv, word):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and word in err and "Traceback" not in err


def test_console_script_exit_status():
    proc = subprocess.run([sys.executable, "-m", "fgrpo_theory.cli", "tail-miss", "--mu", "0.3", "--tau", "0.9"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "tau" in proc.stderr and "Traceback" not in proc.stderr


def test_demo_fast_writes_figures_and_tables(capsys, tmp_path):
    code, out, _ = run(capsys, "demo", "--out", str(tmp_path), "--fast")
    assert code == 0
    theory = tmp_path / "theory"
    for name in ("fig1a_tail_miss.png", "fig3_tail_miss_grid.png", "fig4_focal_magnitudes.png",
                 "fig5_large_group.png", "peaks.csv", "peaks.md"):
        assert (theory / name).stat().st_size > 0, name
    assert "N_star" in (theory / "peaks.csv").read_text().splitlines()[0]
