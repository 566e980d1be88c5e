"""``benchmarks/bench_forecast.py``: a tiny run prints the per-cell time against the budget; bad
input is one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_forecast.py"


def _run(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env
    )


def test_a_tiny_run_reports_the_cell_time_against_the_budget():
    out = _run("--prompts", "40", "--eval", "8", "--rare", "5", "--steps", "3", "--batch", "4")
    assert out.returncode == 0, out.stderr
    assert "per cell:" in out.stdout and "budget of 1.65 s" in out.stdout
    assert "focal:1: cell" in out.stdout


@pytest.mark.parametrize(
    "args", [("--prompts", "0"), ("--budget", "x"), ("--rare", "9", "--prompts", "3")]
)
def test_bad_input_is_one_line_and_exit_2(args):
    out = _run(*args)
    assert out.returncode == 2 and "Traceback" not in out.stderr
