"""A synthetic Countdown-like base for the forecast's tests and benchmark (no LLM needed).

Each prompt draws three numbers in 1..99; its answers are expressions "a op b op c" and
"(a op b) op c" over orderings of the numbers (up to ``max_answers`` of them), tokenised as
number, operator, number, ... (or one token per character) so that prompts sharing a first
number share a prefix. The
target is the value of one answer (at least one answer is correct). The base's log-probabilities
come from a tied random score (a per-token preference shared by all prompts plus per-prompt
noise) and a malformed mass in [0.05, 0.3].

    >>> import numpy as np
    >>> ps = countdown_like(3, np.random.default_rng(0))
    >>> len(ps), all(pa.correct.any() for pa in ps)
    (3, True)
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from fgrpo_theory.forecast.answers import PromptAnswers

__all__ = ["countdown_like"]

_OPS = ("+", "-", "*", "/")


def _value(tokens: tuple) -> float | None:
    try:
        return eval("".join(tokens), {"__builtins__": {}})  # digits, operators, brackets only
    except ZeroDivisionError:
        return None


def countdown_like(
    num_prompts: int,
    rng: np.random.Generator,
    *,
    max_answers: int = 54,
    prefix: str = "p",
    chars: bool = False,
) -> list[PromptAnswers]:
    """``num_prompts`` synthetic prompts (ids ``prefix0``, ...) as ``PromptAnswers``; with
    ``chars`` one token per character (as the project's Countdown tokenizer), else one per
    number or operator."""
    pref = {str(n): rng.normal(0, 0.5) for n in range(1, 100)}
    pref.update({op: rng.normal(0, 0.5) for op in _OPS + ("(", ")")})
    out = []
    for i in range(num_prompts):
        nums = [str(n) for n in rng.choice(np.arange(1, 100), size=3, replace=False)]
        exprs = []
        for a, b, c in itertools.permutations(nums):
            for o1, o2 in itertools.product(_OPS, _OPS):
                exprs.append((a, o1, b, o2, c))
                exprs.append(("(", a, o1, b, ")", o2, c))
        pick = rng.choice(len(exprs), size=min(max_answers, len(exprs)), replace=False)
        exprs = [exprs[j] for j in pick]
        values = [_value(e) for e in exprs]
        target = values[int(rng.integers(len(values)))]
        while target is None:
            target = values[int(rng.integers(len(values)))]
        score = np.array([sum(pref[t] for t in e) for e in exprs]) + rng.normal(0, 1, len(exprs))
        logp = score - np.logaddexp.reduce(score) + math.log1p(-rng.uniform(0.05, 0.3))
        correct = np.array([v is not None and abs(v - target) < 1e-9 for v in values])
        texts = tuple("".join(e) for e in exprs)
        toks = tuple(tuple(t) for t in texts) if chars else tuple(exprs)
        out.append(PromptAnswers(f"{prefix}{i}", texts, toks, logp, correct))
    return out
