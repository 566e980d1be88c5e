"""What a computation ran on, without torch: the package versions, the git commit, the CPU model
and the vector instructions that decide which kernels numpy (and torch) dispatch, and the
variables that switch kernel families. ``fgrpo_llm.environment`` adds torch's own kernels; the
simulator saves :func:`machine_environment` next to its results. :func:`set_variables` sets (and
restores) this process's environment variables.

    >>> {"cpu", "cpu_flags", "fgrpo", "numpy", "python"} <= set(machine_environment(("numpy",)))
    True
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

__all__ = [
    "KERNEL_VARIABLES",
    "cpu",
    "git_commit",
    "machine_environment",
    "package_version",
    "set_variables",
]

#: The variables that switch torch's ATen and numpy to another CPU family's kernels.
KERNEL_VARIABLES = ("ATEN_CPU_CAPABILITY", "NPY_DISABLE_CPU_FEATURES")


def package_version(package: str) -> str | None:
    """The installed version of ``package``, or None when it is not installed."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The commit of the checkout this package runs from (with "+dirty" when it has changes),
    or None when it is not a git checkout."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    try:
        run = dict(cwd=root, capture_output=True, text=True, timeout=10)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], **run).stdout.strip()
        dirty = subprocess.run(
            ["git", "--no-optional-locks", "status", "--porcelain", "-uno"], **run
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (commit + ("+dirty" if dirty else "")) or None


@functools.lru_cache(maxsize=1)
def cpu() -> tuple[str, list[str]]:
    """The CPU model and its vector-instruction flags that decide which kernels run (AVX2, FMA,
    AVX-512F), from /proc/cpuinfo where there is one."""
    model, flags = None, None
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:  # the first processor's entries
        if model is None and line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
        elif flags is None and line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
    model = model or platform.processor() or platform.machine()
    return model, [f for f in ("avx2", "fma", "avx512f") if f in (flags or ())]


def machine_environment(packages=("numpy",)) -> dict:
    """fgrpo's version and git commit, python's, each of ``packages``' (None: not installed),
    the CPU model and its vector flags, the platform, and the kernel variables
    (``KERNEL_VARIABLES``) that are set."""
    model, flags = cpu()
    env = {
        "fgrpo": package_version("fgrpo"),
        "git_commit": git_commit(),
        "python": platform.python_version(),
        **{name: package_version(name) for name in packages},
        "cpu": model,
        "cpu_flags": flags,
        "platform": platform.platform(),
    }
    for var in KERNEL_VARIABLES:
        if os.environ.get(var):
            env[var] = os.environ[var]
    return env


def set_variables(values: Mapping[str, object]) -> None:
    """Set each environment variable of ``values`` (name -> value) in this process to
    ``str(value)``, or unset it where the value is None: what restores the variables saved as
    ``{name: os.environ.get(name)}``."""
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = str(value)
