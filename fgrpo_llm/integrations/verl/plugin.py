"""The module verl imports to find ``focal_grpo`` (entry point group ``verl.plugins``).

Importing it registers the estimator. verl imports entry points inside ``import verl`` and, on
failure, logs the exception at DEBUG level only and later says just "Unknown advantage
estimator", so a failure here is printed to stderr and logged as an error before it is raised.

    # checks, in a fresh interpreter, that verl finds it
    python -m fgrpo_llm.integrations.verl.plugin
    # ... and, before a launch, the focal settings of a run's overrides (verl's ppo_trainer
    # config composed with them; --config-name NAME for another of verl's configs)
    python -m fgrpo_llm.integrations.verl.plugin algorithm.adv_estimator=focal_grpo \
        +algorithm.focal_gamma=1.0 ...
"""

from __future__ import annotations

import logging
import sys

from fgrpo_llm.integrations.verl.startup import FocalCheck, compose_config

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


def check(overrides=(), config_name: str = "ppo_trainer") -> int:
    """0 when a fresh ``import verl`` has ``focal_grpo`` registered without importing fgrpo
    first, 1 when it has not; with ``overrides``, 2 when the focal settings of verl's
    ``config_name`` composed with them are refused
    (:func:`fgrpo_llm.integrations.verl.startup.check_run_config`, one line naming the key)."""
    import verl  # (loads the entry points)
    from verl.trainer.ppo import core_algos

    ok = "focal_grpo" in core_algos.ADV_ESTIMATOR_REGISTRY
    where = "found through verl's entry points" if ok else "NOT registered"
    print(f"verl {verl.__version__}: focal_grpo {where}", file=sys.stderr)
    if not ok or not overrides:
        return 0 if ok else 1
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        config = compose_config(overrides, config_name)
    except (HydraException, OmegaConfBaseException) as err:
        print(f"fgrpo: the overrides do not compose: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    try:
        FocalCheck().on_job_start(config=config)
    except SystemExit as stop:
        return int(stop.code or 0)
    return 0


def _main(argv: list[str]) -> int:
    config_name = "ppo_trainer"
    if argv[:1] == ["--config-name"] and len(argv) > 1:
        config_name, argv = argv[1], argv[2:]
    return check(argv, config_name=config_name)


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
else:
    _register()
