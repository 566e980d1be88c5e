"""fgrpo_theory must import and work without torch (the theory needs numpy and scipy only)."""

import subprocess
import sys

SCRIPT = r"""
import importlib, pkgutil, sys

class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked in this test")
        return None

sys.meta_path.insert(0, _NoTorch())
import fgrpo_theory
for mod in pkgutil.iter_modules(fgrpo_theory.__path__):
    importlib.import_module(f"fgrpo_theory.{mod.name}")
from fgrpo_theory.cli import main
assert main(["tail-miss", "--mu", "0.3", "--rho", "0.1", "--group-size", "1,8", "--json"]) == 0
assert "torch" not in sys.modules
print("ok")
"""


def test_fgrpo_theory_imports_and_runs_with_torch_blocked():
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("ok")
