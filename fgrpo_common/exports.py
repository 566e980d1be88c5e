"""A package's public names, each imported from the module that defines it on first use (a
module ``__getattr__``, PEP 562), so that importing the package stays light.

    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(
    package: str, exports: dict[str, str], namespace: dict
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` of ``package``: a name of ``exports`` (public name -> the module
    that defines it) is imported on first use and kept in ``namespace`` (the package's
    ``globals()``); any other name is an AttributeError naming the package."""

    def __getattr__(name: str):
        """Import a public name's module on first use (importing the package stays light)."""
        if name in exports:
            value = getattr(importlib.import_module(exports[name]), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
