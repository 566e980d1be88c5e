"""Every run records what made it (``fgrpo_llm.environment``): versions, the CPU, torch's kernel
family and threads, the device; reports print it; ``validate`` warns when the runs it compares
come from different environments; a run under torch's AVX2 kernels says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from fgrpo_llm.cli import main
from fgrpo_llm.environment import (
    environment,
    environment_differences,
    environment_markdown,
    environment_section,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_environment_names_versions_cpu_kernels_and_device():
    import numpy
    import transformers

    env = environment("cpu")
    assert env["torch"] == torch.__version__ and env["numpy"] == numpy.__version__
    assert env["transformers"] == transformers.__version__
    assert env["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert env["torch_threads"] == torch.get_num_threads() and env["device"] == "cpu"
    assert env["cpu"] and env["python"].count(".") == 2
    json.dumps(env)  # a run.json can hold it


def test_differences_name_the_field_and_the_runs():
    a = environment("cpu")
    b = {**a, "torch_cpu_capability": "ANOTHER-FAMILY"}  # a value no CPU gives, here or there
    assert environment_differences({"x": a, "y": a}) == []
    assert environment_differences({"x": a, "y": None}) == []  # one known: nothing to compare
    (line,) = environment_differences({"x": a, "y": b, "z": a})
    assert line.startswith("torch_cpu_capability differs") and "(y)" in line and "x, z" in line
    assert "different environments" in environment_section({"x": a, "y": b})
    assert "agree" in environment_section({"x": a, "y": a})
    assert "Not recorded" in environment_markdown(None)


def _train(base, out, env=None):
    argv = [sys.executable, "-m", "fgrpo_llm.cli", "train", "--base", str(base), "--out",
            str(out), "--steps", "1", "--prompts-per-step", "2", "--group-size", "2",
            "--no-progress"]  # fmt: skip
    subprocess.run(argv, check=True, cwd=ROOT, env=env, capture_output=True, timeout=300)
    return json.loads((out / "run.json").read_text())["environment"]


def test_a_run_records_its_environment_and_torchs_avx2_kernels(tiny_checkpoint, tmp_path):
    here = _train(tiny_checkpoint, tmp_path / "a")
    assert here["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if " avx2" not in flags:
        pytest.skip("no AVX2 on this CPU")
    avx2 = _train(tiny_checkpoint, tmp_path / "b", {**os.environ, "ATEN_CPU_CAPABILITY": "avx2"})
    assert avx2["torch_cpu_capability"] == "AVX2" and avx2["ATEN_CPU_CAPABILITY"] == "avx2"


def test_validate_warns_when_runs_come_from_different_environments(tmp_path, capsys):
    from fgrpo_llm.evaluation.rare import RareSet, save_rare_set
    from fgrpo_llm.tracking import write_run_info

    rare = save_rare_set(RareSet([], [], [], [], [], np.zeros(0), {}), tmp_path / "rare.json")
    env = environment("cpu")
    runs = []
    for name, cap in (("g8", env["torch_cpu_capability"]), ("f8", "AVX2-elsewhere")):
        d = tmp_path / name
        d.mkdir()
        write_run_info(d, engine="fgrpo", algo="grpo", group_size=8,
                       gamma=1.0 if name == "f8" else 0.0,
                       environment={**env, "torch_cpu_capability": cap})  # fmt: skip
        (d / "groups.jsonl").write_text("")
        runs += ["--run", str(d)]
    assert main(["validate", "--rare-set", str(rare), *runs, "--out", str(tmp_path / "v")]) == 0
    err = capsys.readouterr().err
    assert "warning: the runs compared come from different environments" in err
    assert "has no training groups (groups.jsonl missing or empty)" in err  # said, not refused
    assert "torch_cpu_capability" in err
    report = (tmp_path / "v" / "report.md").read_text()
    assert "## Environments" in report and "AVX2-elsewhere" in report


@pytest.mark.slow
def test_the_fast_demo_under_the_other_kernel_family_reports_it(tmp_path):
    """`fgrpo-llm demo --fast` under the other family's variables (on an AVX-512 CPU torch's AVX2
    kernels, else its unvectorised ones): every run and the report name that capability.
    (A fast demo in a subprocess, about 17 s: slow; the fast study's two-base test in make test
    runs one base under the other family and checks the same records.)"""
    from fgrpo_llm.environment import kernel_family_env

    family = kernel_family_env("other")
    env = {k: v for k, v in os.environ.items() if k not in family}
    env.update({k: v for k, v in family.items() if v is not None})
    cfg = tmp_path / "no_theory.json"
    cfg.write_text(json.dumps({"theory": False}))
    out = tmp_path / "demo"
    argv = [sys.executable, "-m", "fgrpo_llm.cli", "demo", "--fast", "--workers", "1",
            "--config", str(cfg), "--out", str(out)]  # fmt: skip
    subprocess.run(argv, check=True, cwd=ROOT, env=env, capture_output=True, timeout=600)
    capability = family["ATEN_CPU_CAPABILITY"].upper()
    runs = [json.loads(p.read_text())["environment"] for p in out.glob("*/run.json")]
    assert runs and all(r["torch_cpu_capability"] == capability for r in runs)
    assert all(r["ATEN_CPU_CAPABILITY"] == family["ATEN_CPU_CAPABILITY"] for r in runs)
    report = (out / "report.md").read_text()
    assert f"| torch_cpu_capability | {capability} |" in report
