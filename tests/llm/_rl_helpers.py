"""A toy task for the RL-side tests (rollout, losses, trainer, CLI): fast to score, several correct
forms."""

from __future__ import annotations

from fgrpo_llm.tasks.base import Problem


class ToyTask:
    """Prompt "k=:" over the Countdown alphabet; a completion is correct when it starts with "1"
    (so "1", "12", "1+" ... are different correct forms); its solution form is its first two
    characters."""

    name = "toy"
    splits = ("train", "test")

    def __init__(self, num_problems: int = 12):
        self._problems = [
            Problem(id=f"toy-{k}", prompt=f"{k}=:", answer="1", split="train")
            for k in range(num_problems)
        ]

    def problems(self, split: str) -> list[Problem]:
        return list(self._problems)

    def is_correct(self, problem: Problem, completion: str) -> bool:
        return completion.startswith(problem.answer)

    def reward(self, problem: Problem, completion: str) -> float:
        return 1.0 if self.is_correct(problem, completion) else 0.0

    def solution_form(self, problem: Problem, completion: str) -> str | None:
        return completion[:2] if self.is_correct(problem, completion) else None
