"""``fgrpo-theory tail-miss | peak | pass-at-k | demo``: output, JSON, and exit status 2 on bad
input."""

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
    code, out, _ = run(
        capsys,
        "tail-miss",
        "--mu",
        "0.3",
        "--rho",
        "0.05,0.1,0.2",
        "--max-group-size",
        "128",
        "--plot",
        str(plot),
    )
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
    code, out, _ = run(
        capsys, "tail-miss", "--mu", "0.3", "--tau", "0.015,0.03", "--group-size", "1,2,8", "--json"
    )
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
    code, out, _ = run(
        capsys, "pass-at-k", "--samples", "16", "--c", "0,3,16", "--k", "1,4", "--json"
    )
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
        (["tail-miss", "--mu", "0.3", "--rho", "0.1", "--group-size", "0"], "--group-size"),
        (["tail-miss", "--mu", "0.3", "--rho", "0.1", "--max-group-size", "0"], "--max-group-size"),
        (["tail-miss", "--mu", "nan", "--rho", "0.1"], "--mu"),
        (["tail-miss", "--mu", "", "--rho", "0.1"], "--mu"),
        (["tail-miss", "--mu", "0.3", "--rho", "-0.1"], "--rho"),
        (["peak", "--mu", "0.3", "--tau", "0"], "--max-group-size"),
        (["pass-at-k", "--samples", "8", "--c", "9", "--k", "1"], "--c"),
        (["pass-at-k", "--p", "0.1", "--k", "0"], "--k"),
        (["tail-miss", "--mu", "0.3", "--rho", "0.1", "--plot", "/etc/passwd/d/x.png"], "--plot"),
    ],
)
def test_bad_input_one_line_exit_2(capsys, argv, word):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and word in err and "Traceback" not in err


def test_console_script_exit_status():
    proc = subprocess.run(
        [sys.executable, "-m", "fgrpo_theory.cli", "tail-miss", "--mu", "0.3", "--tau", "0.9"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "tau" in proc.stderr and "Traceback" not in proc.stderr


def test_demo_fast_writes_figures_and_tables(capsys, tmp_path):
    code, out, _ = run(capsys, "demo", "--out", str(tmp_path), "--fast")
    assert code == 0
    theory = tmp_path / "theory"
    for name in (
        "fig1a_tail_miss.png",
        "fig3_tail_miss_grid.png",
        "fig4_focal_magnitudes.png",
        "fig5_large_group.png",
        "peaks.csv",
        "peaks.md",
    ):
        assert (theory / name).stat().st_size > 0, name
    assert "N_star" in (theory / "peaks.csv").read_text().splitlines()[0]


def test_json_is_strict_with_null_for_non_finite_values(capsys):
    code, out, _ = run(
        capsys, "peak", "--mu", "0.3", "--tau", "0,0.3,0.015", "--max-group-size", "64", "--json"
    )
    assert code == 0 and "Infinity" not in out and "NaN" not in out

    def refuse(token):
        raise AssertionError(f"non-strict JSON token {token}")

    rows = json.loads(out, parse_constant=refuse)
    assert rows[0]["N_stationary"] is None  # tau = 0: N_c = +inf
    assert rows[1]["N_stationary"] is None  # tau = mu: P(B) = 0, N_c undefined
    assert rows[2]["N_stationary"] > 1


def test_a_plot_in_a_missing_directory_creates_it(capsys, tmp_path):
    path = tmp_path / "no" / "such" / "x.png"
    code, _, err = run(capsys, "tail-miss", "--mu", "0.3", "--rho", "0.1", "--plot", str(path))
    assert code == 0, err
    assert path.stat().st_size > 0


@pytest.mark.parametrize(
    "path, words",
    [
        ("{tmp}", "--plot must be a file"),
        ("/etc/passwd/no/such/x.png", "--plot directory is not a directory"),
        ("{tmp}/x.unknown", "--plot must end in one of"),
        ("{tmp}/x.pgf", "--plot must end in one of"),  # (LaTeX, found missing only at the end)
        ("{tmp}/noext", "--plot must end in one of"),
        ("/etc/passwd/x.png", "--plot directory is not a directory"),
        ("/proc/x.png", "cannot write --plot"),
        ("{tmp}/nul\0.png", "--plot must be a file path"),
        ("", "--plot must be a file path"),
    ],
)
def test_odd_plot_paths_one_line_exit_2_before_any_output(capsys, tmp_path, path, words):
    code, out, err = run(
        capsys,
        "tail-miss",
        "--mu",
        "0.3",
        "--rho",
        "0.1",
        "--max-group-size",
        "8",
        "--plot",
        path.format(tmp=tmp_path),
    )
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and words in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, word",
    [
        (
            ["pass-at-k", "--samples", "1e20", "--c", "1", "--k", "1"],
            "--samples must be an integer below 2**63",
        ),
        (
            ["pass-at-k", "--samples", "abc", "--c", "1", "--k", "1"],
            "--samples must be a comma-separated list",
        ),
        (["pass-at-k", "--samples", "10", "--c", "9223372036854775808", "--k", "1"], "--c"),
        (["pass-at-k", "--p", "1.5", "--k", "1"], "--p must lie in [0, 1]"),
        (
            ["tail-miss", "--mu", "0.3", "--rho", "0.1", "--max-group-size", "100000000"],
            "--max-group-size must be <=",
        ),
        (["tail-miss", "--mu", "0.3", "--tau", "0.1", "--group-size", "1e19"], "--group-size"),
        (["tail-miss", "--mu", "0.3", "--tau", "0.4"], "--tau must be <= --mu"),
        (["peak", "--mu", "-1", "--rho", "0.1"], "--mu"),
        (["peak", "--mu", "0.3", "--tau", "1e-31", "--max-group-size", "100"], None),
        (["peak", "--mu", "1,0", "--rho", "0.5"], None),  # P(B) = 0 for every N: N* = 1
        (["peak", "--mu", "0.3", "--rho", "5e-324"], "--rho=4.94066e-324 gives tau"),
        (["peak", "--mu", "0.3", "--tau", "0"], "--tau=0"),
        (["pass-at-k", "--p", "0.5", "--k", str(2**63 - 1)], None),
        (["demo", "--out", ""], "--out must name a directory"),
    ],
)
def test_cli_values_are_checked_with_the_flag_named(capsys, argv, word):
    code, _, err = run(capsys, *argv)
    if word is None:
        assert code == 0
        return
    assert code == 2 and len(err.strip().splitlines()) == 1 and word in err


def test_pass_at_k_cli_with_large_counts_is_instant(capsys):
    code, out, _ = run(
        capsys, "pass-at-k", "--samples", "1000000000", "--c", "500000000", "--k", "256", "--json"
    )
    assert code == 0 and json.loads(out)[0]["pass_at_k"] == 1.0


def _runner(exc):
    import argparse

    from fgrpo_common.cli import OneLineArgumentParser

    parser = OneLineArgumentParser(prog="prog")
    sub = parser.add_subparsers(dest="command", required=True)

    def fail(args):
        raise exc

    sub.add_parser("cmd").set_defaults(func=fail)
    assert isinstance(parser, argparse.ArgumentParser)
    return parser


@pytest.mark.parametrize(
    "exc, words",
    [
        (PermissionError(13, "Permission denied", "/root/x"), "Permission denied: /root/x"),
        (IsADirectoryError(21, "Is a directory", "/tmp"), "Is a directory: /tmp"),
        (
            NotADirectoryError(20, "Not a directory", "/etc/passwd/x"),
            "Not a directory: /etc/passwd/x",
        ),
        (
            FileNotFoundError(2, "No such file or directory", "a.json"),
            "No such file or directory: a.json",
        ),
        (OSError(28, "No space left on device"), "No space left on device"),
        (TypeError("gamma must be a number, not a bool"), "gamma must be a number, not a bool"),
        (ValueError("line one\nline two"), "line one line two"),
    ],
)
def test_run_command_turns_os_and_type_errors_into_one_line(capsys, exc, words):
    from fgrpo_common.cli import run_command

    code = run_command(_runner(exc), ["cmd"])
    err = capsys.readouterr().err
    assert code == 2 and err == f"prog cmd: error: {words}\n"


def test_run_command_keeps_errors_interrupts_and_lets_bugs_through(capsys):
    from fgrpo_common.cli import run_command

    # the fgrpo-llm form: errors= adds to the defaults, it never narrows them
    assert (
        run_command(
            _runner(PermissionError(13, "Permission denied", "x")),
            ["cmd"],
            errors=(ValueError, FileNotFoundError, NotADirectoryError),
        )
        == 2
    )
    assert run_command(_runner(LookupError("bad key")), ["cmd"], errors=(LookupError,)) == 2
    assert run_command(_runner(KeyboardInterrupt()), ["cmd"], interrupted="stopped") == 130
    assert capsys.readouterr().err.splitlines()[-1] == "prog: stopped"
    with pytest.raises(ZeroDivisionError):  # a bug is a traceback, not a one-line "bad input"
        run_command(_runner(ZeroDivisionError()), ["cmd"])


def test_integer_flags_are_read_exactly(capsys):
    """2**53 + 1 is not rounded to 2**53 on its way through a float."""
    code, out, _ = run(
        capsys, "tail-miss", "--mu", "0.3", "--rho", "0.1", "--group-size", str(2**53 + 1)
    )
    assert code == 0 and str(2**53 + 1) in out.split()


def test_an_error_naming_a_field_names_its_flag_too(capsys):
    """A library error names its field (max_steps=0); the user typed a flag (--steps 0): the
    line adds which flag sets it, unless the message names the flag already."""
    from fgrpo_common.cli import OneLineArgumentParser, run_command

    parser = OneLineArgumentParser(prog="prog")
    cmd = parser.add_subparsers(dest="command", required=True).add_parser("cmd")
    cmd.add_argument("--steps", dest="max_steps", type=int)
    cmd.add_argument("--rho", type=float)
    cmd.add_argument("--n", type=int)
    cmd.add_argument("--message")

    def fail(args):
        raise ValueError(args.message)

    cmd.set_defaults(func=fail)
    cases = {
        "max_steps must be >= 1, got max_steps=0": " (max_steps is --steps)",
        "rho must lie in [0, 1], got rho=2.0": " (rho is --rho)",
        "--rho must lie in [0, 1], got --rho=2": "",  # names its flag already
        "tau=0.5 exceeds mu=0.3": "",  # no flag of those names
        "every k must lie in [1, n=4], got ks=[8]": " (n is --n)",
        "max_steps=0 and rho=2": " (max_steps is --steps; rho is --rho)",
    }
    for message, hint in cases.items():
        assert run_command(parser, ["cmd", "--message", message]) == 2
        assert capsys.readouterr().err == f"prog cmd: error: {message}{hint}\n"


def test_peak_and_tail_miss_with_a_stationary_point_beyond_float64(capsys):
    """mu = 1e-320, tau = 5e-324: N_c ~ log(mu / tau) / (mu - tau) ~ 7.6e320 is beyond float64,
    so over N <= n_max P(B) (Lemma 3.1) only rises and N* = n_max; N_c is reported as null."""
    code, out, err = run(
        capsys, "peak", "--mu", "1e-320", "--tau", "5e-324", "--max-group-size", "100", "--json"
    )
    assert code == 0 and err == ""
    (row,) = json.loads(out)
    assert row["N_star"] == 100 and row["N_stationary"] is None
    code, out, err = run(
        capsys, "tail-miss", "--mu", "1e-320", "--rho", "0.0005", "--group-size", "5"
    )
    assert code == 0 and err == ""
    assert "N*=5 " in out.splitlines()[-1]


@pytest.mark.parametrize(
    "curve, named",
    [(["--rho", "0.1"], "--rho=0.1 (tau = 1e-301)"), (["--tau", "1e-301"], "--tau=1e-301")],
)
def test_a_peak_beyond_2_to_53_names_the_flags_the_user_typed(capsys, curve, named):
    """mu = 1e-300, tau = 1e-301: the peak of P(B) (Lemma 3.1) lies near log(mu / tau) / mu,
    far beyond 2^53. The error names --mu, the curve's own flag and --max-group-size, and no hint
    points at a flag the user did not type."""
    code, out, err = run(capsys, "peak", "--mu", "1e-300", *curve)
    assert code == 2 and out == ""
    assert err == (
        f"fgrpo-theory peak: error: the peak group size for --mu=1e-300, {named} is beyond "
        "2^53; pass --max-group-size\n"
    )
