"""The one table module of the experiments (``fgrpo_llm.experiments.tables``): a cell writes a
number with its digits and a missing one as the one glyph; a table is its header, the rule and
one line per row."""

import math

import pytest

from fgrpo_llm.experiments.tables import MISSING, cell, fmt, markdown_table, table_lines


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
