"""The task a checkpoint was trained on: the built-in Countdown base records its task settings.

The Countdown base (``fgrpo_llm.experiments.countdown.base``) writes ``pretrain_config.json``
next to its weights; its task seed and split sizes must be the same in RL and evaluation, or
the "test" split would overlap the training prompts. :func:`task_for_model` finds those
settings for a base, a training run's checkpoint or its final model (whose ``config.json``
names the base), so a user never has to repeat them. :func:`recorded_task` names the task a
checkpoint was made for, where it records one, and :func:`check_base_task` refuses training it on
another.

    task = task_for_model("countdown", {}, model_dir="runs/demo/grpo_n8/model")
"""

from __future__ import annotations

import json
from pathlib import Path

from fgrpo_common.files import atomic_write_text
from fgrpo_llm.tasks import get_task

__all__ = [
    "PRETRAIN_CONFIG",
    "TASK_RECORD",
    "check_base_task",
    "model_task_kwargs",
    "recorded_task",
    "task_for_model",
    "write_task_record",
]

#: The file in which the Countdown base records its settings.
PRETRAIN_CONFIG = "pretrain_config.json"

#: The file in which a base made for another task names it (the maze SFT model): ``{"task": NAME}``.
TASK_RECORD = "task.json"


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


def write_task_record(model_dir, name: str) -> Path:
    """Record in the checkpoint directory ``model_dir`` that it was made for task ``name``
    (:data:`TASK_RECORD`), so that training it on another task is refused."""
    return atomic_write_text(Path(model_dir) / TASK_RECORD, json.dumps({"task": name}) + "\n")


#: How many trained runs back :func:`recorded_task` follows a run's base.
_MAX_RUN_CHAIN = 8


def recorded_task(model_dir, _depth: int = 0) -> str | None:
    """The task the checkpoint ``model_dir`` was made for, where it records one: "countdown" for
    the built-in Countdown base (its ``pretrain_config.json``), the task its ``task.json`` names
    (the maze SFT model), or, for a training run's final model or checkpoint, the task its base
    records (the run's ``config.json``, beside its ``run.json``, names the base: a run of any
    local Hugging Face model on one task may go on to another); None for any other checkpoint."""
    model_dir = Path(model_dir)
    if (model_dir / PRETRAIN_CONFIG).is_file():
        return "countdown"
    record = model_dir / TASK_RECORD
    if record.is_file():
        task = (_read_json_object(record) or {}).get("task")
        if not isinstance(task, str) or not task:
            raise ValueError(f"{record} is damaged; it should name the base's task")
        return task
    if not model_dir.is_dir():  # e.g. a hub name: no run of ours around it
        return None
    for run in list(model_dir.resolve().parents)[:2]:  # RUN/model, RUN/checkpoints/step_*
        if not (run / "run.json").is_file() or not (run / "config.json").is_file():
            continue
        cfg = _read_json_object(run / "config.json") or {}
        base = cfg.get("base")
        if isinstance(cfg.get("task"), str) and isinstance(base, str):
            if _depth >= _MAX_RUN_CHAIN or not Path(base).is_dir():
                return None
            return recorded_task(base, _depth + 1)
    return None


def check_base_task(base, name: str) -> None:
    """A ValueError naming both tasks when the base ``base`` records the task it was made for
    (:func:`recorded_task`) and it is not ``name`` (to train, evaluate or build a rare set on);
    a base that records none is accepted."""
    made_for = recorded_task(base)
    if made_for is not None and made_for != name:
        raise ValueError(
            f"base {base} was made for task {made_for!r}, not task {name!r}: use it with "
            f"task {made_for!r} or choose a base made for {name!r}"
        )
