"""Countdown: reach a target with the given numbers, each used exactly once (our CPU-scale task).

In domain, 3 numbers from 1..9 joined by ``+ - *`` without parentheses, targets 0..99;
out of domain ("ood"), 4 numbers. A prompt and a completion look like::

    "3 5 7=22:"  ->  "3*5+7"  (then <eos>)

Every kept prompt has at least ``min_solutions`` (default 2) distinct correct
expressions, so there is always more than one correct mode; ``solutions(problem)`` lists
them in a fixed rank order (numbers in prompt order first, then operators in the order
``+ - *``), which the pretraining demonstrations skew over (common vs rare modes).
The verifier parses with ``fgrpo_llm.tasks.expr`` (no ``eval``); malformed text gets reward 0.
Splits are generated from ``seed`` and are deterministic with disjoint prompts.

    task = CountdownTask(seed=0)
    p = task.problems("test")[0]
    task.reward(p, task.solutions(p)[0])   # 1.0
"""

from __future__ import annotations

import itertools
import re
from functools import cached_property
from typing import NamedTuple

import numpy as np

from fgrpo_llm.tasks.base import Problem, check_split
from fgrpo_llm.tasks.expr import ExprError, parse_expression

#: Whitespace anywhere, or a number literal with a leading zero ("03"): not canonical.
_BAD_FORMAT = re.compile(r"\s|(?<![0-9])0[0-9]")

#: Every character a Countdown prompt or completion can contain (the built-in tokenizer).
ALPHABET = "0123456789 +-*/()=:"


class CountdownAnswer(NamedTuple):
    """What the Countdown verifier needs: the numbers and the target."""

    numbers: tuple[int, ...]
    target: int


def format_prompt(numbers, target: int) -> str:
    """``"3 5 7=22:"`` for numbers (3, 5, 7) and target 22."""
    return " ".join(str(n) for n in numbers) + f"={target}:"


def _value(numbers, ops) -> int:
    """Value of ``n0 op0 n1 op1 n2 ...`` with the usual precedence (``*`` before ``+ -``)."""
    total, term = 0, numbers[0]
    sign = 1
    for op, n in zip(ops, numbers[1:], strict=True):
        if op == "*":
            term *= n
        else:
            total += sign * term
            sign, term = (1 if op == "+" else -1), n
    return total + sign * term


def all_expressions(numbers, operators: str = "+-*") -> list[tuple[str, int]]:
    """Every distinct parenthesis-free expression using each number once, in rank order.

    Rank order: permutations of the number *positions* in lexicographic order (prompt
    order first), then operator tuples in the order of ``operators``. Returns
    ``[(expression, value), ...]`` without duplicate strings (repeated numbers).
    """
    seen, out = set(), []
    for perm in itertools.permutations(range(len(numbers))):
        nums = [numbers[i] for i in perm]
        for ops in itertools.product(operators, repeat=len(numbers) - 1):
            text = str(nums[0]) + "".join(op + str(n) for op, n in zip(ops, nums[1:], strict=True))
            if text not in seen:
                seen.add(text)
                out.append((text, _value(nums, ops)))
    return out


def enumerate_solutions(numbers, target: int, operators: str = "+-*") -> list[str]:
    """The distinct correct expressions for ``(numbers, target)`` in rank order."""
    return [text for text, value in all_expressions(numbers, operators) if value == target]


class CountdownTask:
    """The Countdown task with deterministic "train", "test" and "ood" splits."""

    name = "countdown"
    splits = ("train", "test", "ood")
    #: The completion limit when none is given: an expression of up to 5 numbers (and EOS) in
    #: characters.
    max_new_tokens = 32

    def __init__(
        self,
        *,
        seed: int = 0,
        num_numbers: int = 3,
        ood_num_numbers: int = 4,
        min_number: int = 1,
        max_number: int = 9,
        min_target: int = 0,
        max_target: int = 99,
        operators: str = "+-*",
        min_solutions: int = 2,
        num_test: int = 200,
        num_ood: int = 200,
    ):
        ints = dict(
            seed=seed,
            num_numbers=num_numbers,
            ood_num_numbers=ood_num_numbers,
            min_number=min_number,
            max_number=max_number,
            min_target=min_target,
            max_target=max_target,
            min_solutions=min_solutions,
            num_test=num_test,
            num_ood=num_ood,
        )
        for key, value in ints.items():
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
                raise ValueError(f"{key} must be an integer, got {key}={value!r}")
        if seed < 0 or num_test < 0 or num_ood < 0:
            raise ValueError(
                f"seed, num_test and num_ood must be >= 0, got {seed}, {num_test}, {num_ood}"
            )
        if not 2 <= num_numbers <= 5 or not 2 <= ood_num_numbers <= 5:
            raise ValueError(
                f"num_numbers and ood_num_numbers must lie in [2, 5], got "
                f"{num_numbers}, {ood_num_numbers}"
            )
        if not 0 <= min_number <= max_number or max_number > 999:
            raise ValueError(
                f"need 0 <= min_number <= max_number <= 999, got {min_number}, {max_number}"
            )
        if min_target > max_target:
            raise ValueError(f"need min_target <= max_target, got {min_target} > {max_target}")
        if not operators or set(operators) - set("+-*") or len(set(operators)) != len(operators):
            raise ValueError(f"operators must be distinct characters from '+-*', got {operators!r}")
        if min_solutions < 1:
            raise ValueError(f"min_solutions must be >= 1, got {min_solutions}")
        self.seed, self.num_numbers, self.ood_num_numbers = int(seed), num_numbers, ood_num_numbers
        self.min_number, self.max_number = min_number, max_number
        self.min_target, self.max_target = min_target, max_target
        self.operators, self.min_solutions = operators, min_solutions
        self.num_test, self.num_ood = num_test, num_ood

    # -- problem generation -------------------------------------------------------------

    def _problem(self, numbers, target: int, split: str, num_solutions: int) -> Problem:
        numbers = tuple(int(n) for n in numbers)
        return Problem(
            id=f"{'-'.join(map(str, numbers))}_{target}",
            prompt=format_prompt(numbers, target),
            answer=CountdownAnswer(numbers, int(target)),
            split=split,
            meta={"num_solutions": num_solutions},
        )

    def _targets(self, numbers) -> dict[int, int]:
        """target -> number of distinct correct expressions, for targets in range with enough."""
        counts: dict[int, int] = {}
        for _, value in all_expressions(numbers, self.operators):
            if self.min_target <= value <= self.max_target:
                counts[value] = counts.get(value, 0) + 1
        return {t: c for t, c in sorted(counts.items()) if c >= self.min_solutions}

    @cached_property
    def _in_domain(self) -> dict[str, list[Problem]]:
        """Every in-domain (numbers, target) prompt, shuffled by seed, cut into test / train."""
        pool = []
        values = range(self.min_number, self.max_number + 1)
        for numbers in itertools.product(values, repeat=self.num_numbers):
            pool.extend((numbers, t, c) for t, c in self._targets(numbers).items())
        if len(pool) <= self.num_test:
            raise ValueError(
                f"only {len(pool)} in-domain prompts exist, need more than num_test={self.num_test}"
            )
        order = np.random.default_rng([self.seed, 0]).permutation(len(pool))
        split = {"test": order[: self.num_test], "train": order[self.num_test :]}
        return {
            name: [self._problem(pool[i][0], pool[i][1], name, pool[i][2]) for i in idx]
            for name, idx in split.items()
        }

    def _draw_ood_numbers(self, rng: np.random.Generator):
        """Random ``ood_num_numbers`` numbers and one target with enough solutions, or None."""
        numbers = tuple(
            int(n)
            for n in rng.integers(self.min_number, self.max_number + 1, size=self.ood_num_numbers)
        )
        targets = self._targets(numbers)
        if not targets:
            return None
        target = list(targets)[int(rng.integers(len(targets)))]
        return CountdownAnswer(numbers, target), targets[target]

    @cached_property
    def _ood(self) -> list[Problem]:
        """``num_ood`` distinct prompts with ``ood_num_numbers`` numbers, drawn from seed."""
        rng = np.random.default_rng([self.seed, 1])
        seen, out = set(), []
        for _ in range(200 * max(self.num_ood, 1)):
            if len(out) == self.num_ood:
                break
            draw = self._draw_ood_numbers(rng)
            if draw is not None and draw[0] not in seen:
                seen.add(draw[0])
                out.append(self._problem(*draw[0], "ood", draw[1]))
        if len(out) < self.num_ood:
            raise ValueError(f"could not draw num_ood={self.num_ood} distinct OOD prompts")
        return out

    def sample_ood_like(self, rng: np.random.Generator) -> Problem:
        """A random ``ood_num_numbers``-number prompt that is *not* in the "ood" split.

        For pretraining only: a base that has seen some four-number prompts solves a few
        OOD prompts, so the OOD split measures what RL on three-number prompts does to a
        skill it never trains, as the paper's OOD benchmarks do.
        """
        held_out = {p.answer for p in self._ood}
        for _ in range(10_000):
            draw = self._draw_ood_numbers(rng)
            if draw is not None and draw[0] not in held_out:
                return self._problem(*draw[0], "ood_pretrain", draw[1])
        raise ValueError("could not draw a four-number prompt outside the OOD split")

    def problems(self, split: str) -> list[Problem]:
        """The problems of ``split`` ("train", "test" or "ood"), same order every call."""
        check_split(self, split)
        return list(self._ood if split == "ood" else self._in_domain[split])

    def solutions(self, problem: Problem) -> list[str]:
        """All correct expressions for ``problem``, in the deterministic rank order."""
        numbers, target = problem.answer
        return enumerate_solutions(numbers, target, self.operators)

    # -- verifier -----------------------------------------------------------------------

    def solution_form(self, problem: Problem, completion: str) -> str | None:
        """The expression itself if ``completion`` is correct, else None.

        Correct means: a well-formed expression over ``self.operators`` (no parentheses,
        no unary minus), using exactly the prompt's numbers (as a multiset), whose exact
        value equals the target, written in the canonical format: no whitespace and no
        leading zeros (``"3+9+03"`` and ``" 8*5-6"`` are wrong). The strict format keeps
        one solution one string, so that the rare-correct set holds rare *solutions*
        rather than odd spellings of common ones. Anything else, including trailing text,
        is wrong.
        """
        if not isinstance(completion, str) or _BAD_FORMAT.search(completion):
            return None
        try:
            parsed = parse_expression(completion)
        except ExprError:
            return None
        numbers, target = problem.answer
        if (
            parsed.value is None
            or parsed.parenthesised
            or parsed.unary_minus
            or not parsed.operators <= set(self.operators)
            or sorted(parsed.numbers) != sorted(numbers)
            or parsed.value != target
        ):
            return None
        return parsed.canonical

    def is_correct(self, problem: Problem, completion: str) -> bool:
        """True if ``completion`` is a correct expression for ``problem`` (never raises)."""
        return self.solution_form(problem, completion) is not None

    def reward(self, problem: Problem, completion: str) -> float:
        """1.0 if ``completion`` is correct, else 0.0."""
        return 1.0 if self.is_correct(problem, completion) else 0.0
