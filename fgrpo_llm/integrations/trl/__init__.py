"""F-GRPO on TRL: ``FocalGRPOTrainer`` and pass@k / Delta NLL_rare callbacks (needs TRL: from
the repository, ``pip install -c constraints/torch-cpu.txt -e ".[llm,trl]"``, or
``make .venv-trl/.installed``).

    from fgrpo_llm.integrations.trl import FocalGRPOConfig, FocalGRPOTrainer, method_args
    args = FocalGRPOConfig(output_dir="runs/trl", focal_gamma=1.0, **method_args("grpo"), ...)
    trainer = FocalGRPOTrainer(
        model=model, reward_funcs=[reward], args=args, train_dataset=ds, task=task
    )

The trainer hooks two private methods of TRL's ``GRPOTrainer`` (``_calculate_rewards`` and
``_generate_and_score_completions``), so it is pinned to the TRL versions it was tested with
(:data:`TESTED_TRL`) and refuses others with a clear message (set ``FGRPO_ALLOW_UNTESTED_TRL=1`` to
try anyway). ``python -m fgrpo_llm.integrations.trl.launch`` is ``trl grpo`` with these classes
(:mod:`fgrpo_llm.integrations.trl.launch`). See docs/engines.md.
"""

from __future__ import annotations

import os
import sys
from importlib.util import find_spec

from fgrpo_llm.integrations.trl.version import TESTED_TRL, check_trl_version

if find_spec("trl") is None:
    _MISSING = (
        "fgrpo_llm.integrations.trl needs trl "
        + TESTED_TRL
        + ", not installed in this environment: from the repository, pip install -c "
        'constraints/torch-cpu.txt -e ".[llm,trl]", or use make\'s .venv-trl '
        "(make .venv-trl/.installed)"
    )
    _argv = list(getattr(sys, "orig_argv", ()))
    _as_module = "-m" in _argv[:-1] and _argv[_argv.index("-m") + 1].startswith(__name__ + ".")
    _as_script = any(os.path.basename(a) == "fgrpo-trl" for a in _argv[:2])
    if _as_module or _as_script:  # run as a command: one line, no traceback
        print(f"fgrpo-trl: error: {_MISSING}", file=sys.stderr)
        raise SystemExit(2)
    raise ImportError(_MISSING)

check_trl_version()

from fgrpo_llm.integrations.trl.callbacks import (  # noqa: E402
    DeltaNLLRareCallback,
    PassAtKCallback,
    trl_sampling,
)
from fgrpo_llm.integrations.trl.trainer import (  # noqa: E402
    RUN_RECORDS_DIR,
    FocalGRPOConfig,
    FocalGRPOTrainer,
    local_focal_weights,
    method_args,
    task_dataset,
    task_reward_func,
)

__all__ = [
    "TESTED_TRL",
    "check_trl_version",
    "RUN_RECORDS_DIR",
    "FocalGRPOConfig",
    "FocalGRPOTrainer",
    "local_focal_weights",
    "method_args",
    "task_dataset",
    "task_reward_func",
    "PassAtKCallback",
    "DeltaNLLRareCallback",
    "trl_sampling",
]
