"""Boxed math: extraction (nested braces), math-verify equivalence, data preparation, bad-row
counting, hostile completions (never raise, never hang, any thread), the TRL and verl reward
exports."""

from __future__ import annotations

import json
import warnings

import pytest

from fgrpo_llm.tasks import get_task
from fgrpo_llm.tasks.base import Problem
from fgrpo_llm.tasks.boxed_math import (
    MAX_ANSWER_CHARS,
    SYSTEM_PROMPT,
    VERIFIER_STATS,
    BoxedMathTask,
    answers_equivalent,
    compute_score,
    last_boxed,
    load_boxed_problems,
    trl_reward,
)
from fgrpo_llm.tokenizer import PRINTABLE_ALPHABET, build_char_tokenizer


@pytest.mark.parametrize(
    "text, boxed",
    [
        ("so \\boxed{42}", "42"),
        ("\\boxed{1} then \\boxed{2}", "2"),  # the last one counts
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        (
            "\\boxed{\\{1, \\frac{2}{\\sqrt{3}}\\}} done",
            "\\{1, \\frac{2}{\\sqrt{3}}\\}",
        ),  # nested braces
        ("\\fbox{7}", "7"),
        ("no box here", None),
        ("", None),
        ("\\boxed{unclosed {x}", None),
        (None, None),
    ],
)
def test_last_boxed(text, boxed):
    assert last_boxed(text) == boxed


@pytest.mark.parametrize(
    "a, b",
    [
        ("\\dfrac{1}{2}", "0.5"),
        ("1/2", "\\frac{1}{2}"),
        ("1,000", "1000"),
        (" $ 3 $ ", "3"),
        ("\\left( 1, 2 \\right)", "(1,2)"),
        ("2.50", "5/2"),
        ("\\text{east}", "east"),
        ("90^\\circ", "90"),
        ("\\sqrt{2}", "2^{1/2}"),
    ],
)
def test_math_verify_makes_equal(a, b):
    assert answers_equivalent(a, b) and answers_equivalent(b, a)


@pytest.mark.parametrize(
    "a, b", [("1/2", "1/3"), ("12", "1,2"), ("x+1", "x-1"), ("-3", "3"), ("2", ""), ("2", None)]
)
def test_math_verify_keeps_different_answers_apart(a, b):
    assert not answers_equivalent(a, b)


def _task(llm_data_dir, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BoxedMathTask(
            path=llm_data_dir / "boxed_train.jsonl",
            test_path=llm_data_dir / "boxed_test.jsonl",
            **kwargs,
        )


def test_bad_rows_are_counted_and_reported_not_raised(llm_data_dir):
    with pytest.warns(UserWarning, match="8 bad rows"):
        problems, stats = load_boxed_problems(llm_data_dir / "boxed_train.jsonl", "train")
    assert (stats.rows, stats.invalid_json, stats.missing_keys, stats.wrong_types) == (15, 3, 2, 3)
    assert (stats.duplicates, stats.conflicting, stats.kept) == (1, 2, 4) and stats.bad_rows == 8
    assert "invalid_json=3" in stats.summary() and "boxed_train.jsonl" in stats.summary()
    assert [p.meta["problem"] for p in problems] == [
        "What is 1+1?",
        "Compute 3/6 as a fraction.",
        "What is 10*100?",
        "Name the set {1,2}.",
    ]
    assert [p.answer for p in problems] == [
        "2",
        "\\frac{1}{2}",
        "1000",
        "\\{1,2\\}",
    ]  # numbers become strings


def test_preparation_prepends_system_prompt_and_drops_long_prompts(llm_data_dir):
    task = _task(llm_data_dir)
    assert task.splits == ("train", "test")
    for p in task.problems("train") + task.problems("test"):
        assert p.prompt.startswith(SYSTEM_PROMPT) and p.meta["problem"] in p.prompt
    assert task.stats["test"].too_long == 1 and len(task.problems("test")) == 2
    # with a tokenizer the limit counts its tokens as the model reads them (its BOS included): a
    # tighter limit drops more
    tok = build_char_tokenizer(PRINTABLE_ALPHABET)
    short = _task(llm_data_dir, tokenizer=tok, max_prompt_tokens=1 + len(SYSTEM_PROMPT) + 4 + 15)
    assert [p.meta["problem"] for p in short.problems("train")] == [
        "What is 1+1?",
        "What is 10*100?",
    ]


def test_chat_messages_carry_the_task_system_prompt(llm_data_dir):
    from fgrpo_llm.tasks import chat_messages, get_task

    p = _task(llm_data_dir, system_prompt="Answer in a box.").problems("train")[0]
    assert chat_messages(p) == [
        {"role": "system", "content": "Answer in a box."},
        {"role": "user", "content": "What is 1+1?"},
    ]
    assert p.prompt == "Answer in a box.\n\nWhat is 1+1?\n\n"
    countdown = get_task("countdown").problems("test")[0]  # no system prompt: the prompt text
    assert chat_messages(countdown) == [{"role": "user", "content": countdown.prompt}]


def test_reward_matches_last_boxed_answer(llm_data_dir):
    task = _task(llm_data_dir)
    half = task.problems("train")[1]  # answer \frac{1}{2}
    assert task.reward(half, "3/6 = \\boxed{\\dfrac{1}{2}}") == 1.0
    assert task.reward(half, "\\boxed{0.5}") == 1.0
    assert task.reward(half, "\\boxed{0.5} no wait \\boxed{2}") == 0.0
    assert task.reward(half, "the answer is 1/2") == 0.0  # not boxed
    assert task.reward(half, "\\boxed{}") == 0.0
    assert task.reward(half, None) == 0.0
    assert task.solution_form(half, "\\boxed{ 1/2 }") == "1/2"  # the form: no spaces
    assert task.solution_form(half, "\\boxed{3}") is None
    sets = task.problems("train")[3]
    assert task.reward(sets, "\\boxed{\\{1, 2\\}}") == 1.0


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        BoxedMathTask(path=tmp_path / "nope.jsonl")


def test_file_without_usable_rows_is_value_error(tmp_path):
    """The error counts the bad rows; no warning about them comes before it."""
    path = tmp_path / "bad.jsonl"
    path.write_text("not json\n" + json.dumps({"problem": 1, "answer": 2}) + "\n")
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match=r"bad.jsonl.*invalid_json=1, missing_keys=0"):
            BoxedMathTask(path=path)
    assert [str(w.message) for w in shown] == []


def test_the_cli_says_a_task_argument_problem_in_one_line(tiny_checkpoint, tmp_path):
    """``fgrpo-llm eval --task-arg path=FILE`` of a file without a usable row: the error alone, one
    line (it used to follow Python's two-line UserWarning: file:line, then the source line)."""
    import subprocess
    import sys

    path = tmp_path / "bad.jsonl"
    path.write_text("not json\n[1]\n")
    argv = ["eval", "--model", str(tiny_checkpoint), "--task", "boxed_math", "--samples", "2"]
    proc = subprocess.run(
        [sys.executable, "-m", "fgrpo_llm.cli", *argv, "--task-arg", f"path={path}"],
        capture_output=True,
        text=True,
    )
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, err
    assert err[0].startswith("fgrpo-llm eval: error: no usable problem in")


def test_the_cli_shows_a_warning_as_one_line(tiny_checkpoint, llm_data_dir, capsys):
    """A bad-row warning under ``fgrpo-llm``: one stderr line, ``fgrpo-llm: warning: ...``, then
    the caller's warning display is back."""
    from fgrpo_llm.cli import main

    before = warnings.showwarning
    argv = ["eval", "--model", str(tiny_checkpoint), "--task", "boxed_math", "--splits", "bogus"]
    assert main([*argv, "--task-arg", f"path={llm_data_dir / 'boxed_train.jsonl'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2, err
    assert err[0].startswith("fgrpo-llm: warning: skipped 8 bad rows in ")
    assert err[1].startswith("fgrpo-llm eval: error: unknown split 'bogus'")
    assert warnings.showwarning is before


def test_registry_and_splits(llm_data_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        task = get_task("boxed_math", path=llm_data_dir / "boxed_train.jsonl")
    assert task.splits == ("train",) and isinstance(task.problems("train")[0], Problem)
    with pytest.raises(ValueError, match="test"):
        task.problems("test")


def _write_rows(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_hostile_answers_are_bad_rows_not_a_rejected_file(tmp_path):
    path = _write_rows(
        tmp_path / "hostile.jsonl",
        [
            json.dumps({"problem": "fine", "answer": "7"}),
            '{"problem": "huge integer", "answer": '
            + "9" * 5000
            + "}",  # json.loads alone raises on this
            json.dumps({"problem": "huge string", "answer": "9" * 5000}),
            '{"problem": "nan", "answer": NaN}',
            '{"problem": "inf", "answer": Infinity}',
            '{"problem": "minus inf", "answer": -Infinity}',
            '{"problem": "overflowing float", "answer": 1e999}',
            "[" * 100_000,  # nested too deeply for the JSON parser
        ],
    )
    with pytest.warns(UserWarning, match="7 bad rows"):
        problems, stats = load_boxed_problems(path, "train")
    assert [p.meta["problem"] for p in problems] == ["fine"]
    assert (stats.bad_answers, stats.invalid_json, stats.kept) == (6, 1, 1)
    assert len("9" * 5000) > MAX_ANSWER_CHARS


def test_equivalent_duplicates_are_not_conflicts(tmp_path):
    path = _write_rows(
        tmp_path / "dups.jsonl",
        [
            json.dumps({"problem": "half", "answer": "\\frac{1}{2}"}),
            json.dumps({"problem": "half", "answer": "0.5"}),
            json.dumps({"problem": "two", "answer": "2"}),
            json.dumps({"problem": "two", "answer": "3"}),
        ],
    )
    problems, stats = load_boxed_problems(path, "train")
    assert [p.meta["problem"] for p in problems] == ["half"]
    assert (stats.duplicates, stats.conflicting) == (1, 2)


HOSTILE_COMPLETIONS = [
    "\\boxed{9^{9^{9^{9}}}}",  # a power tower: sympy would compute it for ever
    "\\boxed{" + "(" * 3000 + "}",
    "\\boxed{" + "\\frac{" * 200 + "1" + "}{2}" * 200 + "}",
    "\\boxed{" + "x" * (MAX_ANSWER_CHARS + 1) + "}",
    "\\boxed{\\\\\\}",
    "\\boxed{\x00\ud800}",
    "\\boxed{" * 500,
    12345,
    b"\\boxed{1}",
    ["\\boxed{1}"],
]


def test_hostile_completions_never_raise_and_never_hang(llm_data_dir):
    task = _task(llm_data_dir)
    one = Problem(id="x", prompt="", answer="1", split="train")
    before = VERIFIER_STATS["timeouts"]
    import fgrpo_llm.tasks.boxed_math as bm

    old, bm.VERIFY_TIMEOUT_S = bm.VERIFY_TIMEOUT_S, 1.0
    try:
        for completion in HOSTILE_COMPLETIONS:
            assert task.reward(one, completion) == 0.0
            assert task.is_correct(one, completion) is False
    finally:
        bm.VERIFY_TIMEOUT_S = old
    # the helper process survives (or is restarted after) a kill: the next answer is scored again
    assert task.reward(one, "so \\boxed{\\frac{2}{2}}") == 1.0
    assert VERIFIER_STATS["timeouts"] >= before


def test_power_tower_is_stopped_by_the_hard_timeout():
    before = VERIFIER_STATS["timeouts"]
    assert answers_equivalent("1", "9^{9^{9^{9^{9}}}}", timeout=0.5) is False
    assert VERIFIER_STATS["timeouts"] == before + 1
    assert answers_equivalent("1", "\\frac{3}{3}")  # restarted


def test_verifier_works_in_worker_threads():
    from concurrent.futures import ThreadPoolExecutor

    pairs = [("\\frac{1}{2}", "0.5"), ("2", "3"), ("1000", "1,000"), ("x+1", "1+x")] * 3
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda ab: answers_equivalent(*ab), pairs))
    assert got == [True, False, True, True] * 3


def test_trl_reward_and_verl_compute_score_are_the_task_reward():
    completions = [
        "\\boxed{0.5}",
        [{"role": "assistant", "content": "so \\boxed{\\frac{1}{2}}"}],
        "\\boxed{2}",
        "no box",
        None,
    ]
    assert trl_reward(completions, answer=["1/2"] * 5, prompts=None) == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert compute_score("math", "we get \\boxed{1,000}", "1000", extra_info={"index": 3}) == 1.0
    assert compute_score("math", "\\boxed{999}", "1000") == 0.0
    assert compute_score("math", None, None) == 0.0
