"""The folders are layers and imports only go down (read from the source, nothing is imported).

- ``fgrpo_common`` (checks, fields, CLI parsing, files, the process pool, the timer) imports
  neither other package, and the plumbing both use lives there once: the process pool and the
  directory lock each in one module.
- ``fgrpo_theory`` never imports ``fgrpo_llm``, and torch only in its optional GPU engine.
- ``fgrpo_llm``: the RL core (the package's top-level modules and ``tasks/``) <- ``evaluation/``
  <- ``experiments/`` <- ``cli/``; ``integrations/`` may use the core and evaluation, and nothing
  outside it imports it.
- No module imports another package's private module (a name starting with ``_``).
- No cycle among imports, function-local ones included.
- A project module imported inside a function says why on its line (or the line above):
  ``# lazy: torch`` names the heavy modules it would add to the importer's own top-level
  imports (checked: each one named must be added), ``# lazy: optional`` marks an import inside
  a ``try`` that handles its failure. Any other function-local import belongs at the top.
- ``experiments/`` holds two packages, ``countdown/`` and ``maze/``, on shared modules (runner,
  claims, paper): a package's ``config`` imports nothing from its package, the packages do not
  import each other, and the shared modules import neither.
"""

from __future__ import annotations

import ast
import re
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


@pytest.fixture
def fake_module(tmp_path, monkeypatch):
    """put(name, source): MODULES[name] holds ``source`` for the rest of the test."""

    def put(name: str, source: str) -> None:
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        monkeypatch.setitem(MODULES, name, path)

    return put


def _top_level(body: list) -> list:
    """The statements that run when a module is imported: its top level, with the bodies of
    top-level ``try`` and ``if`` blocks (not ``if TYPE_CHECKING:``)."""
    out = []
    for node in body:
        if isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                out += _top_level(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            handlers = [n for h in node.handlers for n in h.body]
            out += _top_level(node.body + handlers + node.orelse + node.finalbody)
        else:
            out.append(node)
    return out


def _imports(path: Path, *, top_level_only: bool = False) -> list[tuple[str, int]]:
    """``(imported module, line)`` for every import (``top_level_only``: those run on import)."""
    tree = ast.parse(path.read_text())
    nodes = _top_level(tree.body) if top_level_only else list(ast.walk(tree))
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
    return found


def _project_module(target: str) -> str | None:
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


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


#: The plumbing both packages share, each written once, in its module of ``fgrpo_common``.
PLUMBING = {"ProcessPoolExecutor": "fgrpo_common.pool", "fcntl.flock": "fgrpo_common.files"}


@pytest.mark.parametrize("needle,home", sorted(PLUMBING.items()))
def test_the_shared_plumbing_is_written_once_below_both_packages(needle, home):
    found = sorted(name for name, path in MODULES.items() if needle in path.read_text())
    assert found == [home]


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


def _import_graph() -> dict[str, set[str]]:
    """Each project module -> the project modules it imports (function-local imports too)."""
    graph = {}
    for name, path in MODULES.items():
        targets = (_project_module(target) for target, _ in _imports(path))
        graph[name] = {t for t in targets if t and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    """Every import cycle a depth-first walk of ``graph`` meets, as ``a -> b -> a``."""
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
    return cycles


def test_no_cycle_among_imports_function_local_ones_included():
    """A function-local import defers loading, not the dependency: it counts as an edge too."""
    cycles = _cycles(_import_graph())
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
def test_the_layer_checks_catch_a_violation(fake_module, bad, expected):
    target, check = {
        "experiments": ("fgrpo_llm.advantages", test_fgrpo_llm_imports_only_go_down_the_layers),
        "fgrpo_llm.trainer": (
            "fgrpo_theory.focal",
            test_fgrpo_theory_never_imports_fgrpo_llm_and_torch_only_in_its_gpu_engine,
        ),
        "focal_weight": ("fgrpo_common.checks", test_fgrpo_common_imports_neither_package),
    }[next(k for k in ("experiments", "fgrpo_llm.trainer", "focal_weight") if k in bad)]
    fake_module(target, bad)
    with pytest.raises(AssertionError, match=expected):
        check()


def test_a_function_local_import_that_closes_a_cycle_is_caught(fake_module):
    fake_module(
        "fgrpo_llm.experiments.maze.config",
        "def f():\n    from fgrpo_llm.experiments.maze.pipeline import FREE_FIELDS\n",
    )
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
def test_the_experiment_package_check_catches_a_violation(fake_module, module, source, expected):
    fake_module(module, source)
    with pytest.raises(AssertionError, match=expected):
        test_experiment_packages_config_imports_nothing_above_and_packages_stay_apart()


#: Third-party modules slow enough to import (or optional enough) to defer a project import.
HEAVY = frozenset(
    {
        "torch",
        "transformers",
        "tokenizers",
        "safetensors",
        "matplotlib",
        "sympy",
        "numba",
        "scipy",
        "math_verify",
        "yaml",
        "verl",
        "trl",
        "accelerate",
    }
)


_CLOSURES: dict = {}


def _closure(module: str) -> frozenset[str]:
    """Every module (project ones by name, third-party ones by their top package) that importing
    ``module`` imports through top-level imports, its parent packages' included."""
    key = (module, MODULES[module])
    if key in _CLOSURES:
        return _CLOSURES[key]
    _CLOSURES[key] = frozenset()  # a cycle stops here (the cycle test reports it)
    out = set()
    parts = module.split(".")
    for i in range(1, len(parts)):
        parent = ".".join(parts[:i])
        if parent in MODULES:
            out |= _closure(parent) | {parent}
    for target, _ in _imports(MODULES[module], top_level_only=True):
        if target.split(".")[0] in PACKAGES:
            found = _project_module(target)
            if found and found != module:
                out |= _closure(found) | {found}
        else:
            out.add(target.split(".")[0])
    _CLOSURES[key] = frozenset(out)
    return _CLOSURES[key]


def _local_imports(path: Path):
    """``(import node, inside a try)`` for each import of a project module inside a function."""
    tree = ast.parse(path.read_text())
    found = []

    def visit(node, in_function, in_try):
        for child in ast.iter_child_nodes(node):
            fn = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            tried = in_try or (in_function and isinstance(child, ast.Try))
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                names = (
                    [child.module]
                    if isinstance(child, ast.ImportFrom)
                    else [a.name for a in child.names]
                )
                if any(n and n.split(".")[0] in PACKAGES for n in names):
                    found.append((child, in_try))
            visit(child, fn, tried)

    visit(tree, False, False)
    return found


def _lazy_violations() -> list[str]:
    bad = []
    for name, path in MODULES.items():
        lines = path.read_text().splitlines()
        mine = _closure(name)
        for node, in_try in _local_imports(path):
            where = f"{name}:{node.lineno}"
            marks = [
                line.split("# lazy:", 1)[1].strip()
                for line in lines[max(0, node.lineno - 2) : node.lineno]
                if "# lazy:" in line
            ]
            if not marks:
                bad.append(f"{where}: a function-local import without '# lazy: <why>'")
                continue
            why = {w.strip() for w in marks[-1].split(",")}
            if why == {"optional"}:
                if not in_try:
                    bad.append(f"{where}: '# lazy: optional' outside a try")
                continue
            if isinstance(node, ast.ImportFrom):
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            else:
                targets = [a.name for a in node.names]
            adds = set()
            for target in targets:
                found = _project_module(target)
                if found:
                    adds |= (_closure(found) | {found.split(".")[0]}) & HEAVY
            stale = sorted(w for w in why if w not in adds - mine)
            if stale:
                bad.append(f"{where}: '# lazy:' names {stale}, which it does not add")
    return bad


def test_every_function_local_import_says_why_it_is_deferred():
    bad = _lazy_violations()
    assert not bad, bad


@pytest.mark.parametrize(
    "source,expected",
    [
        ("def f():\n    from fgrpo_common.files import read_jsonl\n", "without '# lazy"),
        (
            "def f():\n    from fgrpo_common.files import read_jsonl  # lazy: torch\n",
            "does not add",
        ),
        (
            "def f():\n    from fgrpo_common.files import read_jsonl  # lazy: optional\n",
            "outside a try",
        ),
    ],
)
def test_the_lazy_import_check_catches_a_violation(fake_module, source, expected):
    fake_module("fgrpo_llm.fake", source)
    with pytest.raises(AssertionError, match=expected):
        test_every_function_local_import_says_why_it_is_deferred()


def test_a_justified_lazy_import_passes(fake_module):
    fake_module(
        "fgrpo_llm.fake", "def f():\n    from fgrpo_llm.trainer import train  # lazy: torch\n"
    )
    assert not [v for v in _lazy_violations() if "fgrpo_llm.fake" in v]


def _layout_block() -> str:
    """The README's "Layout" code block."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text.split("\n## Layout\n", 1)[1]
    return after.split("```", 2)[1]


def _folder_text(block: str, folders: tuple[str, ...]) -> str:
    """The part of the layout block that lists ``folders[-1]``'s modules: from its label
    ``name/`` (found after the labels of the folders above it) to the next folder label."""
    at = 0
    for folder in folders:
        found = re.search(rf"(?<![\w/]){re.escape(folder)}/", block[at:])
        if found is None:
            return ""
        at += found.end()
    following = re.search(r"(?<![\w/.])[A-Za-z_]+/(?!\w)", block[at:])
    return block[at : at + following.start()] if following else block[at:]


def test_the_readme_layout_names_every_module():
    """The README's layout names each module of the three packages where its folder's modules
    are listed (a new module is listed where a reader looks for it); the CLI's modules are named
    after their subcommands."""
    block = _layout_block()
    unnamed = []
    for path in _modules().values():
        folders = path.relative_to(ROOT).parts[:-1]
        if path.stem in ("__init__", "__main__") or folders[-1] == "cli":
            continue
        if not re.search(rf"\b{path.stem}\b", _folder_text(block, folders)):
            unnamed.append(str(path.relative_to(ROOT)))
    assert not unnamed, f"README.md's layout does not name {sorted(unnamed)} in its folder"


def test_the_layout_check_reads_each_folder_apart():
    """A module named only under another folder does not count."""
    block = "pkg/   a, b, sub/ (c, d)\nother/ e\n"
    assert re.search(r"\bc\b", _folder_text(block, ("pkg", "sub")))
    assert not re.search(r"\bc\b", _folder_text(block, ("pkg",)))
    assert not re.search(r"\be\b", _folder_text(block, ("pkg", "sub")))
    assert _folder_text(block, ("nowhere",)) == ""
