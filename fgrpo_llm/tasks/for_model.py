"""The task a checkpoint was trained on: the built-in Countdown base records its task settings.

The Countdown base (``fgrpo_llm.experiments.countdown.base``) writes ``pretrain_config.json``
next to its weights; its task seed and split sizes must be the same in RL and evaluation, or
the "test" split would overlap the training prompts. :func:`task_for_model` finds those
settings for a base, a training run's checkpoint or its final model (whose ``config.json``
names the base), so a user never has to repeat them.

    task = task_for_model("countdown", {}, model_dir="runs/demo/grpo_n8/model")
"""

from __future__ import annotations

import json
from pathlib import Path

from fgrpo_llm.tasks import get_task

__all__ = ["PRETRAIN_CONFIG", "model_task_kwargs", "task_for_model"]

#: The file in which the Countdown base records its settings.
PRETRAIN_CONFIG = "pretrain_config.json"


def _read_json_object(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def model_task_kwargs(model_dir, name: str) -> dict:
    """Countdown settings the built-in base was pretrained with (its ``pretrain_config.json``),
    looked up in the checkpoint directory, its two parents, and the ``base`` that a training run's
    ``config.json`` names; ``{}`` for other tasks or when none is found."""
    if name != "countdown":
        return {}
    model_dir = Path(model_dir).resolve()
    candidates = [model_dir, *list(model_dir.parents)[:2]]
    for d in list(candidates):
        cfg = _read_json_object(d / "config.json") if (d / "config.json").is_file() else None
        if cfg is not None and isinstance(cfg.get("base"), str):
            candidates.append(Path(cfg["base"]))
    for d in candidates:
        path = d / PRETRAIN_CONFIG
        if not path.is_file():
            continue
        cfg = _read_json_object(path)
        if cfg is None:  # the defaults' test split could overlap the base's training prompts
            raise ValueError(
                f"{path} is damaged (not a JSON object): the base's task settings cannot be "
                "read; restore it or pass the task settings (--task-arg seed=...,num_test=...)"
            )
        kwargs = {
            "seed": cfg.get("task_seed", 0),
            "num_test": cfg.get("num_test", 200),
            "num_ood": cfg.get("num_ood", 200),
        }
        for key, value in kwargs.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{path}: {key} must be an integer >= 0, got {value!r}")
        return kwargs
    return {}


def task_for_model(name: str, task_args: dict, *, model_dir=None, tokenizer=None):
    """``get_task(name, **kwargs)`` with, for a built-in base, the task settings it was trained with
    unless ``task_args`` overrides them; ``tokenizer`` (the model's) reaches tasks that format
    prompts with it (``get_task``'s ``model_tokenizer``)."""
    kwargs = model_task_kwargs(model_dir, name) if model_dir is not None else {}
    kwargs.update(task_args)
    return get_task(name, model_tokenizer=tokenizer, **kwargs)
