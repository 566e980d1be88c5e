"""Where verl or TRL is not installed (``make test``'s environment): importing their integration
says how to get them, and the TRL example says where to run it, in one line, exit 2."""

from __future__ import annotations

import importlib
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("engine, venv", [("verl", ".venv-verl"), ("trl", ".venv-trl")])
def test_the_integration_without_its_engine_says_how_to_install_it(engine, venv):
    if find_spec(engine) is not None:
        pytest.skip(f"{engine} is installed here")
    with pytest.raises(ImportError, match=rf"not installed in this environment.*{venv}"):
        importlib.import_module(f"fgrpo_llm.integrations.{engine}")


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
