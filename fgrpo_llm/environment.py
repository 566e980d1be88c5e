"""What made a run: package versions, the CPU and the kernels torch and numpy use on it.

Floating-point results depend on the CPU's vector instructions (torch and numpy dispatch other
kernels on AVX-512 and AVX2 CPUs, and round differently), so a base model pretrained on one
machine is not the one pretrained on another. Every run records :func:`environment` in its
``run.json``, a pretrained base and a study's base in their ``environment.json``
(:func:`write_environment`); reports print it (:func:`environment_markdown`), and
:func:`environment_differences` names what differs between runs that are compared as a pair.

    >>> env = environment("cpu")
    >>> {"cpu", "cpu_flags", "device", "torch", "torch_cpu_capability"} <= set(env)
    True
"""

from __future__ import annotations

import json
from pathlib import Path

from fgrpo_common.environment import KERNEL_VARIABLES, machine_environment
from fgrpo_common.environment import cpu as _cpu
from fgrpo_common.files import atomic_write_text, strict_json

__all__ = [
    "ENVIRONMENT_FILE",
    "environment",
    "environment_differences",
    "segment_differences",
    "CPU_FAMILY_KEYS",
    "environment_markdown",
    "environment_section",
    "KERNEL_KEYS",
    "KERNEL_FAMILIES",
    "kernel_family_env",
    "pin_kernel_family",
    "write_environment",
]

#: The file in which a base (built-in, a study's, the demo's) records :func:`environment`.
ENVIRONMENT_FILE = "environment.json"

#: The fields that decide a run's floating-point numbers on the same code: when two runs differ
#: in one of these, their numbers differ too (by rounding at first, then by more).
KERNEL_KEYS = (
    "torch",
    "torch_cpu_capability",
    "transformers",
    "numpy",
    "cpu",
    "device",
    "ATEN_CPU_CAPABILITY",
    "NPY_DISABLE_CPU_FEATURES",
)


#: The two kernel families a study draws its bases under: "default" (what torch and numpy pick on
#: this CPU) and "other" (what they pick on a CPU of the other family).
KERNEL_FAMILIES = ("default", "other")

#: numpy's AVX-512 features: switched off, np.exp and reductions round as on an AVX2-only CPU.
NPY_AVX512 = (
    "AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL "
    "AVX512_SPR X86_V4"
)


def kernel_family_env(family: str) -> dict[str, str | None]:
    """The environment variables of a process that computes under kernel ``family``: "default"
    removes both variables (torch's ATen and numpy dispatch for this CPU); "other" on an AVX-512
    CPU asks ATen for its AVX2 kernels and numpy for no AVX-512, elsewhere ATen's unvectorised
    kernels. Matrix products in torch's MKL / oneDNN and numpy's BLAS keep this CPU's
    instructions; for the small models here ATen's and numpy's kernels are what differ between
    CPU families (the demo under the "other" variables on an AVX-512 CPU gives an AVX2 machine's
    numbers bit for bit)."""
    if family == "default":
        return {"ATEN_CPU_CAPABILITY": None, "NPY_DISABLE_CPU_FEATURES": None}
    if family != "other":
        raise ValueError(f"family must be one of {KERNEL_FAMILIES}, got family={family!r}")
    if "avx512f" in _cpu()[1]:
        return {"ATEN_CPU_CAPABILITY": "avx2", "NPY_DISABLE_CPU_FEATURES": NPY_AVX512}
    return {"ATEN_CPU_CAPABILITY": "default", "NPY_DISABLE_CPU_FEATURES": None}


def pin_kernel_family(out_b: Path, family: str, *, check_only: bool = False) -> None:
    """Record a base's kernel family the first time (``kernel_family.json`` in its directory) and
    refuse another one later: a base drawn under one family stays under it when a study is
    resumed with another list of bases. ``check_only``: refuse, but write nothing."""
    path = Path(out_b) / "kernel_family.json"
    if path.is_file():
        try:
            old = json.loads(path.read_text()).get("family")
        except (ValueError, AttributeError, RecursionError):
            raise ValueError(
                f"{path} is damaged; it should name the base's kernel family"
            ) from None
        if old != family:
            raise ValueError(
                f"{Path(out_b).name} was drawn under the {old!r} kernel family ({path}), not "
                f"{family!r}: keep its family (--families) or use another --out"
            )
        return
    if check_only:
        return

    out_b = Path(out_b)
    out_b.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"family": family}) + "\n")


def environment(device=None) -> dict:
    """The environment of a run on ``device``: versions (fgrpo and its git commit, python,
    torch, transformers, numpy), the CPU model and its vector flags, torch's CPU kernel family
    (``torch.backends.cpu.get_cpu_capability()``) and thread count, the device, and the
    variables that switch kernel families (``ATEN_CPU_CAPABILITY``,
    ``NPY_DISABLE_CPU_FEATURES``) when set."""
    machine = machine_environment(packages=("numpy", "transformers"))
    env = {
        **{k: machine[k] for k in ("fgrpo", "git_commit", "python", "numpy")},
        "torch": None,
        "torch_cpu_capability": None,
        "torch_threads": None,
        **{k: machine[k] for k in ("transformers", "cpu", "cpu_flags", "platform")},
        "device": None if device is None else str(device),
    }
    try:
        import torch

        env["torch"] = torch.__version__
        env["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        env["torch_threads"] = torch.get_num_threads()
        if device is not None and str(device).startswith("cuda") and torch.cuda.is_available():
            env["device_name"] = torch.cuda.get_device_name(torch.device(device))
    except ImportError:
        pass
    env.update({var: machine[var] for var in KERNEL_VARIABLES if var in machine})
    return env


def write_environment(directory, device=None) -> Path:
    """Write :func:`environment` of ``device`` to ``directory/environment.json``
    (:data:`ENVIRONMENT_FILE`, strict JSON, atomically); returns its path."""
    path = Path(directory) / ENVIRONMENT_FILE
    return atomic_write_text(path, strict_json(environment(device), indent=1, default=str) + "\n")


def environment_differences(envs: dict) -> list[str]:
    """For ``{name: environment}`` (a missing one as None), one sentence per
    :data:`KERNEL_KEYS` field whose values differ, each value with the runs that have it (the
    first three named); [] when all agree or fewer than two environments are known."""
    known = {name: env for name, env in envs.items() if isinstance(env, dict)}
    if len(known) < 2:
        return []
    out = []
    for key in KERNEL_KEYS:
        groups: dict[str, list[str]] = {}
        for name, env in known.items():
            groups.setdefault(str(env.get(key)), []).append(str(name))
        if len(groups) > 1:
            shown = "; ".join(f"{value} ({_names(names)})" for value, names in groups.items())
            out.append(f"{key} differs: {shown}")
    return out


#: The fields that tell a CPU family (the vector kernels torch and numpy dispatch to).
CPU_FAMILY_KEYS = ("cpu", "torch_cpu_capability", "ATEN_CPU_CAPABILITY", "NPY_DISABLE_CPU_FEATURES")


def segment_differences(segments: list[dict]) -> list[str]:
    """For the segments of one run (``fgrpo_llm.tracking.run_segments``), one sentence per
    CPU-family field (:data:`CPU_FAMILY_KEYS`) that differs between them; [] when every segment
    ran on one family."""
    envs = {f"from step {s['from_step']}": s.get("environment") for s in segments}
    return [
        line for line in environment_differences(envs) if line.split(" ", 1)[0] in CPU_FAMILY_KEYS
    ]


def _names(names: list[str]) -> str:
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return ", ".join(names[:3]) + more


def environment_section(envs: dict) -> str:
    """A report's section on the environments of its runs (``{name: environment}``): one table
    when they agree on every field that decides rounding, else what differs, then the first."""
    diffs = environment_differences(envs)
    first = next((e for e in envs.values() if isinstance(e, dict)), None)
    if not diffs:
        head = "The runs agree on every field that decides their rounding."
        if sum(isinstance(e, dict) for e in envs.values()) < len(envs):
            head = "Some runs did not record their environment; the others agree."
        return head + "\n\n" + environment_markdown(first)
    return (
        "**The runs come from different environments**, so their differences include the "
        "kernels' rounding, not only the method: "
        + "; ".join(diffs)
        + ".\n\nThe first run's:\n\n"
        + environment_markdown(first)
    )


#: Fields a report leaves out: torch's thread count follows the worker count (a worker process
#: runs one thread), and the numbers do not depend on it (tested).
NOT_REPORTED = ("torch_threads",)


def environment_markdown(env: dict | None) -> str:
    """A two-column table of an environment, for a report."""
    if not env:
        return "Not recorded (a run written before environments were recorded)."
    rows = "\n".join(
        f"| {key} | {value} |" for key, value in env.items() if key not in NOT_REPORTED
    )
    return "| what | value |\n|---|---|\n" + rows
