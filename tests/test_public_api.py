"""The public API: every name in ``__all__`` of both packages resolves, is documented, and importing
a package is light (``import fgrpo_theory`` loads neither torch nor sympy; ``import fgrpo_llm`` no
torch)."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest


@pytest.mark.parametrize("package", ["fgrpo_theory", "fgrpo_llm"])
def test_every_public_name_resolves_and_has_a_docstring(package):
    pkg = importlib.import_module(package)
    assert pkg.__all__ == sorted(set(pkg.__all__))
    for name in pkg.__all__:
        obj = getattr(pkg, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert (obj.__doc__ or "").strip(), f"{package}.{name} has no docstring"
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = pkg.no_such_name


@pytest.mark.parametrize(
    "package,heavy",
    [
        ("fgrpo", ("torch", "sympy", "matplotlib", "numba", "scipy")),
        ("fgrpo_common", ("torch", "sympy", "matplotlib", "numba", "scipy")),
        ("fgrpo_theory", ("torch", "sympy", "matplotlib")),
        ("fgrpo_llm", ("torch", "transformers")),
    ],
)
def test_importing_a_package_is_light(package, heavy):
    code = f"import sys, {package}; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def test_import_fgrpo_names_the_packages():
    """``pip install fgrpo`` then ``import fgrpo``: the version, and the packages by name."""
    import fgrpo
    import fgrpo_common
    import fgrpo_theory

    assert fgrpo.__version__ == fgrpo_common.__version__
    assert fgrpo.theory is fgrpo_theory
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = fgrpo.no_such_name
