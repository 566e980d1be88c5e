"""numba's cache of the compiled engine's kernels follows every file they are built from
(``fgrpo_theory.sim.kernel_cache``): numba itself tracks only the file that defines a kernel."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fgrpo_theory.sim.kernel_cache import drop_stale, sources_stamp

pytest.importorskip("numba")


def _kernels(folder: Path, module: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(f"{module}."))


def test_a_changed_source_drops_the_modules_cached_kernels_and_nothing_else(tmp_path):
    src = tmp_path / "src"
    cache = tmp_path / "cache"
    src.mkdir()
    cache.mkdir()
    (src / "compiled.py").write_text("x = 1\n")
    (src / "fast_exp.py").write_text("SMALL = 1 / 16\n")
    files = [src / "compiled.py", src / "fast_exp.py"]
    kernels = ["compiled._run_steps-10.py311.nbi", "compiled._run_steps-10.py311.1.nbc"]
    others = ["compiled_baseline._run_steps-10.py311.nbi", "fast_exp.exp1-5.py311.nbi"]
    for name in kernels + others:
        (cache / name).write_bytes(b"kernel")

    stamp = sources_stamp(files)
    assert drop_stale(cache, "compiled", stamp) == 2  # kernels of unknown sources: dropped
    assert _kernels(cache, "compiled") == ["compiled.sources"]
    for name in kernels:  # numba compiles them again
        (cache / name).write_bytes(b"kernel")
    assert drop_stale(cache, "compiled", sources_stamp(files)) == 0  # same sources: kept
    assert len(_kernels(cache, "compiled")) == 3

    (src / "fast_exp.py").write_text("SMALL = 1 / 32\n")  # only the other file changes
    assert sources_stamp(files) != stamp
    assert drop_stale(cache, "compiled", sources_stamp(files)) == 2
    assert _kernels(cache, "compiled") == ["compiled.sources"]
    assert sorted(p.name for p in cache.iterdir() if p.name in others) == sorted(others)


def test_a_folder_that_cannot_be_used_is_left_alone(tmp_path):
    assert drop_stale(tmp_path / "missing", "compiled", "stamp") == 0
    assert not (tmp_path / "missing").exists()


def test_the_stamp_covers_every_simulator_module_the_kernels_import():
    """Every ``fgrpo_theory.sim`` module that ``compiled`` imports is in its KERNEL_SOURCES
    (a kernel may inline its functions or freeze its constants)."""
    from fgrpo_theory.sim import compiled

    tree = ast.parse(Path(compiled.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "fgrpo_theory.sim":
            imported |= {f"fgrpo_theory.sim.{a.name}" for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "fgrpo_theory.sim."
        ):
            imported.add(node.module)
    imported.discard("fgrpo_theory.sim.kernel_cache")
    assert imported  # the parse found the imports
    assert imported <= {m.__name__ for m in compiled.KERNEL_SOURCES}


def test_importing_the_engine_stamps_its_cache_with_the_current_sources():
    from fgrpo_theory.sim import compiled

    folder = Path(compiled._tick._cache.cache_path)
    files = [compiled.__file__, *(m.__file__ for m in compiled.KERNEL_SOURCES)]
    assert (folder / "compiled.sources").read_text() == sources_stamp(files)
