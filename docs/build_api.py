"""Build the API reference (docs/api/) from the docstrings with pdoc; any pdoc warning is an error.

    python docs/build_api.py            # make docs

Every module of both packages is documented, except ``__main__`` entry points and the engine
integrations that import verl / TRL (they are documented in docs/engines.md and built by
``make test-engines``'s environments).
"""

from __future__ import annotations

import pkgutil
import sys
import warnings
from pathlib import Path

SKIP = ("fgrpo_llm.integrations.verl", "fgrpo_llm.integrations.trl")
OUT = Path(__file__).resolve().parent / "api"


def modules() -> list[str]:
    import fgrpo_common
    import fgrpo_llm
    import fgrpo_theory

    names = ["fgrpo_common", "fgrpo_theory", "fgrpo_llm"]
    for pkg in (fgrpo_common, fgrpo_theory, fgrpo_llm):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if (
                info.name.endswith("__main__")
                or info.name.startswith(SKIP)
                or info.name == "fgrpo_llm.integrations"
            ):
                continue
            names.append(info.name)
    return names


def main() -> int:
    import pdoc

    warnings.simplefilter("error", UserWarning)  # pdoc reports problems as UserWarnings
    # a subpackage's modules are walked twice (listed here and found under it): not a problem
    warnings.filterwarnings("ignore", message="The module specification", category=UserWarning)
    names = modules()
    pdoc.render.configure(docformat="markdown", search=True, show_source=True)
    pdoc.pdoc(*names, output_directory=OUT)
    print(f"wrote {OUT} ({len(names)} modules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
