"""The simulator package has layers and no cycles: each module of ``fgrpo_theory.sim`` imports
only modules below it (config, samplers, group, dense, sparse, fast_exp, kernel_cache, link,
compiled, split, torch_engine, threads, engines, agreement, sweep), at module level or inside
functions; torch only in torch_engine."""

from __future__ import annotations

import ast
from pathlib import Path

import fgrpo_theory.sim as sim

ORDER = [
    "config",
    "samplers",
    "group",
    "dense",
    "sparse",
    "fast_exp",
    "kernel_cache",
    "link",
    "compiled",
    "split",
    "torch_engine",
    "threads",
    "engines",
    "agreement",
    "sweep",
    "__init__",
]
#: engines dispatches to the engines above it lazily, by name; that is its job.
LAZY_UP = {
    ("engines", "compiled"),
    ("engines", "dense"),
    ("engines", "sparse"),
    ("sweep", "torch_engine"),
}


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            if node.module == "fgrpo_theory.sim":
                names.update(f"fgrpo_theory.sim.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_every_module_is_in_the_layer_order():
    found = {p.stem for p in Path(sim.__file__).parent.glob("*.py")}
    assert found == set(ORDER)


def test_modules_import_only_lower_layers():
    folder = Path(sim.__file__).parent
    for mod in ORDER:
        for name in _imports(folder / f"{mod}.py"):
            if name.startswith("fgrpo_theory.sim."):
                other = name.split(".")[2]
                assert ORDER.index(other) < ORDER.index(mod) or (mod, other) in LAZY_UP, (
                    f"fgrpo_theory.sim.{mod} imports the higher layer {name}"
                )
            if name == "torch" or name.startswith("torch."):
                assert mod == "torch_engine", f"{mod} imports torch"
            assert not name.startswith("fgrpo_llm"), f"{mod} imports {name}"
