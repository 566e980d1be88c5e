"""Files that are never half-written: each is written to a new temporary sibling
``.NAME.tmp-XXXX`` and renamed over ``NAME`` only once complete, so a reader (or a resumed run)
sees the old file or the new one, never a part. A failed write (a full disk) removes the
temporary file and raises.

- :func:`atomic_write`: ``write(fh)`` into a binary file handle (``np.savez``, bytes);
- :func:`atomic_write_text`: a text file;
- :func:`save_figure`: ``fig.savefig`` (matplotlib), the format taken from the suffix.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path

__all__ = ["TEMPORARY_MARK", "atomic_write", "atomic_write_text", "save_figure"]

#: What every temporary sibling's name holds: ``.NAME`` + TEMPORARY_MARK + random hex.
TEMPORARY_MARK = ".tmp-"


def _new_temporary_file(path: Path) -> tuple[Path, int]:
    """A new empty ``.NAME.tmp-*`` sibling of ``path`` and its descriptor, created with mode
    0o666 less the umask, as a plain ``open`` would (not ``tempfile.mkstemp``'s 0o600)."""
    while True:
        tmp = path.parent / f".{path.name}{TEMPORARY_MARK}{secrets.token_hex(6)}"
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue


def atomic_write(path, write: Callable) -> Path:
    """``write(fh)`` into a new temporary binary file next to ``path``, flushed to disk and
    renamed to ``path``. Creates the parent directory; returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, fd = _new_temporary_file(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # only still there when something failed
    return path


def atomic_write_text(path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; see :func:`atomic_write`."""
    data = text.encode("utf-8")
    return atomic_write(path, lambda fh: fh.write(data))


def save_figure(fig, path, **kwargs) -> Path:
    """``fig.savefig(path, **kwargs)`` atomically; the format is ``kwargs["format"]`` or the
    suffix of ``path``."""
    fmt = kwargs.pop("format", None) or (Path(path).suffix.lstrip(".") or None)
    return atomic_write(path, lambda fh: fig.savefig(fh, format=fmt, **kwargs))
