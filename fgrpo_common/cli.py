"""What every subcommand of ``fgrpo-theory`` and ``fgrpo-llm`` shares: the parser (with
``--version``), the runner that turns bad input into one line and exit status 2, the list /
KEY=VALUE parsers of the flags, and the conventions of the one command-line surface:

- one name per concept; an old spelling stays a hidden alias that prints one deprecation line
  on stderr (:func:`add_deprecated_alias`);
- ``--json`` on every command that prints results (:func:`add_json_flag`): the command hands
  its result to :func:`json_result`, and the runner prints it as one strict JSON document on
  stdout once the command is done; whatever else the command prints goes to stderr meanwhile;
- ``--no-progress`` on every long command (:func:`add_progress_flag`): it sets ``TQDM_DISABLE``
  for the command (worker processes included), and every bar is off by itself when stderr is not
  a terminal (:func:`bar_disabled`, the ``disable`` of every bar).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from fgrpo_common import __version__, files

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
    parser.add_argument("--version", action="version", version=f"{prog} {__version__}")
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
        if re.search(rf"(?<![\w.-]){re.escape(action.dest)}(\[\d+\])?=", text):
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
    errors: tuple[type[BaseException], ...] | Callable[[], tuple] = CLI_ERRORS,
    interrupted: str = "interrupted",
) -> int:
    """Parse ``argv`` and run the chosen subcommand.

    ``CLI_ERRORS`` (ValueError, TypeError, OSError, MemoryError) and any extra types in
    ``errors`` (a tuple, or a function that returns one when an error is caught: the types of a
    module that only the command imports) become one line on stderr, ``PROG COMMAND: error:
    ...``, and exit status 2, never a traceback; KeyboardInterrupt becomes ``PROG: interrupted``
    and exit status 130. With ``--json`` the command's stdout goes to stderr and the runner
    prints the command's :func:`json_result` on stdout once it is done; with ``--no-progress``
    the command runs with ``TQDM_DISABLE=1``.
    """
    args = parser.parse_args(argv)
    _check_integer_flags(parser, args)
    try:
        with _progress_off(_no_progress(args)):
            if not getattr(args, "json", False):
                return int(args.func(args) or 0)
            args.json_deferred = True
            with stdout_to_stderr():
                status = int(args.func(args) or 0)
            if hasattr(args, "json_value"):
                print(strict_json(args.json_value), flush=True)
            return status
    except BrokenPipeError:  # the reader of stdout went away (``| head``): stop quietly
        _silence_stdout()
        return 141  # 128 + SIGPIPE, what a shell pipeline expects
    except Exception as err:
        extra = errors() if callable(errors) else errors
        if not isinstance(err, CLI_ERRORS + tuple(extra)):
            raise
        text = flag_hints(parser, args.command, error_line(err))
        print(f"{parser.prog} {args.command}: error: {text}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{parser.prog}: {interrupted}", file=sys.stderr)
        return 130


# ---------------------------------------------------------------------------------------------
# the conventions of the one surface: deprecated aliases, --json, --no-progress
# ---------------------------------------------------------------------------------------------


class _DeprecatedFlag(argparse.Action):
    """A hidden old spelling of a flag: stores like the flag, after one line on stderr."""

    def __init__(self, option_strings, dest, *, new: str, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None):
        print(
            f"{parser.prog}: warning: {option_string} is deprecated and will be removed in a "
            f"future release; use {self.new}",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def add_deprecated_alias(container, old: str, action: argparse.Action) -> argparse.Action:
    """Register ``old`` as a deprecated spelling of the valued flag ``action`` (what
    ``add_argument`` returned), on ``container`` (the parser, or the group ``action`` is in):
    hidden from ``--help``, it sets the same destination through the same type and choices, and
    prints ``PROG: warning: OLD is deprecated ...; use NEW`` on stderr."""
    return container.add_argument(
        old,
        action=_DeprecatedFlag,
        new=action.option_strings[0],
        dest=action.dest,
        type=action.type,
        choices=action.choices,
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )


def add_json_flag(parser: argparse.ArgumentParser, what: str = "the results") -> None:
    """``--json``: print ``what`` as one JSON document on stdout (and nothing else there)."""
    parser.add_argument(
        "--json",
        action="store_true",
        help=f"print {what} as one JSON document on stdout instead of text (NaN and infinity "
        "as null; every other line goes to stderr)",
    )


def add_progress_flag(parser: argparse.ArgumentParser, **kwargs) -> argparse.Action:
    """``--no-progress``: no progress bars (they are off anyway when stderr is not a
    terminal). ``kwargs`` go to ``add_argument`` (e.g. ``dest`` / ``default``)."""
    kwargs.setdefault("action", "store_true")
    kwargs.setdefault("help", "no progress bars (off anyway when stderr is not a terminal)")
    return parser.add_argument("--no-progress", **kwargs)


def json_result(args: argparse.Namespace, value) -> int:
    """Hand a command's result to ``--json``: the runner prints it on stdout when the command is
    done (``run_command``); a command called without the runner prints it here. Returns 0, the
    command's exit status."""
    if getattr(args, "json_deferred", False):
        args.json_value = value
    else:
        print(strict_json(value))
    return 0


def strict_json(value) -> str:
    """JSON that every parser reads (``fgrpo_common.files.strict_json``: NaN and infinity
    written as null, numpy scalars and arrays as numbers and lists), paths and any other object
    JSON has no type for as strings."""
    return files.strict_json(value, default=str)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send everything written to stdout, by Python (``sys.stdout``) and by any process started
    meanwhile (file descriptor 1), to stderr until the block ends."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:  # the process's own descriptors (also when sys.stdout is another stream, a test's)
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no descriptor 1 or 2 (a daemon): Python's stdout only
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _no_progress(args: argparse.Namespace) -> bool:
    """Whether the command line asked for no progress bars (``--no-progress``, whatever its
    destination)."""
    return bool(getattr(args, "no_progress", False)) or getattr(args, "progress", None) is False


def bar_disabled(progress: bool = True) -> bool | None:
    """tqdm's ``disable`` for a bar the caller would show when ``progress``: True when not
    ``progress`` or when ``TQDM_DISABLE`` is set (to anything but empty, 0 or false), else None,
    which tqdm reads as "off when the bar's stream is not a terminal"."""
    if not progress:
        return True
    if os.environ.get("TQDM_DISABLE", "").strip().lower() not in ("", "0", "false"):
        return True
    return None


@contextlib.contextmanager
def _progress_off(off: bool) -> Iterator[None]:
    """``TQDM_DISABLE=1`` in the environment while the block runs (when ``off``): every bar of
    the command, in this process and in its worker processes, stays off."""
    if not off:
        yield
        return
    before = os.environ.get("TQDM_DISABLE")
    os.environ["TQDM_DISABLE"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TQDM_DISABLE", None)
        else:
            os.environ["TQDM_DISABLE"] = before


#: Every integer flag of every command lies in int64 (numpy, torch and the run records hold it);
#: a command bounds its own flags more tightly where it has a reason.
INT_FLAG_LIMIT = 2**63


def _check_integer_flags(parser: argparse.ArgumentParser, args) -> None:
    """Refuse (one line, exit status 2, before the command runs) an integer flag outside int64:
    ``--seeds 18446744073709551616`` would otherwise pass argparse and fail, or wrap, later."""
    sub = next(
        (a.choices.get(args.command) for a in parser._actions if isinstance(a.choices, dict)), None
    )
    for action in getattr(sub, "_actions", []):
        value = getattr(args, action.dest, None)
        if action.type is int and isinstance(value, int) and not isinstance(value, bool):
            if not -INT_FLAG_LIMIT <= value < INT_FLAG_LIMIT:
                flag = next((o for o in action.option_strings if o.startswith("--")), action.dest)
                sub.error(f"{flag} must be below 2^63 in size, got {flag}={value}")


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


#: The most worker processes a command starts (a typo such as --workers 100000 is refused
#: before anything is written, rather than failing to fork later).
MAX_WORKERS = 1024


def check_path_flag(flag: str, value) -> str:
    """``value`` when it names a path: an empty or blank text (an unset shell variable) would
    write into the working directory, and a NUL byte names no file; a ValueError naming
    ``flag`` otherwise."""
    text = "" if value is None else str(value)
    if not text.strip():
        raise ValueError(f"{flag} must name a path, got {flag}={text!r}")
    if "\0" in text:
        raise ValueError(f"{flag} must not hold a NUL byte, got {flag}={text!r}")
    return text


def check_int_flag(flag: str, value, *, minimum: int, maximum: int) -> int:
    """``value`` as an int in [minimum, maximum]; a ValueError naming ``flag`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{flag} must be an integer, got {flag}={value!r}")
    if not minimum <= value <= maximum:
        raise ValueError(f"{flag} must be in {minimum}..{maximum}, got {flag}={value}")
    return value


def check_int_list(flag: str, values, *, minimum: int, maximum: int) -> tuple:
    """Every entry an int in [minimum, maximum], none twice; a ValueError naming ``flag`` and
    the first bad entry otherwise."""
    values = tuple(values)
    for v in values:
        check_int_flag(flag, v, minimum=minimum, maximum=maximum)
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise ValueError(f"{flag} lists {twice[0]} twice, got {flag}={','.join(map(str, values))}")
    return values


def check_output_directory(flag: str, path) -> Path:
    """Check, without creating anything, that ``path`` is (or can be made) a directory to write
    in: not a file, and its nearest existing folder writable. A command checks this with its
    other arguments, and makes the directory only once every input has been read."""
    import os

    path = Path(check_path_flag(flag, path))
    if path.exists() and not path.is_dir():
        raise ValueError(f"{flag} {str(path)!r} exists and is not a directory")
    folder = path
    while not folder.exists():
        if folder.parent == folder:
            break
        folder = folder.parent
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{flag} {str(path)!r}: {str(folder)!r} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {str(path)!r}: cannot write in {str(folder)!r}")
    return path


@contextlib.contextmanager
def output_directory(path):
    """Make ``path`` (with its parents) for the block; when the block fails, remove again every
    folder this call made (a failed command leaves no empty or partial output behind). An
    existing directory is left as it is."""
    path = Path(path)
    made = []
    folder = path
    while not folder.exists():
        made.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    path.mkdir(parents=True, exist_ok=True)
    try:
        yield path
    except BaseException:
        if made:
            shutil.rmtree(made[-1], ignore_errors=True)
        raise
