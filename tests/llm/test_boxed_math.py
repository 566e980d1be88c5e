"""Boxed math: extraction (nested braces), normalisation, data preparation, bad-row counting."""

from __future__ import annotations

import json
import warnings

import pytest

from fgrpo_llm.tasks import get_task
from fgrpo_llm.tasks.base import Problem
from fgrpo_llm.tasks.boxed_math import (SYSTEM_PROMPT, BoxedMathTask, last_boxed, load_boxed_problems,
                                        normalize_answer)
from fgrpo_llm.tokenizer import PRINTABLE_ALPHABET, build_char_tokenizer


@pytest.mark.parametrize("text, boxed", [
    ("so \\boxed{42}", "42"),
    ("\\boxed{1} then \\boxed{2}", "2"),  # the last one counts
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
    ("\\boxed{\\{1, \\frac{2}{\\sqrt{3}}\\}} done", "\\{1, \\frac{2}{\\sqrt{3}}\\}"),  # nested braces
    ("\\fbox{7}", "7"),
    ("no box here", None), ("", None), ("\\boxed{unclosed {x}", None), (None, None),
])
def test_last_boxed(text, boxed):
    assert last_boxed(text) == boxed


@pytest.mark.parametrize("a, b", [("\\dfrac{1}{2}", "0.5"), ("1/2", "\\frac{1}{2}"), ("1,000", "1000"),
                                  (" $ 3 $ ", "3"), ("\\left( 1, 2 \\right)", "(1,2)"), ("5.", "5"),
                                  ("2.50", "5/2"), ("\\text{east}", "east"), ("90^\\circ", "90")])
def test_normalisation_makes_equal(a, b):
    assert normalize_answer(a) == normalize_answer(b)


@pytest.mark.parametrize("a, b", [("1/2", "1/3"), ("12", "1,2"), ("x+1", "x-1"), ("-3", "3")])
def test_normalisation_keeps_different_answers_apart(a, b):
    assert normalize_answer(a) != normalize_answer(b)


def _task(llm_data_dir, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BoxedMathTask(path=llm_data_dir / "boxed_train.jsonl", test_path=llm_data_dir / "boxed_test.jsonl",
                             **kwargs)


def test_bad_rows_are_counted_and_reported_not_raised(llm_data_dir):
    with pytest.warns(UserWarning, match="8 bad rows"):
        problems, stats = load_boxed_problems(llm_data_dir / "boxed_train.jsonl", "train")
    assert (stats.rows, stats.invalid_json, stats.missing_keys, stats.wrong_types) == (15, 3, 2, 3)
    assert (stats.duplicates, stats.conflicting, stats.kept) == (1, 2, 4) and stats.bad_rows == 8
    assert "invalid_json=3" in stats.summary() and "boxed_train.jsonl" in stats.summary()
    assert [p.meta["problem"] for p in problems] == ["What is 1+1?", "Compute 3/6 as a fraction.",
                                                     "What is 10*100?", "Name the set {1,2}."]
    assert [p.answer for p in problems] == ["2", "\\frac{1}{2}", "1000", "\\{1,2\\}"]  # numbers become strings


def test_preparation_prepends_system_prompt_and_drops_long_prompts(llm_data_dir):
    task = _task(llm_data_dir)
    assert task.splits == ("train", "test")
    for p in task.problems("train") + task.problems("test"):
        assert p.prompt.startswith(SYSTEM_PROMPT) and p.meta["problem"] in p.prompt
    assert task.stats["test"].too_long == 1 and len(task.problems("test")) == 2
    # with a tokenizer the limit counts its tokens: a tighter limit drops more
    tok = build_char_tokenizer(PRINTABLE_ALPHABET)
    short = _task(llm_data_dir, tokenizer=tok, max_prompt_tokens=len(SYSTEM_PROMPT) + 4 + 15)
    assert [p.meta["problem"] for p in short.problems("train")] == ["What is 1+1?", "What is 10*100?"]


def test_reward_matches_last_boxed_answer(llm_data_dir):
    task = _task(llm_data_dir)
    half = task.problems("train")[1]  # answer \frac{1}{2}
    assert task.reward(half, "3/6 = \\boxed{\\dfrac{1}{2}}") == 1.0
    assert task.reward(half, "\\boxed{0.5}") == 1.0
    assert task.reward(half, "\\boxed{0.5} no wait \\boxed{2}") == 0.0
    assert task.reward(half, "the answer is 1/2") == 0.0  # not boxed
    assert task.reward(half, "\\boxed{}") == 0.0
    assert task.reward(half, None) == 0.0
    assert task.solution_form(half, "\\boxed{1/2}") == "1/2"
    assert task.solution_form(half, "\\boxed{3}") is None
    sets = task.problems("train")[3]
    assert task.reward(sets, "\\boxed{\\{1, 2\\}}") == 1.0


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        BoxedMathTask(path=tmp_path / "nope.jsonl")


def test_file_without_usable_rows_is_value_error(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("not json\n" + json.dumps({"problem": 1, "answer": 2}) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="bad.jsonl"):
            BoxedMathTask(path=path)


def test_registry_and_splits(llm_data_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        task = get_task("boxed_math", path=llm_data_dir / "boxed_train.jsonl")
    assert task.splits == ("train",) and isinstance(task.problems("train")[0], Problem)
    with pytest.raises(ValueError, match="test"):
        task.problems("test")
