"""fgrpo_llm: a compact GRPO / DAPO / CISPO trainer with the focal weight, and its evaluation.

Layers (imports only go down): the RL core at the top level (``config``, ``model``,
``tokenizer``, ``rollout``, ``advantages``, ``losses``, ``trainer``, ``checkpoint``,
``tracking``, ``tasks``), ``evaluation`` (pass@k, the rare-correct set and Delta NLL_rare, the
tail-miss check, sweep tables, intervals), ``experiments`` (the Countdown base, the demo, the
study, the maze, reports), ``cli``; ``integrations`` (verl, TRL) stands apart. The names below
import their module on first use.

    >>> from fgrpo_llm import TrainConfig, train
    >>> cfg = TrainConfig(base="runs/base", out="runs/x", gamma=1.0, steps=20)   # doctest: +SKIP
    >>> train(cfg)                                                              # doctest: +SKIP
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from fgrpo_common.exports import lazy_exports

try:  # the version of the installed distribution (pyproject.toml's, one for the three packages)
    __version__ = version("fgrpo")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
del PackageNotFoundError, version

#: public name -> the module that defines it
_EXPORTS = {
    "TrainConfig": "fgrpo_llm.config",
    "load_config": "fgrpo_llm.config",
    "save_config": "fgrpo_llm.config",
    "train": "fgrpo_llm.trainer",
    "TrainingDiverged": "fgrpo_llm.trainer",
    "grpo_advantages": "fgrpo_llm.advantages",
    "focal_weight": "fgrpo_llm.advantages",
    "focal_advantages": "fgrpo_llm.advantages",
    "policy_loss": "fgrpo_llm.losses",
    "grpo_loss": "fgrpo_llm.losses",
    "dapo_loss": "fgrpo_llm.losses",
    "cispo_loss": "fgrpo_llm.losses",
    "sample_completions": "fgrpo_llm.rollout",
    "RolloutBatch": "fgrpo_llm.rollout",
    "token_logprobs": "fgrpo_llm.rollout",
    "load_model_and_tokenizer": "fgrpo_llm.model",
    "save_model_and_tokenizer": "fgrpo_llm.model",
    "build_tiny_model": "fgrpo_llm.model",
    "build_char_tokenizer": "fgrpo_llm.tokenizer",
    "build_word_tokenizer": "fgrpo_llm.tokenizer",
    "get_task": "fgrpo_llm.tasks",
    "register_task": "fgrpo_llm.tasks",
    "Problem": "fgrpo_llm.tasks",
    "Task": "fgrpo_llm.tasks",
    "evaluate_model": "fgrpo_llm.evaluation.passk",
    "pass_at_k_table": "fgrpo_llm.evaluation.passk",
    "compare_evals": "fgrpo_llm.evaluation.passk",
    "RareSet": "fgrpo_llm.evaluation.rare",
    "build_rare_set": "fgrpo_llm.evaluation.rare",
    "load_rare_set": "fgrpo_llm.evaluation.rare",
    "save_rare_set": "fgrpo_llm.evaluation.rare",
    "delta_nll_rare": "fgrpo_llm.evaluation.rare",
    "make_rare_evaluator": "fgrpo_llm.evaluation.rare",
    "load_run": "fgrpo_llm.evaluation.runs",
    "RunInfo": "fgrpo_llm.evaluation.runs",
    "t_interval": "fgrpo_llm.evaluation.stats",
    "paired_difference": "fgrpo_llm.evaluation.stats",
    "cross_check": "fgrpo_llm.experiments.countdown.cross_check",
    "PretrainConfig": "fgrpo_llm.experiments.countdown.base",
    "pretrain": "fgrpo_llm.experiments.countdown.base",
    "DemoConfig": "fgrpo_llm.experiments.countdown.config",
    "load_demo_config": "fgrpo_llm.experiments.countdown.config",
    "run_demo": "fgrpo_llm.experiments.countdown.pipeline",
    "run_study": "fgrpo_llm.experiments.countdown.study",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
del lazy_exports  # (not a public name of this package)
