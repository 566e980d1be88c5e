"""The examples in the docstrings (``>>>``) run and print what they show.

Every module of the three packages whose source holds an example is collected from the files,
so a new one is covered without a list to keep. Each module's examples run as Python's
``doctest`` runs them (the ``...`` and whitespace options, as written in the docs); an example
marked ``# doctest: +SKIP`` (it needs a GPU or a trained model) is not run.
"""

from __future__ import annotations

import doctest
import importlib

import pytest

from tests.test_layers import _modules

OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

#: The modules of the three packages with an example in their source.
MODULES = sorted(
    name for name, path in _modules().items() if ">>> " in path.read_text(encoding="utf-8")
)


def test_examples_are_found():
    """The collection finds the modules it is meant to (a broken scan would pass vacuously)."""
    assert len(MODULES) >= 20
    assert {"fgrpo_theory.tail_miss", "fgrpo_common.checks", "fgrpo_llm"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=OPTIONS, verbose=False)
    tests = [t for t in finder.find(module, name) if t.examples]
    ran = 0
    for test in tests:
        report: list[str] = []
        result = runner.run(test, out=report.append)
        ran += sum(not ex.options.get(doctest.SKIP, False) for ex in test.examples)
        assert result.failed == 0, "".join(report)
    assert tests, f"{name}: its '>>> ' lines are in no docstring doctest finds"
    if name != "fgrpo_llm":  # its only example needs a trained base (+SKIP)
        assert ran > 0, f"{name}: every example is skipped"
