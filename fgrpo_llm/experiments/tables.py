"""Markdown tables and their cells for every experiment's report (pure formatting).

One place builds a GitHub-flavoured markdown table (:func:`markdown_table`) and writes a number
into a cell (:func:`cell`): the reports of ``countdown/`` and ``maze/`` call these, never a
hand-written ``|---|`` row.

    markdown_table(["run", "pass@1"], [["GRPO", 0.25], ["F-GRPO", None]])
"""

from __future__ import annotations

import math

__all__ = ["MISSING", "cell", "fmt", "markdown_table", "table_lines"]

#: The glyph of a missing value (None, NaN, inf) in a cell.
MISSING = "–"


def cell(x, digits: int = 3, *, missing: str = MISSING) -> str:
    """A value for a table cell: text as is, an int as written, a float with ``digits``
    decimals, a missing number (None, NaN, inf) as ``missing``."""
    if isinstance(x, str):
        return x
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return missing
    if isinstance(x, int) and not isinstance(x, bool):
        return str(x)
    return f"{x:.{digits}f}"


def fmt(x, digits: int = 3) -> str:
    """A number for a table cell; missing values become an en dash (:func:`cell`)."""
    return cell(x, digits)


def table_lines(headers: list[str], rows: list[list]) -> list[str]:
    """The lines of a markdown table: the header, the ``|---|`` rule, one line per row; floats
    and None through :func:`cell`, anything else ``str()``-ed."""

    def one(v):
        return cell(v) if isinstance(v, float) or v is None else str(v)

    lines = ["| " + " | ".join(headers) + " |", "".join("|---" for _ in headers) + "|"]
    return lines + ["| " + " | ".join(one(v) for v in row) + " |" for row in rows]


def markdown_table(headers: list[str], rows: list[list]) -> str:
    """A GitHub-flavoured markdown table (:func:`table_lines`) as one string."""
    return "\n".join(table_lines(headers, rows))
