"""``benchmarks/profile_simulate.py`` (where a compiled run's time goes) runs, prints one line
per N with the kernels' shares, restores the kernels it wrapped, and rejects bad input."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "profile_simulate.py"


def _run(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600
    )


def test_the_profile_prints_a_line_per_n_with_the_kernels():
    pytest.importorskip("numba")
    out = _run("--sizes", "4,20000", "--steps", "15")
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("N=")]
    assert [int(re.match(r"N=\s*(\d+)", line).group(1)) for line in lines] == [4, 20000]
    assert "draw_blocks" in lines[0] and "draw_guide" in lines[1]  # both samplers
    assert all("ms/step" in line and "other" in line for line in lines)
    assert "the sweep (8 runs per N) would take about" in out.stdout


@pytest.mark.parametrize("args", [["--sizes", "4,x"], ["--sizes", "1"], ["--steps", "0"]])
def test_bad_input_is_one_error_and_exit_2(args):
    out = _run(*args)
    assert out.returncode == 2
    assert "error:" in out.stderr and "Traceback" not in out.stderr
