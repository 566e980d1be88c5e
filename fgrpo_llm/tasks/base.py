"""The task protocol: prompts, a verifier, a reward, and an optional solution form.

A task is a small object (nanochat ``tasks/``): ``problems(split)`` lists the prompts,
``is_correct(problem, completion)`` is the verifier, the one definition of "correct" that the
trainer (X, mu_hat = X/N, the focal weight), pass@k, the rare-correct set and the tail-miss
check all ask; ``reward(problem, completion)`` is the training reward (the paper's binary
reward: 1 when correct, 0 otherwise; a task may shape it, correctness stays ``is_correct``);
``solution_form`` names which correct solution a completion is, so the rare-mode logging can
count how often each form is sampled. A verifier never raises on model output: malformed text is
simply wrong.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Problem:
    """One prompt with what its verifier needs."""

    id: str
    """Stable identifier that names the problem's content (``content_id``, or Countdown's numbers
    and target), never its position in a file."""
    prompt: str
    """The exact text fed to the model."""
    answer: object
    """Whatever the verifier needs (Countdown: numbers and target; boxed math: the answer)."""
    split: str
    """"train", "test", "ood", ..."""
    meta: dict = field(default_factory=dict, hash=False, compare=False)
    """Free-form extras (e.g. the number of correct solutions)."""


def content_id(prefix: str, text: str, answer) -> str:
    """A problem id that names its content: ``prefix-`` and the first 16 hex digits of the
    SHA-256 of the problem's text and its answer. The same problem has the same id in any file,
    at any position, in any split; two evaluations are paired by it (never by row number)."""
    blob = f"{text}\x00{answer}".encode("utf-8", "surrogatepass")
    return f"{prefix}-{hashlib.sha256(blob).hexdigest()[:16]}"


@runtime_checkable
class Task(Protocol):
    """What the trainer, evaluator and rare-set builder need from a task."""

    name: str
    splits: tuple[str, ...]

    def problems(self, split: str) -> list[Problem]:
        """The problems of ``split`` (a fixed list, same order every call)."""
        ...

    def is_correct(self, problem: Problem, completion: str) -> bool:
        """True when ``completion`` solves ``problem``; never raises on bad text."""
        ...

    def reward(self, problem: Problem, completion: str) -> float:
        """The training reward of ``completion`` (binary tasks: 1.0 if correct, else 0.0)."""
        ...

    def solution_form(self, problem: Problem, completion: str) -> str | None:
        """A canonical form of a correct completion (None if wrong). Optional for user tasks."""
        ...


def chat_messages(problem: Problem) -> list[dict]:
    """The problem as chat messages, for engines that apply the model's chat template
    themselves (verl, TRL's conversational datasets): a system message when the task keeps one
    (``meta["system_prompt"]``, boxed math), then the user message (``meta["problem"]``, the
    raw problem, when the task keeps it; else the prompt text)."""
    system = problem.meta.get("system_prompt")
    user = {"role": "user", "content": problem.meta.get("problem", problem.prompt)}
    return ([{"role": "system", "content": system}] if system is not None else []) + [user]


def check_split(task, split: str) -> str:
    """``split`` if ``task`` has it, else a ValueError listing the splits."""
    if split not in task.splits:
        raise ValueError(
            f"unknown split {split!r} for task {task.name!r}; choose from {list(task.splits)}"
        )
    return split


#: Methods every task must have (``solution_form`` is optional: see :func:`solution_form`).
REQUIRED_METHODS = ("problems", "is_correct", "reward")


def check_task(task) -> None:
    """A TypeError naming what is missing when ``task`` does not follow the protocol."""
    missing = [m for m in REQUIRED_METHODS if not callable(getattr(task, m, None))]
    missing += [a for a in ("name", "splits") if not hasattr(task, a)]
    if missing:
        raise TypeError(
            f"task {getattr(task, 'name', type(task).__name__)!r} lacks {missing}; a task needs "
            f"name, splits, problems(split), is_correct(problem, completion) and "
            f"reward(problem, completion)"
        )


def solution_form(task, problem: Problem, completion: str) -> str | None:
    """The form of a *correct* completion: the task's ``solution_form`` when it has one, else the
    stripped completion text; None for a wrong completion.

    The one rule used by the trainer's group log, the rare-correct set and the tail-miss check,
    so that a rare form found in the base's samples is recognised in training groups.
    """
    if not task.is_correct(problem, completion):
        return None
    fn = getattr(task, "solution_form", None)
    return completion.strip() if fn is None else fn(problem, completion)


def encode_prompt(tokenizer, text: str) -> list[int]:
    """The token ids of a prompt as the model reads it: the tokenizer's own special tokens added
    (a BOS where it prepends one), except that a text that already starts with the BOS token (a
    chat template that writes it, as Llama 3's does) does not get a second one."""
    bos = getattr(tokenizer, "bos_token", None)
    if bos and text.startswith(bos):
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return list(tokenizer(text)["input_ids"])
