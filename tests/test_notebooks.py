"""Execute every notebook in notebooks/ with small parameters (FGRPO_NOTEBOOK_FAST=1)."""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path, monkeypatch):
    monkeypatch.setenv("FGRPO_NOTEBOOK_FAST", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute(cwd=str(tmp_path))  # raises CellExecutionError naming the failing cell
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.output_type == "error"
    ]
    assert not errors


BUILDERS = sorted(NOTEBOOKS[0].parent.glob("build_*.py")) if NOTEBOOKS else []


@pytest.mark.parametrize("builder", BUILDERS, ids=[p.name for p in BUILDERS])
def test_the_committed_notebooks_are_their_builders(builder, monkeypatch):
    """Each builder writes the cells of the committed notebook (``make notebooks`` rebuilds them
    from the builders), and its code cells compile."""
    import runpy

    from IPython.core.inputtransformer2 import TransformerManager  # %magics as Python

    written = {}
    monkeypatch.setattr(nbformat, "write", lambda nb, path, *a, **k: written.update({path: nb}))
    monkeypatch.chdir(NOTEBOOKS[0].parents[1])
    runpy.run_path(str(builder), run_name="__main__")
    assert written
    for path, nb in written.items():
        committed = nbformat.read(NOTEBOOKS[0].parent / Path(path).name, as_version=4)
        assert [c.source for c in nb.cells] == [c.source for c in committed.cells], path
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                python = TransformerManager().transform_cell(cell.source)
                compile(python, f"{Path(path).name} cell {i}", "exec")
