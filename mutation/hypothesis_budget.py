"""pytest plugin used by ``make mutation``: every Hypothesis test runs at most
``FGRPO_MUTATION_MAX_EXAMPLES`` examples (default 10), without shrinking, while a mutant is
under test.

Thousands of mutants each rerun the tests that reach them, so the full example counts of the
property tests would take hours on 2 cores. With fewer examples a test can only kill fewer
mutants: the kill rates ``make mutation`` reports are a lower bound on what the full suite
catches. Loaded by ``[tool.mutmut] pytest_add_cli_args`` in pyproject.toml; not used by
``make test``.
"""

from __future__ import annotations

import os

from hypothesis import Phase, settings

MAX_EXAMPLES = int(os.environ.get("FGRPO_MUTATION_MAX_EXAMPLES", "10"))
#: No shrinking: a mutant is killed by the first failing example; a minimal one is not needed.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate)


def pytest_collection_modifyitems(items):
    for item in items:
        test = getattr(item, "obj", None)
        current = getattr(test, "_hypothesis_internal_use_settings", None)
        if current is not None:
            test._hypothesis_internal_use_settings = settings(
                current, max_examples=min(current.max_examples, MAX_EXAMPLES), phases=PHASES
            )
