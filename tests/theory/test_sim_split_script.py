"""``benchmarks/split_simulate.py`` (a run against two half runs at once on two cores: what a
run split over two cores could give at most) prints a line per N with the three times and
their ratio, and rejects bad input with one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "split_simulate.py"


def _run(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600
    )


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs two cores",
)
def test_the_script_prints_a_line_per_n():
    pytest.importorskip("numba")
    out = _run("--sizes", "4,20000", "--steps", "3", "--repeats", "1")
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert [int(r[0]) for r in rows] == [4, 20000]
    for row in rows:
        whole, in_turn, together, ratio = map(float, row[1:])
        assert min(whole, in_turn, together) > 0
        assert ratio == pytest.approx(together / whole, rel=0.05, abs=0.02)
    assert "load average at the start" in out.stdout


@pytest.mark.parametrize(
    "args", [["--sizes", "4,x"], ["--sizes", "5"], ["--steps", "0"], ["--repeats", "0"]]
)
def test_bad_input_is_one_error_and_exit_2(args):
    out = _run(*args)
    assert out.returncode == 2, out.stderr
    assert "error:" in out.stderr and "Traceback" not in out.stderr
