"""The one table module of the experiments (``fgrpo_llm.experiments.tables``): a cell writes a
number with its digits and a missing one as the one glyph; a table is its header, the rule and
one line per row; a typed CSV table gives back every value it wrote, and refuses a file
without its columns or with text in a number column, naming the file and line."""

import math

import pytest

from fgrpo_llm.experiments.tables import (
    MISSING,
    CsvTable,
    cell,
    fmt,
    markdown_table,
    table_lines,
)


@pytest.mark.parametrize(
    "value,digits,expected",
    [(0.25, 3, "0.250"), (1.0 / 3, 1, "0.3"), (7, 3, "7"), ("text", 3, "text"),
     (None, 3, MISSING), (math.nan, 3, MISSING), (-math.inf, 1, MISSING)],
)  # fmt: skip
def test_a_cell_writes_digits_ints_and_text_as_they_are_and_missing_values_as_one_glyph(
    value, digits, expected
):
    assert cell(value, digits) == expected
    assert fmt(value, digits) == expected


def test_a_cell_can_name_another_glyph_for_a_file_that_keeps_its_bytes():
    assert cell(None, 1, missing="-") == "-"
    assert cell(2.0, 1, missing="-") == "2.0"


def test_a_table_is_its_header_its_rule_and_one_line_per_row():
    lines = table_lines(["run", "pass@1", "n"], [["GRPO", 0.5, 3], ["F-GRPO", None, 4]])
    assert lines == [
        "| run | pass@1 | n |",
        "|---|---|---|",
        "| GRPO | 0.500 | 3 |",
        f"| F-GRPO | {MISSING} | 4 |",
    ]
    assert markdown_table(["run", "pass@1", "n"], [["GRPO", 0.5, 3], ["F-GRPO", None, 4]]) == (
        "\n".join(lines)
    )


TYPED = CsvTable(("base", "name", "x"), ints={"base"}, text={"name"})


def test_a_typed_csv_table_gives_back_every_value_bit_for_bit(tmp_path):
    rows = [
        {"base": 0, "name": "grpo_n8", "x": 0.1 + 0.2},  # 0.30000000000000004, written in full
        {"base": 1, "name": "fgrpo_n8", "x": None},
        {"base": 2, "name": "a,b", "x": float("nan")},  # quoted text; NaN is a missing value
    ]
    path = TYPED.write(tmp_path / "sub" / "t.csv", rows)
    back = [row for _, row in TYPED.read(path)]
    assert back == [rows[0], rows[1], {**rows[2], "x": None}]
    assert back[0]["x"] == 0.1 + 0.2 and isinstance(back[0]["base"], int)
    assert [i for i, _ in TYPED.read(path)] == [2, 3, 4]  # the file's lines, header at 1
    assert not list((tmp_path / "sub").glob(".*"))  # atomic: no temporary left beside it


def test_a_typed_csv_table_refuses_a_missing_column_and_text_in_a_number(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("base,name\n0,a\n")
    with pytest.raises(ValueError, match=r"t\.csv is not a units file: no column 'x'"):
        list(TYPED.read(path, what="a units file"))
    assert [r for _, r in TYPED.read(path, required=("base",))] == [{"base": 0, "name": "a"}]
    path.write_text("base,name,x\n0,a,1.5\nzero,b,2\n")
    with pytest.raises(ValueError, match=r"t\.csv:3: a number column holds text"):
        list(TYPED.read(path))
    with pytest.raises(ValueError, match="'y' is not among the columns"):
        CsvTable(("a",), ints={"y"})
