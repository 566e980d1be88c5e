"""``fgrpo-theory plan --counts``: a prompt is counted once. A CSV without ``prompt_id``, a
prompt id given twice (repeated or with other counts) and a field past the csv module's limit
are each one stderr line naming the file, exit 2."""

from __future__ import annotations

import json

import pytest

from fgrpo_theory.cli import main


def _plan(capsys, path, *extra):
    rc = main(["plan", "--counts", str(path), "--group-size", "4,8", "--json", *extra])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("second, word", [("p0,16,15", "conflicts with"), ("p0,16,3", "repeats")])
def test_a_prompt_id_given_twice_is_refused(tmp_path, capsys, second, word):
    path = tmp_path / "d.csv"
    path.write_text(f"prompt_id,n,c\np0,16,3\n{second}\n")
    rc, out, err = _plan(capsys, path)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and str(path) in err and "'p0'" in err and word in err


def test_a_csv_without_prompt_id_is_refused(tmp_path, capsys):
    path = tmp_path / "d.csv"
    path.write_text("n,c\n16,3\n16,8\n")
    rc, out, err = _plan(capsys, path)
    assert rc == 2 and err.count("\n") == 1 and "prompt_id" in err and str(path) in err


def test_distinct_prompts_are_each_counted_once(tmp_path, capsys):
    path = tmp_path / "d.csv"
    path.write_text("prompt_id,n,c\np0,16,3\np1,16,15\n")
    rc, out, err = _plan(capsys, path)
    assert rc == 0 and json.loads(out)["prompts"] == 2


def test_a_field_over_the_csv_limit_is_one_line(tmp_path, capsys):
    path = tmp_path / "big.csv"
    path.write_text("prompt_id,n,c\n" + "x" * 200_000 + ",16,3\n")
    rc, out, err = _plan(capsys, path)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err and str(path) in err
