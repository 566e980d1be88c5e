"""Rebuild every notebook from its builder and execute it in place, keeping the outputs (figures).

    python notebooks/execute.py            # make notebooks: full parameters, reads runs/ when there
    python notebooks/execute.py --fast     # small parameters (what tests/test_notebooks.py runs)

The builders (``build_*.py``) are the source of the notebooks; the committed ``.ipynb`` files carry
the outputs of the last ``make notebooks``, so a code host shows the figures. Notebook 03 reads
``results/fig2`` and computes it first when absent; notebook 04 reads the runs of ``make demo``
(``runs/demo``) and otherwise builds a tiny run whose numbers mean nothing (it says so); notebook
05 reuses the maze study in ``runs/maze_study`` and otherwise runs it there (11-19 min on two
idle cores, ``docs/results_maze.md``).
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--fast", action="store_true", help="small parameters (FGRPO_NOTEBOOK_FAST=1)"
    )
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per cell")
    args = parser.parse_args(argv)
    # the inline backend: each figure becomes a PNG output of its cell (Agg would show none)
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    if args.fast:
        os.environ["FGRPO_NOTEBOOK_FAST"] = "1"
    else:
        os.environ.pop("FGRPO_NOTEBOOK_FAST", None)
    root = HERE.parent
    os.chdir(root)  # the builders and the notebooks use paths relative to the repository
    for builder in sorted(HERE.glob("build_*.py")):
        runpy.run_path(str(builder), run_name="__main__")
    for path in sorted(HERE.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        print(f"executing {path.name} ...", file=sys.stderr, flush=True)
        NotebookClient(
            nb,
            kernel_name="python3",
            timeout=args.timeout,
            resources={"metadata": {"path": str(root)}},
        ).execute(cwd=str(root))
        nbformat.write(nb, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
