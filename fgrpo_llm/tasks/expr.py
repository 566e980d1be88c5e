"""A safe arithmetic parser and evaluator (no ``eval``) for the Countdown verifier.

Grammar (integers, ``+ - * /``, parentheses, optional unary minus)::

    expr   := term (("+" | "-") term)*
    term   := factor (("*" | "/") factor)*
    factor := NUMBER | "(" expr ")" | "-" factor

Values are exact ``fractions.Fraction``; division by zero gives ``value = None``.
Anything else (unknown characters, unbalanced parentheses, trailing text, over-long
input) raises :class:`ExprError`, a ``ValueError`` naming the offending text. The
verifier (``tasks/countdown.py``) turns that into reward 0.

    >>> parse_expression("3*5+7").value
    Fraction(22, 1)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

#: Longest accepted expression (characters) and number literal (digits): bounds the work
#: and the size of the integers a policy can make us multiply.
MAX_CHARS = 256
MAX_DIGITS = 18
_MAX_DEPTH = 64

#: A number is ASCII digits only: \d would also take "４" or "٤" (Unicode digits), other spellings
#: of the same answer.
_TOKEN = re.compile(r"\s*(?:([0-9]+)|([-+*/()]))")


class ExprError(ValueError):
    """A malformed arithmetic expression."""


@dataclass(frozen=True)
class ParsedExpression:
    """The result of :func:`parse_expression`."""

    value: Fraction | None
    """Exact value, or None after a division by zero."""
    numbers: tuple[int, ...]
    """The number literals in order of appearance."""
    operators: frozenset[str]
    """The binary operators used, a subset of ``{"+", "-", "*", "/"}``."""
    parenthesised: bool
    """True when the expression contains parentheses."""
    unary_minus: bool
    """True when a unary minus appears."""
    canonical: str
    """The tokens joined without whitespace, e.g. ``"3*5+7"`` for ``" 3 * 5+ 7"``."""


def tokenize(text: str) -> list[str]:
    """Split ``text`` into number and operator tokens; raises ExprError on anything else."""
    if not isinstance(text, str):
        raise ExprError(f"expression must be a string, got {type(text).__name__}")
    if len(text) > MAX_CHARS:
        raise ExprError(f"expression longer than {MAX_CHARS} characters: {text[:40]!r}...")
    tokens, pos, end = [], 0, len(text.rstrip())
    while pos < end:
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ExprError(f"unexpected character {text[pos : pos + 1]!r} at {pos} in {text!r}")
        number = match.group(1)
        if number is not None and len(number) > MAX_DIGITS:
            raise ExprError(f"number literal longer than {MAX_DIGITS} digits in {text!r}")
        tokens.append(number if number is not None else match.group(2))
        pos = match.end()
    if not tokens:
        raise ExprError(f"empty expression {text!r}")
    return tokens


class _Parser:
    """Recursive-descent parser over a token list; evaluates as it parses."""

    def __init__(self, tokens: list[str], text: str):
        self.tokens, self.text, self.i = tokens, text, 0
        self.numbers: list[int] = []
        self.operators: set[str] = set()
        self.parenthesised = False
        self.unary_minus = False
        self.div_by_zero = False

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ExprError(f"unexpected end of expression {self.text!r}")
        self.i += 1
        return token

    def expr(self, depth: int) -> Fraction:
        value = self.term(depth)
        while self.peek() in ("+", "-"):
            op = self.take()
            self.operators.add(op)
            rhs = self.term(depth)
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self, depth: int) -> Fraction:
        value = self.factor(depth)
        while self.peek() in ("*", "/"):
            op = self.take()
            self.operators.add(op)
            rhs = self.factor(depth)
            if op == "*":
                value = value * rhs
            elif rhs == 0:
                self.div_by_zero = True
                value = Fraction(0)
            else:
                value = value / rhs
        return value

    def factor(self, depth: int) -> Fraction:
        if depth > _MAX_DEPTH:
            raise ExprError(f"expression nested deeper than {_MAX_DEPTH} in {self.text!r}")
        token = self.take()
        if token.isascii() and token.isdigit():
            self.numbers.append(int(token))
            return Fraction(int(token))
        if token == "(":
            self.parenthesised = True
            value = self.expr(depth + 1)
            if self.take() != ")":
                raise ExprError(f"missing ')' in {self.text!r}")
            return value
        if token == "-":
            self.unary_minus = True
            return -self.factor(depth + 1)
        raise ExprError(f"unexpected token {token!r} in {self.text!r}")


def parse_expression(text: str) -> ParsedExpression:
    """Parse and evaluate ``text`` exactly; raises :class:`ExprError` when malformed."""
    tokens = tokenize(text)
    parser = _Parser(tokens, text)
    value = parser.expr(0)
    if parser.peek() is not None:
        raise ExprError(f"trailing text {''.join(tokens[parser.i :])!r} in {text!r}")
    return ParsedExpression(
        value=None if parser.div_by_zero else value,
        numbers=tuple(parser.numbers),
        operators=frozenset(parser.operators),
        parenthesised=parser.parenthesised,
        unary_minus=parser.unary_minus,
        canonical="".join(tokens),
    )
