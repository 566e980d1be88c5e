"""``benchmarks/bench_simulate.py`` rejects bad input with one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_simulate.py"


@pytest.mark.parametrize("sizes", ["4,x", ""])
def test_bad_group_sizes_are_one_error_and_exit_2(sizes):
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--group-sizes", sizes], capture_output=True, text=True
    )
    assert out.returncode == 2, out.stderr
    assert "--group-sizes" in out.stderr and "Traceback" not in out.stderr
