"""Boxed-answer math over a local JSONL file of ``{"problem": ..., "answer": ...}`` records.

Preparation follows the paper (SPEC §6 "Data", App. L): rows whose prompt is longer than
1024 tokens are dropped, duplicate problems whose answers conflict are dropped (exact
duplicates are kept once), and the system prompt "Please reason step by step, and put
your final answer within \\boxed{}." is prepended. The reward is 1 when the last
``\\boxed{...}`` of the completion (nested braces allowed) matches the reference after a
light normalisation (spaces, ``$``, ``\\left``/``\\right``, ``\\dfrac``, thousands commas,
numeric equality of integers, decimals and simple fractions), else 0.

Bad rows (invalid JSON or UTF-8, missing keys, wrong types) are counted in
``task.stats`` and reported with one warning line; they never stop the run. A missing
file raises FileNotFoundError naming it; a file with no usable row raises ValueError.

    task = BoxedMathTask(path="data/train.jsonl", test_path="data/test.jsonl", tokenizer=tok)
    print(task.stats.summary())
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path

from fgrpo_llm.tasks.base import Problem, check_split

SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."
MAX_PROMPT_TOKENS = 1024


@dataclass
class DataStats:
    """Counts from reading and preparing one JSONL file."""

    path: str
    rows: int = 0
    """Non-blank lines read."""
    invalid_json: int = 0
    """Lines that are not valid UTF-8 JSON objects."""
    missing_keys: int = 0
    """Objects without "problem" or "answer"."""
    wrong_types: int = 0
    """"problem" not a non-empty string, or "answer" not a string / number."""
    too_long: int = 0
    """Prompts over the token limit (dropped)."""
    duplicates: int = 0
    """Repeated problems with the same answer (extra copies dropped)."""
    conflicting: int = 0
    """Rows of problems that appear with different answers (all dropped)."""
    kept: int = 0
    """Problems in the prepared split."""

    @property
    def bad_rows(self) -> int:
        return self.invalid_json + self.missing_keys + self.wrong_types

    def summary(self) -> str:
        """One line, e.g. for a warning or a log."""
        parts = ", ".join(f"{k}={v}" for k, v in asdict(self).items() if k != "path")
        return f"{self.path}: {parts}"


# -- answer extraction and normalisation --------------------------------------------------

def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, braces matched.

    Returns None when there is none or its braces never close.
    """
    if not isinstance(text, str):
        return None
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth, begin = 1, i
    while i < len(text):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[begin:i]
        i += 1
    return None


_FRAC = re.compile(r"^(-?)\\frac\{(-?\d+)\}\{(-?\d+)\}$")
_NUMBER = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)$")
_THOUSANDS = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")


def normalize_answer(answer: str) -> str:
    """A light normal form: no spaces or ``$``, ``\\dfrac``->``\\frac``, no ``\\left``/``\\right``,
    no ``\\text{}`` wrapper, no trailing period, no thousands commas; numbers in lowest terms."""
    s = str(answer).strip()
    for old, new in (("\\left", ""), ("\\right", ""), ("\\!", ""), ("\\,", ""), ("\\;", ""), ("$", ""),
                     ("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("^\\circ", ""), ("^{\\circ}", "")):
        s = s.replace(old, new)
    s = re.sub(r"\\text\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\s+", "", s).rstrip(".")
    if _THOUSANDS.match(s):
        s = s.replace(",", "")
    value = _as_fraction(s)
    return s if value is None else (str(value.numerator) if value.denominator == 1 else str(value))


def _as_fraction(s: str) -> Fraction | None:
    """``s`` as an exact number when it is an integer, decimal, ``a/b`` or ``\\frac{a}{b}``."""
    m = _FRAC.match(s)
    if m:
        sign, a, b = m.groups()
        return None if int(b) == 0 else Fraction(int(a), int(b)) * (-1 if sign else 1)
    if re.match(r"^-?\d+/\d+$", s):
        a, b = s.split("/")
        return None if int(b) == 0 else Fraction(int(a), int(b))
    if _NUMBER.match(s) and len(s) <= 40:
        return Fraction(s)
    return None


# -- the task -----------------------------------------------------------------------------

def format_prompt(problem: str, tokenizer=None, system_prompt: str = SYSTEM_PROMPT) -> str:
    """The model input: the tokenizer's chat template when it has one, else plain text."""
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": problem}]
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return f"{system_prompt}\n\n{problem}\n\n"


def _read_rows(path: Path, stats: DataStats) -> list[tuple[str, str]]:
    """Valid ``(problem, answer)`` pairs of a JSONL file; bad rows only counted."""
    rows = []
    with open(path, "rb") as fh:
        for raw in fh:
            if not raw.strip():
                continue
            stats.rows += 1
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                stats.invalid_json += 1
                continue
            if not isinstance(record, dict):
                stats.invalid_json += 1
                continue
            if "problem" not in record or "answer" not in record:
                stats.missing_keys += 1
                continue
            problem, answer = record["problem"], record["answer"]
            if (not isinstance(problem, str) or not problem.strip() or isinstance(answer, bool)
                    or not isinstance(answer, (str, int, float)) or not str(answer).strip()):
                stats.wrong_types += 1
                continue
            rows.append((problem.strip(), str(answer).strip()))
    return rows


def load_boxed_problems(path, split: str, *, tokenizer=None, max_prompt_tokens: int = MAX_PROMPT_TOKENS,
                        system_prompt: str = SYSTEM_PROMPT) -> tuple[list[Problem], DataStats]:
    """Read and prepare one JSONL split; returns the problems and their :class:`DataStats`.

    Prompt length is counted in ``tokenizer`` tokens when given, else in characters (an
    upper bound for any subword tokenizer).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dataset file not found: {path}")
    stats = DataStats(path=str(path))
    rows = _read_rows(path, stats)
    answers: dict[str, set[str]] = {}
    count: dict[str, int] = {}
    for problem, answer in rows:
        answers.setdefault(problem, set()).add(normalize_answer(answer))
        count[problem] = count.get(problem, 0) + 1
    out, emitted = [], set()
    for problem, answer in rows:
        if len(answers[problem]) > 1:
            stats.conflicting += 1
            continue
        if problem in emitted:
            stats.duplicates += 1
            continue
        emitted.add(problem)
        prompt = format_prompt(problem, tokenizer, system_prompt)
        length = len(tokenizer(prompt, add_special_tokens=False).input_ids) if tokenizer is not None else len(prompt)
        if length > max_prompt_tokens:
            stats.too_long += 1
            continue
        out.append(Problem(id=f"{split}-{len(out)}", prompt=prompt, answer=answer, split=split,
                           meta={"problem": problem}))
    stats.kept = len(out)
    if stats.bad_rows:
        warnings.warn(f"skipped {stats.bad_rows} bad rows in {stats.summary()}", stacklevel=2)
    if not out:
        raise ValueError(f"no usable problem in {path} ({stats.summary()})")
    return out, stats


class BoxedMathTask:
    """Boxed-answer math from local JSONL files ("train" and, when given, "test")."""

    name = "boxed_math"

    def __init__(self, *, path, test_path=None, tokenizer=None, max_prompt_tokens: int = MAX_PROMPT_TOKENS,
                 system_prompt: str = SYSTEM_PROMPT):
        if not isinstance(max_prompt_tokens, int) or max_prompt_tokens < 1:
            raise ValueError(f"max_prompt_tokens must be a positive integer, got {max_prompt_tokens!r}")
        kwargs = dict(tokenizer=tokenizer, max_prompt_tokens=max_prompt_tokens, system_prompt=system_prompt)
        self._problems, self.stats = {}, {}
        paths = {"train": path} if test_path is None else {"train": path, "test": test_path}
        for split, p in paths.items():
            self._problems[split], self.stats[split] = load_boxed_problems(p, split, **kwargs)
        self.splits = tuple(paths)

    def problems(self, split: str) -> list[Problem]:
        """The prepared problems of ``split``."""
        return list(self._problems[check_split(self, split)])

    def solution_form(self, problem: Problem, completion: str) -> str | None:
        """The normalised boxed answer when it matches the reference, else None."""
        boxed = last_boxed(completion)
        if boxed is None:
            return None
        got = normalize_answer(boxed)
        return got if got and got == normalize_answer(problem.answer) else None

    def is_correct(self, problem: Problem, completion: str) -> bool:
        """True when the last ``\\boxed{}`` matches the reference answer (never raises)."""
        try:
            return self.solution_form(problem, completion) is not None
        except (ValueError, TypeError, ZeroDivisionError, OverflowError):
            return False

    def reward(self, problem: Problem, completion: str) -> float:
        """1.0 when correct, else 0.0."""
        return 1.0 if self.is_correct(problem, completion) else 0.0
