"""One way to check a configuration: a table of field rules, applied in ``__post_init__``.

Every config dataclass of both packages declares a module-level table ``{field: rule}``
(``SimConfig``: ``SIM_RULES``, ``TrainConfig``: ``RULES``, ``PretrainConfig``: ``PRETRAIN_RULES``,
``DemoConfig``: ``DEMO_RULES``, ``MazeConfig``: ``MAZE_RULES``) and calls ``check_fields(self,
table)`` first thing in ``__post_init__``; only the rules between fields (correct < actions, ...)
are checked by hand after it. Each rule returns the field's value in its canonical type or raises
one ``ValueError`` naming the field and the value ("steps must be an integer >= 1, got
steps=0"; a bad item of a list is named as ``seeds[1]``). What every rule does the same way:

- numbers written as strings are read as numbers (PyYAML reads ``lr: 1e-4`` as the string
  "1e-4", and ``--set KEY=VALUE`` passes text); numpy scalars and 0-d arrays become Python
  numbers, and a 1-d array counts as a list;
- a bool is never taken for a number, and a float is never truncated to an integer;
- reals must be finite unless the rule says otherwise.

    RULES = {"steps": Integer(minimum=1), "lr": Real(minimum=0, open_low=True),
             "algo": Choice(("grpo", "dapo", "cispo")), "seeds": Sequence(Integer(minimum=0))}
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable
from typing import Any

__all__ = [
    "Rule",
    "Integer",
    "Real",
    "Choice",
    "Boolean",
    "Text",
    "Mapping",
    "Sequence",
    "Optional",
    "check_fields",
    "dataclass_from_dict",
]


class Rule:
    """A field rule: ``rule(name, value) -> canonical value``, or a ValueError naming both."""

    description = "valid"

    def __call__(self, name: str, value):
        raise NotImplementedError

    def fail(self, name: str, value):
        raise ValueError(f"{name} must be {self.description}, got {name}={_short(value)}")


#: Characters of a value's repr quoted in an error message (K initial logits would be pages).
_REPR_CHARS = 120


def _short(value) -> str:
    """repr(value), cut to a readable length."""
    text = repr(value)
    return text if len(text) <= _REPR_CHARS else text[: _REPR_CHARS - 3] + "..."


def _scalar(value):
    """A 0-d array (numpy's, or anything with ``ndim == 0`` and ``item()``) as its element."""
    if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):
        return value.item()
    return value


def _number(value):
    """``value`` as a Python int / float when it is a real number (or one written as text), else
    None."""
    value = _scalar(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return None


def _bound(x) -> str:
    """An integer bound written out in full (2**27, not 1.34218e+08), a real one with ``g``."""
    return str(x) if isinstance(x, int) else f"{x:g}"


def _bounds(minimum, maximum, open_low=False, open_high=False) -> str:
    parts = []
    if minimum is not None:
        parts.append(f"{'>' if open_low else '>='} {_bound(minimum)}")
    if maximum is not None:
        parts.append(f"{'<' if open_high else '<='} {_bound(maximum)}")
    return " and ".join(parts)


class Integer(Rule):
    """An integer within [minimum, maximum]."""

    def __init__(self, minimum: int | None = None, maximum: int | None = None):
        self.minimum, self.maximum = minimum, maximum
        bounds = _bounds(minimum, maximum)
        self.description = "an integer" + (f" {bounds}" if bounds else "")

    def __call__(self, name, value):
        value = _scalar(value)
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            x = int(value)
        elif isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            x = int(value)
        else:  # a float (even 3.0) is refused rather than truncated
            self.fail(name, value)
        if (self.minimum is not None and x < self.minimum) or (
            self.maximum is not None and x > self.maximum
        ):
            self.fail(name, value)
        return x


#: A random seed: an integer torch's and numpy's generators both take (0 ... 2**63 - 1).
SEED = Integer(0, 2**63 - 1)


class Real(Rule):
    """A real number within its bounds (finite unless ``finite=False``); an int is accepted."""

    def __init__(
        self,
        minimum: float | None = None,
        maximum: float | None = None,
        *,
        open_low: bool = False,
        open_high: bool = False,
        finite: bool = True,
    ):
        self.minimum, self.maximum, self.open_low, self.open_high, self.finite = (
            minimum,
            maximum,
            open_low,
            open_high,
            finite,
        )
        bounds = _bounds(minimum, maximum, open_low, open_high)
        self.description = ("a finite number" if finite else "a number") + (
            f" {bounds}" if bounds else ""
        )

    def __call__(self, name, value):
        x = _number(value)
        try:
            x = float(x) if x is not None else None
        except OverflowError:  # an integer beyond the float range (10**400)
            x = None
        if x is None or math.isnan(x) or (self.finite and not math.isfinite(x)):
            self.fail(name, value)
        lo, hi = self.minimum, self.maximum
        if lo is not None and (x <= lo if self.open_low else x < lo):
            self.fail(name, value)
        if hi is not None and (x >= hi if self.open_high else x > hi):
            self.fail(name, value)
        return x


class Choice(Rule):
    """One of a fixed set of values."""

    def __init__(self, options):
        self.options = tuple(options)
        self.description = f"one of {list(self.options)}"

    def __call__(self, name, value):
        if isinstance(value, bool) or value not in self.options:
            self.fail(name, value)
        return value


class Boolean(Rule):
    """True or False (never a number or a string)."""

    description = "true or false"

    def __call__(self, name, value):
        if not isinstance(value, bool):
            self.fail(name, value)
        return value


class Text(Rule):
    """A string (non-empty unless ``empty=True``)."""

    def __init__(self, *, empty: bool = False):
        self.empty = empty
        self.description = "a string" if empty else "a non-empty string"

    def __call__(self, name, value):
        if not isinstance(value, str) or (not self.empty and not value):
            self.fail(name, value)
        return value


class Mapping(Rule):
    """A dict (its contents are checked by whoever uses it)."""

    description = "a mapping"

    def __call__(self, name, value):
        if not isinstance(value, dict):
            self.fail(name, value)
        return value


class Sequence(Rule):
    """A list / tuple (or 1-d array) of items, each checked by ``item``, returned as a tuple;
    ``length``: exactly that many items."""

    def __init__(
        self,
        item: Rule,
        *,
        nonempty: bool = True,
        distinct: bool = False,
        length: int | None = None,
    ):
        self.item, self.nonempty, self.distinct, self.length = item, nonempty, distinct, length
        size = f"list of {length} values" if length is not None else "list"
        self.description = (
            ("a non-empty " if nonempty and length is None else "a ")
            + size
            + (" of distinct values" if distinct else "")
            + f", each {item.description}"
        )

    def __call__(self, name, value):
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
            self.fail(name, value)
        try:
            values = list(value)
        except TypeError:  # iterable in name only (a 0-d array)
            self.fail(name, value)
        items = tuple(self.item(f"{name}[{i}]", v) for i, v in enumerate(values))
        if (
            (self.nonempty and not items)
            or (self.distinct and len(set(items)) != len(items))
            or (self.length is not None and len(items) != self.length)
        ):
            self.fail(name, value)
        return items


class Optional(Rule):
    """None, or a value that ``rule`` accepts."""

    def __init__(self, rule: Rule):
        self.rule = rule
        self.description = f"None or {rule.description}"

    def __call__(self, name, value):
        if value is None:
            return None
        try:
            return self.rule(name, value)
        except ValueError as err:
            if str(err).startswith(f"{name}["):  # a bad item of a list names that item
                raise
            self.fail(name, value)


def check_fields(obj, rules: dict[str, Callable[[str, Any], Any]]) -> None:
    """Apply ``rules`` to the fields of the (frozen) dataclass ``obj``, in the table's order, and
    store each canonical value; the first bad field raises its ValueError."""
    for name, rule in rules.items():
        object.__setattr__(obj, name, rule(name, getattr(obj, name)))


def dataclass_from_dict(cls, data, *, what: str = "config"):
    """``cls(**data)`` for a config dataclass; a non-mapping or an unknown key is a ValueError
    naming it (typos never pass silently)."""
    if not isinstance(data, dict):
        raise ValueError(
            f"a {what} must be a mapping of field names to values, got {type(data).__name__}"
        )
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(map(str, data)) - known)
    if unknown:
        raise ValueError(f"unknown {what} key(s) {unknown}; known keys: {sorted(known)}")
    return cls(**data)
