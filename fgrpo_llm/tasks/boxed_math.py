"""Boxed-answer math over a local JSONL file of ``{"problem": ..., "answer": ...}`` records.

Preparation follows the paper (Appendix L): rows whose prompt is longer than 1024 tokens are
dropped, duplicate problems whose answers conflict are dropped (exact duplicates are kept once),
and the system prompt "Please reason step by step, and put your final answer within \\boxed{}."
is prepended. The reward is 1 when the last ``\\boxed{...}`` of the completion (nested braces
allowed) is equivalent to the reference answer by Hugging Face ``math-verify`` (the scorer the
paper used), else 0.

The verifier never raises and never hangs. ``math-verify`` guards its sympy work with
``signal.alarm``, which works only in the main thread (elsewhere it raises) and cannot stop a
computation stuck in C (``\\boxed{9^{9^{9^9}}}``). So the comparison runs in a helper process
(``python -m fgrpo_llm.tasks.boxed_math --worker``, started on first use, one per process, safe to
call from any thread): it is killed and restarted when an answer takes longer than
``VERIFY_TIMEOUT_S``, and that completion counts as wrong (``VERIFIER_STATS["timeouts"]``).
Boxed answers longer than ``MAX_ANSWER_CHARS`` are wrong without being parsed; an answer equal
to the reference up to spaces and ``$`` is right without a round trip.

Bad rows (invalid JSON or UTF-8, missing keys, wrong types, non-finite numbers such as ``NaN`` /
``Infinity``, answers over ``MAX_ANSWER_CHARS`` characters, integers too long to parse) are
counted in ``task.stats`` and reported with one warning line; they never stop the run. A missing
file raises FileNotFoundError naming it; a file with no usable row raises ValueError.

The same reward is exported for the engines: :func:`trl_reward` (a TRL reward function reading
the dataset's ``answer`` column) and :func:`compute_score` (verl's ``custom_reward_function``).

    task = BoxedMathTask(path="data/train.jsonl", test_path="data/test.jsonl", tokenizer=tok)
    print(task.stats["train"].summary())
"""

from __future__ import annotations

import json
import math
import os
import select
import subprocess
import sys
import threading
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from fgrpo_llm.tasks.base import Problem, check_split, content_id, encode_prompt

SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."
MAX_PROMPT_TOKENS = 1024
MAX_ANSWER_CHARS = 1000
"""Longer reference answers are bad rows; longer boxed answers in a completion are wrong."""
MAX_CHARS_PER_TOKEN = 64
"""A prompt longer than this many characters per allowed token is too long without tokenizing it
(no tokenizer's token is this long; a 20 MB problem would otherwise take gigabytes to
tokenize)."""
VERIFY_TIMEOUT_S = 5.0
"""Wall-clock limit of one comparison (the helper process is killed past it)."""
WORKER_START_TIMEOUT_S = 120.0
"""Limit for the helper process to import math-verify and say it is ready."""
_JSON_INT_DIGITS = 4000
"""JSON integers with more digits are bad rows (Python refuses to parse past 4300 digits)."""


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
    bad_answers: int = 0
    """Answers that are NaN / Infinity, longer than MAX_ANSWER_CHARS, or integers too long to
    read."""
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
        return self.invalid_json + self.missing_keys + self.wrong_types + self.bad_answers

    def summary(self) -> str:
        """One line, e.g. for a warning or a log."""
        parts = ", ".join(f"{k}={v}" for k, v in asdict(self).items() if k != "path")
        return f"{self.path}: {parts}"


# -- answer extraction --------------------------------------------------------------------


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


def compact_answer(answer: str) -> str:
    """``answer`` without whitespace and ``$``: the solution form, and the equality fast path."""
    return "".join(str(answer).split()).replace("$", "")


# -- the verifier: math-verify in a helper process ----------------------------------------

VERIFIER_STATS = {"calls": 0, "fast_path": 0, "timeouts": 0, "worker_starts": 0, "failures": 0}
"""Counts of this process's comparisons (``failures``: the helper died or answered garbage)."""


def _math_verify_equal(gold: str, pred: str) -> bool:
    """math-verify's verdict on two boxed contents (runs inside the helper process)."""
    from math_verify import parse, verify

    # math-verify's own signal timeouts work here (the helper's main thread); the parent's kill is
    # the backstop.
    g = parse("\\boxed{" + gold + "}", parsing_timeout=2)
    p = parse("\\boxed{" + pred + "}", parsing_timeout=2)
    return bool(g) and bool(p) and bool(verify(g, p, timeout_seconds=2))


def _worker_main() -> None:
    """The helper process: one JSON request per stdin line, one JSON answer per stdout line."""
    import logging

    logging.disable(logging.WARNING)  # math-verify logs every timeout; the parent counts them
    import math_verify  # noqa: F401  (fail at start, not on the first request)

    out = sys.stdout
    out.write('{"ready": true}\n')
    out.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
            ok = _math_verify_equal(str(req["gold"]), str(req["pred"]))
        except Exception:  # anything math-verify or sympy throws means "not shown equal"
            ok = False
        out.write(json.dumps({"ok": ok}) + "\n")
        out.flush()


class _Verifier:
    """One helper process per Python process (restarted after a fork, a timeout or a crash)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._pid = None

    def _readline(self, timeout: float) -> str | None:
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout)
        return self._proc.stdout.readline() if ready else None

    def _start(self) -> None:
        VERIFIER_STATS["worker_starts"] += 1
        env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "fgrpo_llm.tasks.boxed_math", "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            env=env,
        )
        self._pid = os.getpid()
        line = self._readline(WORKER_START_TIMEOUT_S)
        if not line or "ready" not in line:
            self._kill()
            raise RuntimeError(
                "the math-verify helper process did not start; is math-verify installed "
                "(pip install math-verify)?"
            )

    def _kill(self) -> None:
        if self._proc is not None:
            try:
                self._proc.kill()
                self._proc.wait(timeout=10)
            except Exception:
                pass
        self._proc = None

    def equal(self, gold: str, pred: str, timeout: float) -> bool:
        with self._lock:
            if self._proc is None or self._pid != os.getpid() or self._proc.poll() is not None:
                self._proc = None  # a forked child must not share its parent's pipes
                self._start()
            try:
                self._proc.stdin.write(json.dumps({"gold": gold, "pred": pred}) + "\n")
                self._proc.stdin.flush()
                line = self._readline(timeout)
            except (OSError, ValueError):
                line = ""
            if line is None:
                VERIFIER_STATS["timeouts"] += 1
                self._kill()
                return False
            try:
                return bool(json.loads(line)["ok"])
            except (ValueError, KeyError, TypeError):
                VERIFIER_STATS["failures"] += 1
                self._kill()
                return False


_VERIFIER = _Verifier()


def answers_equivalent(gold, pred, *, timeout: float | None = None) -> bool:
    """True when math-verify shows boxed contents ``gold`` and ``pred`` equal; never raises, never
    runs longer than about ``timeout`` seconds (default ``VERIFY_TIMEOUT_S``; plus the helper's
    start-up on first use)."""
    if not isinstance(gold, str) or not isinstance(pred, str):
        return False
    gold, pred = gold.strip(), pred.strip()
    if not gold or not pred or len(pred) > MAX_ANSWER_CHARS or len(gold) > MAX_ANSWER_CHARS:
        return False
    VERIFIER_STATS["calls"] += 1
    if compact_answer(gold) == compact_answer(pred):
        VERIFIER_STATS["fast_path"] += 1
        return True
    try:
        return _VERIFIER.equal(gold, pred, VERIFY_TIMEOUT_S if timeout is None else float(timeout))
    except Exception as err:  # the helper cannot start: say so once per process, score as wrong
        VERIFIER_STATS["failures"] += 1
        if VERIFIER_STATS["failures"] == 1:
            warnings.warn(
                f"boxed_math verifier failed ({err}); such completions are scored as wrong",
                RuntimeWarning,
                stacklevel=2,
            )
        return False


def check_math_verify() -> None:
    """An ImportError saying how to install math-verify when it is missing."""
    try:
        import math_verify  # noqa: F401
    except ImportError as err:
        raise ImportError(
            "the boxed_math task scores answers with math-verify: pip install 'math-verify>=0.9'"
        ) from err


# -- rewards for the engines --------------------------------------------------------------


def boxed_reward(completion, answer) -> float:
    """1.0 when the last ``\\boxed{}`` of ``completion`` is equivalent to ``answer``, else 0.0."""
    try:
        boxed = last_boxed(completion)
        return 1.0 if boxed is not None and answers_equivalent(str(answer), boxed) else 0.0
    except Exception:
        return 0.0


def _completion_text(completion) -> str | None:
    """A TRL completion: plain text, or a conversation whose last message holds the text."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        content = completion[-1].get("content")
        return content if isinstance(content, str) else None
    return None


def trl_reward(completions, answer, **kwargs) -> list[float]:
    """TRL reward function (``GRPOTrainer(reward_funcs=[trl_reward])``): the dataset needs an
    ``answer`` column; completions may be text or conversational."""
    return [boxed_reward(_completion_text(c), a) for c, a in zip(completions, answer, strict=True)]


def compute_score(
    data_source=None, solution_str=None, ground_truth=None, extra_info=None, **kwargs
) -> float:
    """verl's custom reward function (``reward.custom_reward_function.name=compute_score``)."""
    return boxed_reward(solution_str, ground_truth)


# -- the task -----------------------------------------------------------------------------


def format_prompt(problem: str, tokenizer=None, system_prompt: str = SYSTEM_PROMPT) -> str:
    """The model input: the tokenizer's chat template when it has one, else plain text."""
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        messages = [
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": problem},
        ]
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return f"{system_prompt}\n\n{problem}\n\n"


class _BadValue:
    """A JSON value that parsed but must not be used (NaN, Infinity, a too-long integer)."""


def _parse_int(text: str):
    return int(text) if len(text.lstrip("-")) <= _JSON_INT_DIGITS else _BadValue()


def _parse_float(text: str):
    value = float(text)
    return value if math.isfinite(value) else _BadValue()


def _loads(raw: bytes):
    return json.loads(
        raw.decode("utf-8"),
        parse_int=_parse_int,
        parse_float=_parse_float,
        parse_constant=lambda name: _BadValue(),
    )


def _read_rows(path: Path, stats: DataStats) -> list[tuple[str, str]]:
    """Valid ``(problem, answer)`` pairs of a JSONL file; bad rows only counted."""
    rows = []
    with open(path, "rb") as fh:
        for raw in fh:
            if not raw.strip():
                continue
            stats.rows += 1
            try:
                record = _loads(raw)
            except (UnicodeDecodeError, ValueError, RecursionError):
                stats.invalid_json += 1
                continue
            if not isinstance(record, dict):
                stats.invalid_json += 1
                continue
            if "problem" not in record or "answer" not in record:
                stats.missing_keys += 1
                continue
            problem, answer = record["problem"], record["answer"]
            if isinstance(answer, _BadValue):
                stats.bad_answers += 1
                continue
            if (
                not isinstance(problem, str)
                or not problem.strip()
                or isinstance(answer, bool)
                or not isinstance(answer, (str, int, float))
                or not str(answer).strip()
            ):
                stats.wrong_types += 1
                continue
            answer = str(answer).strip()
            if len(answer) > MAX_ANSWER_CHARS:
                stats.bad_answers += 1
                continue
            rows.append((problem.strip(), answer))
    return rows


def _conflicting(answers: list[str]) -> bool:
    """True when the distinct answers of one problem are not all equivalent to the first."""
    first, *rest = answers
    return any(not answers_equivalent(first, other) for other in rest)


def _conflicting_problems(rows: list[tuple[str, str]]) -> set[str]:
    """The problems that ``(problem, answer)`` rows give answers for that disagree
    (``_conflicting``; the same answer written twice is one answer)."""
    distinct: dict[str, list[str]] = {}
    for problem, answer in rows:
        seen = distinct.setdefault(problem, [])
        if all(compact_answer(answer) != compact_answer(a) for a in seen):
            seen.append(answer)
    return {
        problem
        for problem, answers in distinct.items()
        if len(answers) > 1 and _conflicting(answers)
    }


def load_boxed_problems(
    path,
    split: str,
    *,
    tokenizer=None,
    max_prompt_tokens: int = MAX_PROMPT_TOKENS,
    system_prompt: str = SYSTEM_PROMPT,
) -> tuple[list[Problem], DataStats]:
    """Read and prepare one JSONL split; returns the problems and their :class:`DataStats`.

    Prompt length is counted in ``tokenizer`` tokens when given, else in characters (an
    upper bound for any subword tokenizer); a problem of more than ``MAX_CHARS_PER_TOKEN``
    characters per allowed token is too long without being tokenized. Bad rows are skipped and
    counted in one UserWarning; a file without a usable problem is a ValueError that counts them
    (and no warning).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dataset file not found: {path}")
    stats = DataStats(path=str(path))
    rows = _read_rows(path, stats)
    conflict = _conflicting_problems(rows)
    out, emitted = [], set()
    for problem, answer in rows:
        if problem in conflict:
            stats.conflicting += 1
            continue
        if problem in emitted:
            stats.duplicates += 1
            continue
        emitted.add(problem)
        if len(problem) > max_prompt_tokens * MAX_CHARS_PER_TOKEN:
            stats.too_long += 1
            continue
        prompt = format_prompt(problem, tokenizer, system_prompt)
        length = len(encode_prompt(tokenizer, prompt)) if tokenizer is not None else len(prompt)
        if length > max_prompt_tokens:
            stats.too_long += 1
            continue
        out.append(
            Problem(
                id=content_id("math", problem, answer),
                prompt=prompt,
                answer=answer,
                split=split,
                meta={"problem": problem, "system_prompt": system_prompt},
            )
        )
    stats.kept = len(out)
    if not out:  # the error counts the bad rows: no warning before it
        raise ValueError(f"no usable problem in {path} ({stats.summary()})")
    if stats.bad_rows:
        warnings.warn(f"skipped {stats.bad_rows} bad rows in {stats.summary()}", stacklevel=2)
    return out, stats


class BoxedMathTask:
    """Boxed-answer math from local JSONL files ("train" and, when given, "test")."""

    name = "boxed_math"
    #: The completion limit when none is given (``--max-new-tokens``): room for a short worked
    #: solution and its boxed answer. Reasoning models need more; give your budget.
    max_new_tokens = 1024

    def __init__(
        self,
        *,
        path,
        test_path=None,
        tokenizer=None,
        max_prompt_tokens: int = MAX_PROMPT_TOKENS,
        system_prompt: str = SYSTEM_PROMPT,
    ):
        if (
            not isinstance(max_prompt_tokens, int)
            or isinstance(max_prompt_tokens, bool)
            or max_prompt_tokens < 1
        ):
            raise ValueError(
                f"max_prompt_tokens must be a positive integer, got {max_prompt_tokens!r}"
            )
        check_math_verify()
        kwargs = dict(
            tokenizer=tokenizer, max_prompt_tokens=max_prompt_tokens, system_prompt=system_prompt
        )
        self._problems, self.stats = {}, {}
        paths = {"train": path} if test_path is None else {"train": path, "test": test_path}
        for split, p in paths.items():
            self._problems[split], self.stats[split] = load_boxed_problems(p, split, **kwargs)
        self.splits = tuple(paths)

    def problems(self, split: str) -> list[Problem]:
        """The prepared problems of ``split``."""
        return list(self._problems[check_split(self, split)])

    def solution_form(self, problem: Problem, completion: str) -> str | None:
        """The boxed answer without spaces or ``$`` when it is correct, else None."""
        boxed = last_boxed(completion)
        if boxed is None or not answers_equivalent(str(problem.answer), boxed):
            return None
        return compact_answer(boxed)

    def is_correct(self, problem: Problem, completion: str) -> bool:
        """True when the last ``\\boxed{}`` is equivalent to the reference answer (never raises)."""
        return boxed_reward(completion, problem.answer) == 1.0

    def reward(self, problem: Problem, completion: str) -> float:
        """1.0 when correct, else 0.0."""
        return boxed_reward(completion, problem.answer)


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    _worker_main()
