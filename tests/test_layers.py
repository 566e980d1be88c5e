"""The folders are layers and imports only go down (read from the source, nothing is imported).

- ``fgrpo_theory`` never imports ``fgrpo_llm``, and torch only in its optional GPU engine.
- ``fgrpo_llm``: the RL core (the package's top-level modules and ``tasks/``) <- ``evaluation/``
  <- ``experiments/`` <- ``cli/``; ``integrations/`` may use the core and evaluation, and nothing
  outside it imports it.
- No module imports another package's private module (a name starting with ``_``).
- No cycle among imports, function-local ones included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fgrpo_theory", "fgrpo_llm")

#: fgrpo_llm's layers, lowest first; a module may import its own layer and the ones below.
LLM_LAYERS = ("core", "evaluation", "experiments", "cli")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


MODULES = _modules()


def _imports(path: Path, *, top_level_only: bool = False) -> list[tuple[str, int]]:
    """``(imported module, line)`` for every import of a fgrpo package (relative ones resolved)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            found.append((base, node.lineno))
            found += [
                (f"{base}.{a.name}", node.lineno)
                for a in node.names
                if f"{base}.{a.name}" in MODULES
            ]
        # e.g. `if TYPE_CHECKING:` blocks
        elif top_level_only and isinstance(node, (ast.If, ast.Try)):
            continue
    return found


def _llm_layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ("evaluation", "experiments", "cli", "integrations"):
        return parts[1]
    return "core"


def test_fgrpo_theory_never_imports_fgrpo_llm_and_torch_only_in_its_gpu_engine():
    bad = []
    for name, path in MODULES.items():
        if not name.startswith("fgrpo_theory"):
            continue
        for target, line in _imports(path):
            if target.startswith("fgrpo_llm"):
                bad.append(f"{name}:{line} imports {target}")
            if target.split(".")[0] == "torch" and name != "fgrpo_theory.sim.torch_engine":
                bad.append(f"{name}:{line} imports {target}")
    assert not bad, bad


def test_fgrpo_llm_imports_only_go_down_the_layers():
    bad = []
    for name, path in MODULES.items():
        if not name.startswith("fgrpo_llm"):
            continue
        mine = _llm_layer(name)
        for target, line in _imports(path):
            if (
                not target.startswith("fgrpo_llm.")
                or target not in MODULES
                and target.rsplit(".", 1)[0] not in MODULES
            ):
                continue
            theirs = _llm_layer(target)
            if theirs == "integrations" and mine != "integrations":
                bad.append(
                    f"{name}:{line} imports {target} (only integrations/ may import integrations/)"
                )
            elif mine == "integrations":
                if theirs not in ("core", "evaluation", "integrations"):
                    bad.append(f"{name}:{line} ({mine}) imports {target} ({theirs})")
            elif theirs != "integrations" and LLM_LAYERS.index(theirs) > LLM_LAYERS.index(mine):
                bad.append(f"{name}:{line} ({mine}) imports {target} ({theirs}), a higher layer")
    assert not bad, bad


def test_no_module_imports_another_packages_private_module():
    bad = []
    for name, path in MODULES.items():
        own = ".".join(name.split(".")[:2])
        for target, line in _imports(path):
            parts = target.split(".")
            if parts[0] not in PACKAGES:
                continue
            private = [
                i for i, p in enumerate(parts) if p.startswith("_") and not p.startswith("__")
            ]
            if (
                private
                and ".".join(parts[: private[0]]) != own
                and not name.startswith(".".join(parts[: private[0]]))
            ):
                bad.append(f"{name}:{line} imports {target}")
    assert not bad, bad


def test_no_cycle_among_imports_function_local_ones_included():
    """A function-local import defers loading, not the dependency: it counts as an edge too."""
    graph = {}
    for name, path in MODULES.items():
        deps = set()
        for target, _ in _imports(path):
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                deps.add(target)
        graph[name] = deps
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for dep in sorted(graph.get(node, ())):
            if name_is_package_of(dep, node):
                continue
            if state.get(dep) == "open":
                cycles.append(" -> ".join(stack[stack.index(dep) :] + [dep]))
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, cycles


def name_is_package_of(package: str, module: str) -> bool:
    """A module importing from its own package's ``__init__`` is not a cycle worth reporting."""
    return module.startswith(package + ".")


@pytest.mark.parametrize(
    "bad,expected",
    [
        ("from fgrpo_llm.experiments.demo import run_demo\n", "a higher layer"),
        (
            "from fgrpo_theory.sim import samplers\nimport fgrpo_llm.trainer\n",
            "imports fgrpo_llm.trainer",
        ),
    ],
)
def test_the_layer_checks_catch_a_violation(tmp_path, monkeypatch, bad, expected):
    target = "fgrpo_llm.advantages" if "experiments" in bad else "fgrpo_theory.focal"
    fake = tmp_path / "m.py"
    fake.write_text(bad)
    monkeypatch.setitem(MODULES, target, fake)
    check = (
        test_fgrpo_llm_imports_only_go_down_the_layers
        if "experiments" in bad
        else test_fgrpo_theory_never_imports_fgrpo_llm_and_torch_only_in_its_gpu_engine
    )
    with pytest.raises(AssertionError, match=expected):
        check()


def test_a_function_local_import_that_closes_a_cycle_is_caught(tmp_path, monkeypatch):
    fake = tmp_path / "maze.py"
    fake.write_text("def f():\n    from fgrpo_llm.experiments.maze_pipeline import FREE_FIELDS\n")
    monkeypatch.setitem(MODULES, "fgrpo_llm.experiments.maze", fake)
    with pytest.raises(AssertionError, match="maze_pipeline"):
        test_no_cycle_among_imports_function_local_ones_included()
