"""``benchmarks/gpu_sweep.py``, the prepared script for a GPU machine, run end to end on
CPU torch at a reduced size: it times the torch engine's sweep and the compiled engine's, checks
their agreement and writes the JSON; bad input is one line and exit 2."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_sweep.py"
SMALL = ["--steps", "20", "--actions", "640", "--correct", "50", "--group-sizes", "2,16,128"]


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_the_gpu_script_runs_on_cpu_torch(tmp_path):
    path = tmp_path / "gpu.json"
    seeds = ",".join(str(s) for s in range(8))
    out = _run("--device", "cpu", *SMALL, "--seeds", seeds, "--json", str(path))
    assert out.returncode == 0, out.stderr
    assert "torch engine on cpu:" in out.stdout
    assert "compiled engine, 2 CPU workers:" in out.stdout
    assert "agreement, torch vs compiled: agree in distribution (12 comparisons" in out.stdout
    result = json.loads(path.read_text())
    assert result["sweep"] == {"runs": 48, "steps": 20, "K": 640, "correct": 50}
    assert result["agree"] is True and result["workers"] == 2
    assert result["torch_s"] > 0 and result["compiled_s"] > 0
    assert result["warmup_torch_s"] > 0 and result["warmup_compiled_s"] > 0
    assert result["environment"]["device"] == "cpu" and "torch" in result["environment"]
    assert 0 < result["torch_final_means"]["q_pos"] < 1


def test_the_gpu_script_without_baseline(tmp_path):
    """One group size and one seed are enough without the agreement check."""
    sizes = ["--group-sizes", "16", "--seeds", "0"]
    out = _run("--device", "cpu", *SMALL, *sizes, "--no-baseline")
    assert out.returncode == 0, out.stderr
    assert "torch engine on cpu:" in out.stdout and "compiled engine" not in out.stdout


def test_the_gpu_script_runs_from_a_checkout_without_the_package(tmp_path):
    """A bare GPU machine has the checkout, not the installed package: the script imports the
    checkout it lies in (here a copy without .git, so its environment has no commit, where the
    installed package's would)."""
    root = Path(__file__).resolve().parents[2]
    copy = tmp_path / "checkout"
    skip = shutil.ignore_patterns("__pycache__")
    for name in ("fgrpo_common", "fgrpo_theory", "benchmarks"):
        shutil.copytree(root / name, copy / name, ignore=skip)
    path = tmp_path / "gpu.json"
    script = copy / "benchmarks" / "gpu_sweep.py"
    args = ["--device", "cpu", *SMALL, "--no-baseline", "--json", str(path)]
    out = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(path.read_text())["environment"]["git_commit"] is None


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--device", "tpu"], "device"),
        (["--group-sizes", "4,x"], "--group-sizes"),
        (["--seeds", ""], "--seeds"),
        (["--seeds", "3"], "the agreement check needs at least 2 seeds"),
        (["--steps", "0"], "steps"),
        (["--workers", "0"], "--workers"),
        (["--json", "/no/such/folder/x.json"], "--json"),
    ],
)
def test_bad_input_is_one_error_and_exit_2(args, named):
    """(The device is checked before anything runs: ``--device cpu`` comes first, the case's own
    flag after it.)"""
    out = _run("--device", "cpu", *args)
    assert out.returncode == 2, out.stderr
    assert named in out.stderr and "Traceback" not in out.stderr


def test_cuda_without_a_gpu_is_one_error_and_exit_2():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the script would run the whole sweep")
    out = _run("--device", "cuda", *SMALL)
    assert out.returncode == 2 and "torch sees no CUDA device here" in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
