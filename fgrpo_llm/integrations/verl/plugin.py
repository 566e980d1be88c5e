"""The module verl imports to find ``focal_grpo`` (entry point group ``verl.plugins``).

Importing it registers the estimator. verl imports entry points inside ``import verl`` and, on
failure, logs the exception at DEBUG level only and later says just "Unknown advantage
estimator", so a failure here is printed to stderr and logged as an error before it is raised.

    # checks, in a fresh interpreter, that verl finds it
    python -m fgrpo_llm.integrations.verl.plugin
"""

from __future__ import annotations

import logging
import sys

REGISTRATION_ERROR: BaseException | None = None


def _register() -> None:
    global REGISTRATION_ERROR
    try:
        from fgrpo_llm.integrations.verl.estimator import register  # lazy: optional

        register()
        REGISTRATION_ERROR = None
    except BaseException as err:
        REGISTRATION_ERROR = err
        msg = (
            "fgrpo: registering the 'focal_grpo' advantage estimator with verl FAILED: "
            f"{type(err).__name__}: {err}. verl will report 'Unknown advantage estimator' for "
            "algorithm.adv_estimator=focal_grpo."
        )
        print(msg, file=sys.stderr, flush=True)
        logging.getLogger("fgrpo").error(msg)
        raise


def setup_hook() -> None:
    """A Ray ``worker_process_setup_hook`` (the fallback for verl without entry points)."""
    _register()


def check() -> int:
    """0 when a fresh ``import verl`` has ``focal_grpo`` registered without importing fgrpo
    first."""
    import verl  # noqa: F401  (loads the entry points)
    from verl.trainer.ppo import core_algos

    ok = "focal_grpo" in core_algos.ADV_ESTIMATOR_REGISTRY
    where = "found through verl's entry points" if ok else "NOT registered"
    print(f"verl {verl.__version__}: focal_grpo {where}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(check())
else:
    _register()
