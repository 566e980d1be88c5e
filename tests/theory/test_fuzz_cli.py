"""Hypothesis fuzz of the closed-form CLI (``fgrpo-theory tail-miss | peak | pass-at-k``).

Valid argument lists must exit 0 (with ``--json``: strict JSON, probabilities in [0, 1]);
hostile ones (a bad number, list or ``--plot`` path in one flag) must exit 2 with one stderr
line naming that flag, never a traceback, within a per-call deadline. The strategies and the
classification are those of ``test_fuzz_api.py``.
"""

import pytest

from tests.theory.test_fuzz_api import FAST_EXAMPLES, SLOW_EXAMPLES, _cli_example


@pytest.mark.parametrize("hostile", [False, True], ids=["valid", "hostile"])
def test_closed_form_cli(hostile):
    _cli_example(hostile, FAST_EXAMPLES * 3)


@pytest.mark.slow
@pytest.mark.parametrize("hostile", [False, True], ids=["valid", "hostile"])
def test_closed_form_cli_many_examples(hostile):
    _cli_example(hostile, SLOW_EXAMPLES)
