"""The folders are layers and imports only go down (read from the source, nothing is imported).

- ``fgrpo_common`` (checks, fields, CLI parsing, atomic files) imports neither other package.
- ``fgrpo_theory`` never imports ``fgrpo_llm``, and torch only in its optional GPU engine.
- ``fgrpo_llm``: the RL core (the package's top-level modules and ``tasks/``) <- ``evaluation/``
  <- ``experiments/`` <- ``cli/``; ``integrations/`` may use the core and evaluation, and nothing
  outside it imports it.
- No module imports another package's private module (a name starting with ``_``).
- No cycle among imports, function-local ones included.
- ``experiments/`` holds two packages, ``countdown/`` and ``maze/``, on shared modules (runner,
  claims, paper): a package's ``config`` imports nothing from its package, the packages do not
  import each other, and the shared modules import neither.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fgrpo_common", "fgrpo_theory", "fgrpo_llm")

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


def test_fgrpo_common_imports_neither_package():
    bad = [
        f"{name}:{line} imports {target}"
        for name, path in MODULES.items()
        if name.startswith("fgrpo_common")
        for target, line in _imports(path)
        if target.split(".")[0] in ("fgrpo_theory", "fgrpo_llm")
    ]
    assert not bad, bad


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
        ("from fgrpo_llm.experiments.countdown.pipeline import run_demo\n", "a higher layer"),
        (
            "from fgrpo_theory.sim import samplers\nimport fgrpo_llm.trainer\n",
            "imports fgrpo_llm.trainer",
        ),
        ("def f():\n    from fgrpo_theory.focal import focal_weight\n", "imports fgrpo_theory"),
    ],
)
def test_the_layer_checks_catch_a_violation(tmp_path, monkeypatch, bad, expected):
    target, check = {
        "experiments": ("fgrpo_llm.advantages", test_fgrpo_llm_imports_only_go_down_the_layers),
        "fgrpo_llm.trainer": (
            "fgrpo_theory.focal",
            test_fgrpo_theory_never_imports_fgrpo_llm_and_torch_only_in_its_gpu_engine,
        ),
        "focal_weight": ("fgrpo_common.checks", test_fgrpo_common_imports_neither_package),
    }[next(k for k in ("experiments", "fgrpo_llm.trainer", "focal_weight") if k in bad)]
    fake = tmp_path / "m.py"
    fake.write_text(bad)
    monkeypatch.setitem(MODULES, target, fake)
    with pytest.raises(AssertionError, match=expected):
        check()


def test_a_function_local_import_that_closes_a_cycle_is_caught(tmp_path, monkeypatch):
    fake = tmp_path / "config.py"
    fake.write_text("def f():\n    from fgrpo_llm.experiments.maze.pipeline import FREE_FIELDS\n")
    monkeypatch.setitem(MODULES, "fgrpo_llm.experiments.maze.config", fake)
    with pytest.raises(AssertionError, match="maze.pipeline"):
        test_no_cycle_among_imports_function_local_ones_included()


#: The experiment packages, each on the shared modules of ``experiments/`` (runner, claims, paper).
EXPERIMENT_PACKAGES = ("countdown", "maze")


def _experiment_violations() -> list[str]:
    """A package's ``config`` imports nothing from its package; the packages do not import each
    other; the shared modules import neither."""
    bad = []
    for name, path in MODULES.items():
        parts = name.split(".")
        if parts[:2] != ["fgrpo_llm", "experiments"] or len(parts) < 3:
            continue
        own = parts[2] if parts[2] in EXPERIMENT_PACKAGES else None
        for target, line in _imports(path):
            tparts = target.split(".")
            if tparts[:2] != ["fgrpo_llm", "experiments"] or len(tparts) < 3:
                continue
            other = tparts[2] if tparts[2] in EXPERIMENT_PACKAGES else None
            if other is None:
                continue
            if own is None:
                bad.append(f"{name}:{line}: the shared module imports {target}")
            elif other != own:
                bad.append(f"{name}:{line}: package {own} imports {target}")
            elif parts[3:] == ["config"] and tparts[3:] and tparts[3] != "config":
                bad.append(f"{name}:{line}: config imports {target} from its package")
    return bad


def test_experiment_packages_config_imports_nothing_above_and_packages_stay_apart():
    assert not _experiment_violations(), _experiment_violations()


@pytest.mark.parametrize(
    "module,source,expected",
    [
        (
            "fgrpo_llm.experiments.countdown.config",
            "from fgrpo_llm.experiments.countdown.stages import run_done\n",
            "config imports",
        ),
        (
            "fgrpo_llm.experiments.maze.study",
            "from fgrpo_llm.experiments.countdown.study_report import run_numbers\n",
            "package maze imports",
        ),
        (
            "fgrpo_llm.experiments.runner",
            "def f():\n    from fgrpo_llm.experiments.maze.config import MazeConfig\n",
            "shared module imports",
        ),
    ],
)
def test_the_experiment_package_check_catches_a_violation(
    tmp_path, monkeypatch, module, source, expected
):
    fake = tmp_path / "m.py"
    fake.write_text(source)
    monkeypatch.setitem(MODULES, module, fake)
    with pytest.raises(AssertionError, match=expected):
        test_experiment_packages_config_imports_nothing_above_and_packages_stay_apart()
