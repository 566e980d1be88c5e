"""Every experiment's tables: markdown for the reports, typed CSV for the data behind them.

One place builds a GitHub-flavoured markdown table (:func:`markdown_table`) and writes a number
into a cell (:func:`cell`): the reports of ``countdown/`` and ``maze/`` call these, never a
hand-written ``|---|`` row. One object, :class:`CsvTable`, writes and reads the studies' per-unit
tables (``units.csv``): its columns in order, which hold ints and which text (every other one a
float), floats written in full so that the file gives back every number bit for bit.

    markdown_table(["run", "pass@1"], [["GRPO", 0.25], ["F-GRPO", None]])
    CsvTable(("base", "name", "pass1"), ints={"base"}, text={"name"}).write(path, rows)
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fgrpo_common.files import atomic_write_text

__all__ = ["MISSING", "CsvTable", "cell", "fmt", "markdown_table", "table_lines"]

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


@dataclass(frozen=True)
class CsvTable:
    """A CSV table of typed columns: ``columns`` in order; those in ``ints`` hold ints, those in
    ``text`` strings, every other one a float. A missing value (None, NaN, inf) is an empty
    cell and reads back as None."""

    columns: tuple[str, ...]
    ints: frozenset[str] = frozenset()
    text: frozenset[str] = frozenset()

    def __post_init__(self):
        object.__setattr__(self, "columns", tuple(self.columns))
        object.__setattr__(self, "ints", frozenset(self.ints))
        object.__setattr__(self, "text", frozenset(self.text))
        unknown = sorted((self.ints | self.text) - set(self.columns))
        if unknown:
            raise ValueError(f"the typed column {unknown[0]!r} is not among the columns")

    @staticmethod
    def format(value) -> str:
        """One cell: empty for a missing value, a float in full (``repr``), else ``str``."""
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return ""
        return repr(float(value)) if isinstance(value, float) else str(value)

    def parse(self, column: str, text: str):
        """One cell read back: None when empty, else the column's type (a ValueError on text
        in a number column)."""
        if text == "":
            return None
        if column in self.text:
            return text
        return int(text) if column in self.ints else float(text)

    def write(self, path, rows: list[dict]) -> Path:
        """Write ``rows`` (dicts; a key absent from a row is a missing value) atomically, with
        the header :attr:`columns`."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.columns)
        for r in rows:
            w.writerow([self.format(r.get(c)) for c in self.columns])
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        return atomic_write_text(path, buf.getvalue())

    def read(self, path, *, required: tuple[str, ...] | None = None,
             what: str = "table") -> Iterator[tuple[int, dict]]:  # fmt: skip
        """``(line, row)`` for each row of the file at ``path``, every column of the table that
        the header holds parsed to its type. A ValueError names the file when its header lacks
        a column of ``required`` (None: every column; ``what`` names the table in the message)
        or it is no CSV, and the file and line of a row with text in a number column."""
        path = Path(path)
        needed = self.columns if required is None else required
        with open(path, newline="", encoding="utf-8") as f:
            try:
                reader = csv.DictReader(f)
                header = reader.fieldnames or []
                missing = [c for c in needed if c not in header]
                if missing:
                    raise ValueError(f"{path} is not {what}: no column {missing[0]!r}")
                present = [c for c in self.columns if c in header]
                for i, raw in enumerate(reader, 2):
                    try:
                        row = {c: self.parse(c, raw.get(c) or "") for c in present}
                    except ValueError:
                        raise ValueError(f"{path}:{i}: a number column holds text") from None
                    yield i, row
            except csv.Error as err:
                raise ValueError(f"{path} is not a CSV file: {err}") from None
