"""Problem ids name the problem's content (a hash of its text and answer), never its row: two
evaluations of different files are refused by ``compare``; the same file in another order is
paired problem by problem. Countdown's ids were already content (numbers and target)."""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest

from fgrpo_llm.evaluation.passk import compare_evals, pass_at_k_table, write_eval_outputs
from fgrpo_llm.tasks.boxed_math import load_boxed_problems
from fgrpo_llm.tasks.countdown import CountdownTask
from fgrpo_llm.tasks.maze import MazeTask

ROWS_A = [("What is 2+2?", "4"), ("What is 3*3?", "9"), ("What is 10-7?", "3"), ("1+1?", "2")]
ROWS_B = [("What is 5+5?", "10"), ("What is 2*8?", "16"), ("What is 9-1?", "8"), ("2+2?", "4")]


def _write(path, rows):
    path.write_text("".join(json.dumps({"problem": p, "answer": a}) + "\n" for p, a in rows))
    return path


def _outcomes(problems, n=40):
    """An outcome row that follows each problem's content: the same problem gets the same row
    wherever it stands in the file."""
    rows = []
    for p in problems:
        rng = np.random.default_rng(zlib.crc32(p.meta["problem"].encode()))
        rows.append((rng.random(n) < 0.5).astype(np.int8))
    return np.stack(rows)


def _eval(tmp_path, name, problems):
    matrix = _outcomes(problems)
    res = {
        "n": matrix.shape[1],
        "ks": [1],
        "splits": {
            "test": {
                "role": "in_domain",
                "num_problems": len(problems),
                "problem_ids": [p.id for p in problems],
                "counts": matrix.sum(1).tolist(),
                **pass_at_k_table(matrix.sum(1), matrix.shape[1], [1]),
            }
        },
    }
    write_eval_outputs(res, {"test": matrix}, tmp_path / name)
    return tmp_path / name


def _boxed(tmp_path, name, rows):
    return load_boxed_problems(_write(tmp_path / f"{name}.jsonl", rows), "test")[0]


def test_two_boxed_math_files_are_not_compared_row_by_row(tmp_path):
    a = _eval(tmp_path, "a", _boxed(tmp_path, "a", ROWS_A))
    b = _eval(tmp_path, "b", _boxed(tmp_path, "b", ROWS_B))
    with pytest.raises(ValueError, match="different problems"):
        compare_evals(a, b, m=10, iterations=50, ks=(1,), rng=np.random.default_rng(0))


def test_the_same_boxed_math_file_in_another_order_is_compared_by_content(tmp_path):
    a = _eval(tmp_path, "a", _boxed(tmp_path, "a", ROWS_A))
    same = _eval(tmp_path, "same", _boxed(tmp_path, "same", ROWS_A))
    moved = _eval(tmp_path, "moved", _boxed(tmp_path, "moved", ROWS_A[::-1]))
    kw = dict(m=10, iterations=200, ks=(1,))
    ref = compare_evals(a, same, rng=np.random.default_rng(0), **kw)["test"]["pass@1"]
    got = compare_evals(a, moved, rng=np.random.default_rng(0), **kw)["test"]["pass@1"]
    assert got == ref and got["statistic"] == 0.0


def test_a_boxed_math_id_is_a_hash_of_the_problem_and_its_answer(tmp_path):
    ids = [p.id for p in _boxed(tmp_path, "a", ROWS_A)]
    assert len(set(ids)) == len(ids) and all(i.startswith("math-") for i in ids)
    assert [p.id for p in _boxed(tmp_path, "r", ROWS_A[::-1])] == ids[::-1]
    # the same text with another answer is another problem
    other = _boxed(tmp_path, "o", [(ROWS_A[0][0], "5")])
    assert other[0].id != ids[0]


def test_maze_ids_follow_the_maze_not_its_position():
    small = MazeTask(grid_size=5, num_train=4, num_test=6, seed=0).problems("test")
    ids = [p.id for p in small]
    assert len(set(ids)) == len(ids) and all(i.startswith("maze-") for i in ids)
    # another draw with another seed: the mazes (and so the ids) differ, whatever their rows
    other = MazeTask(grid_size=5, num_train=4, num_test=6, seed=1).problems("test")
    by_prompt = {p.prompt: p.id for p in small}
    for p in other:
        assert by_prompt.get(p.prompt, p.id) == p.id
    assert {p.id for p in other} != set(ids)


def test_countdown_ids_stay_its_numbers_and_target():
    task = CountdownTask(num_test=4, num_ood=2)
    for p in task.problems("test"):
        assert p.id == f"{'-'.join(map(str, p.answer.numbers))}_{p.answer.target}"


def test_validate_refuses_a_rare_set_that_names_a_prompt_twice(tmp_path, capsys):
    """JSON keeps the last of two equal keys silently; a rare set whose prompts name one id
    twice (with other counts) is refused in one line naming the file and the id."""
    from fgrpo_llm.cli import main
    from fgrpo_llm.evaluation.rare import load_rare_set

    path = tmp_path / "rare.json"
    path.write_text(
        '{"meta": {}, "trajectories": [], "prompts": {"math-1f": {"mu": 0.5}, '
        '"math-1f": {"mu": 0.25}}}'
    )
    with pytest.raises(ValueError, match=r"'math-1f' is given twice"):
        load_rare_set(path)
    from fgrpo_llm.tracking import write_run_info

    run = tmp_path / "run"
    write_run_info(run, engine="fgrpo", algo="grpo", group_size=4, gamma=0.0)
    rc = main(
        ["validate", "--rare-set", str(path), "--run", str(run), "--out", str(tmp_path / "v")]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and str(path) in err[-1] and "'math-1f' is given twice" in err[-1]
    assert not (tmp_path / "v").exists()
