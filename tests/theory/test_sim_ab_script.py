"""``benchmarks/ab_simulate.py`` (the compiled engine against its version at a git revision, in
one process): it compares runs record for record and prints the ratio, and rejects bad input
with one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "ab_simulate.py"


def _run(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=900
    )


@pytest.mark.slow  # compiles the baseline's kernels from nothing (~20 s)
def test_against_head_every_record_is_identical():
    pytest.importorskip("numba")
    out = _run("--against", "HEAD", "--sizes", "4,20000", "--steps", "6", "--repeats", "1")
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("N=")]
    assert len(lines) == 2 and all(line.endswith("identical") for line in lines)
    assert "records identical at every N" in out.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--against", "no-such-revision-xyz"],
        ["--against", "HEAD", "--sizes", "4,x"],
        ["--against", "HEAD", "--steps", "0"],
        ["--sizes", "4"],
    ],
)
def test_bad_input_is_one_error_and_exit_2(args):
    out = _run(*args)
    assert out.returncode == 2, out.stderr
    assert "error:" in out.stderr and "Traceback" not in out.stderr
