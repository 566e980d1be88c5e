"""F-GRPO on verl: the ``focal_grpo`` advantage estimator (needs verl: from the repository,
``pip install -c constraints/torch-cpu.txt -e ".[llm,verl]"``, or ``make .venv-verl/.installed``).

verl finds it by itself: this package declares a ``verl.plugins`` entry point
(``fgrpo_llm.integrations.verl.plugin``), which verl >= 0.9 loads in every process that imports
verl, the Ray worker that computes advantages included. Select it with

    algorithm.adv_estimator=focal_grpo +algorithm.focal_gamma=1.0

Older verl (no entry points): ``VERL_USE_EXTERNAL_MODULES=fgrpo_llm.integrations.verl.plugin`` in
the environment of every Ray worker, or a Ray worker setup hook
(``+ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=fgrpo_llm.integrations.verl.plugin.setup_hook``).
``python -m fgrpo_llm.integrations.verl.plugin`` checks the registration in a fresh interpreter
(and, given a run's overrides, their focal settings: ``startup``).
See docs/engines.md for the F-GRPO / F-DAPO / F-CISPO overrides.
"""

from __future__ import annotations

import sys
from importlib.util import find_spec

#: The verl versions this plug-in was tested with (``make test-engines``).
TESTED_VERL = ">=0.9.1,<0.10"

if find_spec("verl") is None:
    _MISSING = (
        "fgrpo_llm.integrations.verl needs verl "
        + TESTED_VERL
        + ", not installed in this environment: from the repository, pip install -c "
        'constraints/torch-cpu.txt -e ".[llm,verl]", or use make\'s .venv-verl '
        "(make .venv-verl/.installed)"
    )
    argv = list(getattr(sys, "orig_argv", ()))
    if "-m" in argv[:-1] and argv[argv.index("-m") + 1].startswith(__name__ + "."):
        print(f"{argv[argv.index('-m') + 1]}: error: {_MISSING}", file=sys.stderr)
        raise SystemExit(2)  # run as a command (python -m ...plugin): one line, no traceback
    raise ImportError(_MISSING)

from fgrpo_llm.integrations.verl.estimator import (  # noqa: E402
    ESTIMATOR_NAME,
    focal_grpo_advantage,
    focal_settings,
    register,
)

__all__ = ["ESTIMATOR_NAME", "TESTED_VERL", "focal_grpo_advantage", "focal_settings", "register"]
