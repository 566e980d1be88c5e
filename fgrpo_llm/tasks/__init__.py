"""Task registry: ``get_task("countdown")``, ``get_task("boxed_math", path=...)``,
``get_task("maze")``.

Built-in tasks are imported lazily (a task module is only loaded when asked for);
``register_task`` adds a user task factory under a new name.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable

from fgrpo_llm.tasks.base import (
    Problem,
    Task,
    chat_messages,
    check_split,
    check_task,
    solution_form,
)

__all__ = [
    "Problem",
    "Task",
    "chat_messages",
    "check_split",
    "check_task",
    "solution_form",
    "get_task",
    "register_task",
    "task_names",
]

#: name -> "module:factory" of the built-in tasks; factories take keyword arguments only.
_BUILTIN = {
    "countdown": "fgrpo_llm.tasks.countdown:CountdownTask",
    "boxed_math": "fgrpo_llm.tasks.boxed_math:BoxedMathTask",
    "maze": "fgrpo_llm.tasks.maze:MazeTask",
}
_USER: dict[str, Callable[..., Task]] = {}


def register_task(name: str, factory: Callable[..., Task]) -> None:
    """Make ``get_task(name, **kwargs)`` return ``factory(**kwargs)``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"task name must be a non-empty string, got {name!r}")
    _USER[name] = factory


def task_names() -> list[str]:
    """All registered task names."""
    return sorted(set(_BUILTIN) | set(_USER))


def get_task(name: str, *, model_tokenizer=None, **kwargs) -> Task:
    """Build the task called ``name`` with keyword arguments ``kwargs``.

    ``model_tokenizer`` is the tokenizer of the model that will see the prompts: a task whose
    factory takes ``tokenizer`` (boxed math: the checkpoint's chat template and the prompt-length
    filter) gets it unless ``kwargs`` names one; other tasks ignore it.
    """
    if name in _USER:
        factory = _USER[name]
    elif name in _BUILTIN:
        module_name, attr = _BUILTIN[name].split(":")
        factory = getattr(importlib.import_module(module_name), attr)
    else:
        raise ValueError(f"unknown task {name!r}; choose from {task_names()}")
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    if params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(kwargs) - set(params))
        if unknown:
            raise ValueError(
                f"task {name!r} has no argument(s) {unknown}; it takes {sorted(params)}"
            )
    if model_tokenizer is not None and "tokenizer" in params and kwargs.get("tokenizer") is None:
        kwargs = {**kwargs, "tokenizer": model_tokenizer}
    return factory(**kwargs)
