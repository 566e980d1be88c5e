"""``benchmarks/profile_simulate.py`` (where a compiled run's time goes) runs, prints one line
per N with the parts of a step, and rejects bad input; the engine's profile counts every part
and leaves the run's numbers as they are."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "profile_simulate.py"


def _run(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600
    )


def test_the_profile_prints_a_line_per_n_with_the_parts_of_a_step():
    pytest.importorskip("numba")
    from fgrpo_theory.sim.compiled import PROFILE_PARTS

    out = _run("--sizes", "4,20000", "--steps", "15")
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("N=")]
    assert [int(re.match(r"N=\s*(\d+)", line).group(1)) for line in lines] == [4, 20000]
    for line in lines:
        shares = dict(re.findall(r"(\w+) (-?\d+\.\d+)", line.split("|", 1)[1]))
        assert set(shares) == {*PROFILE_PARTS, "python"}
        assert all(float(v) >= 0 for k, v in shares.items() if k != "python")
    # (at N = 4 a part can take under the 0.5 us per step that the line shows as 0.000)
    assert float(shares["sampler"]) > 0 and float(shares["move"]) > 0
    assert "the sweep (8 runs per N) would take about" in out.stdout


@pytest.mark.parametrize("N", [4, 20000])  # the block sampler; the guide table
def test_a_profiled_run_counts_every_part_and_keeps_its_numbers(N):
    pytest.importorskip("numba")
    from fgrpo_theory.sim import compiled
    from fgrpo_theory.sim.config import SimConfig

    cfg = SimConfig(actions=2000, correct=200, group_sizes=(N,), steps=12, optimizer="adam")
    plain = compiled.simulate_run_compiled(cfg, N, 1.0, 3)
    ticks = np.zeros(len(compiled.PROFILE_PARTS), dtype=np.int64)
    timed = compiled.simulate_run_compiled(cfg, N, 1.0, 3, profile=ticks)
    assert all(np.array_equal(plain[k], timed[k]) for k in plain)
    spent = dict(zip(compiled.PROFILE_PARTS, ticks, strict=True))
    assert all(spent[k] > 0 for k in ("record", "rng", "sampler", "moments", "move"))
    assert ticks.min() >= 0
    with pytest.raises(ValueError, match="profile must be an int64 array"):
        compiled.simulate_run_compiled(cfg, N, 1.0, 3, profile=np.zeros(7))


@pytest.mark.parametrize("args", [["--sizes", "4,x"], ["--sizes", "1"], ["--steps", "0"]])
def test_bad_input_is_one_error_and_exit_2(args):
    out = _run(*args)
    assert out.returncode == 2
    assert "error:" in out.stderr and "Traceback" not in out.stderr
