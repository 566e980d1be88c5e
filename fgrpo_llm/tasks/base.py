"""The task protocol: prompts, a verifiable reward, and an optional solution form.

A task is a small object (nanochat ``tasks/``): ``problems(split)`` lists the prompts,
``reward(problem, completion)`` returns the binary verifier reward R in {1, 0} of SPEC §1
(R_c = 1, R_w = 0), and ``solution_form`` names which correct solution a completion is,
so the rare-mode logging can count how often each form is sampled. A verifier never
raises on model output: malformed text is simply wrong (reward 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Problem:
    """One prompt with what its verifier needs."""

    id: str
    """Stable identifier (the same across runs with the same task arguments)."""
    prompt: str
    """The exact text fed to the model."""
    answer: object
    """Whatever the verifier needs (Countdown: numbers and target; boxed math: the answer)."""
    split: str
    """"train", "test", "ood", ..."""
    meta: dict = field(default_factory=dict, hash=False, compare=False)
    """Free-form extras (e.g. the number of correct solutions)."""


@runtime_checkable
class Task(Protocol):
    """What the trainer, evaluator and rare-set builder need from a task."""

    name: str
    splits: tuple[str, ...]

    def problems(self, split: str) -> list[Problem]:
        """The problems of ``split`` (a fixed list, same order every call)."""
        ...

    def reward(self, problem: Problem, completion: str) -> float:
        """1.0 when ``completion`` solves ``problem``, else 0.0; never raises on bad text."""
        ...

    def solution_form(self, problem: Problem, completion: str) -> str | None:
        """A canonical form of a correct completion (None if wrong). Optional for user tasks."""
        ...


def check_split(task, split: str) -> str:
    """``split`` if ``task`` has it, else a ValueError listing the splits."""
    if split not in task.splits:
        raise ValueError(f"unknown split {split!r} for task {task.name!r}; choose from {list(task.splits)}")
    return split
