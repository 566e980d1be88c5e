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


def _builder_cells(builder: str, notebook: str, monkeypatch) -> list:
    """The cells ``notebooks/<builder>`` writes for ``notebook`` (nothing written to disk)."""
    import runpy

    written = {}
    monkeypatch.setattr(nbformat, "write", lambda nb, path, *a, **k: written.update({path: nb}))
    monkeypatch.chdir(NOTEBOOKS[0].parents[1])
    runpy.run_path(str(NOTEBOOKS[0].parent / builder), run_name="__main__")
    (nb,) = [nb for path, nb in written.items() if Path(path).name == notebook]
    return nb.cells


def test_notebook_01_fig5_prose_states_the_closed_form_values(monkeypatch):
    """Every "P at N = 2^k" the Fig. 5 prose of notebook 01 quotes is Lemma 3.1 at the figure's
    (mu, tau) to the digits shown, and the plateau it names holds: the prose once said the curve
    fell only for N >= 2^15, where the printed values had it at 0.36 by N = 2^14."""
    import re

    import numpy as np

    from fgrpo_theory.plots import FIG5
    from fgrpo_theory.tail_miss import p_tail_miss

    (text,) = [
        c.source
        for c in _builder_cells("build_01_02_theory.py", "01_tail_miss.ipynb", monkeypatch)
        if c.cell_type == "markdown" and c.source.startswith("## Fig. 5")
    ]
    quoted = re.findall(r"(\d\.\d\d) at \$N = 2\^\{?(\d+)\}?\$", text)
    assert len(quoted) >= 3, text
    for value, log2n in quoted:
        assert f"{p_tail_miss(FIG5['mu'], FIG5['tau'], 2.0 ** int(log2n)):.2f}" == value, log2n
    lo, hi = (
        int(k)
        for k in re.search(r"above 0\.96 from \$N = 2\^(\d+)\$ to \$2\^(\d+)\$", text).groups()
    )
    assert (p_tail_miss(FIG5["mu"], FIG5["tau"], 2.0 ** np.arange(lo, hi + 1)) > 0.96).all()
    assert p_tail_miss(FIG5["mu"], FIG5["tau"], 2.0**17) < 0.005


def test_notebook_04_says_when_its_numbers_come_from_a_tiny_run(tmp_path, monkeypatch, capsys):
    """Without a demo run (here: none under the working directory) and without
    FGRPO_NOTEBOOK_FAST, notebook 04 falls back to a tiny run: its first cell must say that the
    numbers mean nothing (it once did so silently, so a `make notebooks` on a fresh clone wrote a
    meaningless notebook that read like the real one)."""
    from fgrpo_llm.experiments.countdown import pipeline

    cells = _builder_cells("build_04_llm_validation.py", "04_llm_validation.ipynb", monkeypatch)
    first = next(c.source for c in cells if c.cell_type == "code")
    built = []
    monkeypatch.setattr(pipeline, "run_demo", lambda out, cfg: built.append(out))
    monkeypatch.delenv("FGRPO_NOTEBOOK_FAST", raising=False)
    monkeypatch.delenv("FGRPO_DEMO_DIR", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)
    exec(compile(first, "04 cell 1", "exec"), {})
    assert built and "means nothing" in capsys.readouterr().out
    # a demo run in place: read, nothing built, no warning
    (tmp_path / "runs" / "demo").mkdir(parents=True)
    (tmp_path / "runs" / "demo" / "rare_set.json").write_text("{}")
    built.clear()
    exec(compile(first, "04 cell 1", "exec"), {})
    out = capsys.readouterr().out
    assert not built and "means nothing" not in out and "runs/demo" in out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_the_committed_notebooks_carry_one_run_of_every_cell(path):
    """``make notebooks`` executes each notebook top to bottom, so its code cells carry the
    execution counts 1, 2, ...: a cell added to a builder without re-executing the notebook
    (no output, no count) shows a reader no result, and the outputs around it may predate it."""
    nb = nbformat.read(path, as_version=4)
    counts = [c.get("execution_count") for c in nb.cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1)), counts
