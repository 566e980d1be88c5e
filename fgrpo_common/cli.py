"""What every subcommand of ``fgrpo-theory`` and ``fgrpo-llm`` shares: the parser, the runner that
turns bad input into one line and exit status 2, and the list / KEY=VALUE parsers of the flags.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable

_ROLE = re.compile(r":[a-z]+:`(~?)([^`]+)`")


def plain_text(doc: str) -> str:
    """A docstring as a terminal shows it: reST roles (:class:`~a.b.C` -> C, :func:`f` -> f) and
    double back-quotes (``x`` -> x) dropped, for a command's ``--help``."""
    doc = _ROLE.sub(lambda m: m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2), doc)
    return doc.replace("``", "")


class OneLineArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line on stderr and exit status 2
    (argparse's default prints the whole usage block first), and whose description (often a
    module's docstring) is shown as plain text (``plain_text``)."""

    def __init__(self, *args, description: str | None = None, **kwargs):
        super().__init__(
            *args, description=None if description is None else plain_text(description), **kwargs
        )

    def error(self, message: str):  # noqa: D102 - argparse API
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_command_parser(
    prog: str, description: str, modules: list[str]
) -> argparse.ArgumentParser:
    """A parser with one subcommand per module in ``modules`` (each exposes ``register``).

    Shared by ``fgrpo-theory`` and ``fgrpo-llm``.
    """
    parser = OneLineArgumentParser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineArgumentParser)
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


#: What every command turns into one stderr line and exit status 2: bad values (ValueError),
#: wrong types (TypeError), every file-system error (OSError: PermissionError,
#: IsADirectoryError, NotADirectoryError, FileNotFoundError, a full disk, ...) and a request
#: for more memory than there is (MemoryError: a file whose header claims a huge array, a huge
#: --iterations).
CLI_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError, OSError, MemoryError)


def error_line(err: BaseException) -> str:
    """The one-line text of an error: an OSError as 'reason: path', anything else as str(err)."""
    if isinstance(err, OSError) and err.strerror:
        names = [str(n) for n in (err.filename, err.filename2) if n is not None]
        text = f"{err.strerror}: {' -> '.join(names)}" if names else err.strerror
    else:
        text = str(err) or type(err).__name__
    return " ".join(text.split())  # one line, whatever the message held


def flag_hints(parser: argparse.ArgumentParser, command: str, text: str) -> str:
    """``text`` with the flag of every setting it names as ``name=value`` appended, where the
    text does not name that flag itself: a library error names its field (``max_steps=0``), the
    user typed a flag (``--steps 0``): ``... got max_steps=0 (max_steps is --steps)``."""
    sub = next(
        (a.choices.get(command) for a in parser._actions if isinstance(a.choices, dict)), None
    )
    hints = []
    for action in getattr(sub, "_actions", []):
        flags = [o for o in action.option_strings if o.startswith("--")]
        if not flags or any(flag in text for flag in flags):
            continue
        if re.search(rf"(?<![\w.-]){re.escape(action.dest)}=", text):
            hints.append(f"{action.dest} is {flags[0]}")
    return f"{text} ({'; '.join(hints)})" if hints else text


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def run_command(
    parser: argparse.ArgumentParser,
    argv: list[str] | None,
    *,
    errors: tuple[type[BaseException], ...] = CLI_ERRORS,
    interrupted: str = "interrupted",
) -> int:
    """Parse ``argv`` and run the chosen subcommand.

    ``CLI_ERRORS`` (ValueError, TypeError, OSError, MemoryError) and any extra types in
    ``errors`` become one line on stderr, ``PROG COMMAND: error: ...``, and exit status 2,
    never a traceback; KeyboardInterrupt becomes ``PROG: interrupted`` and exit status 130.
    """
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # the reader of stdout went away (``| head``): stop quietly
        _silence_stdout()
        return 141  # 128 + SIGPIPE, what a shell pipeline expects
    except CLI_ERRORS + tuple(errors) as err:
        text = flag_hints(parser, args.command, error_line(err))
        print(f"{parser.prog} {args.command}: error: {text}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{parser.prog}: {interrupted}", file=sys.stderr)
        return 130


def parse_list(flag: str, text: str, kind: Callable = float) -> tuple:
    """``"2,4,8"`` -> ``(2, 4, 8)`` with each item converted by ``kind`` (int, float, str);
    a ValueError naming ``flag`` and the text when an item does not convert or the list is empty."""
    items = [item.strip() for item in str(text).split(",") if item.strip()]
    try:
        values = tuple(kind(item) for item in items)
    except (TypeError, ValueError):
        raise ValueError(
            f"{flag} must be a comma-separated list of {getattr(kind, '__name__', kind)}s, "
            f"got {flag}={text!r}"
        ) from None
    if not values:
        raise ValueError(f"{flag} must not be empty, got {flag}={text!r}")
    return values


def parse_key_values(items: list[str], flag: str) -> dict:
    """``["seed=0", "path=x.jsonl"]`` -> ``{"seed": 0, "path": "x.jsonl"}``; each value is read as a
    YAML scalar (numbers, booleans, null, strings). A ValueError names ``flag`` and the bad item."""
    import yaml

    out = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} must look like KEY=VALUE, got {flag} {item!r}")
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ValueError(f"{flag} {item!r}: the value is not a readable scalar") from None
        if isinstance(parsed, (dict, list)):
            raise ValueError(
                f"{flag} {item!r}: the value must be a scalar, not a {type(parsed).__name__}"
            )
        out[key.strip().replace("-", "_")] = parsed
    return out
