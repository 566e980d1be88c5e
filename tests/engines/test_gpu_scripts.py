"""The prepared GPU smoke scripts (examples/gpu_smoke_trl.sh, examples/gpu_smoke_verl.sh): they
parse, and on a machine without a GPU they stop at once with one line and exit status 2, before
writing anything. (Their GPU run itself is not tested here: no GPU was lent to this work.)"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPTS = ["gpu_smoke_trl.sh", "gpu_smoke_verl.sh", "verl_qwen25_05b_gsm8k_1gpu.sh"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_gpu_scripts_parse(name):
    done = subprocess.run(["bash", "-n", str(EXAMPLES / name)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has nvidia-smi")
@pytest.mark.parametrize("name", SCRIPTS[:2])
def test_without_a_gpu_the_smoke_scripts_stop_before_writing(name, tmp_path):
    done = subprocess.run(
        ["bash", str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "MODEL": str(tmp_path)},
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"{name[:-3]}: no GPU here (nvidia-smi finds none); this smoke test needs one"
    ]
    assert list(tmp_path.iterdir()) == []
