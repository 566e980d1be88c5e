"""Countdown: safe parser, verifier on malformed answers, solution enumeration, splits."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_llm.tasks import get_task, register_task, task_names
from fgrpo_llm.tasks.base import Problem, Task
from fgrpo_llm.tasks.countdown import (
    CountdownAnswer,
    CountdownTask,
    all_expressions,
    enumerate_solutions,
    format_prompt,
)
from fgrpo_llm.tasks.expr import ExprError, parse_expression


def _problem(numbers, target):
    return Problem(
        id="p",
        prompt=format_prompt(numbers, target),
        answer=CountdownAnswer(tuple(numbers), target),
        split="test",
    )


# -- the parser -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, value",
    [
        ("3*5+7", 22),
        ("2-9*3", -25),
        (" 8 - 2 - 1 ", 5),
        ("(1+2)*3", 9),
        ("-4+6", 2),
        ("7/2", Fraction(7, 2)),
        ("12", 12),
    ],
)
def test_parser_values_follow_precedence(text, value):
    assert parse_expression(text).value == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "3+",
        "+3",
        "3**2",
        "3 5",
        "(3+4",
        "3+4)",
        "3+4=7",
        "2^3",
        "abc",
        "3.5+1",
        "__import__('os')",
        "1" * 19,
        "1+" * 200 + "1",
        "(" * 70 + "1" + ")" * 70,
    ],
)
def test_parser_rejects_malformed_text(text):
    with pytest.raises(ExprError):
        parse_expression(text)


def test_parser_records_structure():
    parsed = parse_expression(" 9 - (2*3)/0 ")
    assert parsed.value is None  # division by zero
    assert parsed.numbers == (9, 2, 3, 0)
    assert parsed.operators == {"-", "*", "/"} and parsed.parenthesised and not parsed.unary_minus
    assert parsed.canonical == "9-(2*3)/0"


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 999), min_size=1, max_size=5), st.data())
def test_parser_matches_python_arithmetic_without_eval(numbers, data):
    ops = data.draw(
        st.lists(st.sampled_from("+-*"), min_size=len(numbers) - 1, max_size=len(numbers) - 1)
    )
    text = str(numbers[0]) + "".join(o + str(n) for o, n in zip(ops, numbers[1:], strict=True))
    # reference: sum of products of the '*'-runs, signed by the preceding + / -
    total, term, sign = 0, numbers[0], 1
    for o, n in zip(ops, numbers[1:], strict=True):
        if o == "*":
            term *= n
        else:
            total, term, sign = total + sign * term, n, (1 if o == "+" else -1)
    assert parse_expression(text).value == total + sign * term


# -- the verifier ---------------------------------------------------------------------------

P = _problem((3, 5, 7), 22)  # 3*5+7 = 22, 5*3+7, 7+3*5, 7+5*3


@pytest.mark.parametrize("completion", ["3*5+7", "5*3+7", "7+3*5", "7+5*3"])
def test_correct_answers_get_reward_one(completion):
    task = CountdownTask(num_test=0, num_ood=0)
    assert task.reward(P, completion) == 1.0
    assert task.solution_form(P, completion) == completion


@pytest.mark.parametrize(
    "completion, why",
    [
        ("", "empty"),
        ("   ", "blank"),
        ("3*5+8", "wrong value"),
        ("3*5", "number missing"),
        ("3*5+7+0", "extra number"),
        ("3*5+5+2", "wrong numbers"),
        ("3*3+7+6", "reused number"),
        ("35-13", "concatenated digits"),
        ("3*5+7=22", "trailing equation"),
        ("3*5+7 because", "trailing text"),
        ("3*5+7<eos>", "special token text"),
        ("(3*5)+7", "parentheses"),
        ("7/7+3*5+7", "division"),
        ("-3+5*5", "unary minus"),
        ("99999999999999999*3+7", "huge number"),
        ("1" * 300, "huge input"),
        ("3×5+7", "unicode operator"),
        ("garbage!!", "garbage"),
        ("3*5+", "dangling operator"),
        (" 7+5*3", "leading space"),
        ("7 + 5 * 3", "inner spaces"),
        ("3*5+7\n", "trailing newline"),
        ("03*5+7", "leading zero"),
        ("3*05+7", "leading zero inside"),
        ("3*5+007", "zeros"),
    ],
)
def test_malformed_or_wrong_answers_get_reward_zero(completion, why):
    task = CountdownTask(num_test=0, num_ood=0)
    assert task.reward(P, completion) == 0.0, why
    assert task.solution_form(P, completion) is None


def test_division_by_zero_and_non_string_never_raise():
    task = CountdownTask(num_test=0, num_ood=0)
    assert task.reward(_problem((4, 0, 2), 4), "4+2/0") == 0.0
    assert task.reward(P, None) == 0.0
    assert task.reward(P, b"3*5+7") == 0.0


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="0123456789+-*/() =:x３５７٣٥٧", max_size=40))  # with Unicode digits
def test_verifier_never_raises_and_accepts_only_true_solutions(completion):
    task = CountdownTask(num_test=0, num_ood=0)
    reward = task.reward(P, completion)
    assert reward in (0.0, 1.0)
    if reward == 1.0:
        assert completion in enumerate_solutions((3, 5, 7), 22)


def test_unicode_digits_are_not_numbers():
    """Fullwidth or Arabic-Indic digits spell the same numbers another way: not the canonical
    ASCII answer, so not correct (else they would be extra solution forms)."""
    task = CountdownTask(num_test=0, num_ood=0)
    assert task.reward(P, "3*5+7") == 1.0
    for other in ("３*５+７", "٣*٥+٧", "3*5+７"):
        assert task.reward(P, other) == 0.0
        with pytest.raises(ExprError):
            parse_expression(other)


# -- enumeration ----------------------------------------------------------------------------


def test_enumeration_matches_brute_force():
    numbers, target = (2, 3, 4), 10
    brute = set()
    for perm in itertools.permutations(numbers):
        for ops in itertools.product("+-*", repeat=2):
            text = f"{perm[0]}{ops[0]}{perm[1]}{ops[1]}{perm[2]}"
            if parse_expression(text).value == target:
                brute.add(text)
    solutions = enumerate_solutions(numbers, target)
    assert set(solutions) == brute and len(solutions) == len(brute)
    # rank order: numbers in prompt order first, then operators "+-*"
    assert solutions[0] == "2*3+4"


def test_enumeration_has_no_duplicates_with_repeated_numbers():
    exprs = [e for e, _ in all_expressions((2, 2, 5))]
    assert len(exprs) == len(set(exprs)) == 3 * 9  # 3 distinct orders x 9 operator pairs


def test_task_solutions_are_all_correct_and_ranked(countdown_task):
    for problem in countdown_task.problems("test")[:10]:
        sols = countdown_task.solutions(problem)
        assert len(sols) == problem.meta["num_solutions"] >= 2
        assert all(countdown_task.reward(problem, s) == 1.0 for s in sols)
        assert sols == enumerate_solutions(*problem.answer)


# -- splits ---------------------------------------------------------------------------------


def test_splits_are_disjoint_and_within_the_setting(countdown_task):
    train, test, ood = (countdown_task.problems(s) for s in ("train", "test", "ood"))
    prompts = [{p.prompt for p in split} for split in (train, test, ood)]
    assert len(prompts[1]) == len(test) == 20 and len(prompts[2]) == len(ood) == 10
    assert len(prompts[0]) == len(train) > 1000
    assert (
        not (prompts[0] & prompts[1])
        and not (prompts[0] & prompts[2])
        and not (prompts[1] & prompts[2])
    )
    for p in train + test:
        assert len(p.answer.numbers) == 3 and all(1 <= n <= 9 for n in p.answer.numbers)
        assert 0 <= p.answer.target <= 99 and p.prompt == format_prompt(*p.answer)
    for p in ood:
        assert len(p.answer.numbers) == 4 and p.meta["num_solutions"] >= 2
        assert countdown_task.reward(p, countdown_task.solutions(p)[-1]) == 1.0


def test_splits_are_deterministic_and_depend_on_seed():
    a, b, c = (
        CountdownTask(seed=1, num_test=15, num_ood=5),
        CountdownTask(seed=1, num_test=15, num_ood=5),
        CountdownTask(seed=2, num_test=15, num_ood=5),
    )
    for split in ("train", "test", "ood"):
        assert [p.prompt for p in a.problems(split)] == [p.prompt for p in b.problems(split)]
    assert [p.prompt for p in a.problems("test")] != [p.prompt for p in c.problems("test")]
    assert {p.prompt for p in a.problems("train") + a.problems("test")} == {
        p.prompt for p in c.problems("train") + c.problems("test")
    }  # same pool, different cut


def test_min_solutions_filter():
    task = CountdownTask(num_test=5, num_ood=0, min_solutions=4)
    assert all(p.meta["num_solutions"] >= 4 for p in task.problems("train"))
    assert len(task.problems("train")) < len(CountdownTask(num_test=5, num_ood=0).problems("train"))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(num_numbers=1),
        dict(operators="+/"),
        dict(min_solutions=0),
        dict(seed=-1),
        dict(min_target=5, max_target=4),
        dict(num_test=10**6),
        dict(seed=1.5),
    ],
)
def test_bad_arguments_are_value_errors(kwargs):
    with pytest.raises(ValueError):
        CountdownTask(**kwargs).problems("test")


def test_unknown_split(countdown_task):
    with pytest.raises(ValueError, match="valid"):
        countdown_task.problems("valid")


# -- registry -------------------------------------------------------------------------------


def test_registry_builds_tasks_and_rejects_unknown_names():
    task = get_task("countdown", seed=0, num_test=5, num_ood=2)
    assert isinstance(task, Task) and task.name == "countdown"
    assert {"countdown", "boxed_math", "maze"} <= set(task_names())
    with pytest.raises(ValueError, match="nope"):
        get_task("nope")
    register_task("countdown_small", lambda **kw: CountdownTask(num_test=3, num_ood=1, **kw))
    assert len(get_task("countdown_small", seed=4).problems("test")) == 3
