"""Engine integration tests (``make test-engines``): each module skips itself when its engine is
absent, so the default ``make test`` collects them and reports them skipped."""

import pytest


@pytest.fixture(scope="session")
def countdown_task():
    from fgrpo_llm.tasks.countdown import CountdownTask

    return CountdownTask(seed=0, num_test=20, num_ood=10)
