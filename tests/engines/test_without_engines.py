"""Where TRL is not installed (``make test``'s environment) the TRL example says where to run it,
in one line, exit 2 (``test_records.py`` checks the integrations' own import errors)."""

from __future__ import annotations

import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_trl_example_without_trl_is_one_line():
    if find_spec("trl") is not None and find_spec("accelerate") is not None:
        pytest.skip("trl is installed here")
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trl_countdown_cpu.py"), "--out", "unused"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    err = out.stderr.strip().splitlines()
    assert "Traceback" not in out.stderr and ".venv-trl/bin/python" in err[-1], err
    assert not (ROOT / "unused").exists()


def test_the_verl_plugin_check_without_verl_is_one_line():
    if find_spec("verl") is not None:
        pytest.skip("verl is installed here")
    out = subprocess.run(
        [sys.executable, "-m", "fgrpo_llm.integrations.verl.plugin"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and ".venv-verl" in err[0], err


def test_the_trl_launcher_without_trl_is_one_line():
    if find_spec("trl") is not None:
        pytest.skip("trl is installed here")
    out = subprocess.run(
        [sys.executable, "-m", "fgrpo_llm.integrations.trl.launch", "--config", "x.yaml"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fgrpo-trl: error:") and ".venv-trl" in err[0], err
