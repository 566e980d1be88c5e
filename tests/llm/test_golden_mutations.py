"""The golden one-step test fails under each named mutation of the focal update
(``make test-slow``).

Each case copies the two packages and the golden test into a temporary directory, applies one
mutation to the copy (the repository is never touched), runs the golden test there in a fresh
interpreter and requires it to fail. The first two are the mutations that once left every test
green: gamma ignored in the trainer's advantage call, the advantages reversed across rows.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

MUTATIONS = {
    "gamma ignored": (
        "fgrpo_llm/advantages.py",
        "g = w.rule.weight_torch(mu_hat, w.gamma)",
        "g = w.rule.weight_torch(mu_hat, 0.0)",
    ),
    "advantages reversed across rows": (
        "fgrpo_theory/weighting.py",
        "return g[:, None] * A_grpo",
        "return (g[:, None] * A_grpo).flip(0)",
    ),
    "weight applied to another group": (
        "fgrpo_theory/weighting.py",
        "return g[:, None] * A_grpo",
        "return g.roll(1)[:, None] * A_grpo",
    ),
    "sign flip": (
        "fgrpo_theory/weighting.py",
        "return g[:, None] * A_grpo",
        "return -g[:, None] * A_grpo",
    ),
    "clip bounds swapped": (
        "fgrpo_llm/losses.py",
        "torch.clamp(r, 1.0 - clip_eps_low, 1.0 + clip_eps_high)",
        "torch.clamp(r, 1.0 - clip_eps_high, 1.0 + clip_eps_low)",
    ),
    "token-mean over sequences": (
        "fgrpo_llm/losses.py",
        ".sum() / mask.sum().clamp(min=1)",
        ".sum() / mask.shape[0]",
    ),
    "accumulation denominator": (
        "fgrpo_llm/trainer.py",
        "(loss * (n_tok / max(mb_tokens, 1))).backward()",
        "(loss * (n_tok / max(mb_tokens, 1) / 2)).backward()",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MUTATIONS))
def test_golden_test_fails_under_mutation(tmp_path, name):
    for pkg in ("fgrpo_llm", "fgrpo_theory", "fgrpo_common"):
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(
        ROOT / "tests", tmp_path / "tests", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path, old, new = MUTATIONS[name]
    source = (tmp_path / path).read_text()
    assert source.count(old) >= 1, f"the code this mutation targets changed: {old!r} not in {path}"
    (tmp_path / path).write_text(source.replace(old, new, 1))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-x",
            "tests/llm/test_golden_update.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        timeout=600,
    )
    assert proc.returncode == 1, f"{name}: the golden test did not fail\n{proc.stdout[-2000:]}"
    assert "failed" in proc.stdout
