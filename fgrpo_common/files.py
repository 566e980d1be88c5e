"""Files that are never half-written, JSON that any parser reads, and one process at a time in
a directory (the helpers both packages use; standard library only).

Every file is written to a new temporary sibling ``.NAME.tmp-XXXX`` and renamed over ``NAME``
only once complete, so a reader (or a resumed run) sees the old file or the new one, never a
part. A failed write (a full disk) removes the temporary file and raises.

- :func:`atomic_write`: ``write(fh)`` into a binary file handle (``np.savez``, bytes);
- :func:`atomic_write_text`: a text file; :func:`write_json`: strict JSON, atomically;
- :func:`save_figure`: ``fig.savefig`` (matplotlib), the format taken from the suffix;
- :func:`atomic_directory`: a directory built under a temporary name and renamed into place only
  when complete (checkpoints, saved models), replacing an existing one; a crash leaves either the
  old directory or the new one, plus at worst a ``.NAME.tmp-*`` sibling that
  :func:`remove_stale_temporaries` deletes;
- :func:`read_json`, :func:`read_jsonl`: a file's JSON, with clear errors naming file and line;
- :func:`changed_settings`, :func:`refuse_other_settings`: settings saved beside an output
  compared with new ones;
- :func:`strict_json`: ``json.dumps`` that writes NaN / Infinity as ``null`` (strict JSON);
- :func:`directory_lock`: one process at a time in a directory (``fcntl.flock`` on ``.lock``).

    from fgrpo_common.files import directory_lock, write_json
    with directory_lock("runs/x", what="run"):
        write_json("runs/x/summary.json", {"loss": float("nan")})  # {"loss": null}
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "TEMPORARY_MARK",
    "atomic_write",
    "atomic_write_text",
    "write_json",
    "save_figure",
    "atomic_directory",
    "check_not_working_directory",
    "writable_directory",
    "writable_file",
    "remove_stale_temporaries",
    "read_json",
    "read_jsonl",
    "changed_settings",
    "refuse_other_settings",
    "strict_json",
    "finite_or_none",
    "directory_lock",
    "DirectoryInUse",
]

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


def _temporary_prefix(path: Path) -> str:
    return f".{path.name}{TEMPORARY_MARK}"


def _new_temporary_directory(path: Path) -> Path:
    """A new empty ``.NAME.tmp-*`` sibling of ``path``, made with mode 0o777 less the umask, as
    a plain ``mkdir`` would (``tempfile.mkdtemp`` makes it 0o700, and the directory it becomes
    would be unreadable to anyone else)."""
    while True:
        tmp = path.parent / f"{_temporary_prefix(path)}{secrets.token_hex(6)}"
        try:
            tmp.mkdir(0o777)
            return tmp
        except FileExistsError:
            continue


def check_not_working_directory(path, flag: str = "path") -> None:
    """ValueError when ``path`` is the working directory or holds it: a directory written by
    ``atomic_directory`` is renamed as a whole, which the working directory cannot be."""
    here, target = Path.cwd().resolve(), Path(path).resolve()
    if target == here or target in here.parents:
        raise ValueError(
            f"{flag} {str(path)!r} is the working directory or holds it; give a subdirectory"
        )


@contextlib.contextmanager
def atomic_directory(path, *, carry=None):
    """``with atomic_directory(p) as tmp: <write files into tmp>``; on success ``tmp`` becomes
    ``p``.

    An existing ``p`` is moved aside just before the rename and deleted after it; on an exception
    the temporary directory is removed and ``p`` is left as it was. ``carry(name)`` (optional)
    picks the entries of the old ``p`` that the new one did not write to move into it after the
    rename (a user's notes, an evaluation beside a model, a held lock file: moved, not copied).
    """
    check_not_working_directory(path)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_temporary_directory(path)
    try:
        try:
            yield tmp
        except Exception as err:
            if _is_write_failure(err):  # safetensors reports a full disk as its own error
                raise OSError(f"could not write {path}: {err}") from err
            raise
        _plain_file_modes(tmp)
        old = None
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=_temporary_prefix(path), dir=path.parent)) / "old"
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None:
            for entry in old.iterdir() if carry is not None else ():
                if carry(entry.name) and not (path / entry.name).exists():
                    os.replace(entry, path / entry.name)
            shutil.rmtree(old.parent, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _plain_file_modes(folder: Path) -> None:
    """Give every file under ``folder`` the mode a plain ``open`` gives (0o666 less the umask):
    some writers (safetensors) make their files 0o600, unreadable to anyone else."""
    mask = os.umask(0)
    os.umask(mask)
    for f in folder.rglob("*"):
        if f.is_file() and not f.is_symlink():
            f.chmod(0o666 & ~mask)


def _is_write_failure(err: Exception) -> bool:
    """An error of a file writer that is an OSError in all but type (safetensors'
    ``SafetensorError`` on a full disk or a failed write)."""
    return not isinstance(err, OSError) and type(err).__name__ == "SafetensorError"


def writable_directory(path, *, what: str = "output directory") -> Path:
    """Create ``path`` (and its parents) and check that files can be written in it, before any long
    work starts: an OSError / ValueError naming ``what`` and the path otherwise."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{what} {path} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".write-test-", delete=True)
        probe.close()
    except OSError as err:
        raise OSError(
            f"{what} {path} is not writable ({err.strerror or type(err).__name__})"
        ) from None
    return path


def writable_file(path, *, what: str = "output file") -> Path:
    """Check, before any long work starts, that a file can be written at ``path``: not a
    directory, in a folder that is (or can be made) writable (``writable_directory``)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{what} {str(path)!r} is a directory; give a file path")
    writable_directory(path.parent, what=f"{what}'s folder")
    return path


def remove_stale_temporaries(directory) -> list[Path]:
    """Delete the ``.NAME.tmp-*`` leftovers of :func:`atomic_directory` / :func:`atomic_write_text`
    that a killed process left in ``directory``; returns what was removed.

    A process killed between :func:`atomic_directory`'s two renames left ``NAME`` missing and its
    previous contents in ``.NAME.tmp-*/old``: those are put back as ``NAME`` first (the new
    version may not be complete), so nothing is lost."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    for child in list(directory.iterdir()):
        if child.name.startswith(".") and TEMPORARY_MARK in child.name and (child / "old").is_dir():
            target = directory / child.name[1:].rsplit(TEMPORARY_MARK, 1)[0]
            if not target.exists():
                os.replace(child / "old", target)
    removed = []
    for child in directory.iterdir():
        if not (child.name.startswith(".") and TEMPORARY_MARK in child.name):
            continue
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
        removed.append(child)
    return removed


def read_json(path: Path):
    """The JSON value in the file ``path``; a ValueError naming it (and the kind of failure) when
    it is not readable JSON (not JSON, nested too deeply, not UTF-8 text)."""
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, RecursionError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not readable JSON ({type(err).__name__})") from None


def read_jsonl(path, *, what: str = "JSON lines file", partial_tail: bool = False) -> list[dict]:
    """One dict per non-empty line of ``path``.

    FileNotFoundError for a missing file; ValueError naming the file and line for a line that is
    not a JSON object (including one nested too deeply to parse). With ``partial_tail``, a last
    line that is not JSON and has no newline (a writer still at work, or one that stopped
    mid-line) is left out with a warning instead.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} not found: {path}")
    rows = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for i, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                if partial_tail and not raw.endswith("\n"):  # only the last line can lack one
                    warnings.warn(
                        f"{path}:{i} is an incomplete last line (its writer was still at work, "
                        "or stopped mid-line): left out",
                        stacklevel=2,
                    )
                    break
                raise ValueError(f"{path}:{i} is not JSON ({err.msg})") from None
            except RecursionError:
                raise ValueError(f"{path}:{i} is nested too deeply to read") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{i} must be a JSON object, got {type(row).__name__}")
            rows.append(row)
    return rows


def changed_settings(
    path, settings: dict, *, free=(), hint: str = "", section: str | None = None, since=()
) -> dict:
    """The settings that differ from the ones saved in the JSON object file ``path`` (a run's or
    an experiment's ``config.json``; with ``section``, the object under that key, as a rare set's
    ``meta``): ``{key: (saved, new)}`` for every key of ``settings`` outside ``free``; empty when
    no file was saved. A key of ``since`` (recorded only by later versions) that the file lacks is
    not a difference. A ValueError, ending in ``hint``, names a file that is not a JSON object.
    The one check a resumed run and a reused output directory both make."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        saved = json.loads(path.read_text())
    except (json.JSONDecodeError, RecursionError, UnicodeDecodeError):
        raise ValueError(f"{path} is not readable JSON{hint}") from None
    if section is not None and isinstance(saved, dict):
        saved = saved.get(section, {})
    if not isinstance(saved, dict):
        where = f"{path}'s {section!r}" if section is not None else str(path)
        raise ValueError(f"{where} must hold a JSON object{hint}")
    return {
        k: (saved.get(k), v)
        for k, v in sorted(settings.items())
        if k not in free and saved.get(k) != v and (k in saved or k not in since)
    }


def refuse_other_settings(
    path, settings: dict, *, free=(), what: str, advice: str, section=None, since=()
) -> None:
    """A ValueError ``{what} made with other settings: key=saved (now new), ...; {advice}`` when
    the settings saved in ``path`` differ from ``settings`` outside ``free``
    (:func:`changed_settings`, with its ``section`` and ``since``): what was made with them must
    not be reused, nor overwritten, under new ones."""
    diff = changed_settings(
        path, settings, free=free, hint="; use another --out", section=section, since=since
    )
    if diff:
        shown = ", ".join(f"{k}={old!r} (now {new!r})" for k, (old, new) in diff.items())
        raise ValueError(f"{what} made with other settings: {shown}; {advice}")


def finite_or_none(value):
    """``value`` with every non-finite float (NaN, inf), at any depth of dicts / lists / tuples,
    replaced by None; numpy and torch scalars (and arrays) become Python numbers (and lists), a
    dict key JSON has no type for its string."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):  # keys JSON has no type for (a tuple) as strings
        return {_json_key(k): finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    if hasattr(value, "tolist"):
        return finite_or_none(value.tolist())
    return value


def _json_key(key):
    return key if key is None or isinstance(key, (str, int, float, bool)) else str(key)


def strict_json(data, **kwargs) -> str:
    """``json.dumps`` of ``data`` with NaN / Infinity written as null, so every JSON parser reads
    it."""
    return json.dumps(finite_or_none(data), allow_nan=False, **kwargs)


def write_json(path, data) -> Path:
    """``data`` as strict JSON (:func:`strict_json`: NaN / inf as null; other objects by their
    ``str``), indented, written atomically; returns ``path``."""
    return atomic_write_text(path, strict_json(data, indent=1, default=str) + "\n")


# ------------------------------------------------------------------------- one process at a time

#: The locks this process holds (:func:`directory_lock`): (device, inode) -> nesting depth.
_HELD: dict[tuple[int, int], int] = {}


class DirectoryInUse(ValueError):
    """Another process holds the directory's lock."""


@contextlib.contextmanager
def directory_lock(directory, *, what: str = "run", lock_file: str | None = ".lock"):
    """Hold an exclusive lock (``fcntl.flock``) on ``directory/lock_file`` (created; the holder's
    pid written into it), or with ``lock_file=None`` on the directory itself (nothing written
    into it), while the block runs.

    The operating system releases it when the process ends, however it ends (``kill -9``
    included), so a stale lock never blocks a rerun. A second process raises
    :class:`DirectoryInUse` naming the holder's pid where it is known; the same process may
    enter again (re-entrant). The lock file stays (removing it would race with a process that
    has just opened it), except that a directory this call created is removed again when the
    block fails before anything else was written into it (a run refused at its first check
    leaves no empty run behind). Where there is no such lock (no ``fcntl``: Windows; a file
    system without ``flock``) the block runs unlocked."""
    directory = Path(directory)
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    fd, key = _lock(fcntl, directory, lock_file, what)
    if key is not None:
        _HELD[key] = _HELD.get(key, 0) + 1
    try:
        if fd is not None and lock_file:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    except BaseException:
        if created:
            _remove_if_only_the_lock(directory, lock_file)
        raise
    finally:
        if key is not None:
            _HELD[key] -= 1
            if not _HELD[key]:
                del _HELD[key]
        if fd is not None:
            _HELD_FDS.discard(fd)
            os.close(fd)  # releases the lock


def _lock(fcntl, directory: Path, lock_file: str | None, what: str):
    """``(fd, key)``: the descriptor now holding the lock and the locked file's (device, inode);
    fd None when this process holds it already, both None when the file system has no flock.
    Retried when the path names another file once locked (the old one was removed meanwhile)."""
    target = directory / lock_file if lock_file else directory
    while True:
        # O_CLOEXEC: a program the holder starts (exec) never gets the descriptor; a forked child
        # (a data-loader or pool worker) closes it at once (_HELD_FDS): a child that outlives a
        # killed holder must not keep the directory locked
        if lock_file:
            fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        else:
            fd = os.open(target, os.O_RDONLY | os.O_CLOEXEC)
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        if key in _HELD:  # this process holds it already
            os.close(fd)
            return None, key
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            if lock_file:  # the pid its holder wrote
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise DirectoryInUse(
                f"{directory} is in use by another {what}"
                + (f" (pid {holder})" if holder else "")
                + "; wait for it to end or choose another directory"
            ) from None
        except OSError:  # no flock on this file system: unlocked
            os.close(fd)
            return None, None
        try:
            same = os.path.samestat(st, os.stat(target))
        except FileNotFoundError:
            same = False
        if same:
            _HELD_FDS.add(fd)
            return fd, key
        os.close(fd)
        directory.mkdir(parents=True, exist_ok=True)


#: Descriptors of the locks this process holds (``directory_lock``).
_HELD_FDS: set[int] = set()


def _close_held_locks_in_child() -> None:
    """After a fork, in the child: close its copies of the held locks' descriptors. A flock
    belongs to the open file, which a forked child shares; closing the child's copy leaves the
    parent's lock in place, and a child that outlives its parent then holds nothing."""
    for fd in list(_HELD_FDS):
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD_FDS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_held_locks_in_child)


def _remove_if_only_the_lock(directory: Path, lock_file: str | None) -> None:
    """Remove ``directory`` if it holds nothing but the lock file (while the lock is still
    held)."""
    try:
        if [entry.name for entry in directory.iterdir()] == ([lock_file] if lock_file else []):
            if lock_file:
                (directory / lock_file).unlink()
            directory.rmdir()
    except OSError:
        pass  # something appeared meanwhile, or it is gone: leave it
