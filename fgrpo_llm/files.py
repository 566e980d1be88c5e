"""Files that are never half-written, and JSON that any parser reads.

- :func:`atomic_write_text`: a text file through a temporary sibling and a rename
  (``fgrpo_common.files``'s, which both packages use).
- :func:`atomic_directory`: a directory built under a temporary name and renamed into place only
  when complete (checkpoints, saved models), replacing an existing one; a crash leaves either the
  old directory or the new one, plus at worst a ``.NAME.tmp-*`` sibling that
  :func:`remove_stale_temporaries` deletes.
- :func:`read_json`: the JSON value of a file, a ValueError naming the file when it is not JSON.
- :func:`read_jsonl`: one dict per line, with clear errors naming the file and line.
- :func:`strict_json`: ``json.dumps`` that writes NaN / Infinity as ``null`` (strict JSON).
- :func:`directory_lock`: one process at a time in a run directory (an OS lock on ``.lock``).
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
from pathlib import Path

from fgrpo_common.files import TEMPORARY_MARK, atomic_write_text

__all__ = [
    "atomic_write_text",
    "atomic_directory",
    "writable_directory",
    "remove_stale_temporaries",
    "read_json",
    "read_jsonl",
    "changed_settings",
    "strict_json",
    "finite_or_none",
    "directory_lock",
    "DirectoryInUse",
]


class DirectoryInUse(ValueError):
    """Another process holds the directory's lock."""


@contextlib.contextmanager
def directory_lock(directory, *, what: str = "run"):
    """Hold an exclusive lock on ``directory/.lock`` (``fcntl.flock``) while the block runs.

    The operating system releases it when the process ends, however it ends (``kill -9``
    included), so a stale lock never blocks a rerun. A second process raises
    :class:`DirectoryInUse` naming the holder's pid (written into the file). The file stays
    (removing it would race with a process that has just opened it), except that a directory
    this call created is removed again when the block fails before anything else was written
    into it (a run refused at its first check leaves no empty run behind). Where ``fcntl`` does
    not exist (Windows) the block runs unlocked."""
    directory = Path(directory)
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    # O_CLOEXEC: a program the holder starts (exec) never gets the descriptor; a forked child
    # (a data-loader or pool worker) closes it at once (_HELD_LOCKS): a child that outlives a
    # killed holder must not keep the run locked
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            raise DirectoryInUse(
                f"{directory} is in use by another {what} (pid {holder}); wait for it to end "
                "or choose another directory"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _HELD_LOCKS.add(fd)
        try:
            yield
        except BaseException:
            if created:
                _remove_if_only_the_lock(directory)
            raise
    finally:
        _HELD_LOCKS.discard(fd)
        os.close(fd)  # releases the lock


#: Descriptors of the locks this process holds (``directory_lock``).
_HELD_LOCKS: set[int] = set()


def _close_held_locks_in_child() -> None:
    """After a fork, in the child: close its copies of the held locks' descriptors. A flock
    belongs to the open file, which a forked child shares; closing the child's copy leaves the
    parent's lock in place, and a child that outlives its parent then holds nothing."""
    for fd in list(_HELD_LOCKS):
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD_LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_held_locks_in_child)


def _remove_if_only_the_lock(directory: Path) -> None:
    """Remove ``directory`` if it holds nothing but ``.lock`` (while the lock is still held)."""
    try:
        if [entry.name for entry in directory.iterdir()] == [".lock"]:
            (directory / ".lock").unlink()
            directory.rmdir()
    except OSError:
        pass  # something appeared meanwhile, or it is gone: leave it


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
    replaced by None; numpy and torch scalars become Python numbers."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    if hasattr(value, "tolist"):
        return finite_or_none(value.tolist())
    return value


def strict_json(data, **kwargs) -> str:
    """``json.dumps`` of ``data`` with NaN / Infinity written as null, so every JSON parser reads
    it."""
    return json.dumps(finite_or_none(data), allow_nan=False, **kwargs)
