"""``fgrpo_common.files``: a directory written atomically gets the mode a plain ``mkdir`` gives
(0o777 less the umask), replaces an existing one, and leaves nothing behind on an error."""

from __future__ import annotations

import os
import stat

import pytest

from fgrpo_common.files import atomic_directory


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_an_atomic_directory_is_readable_like_any_made_directory(tmp_path):
    target = tmp_path / "model"
    with atomic_directory(target) as tmp:
        (tmp / "weights.txt").write_text("1")
        (tmp / "private.bin").write_bytes(b"2")
        (tmp / "private.bin").chmod(0o600)  # as safetensors writes its files
    assert stat.S_IMODE(target.stat().st_mode) == 0o777 & ~_umask()
    assert (target / "weights.txt").read_text() == "1"
    assert stat.S_IMODE((target / "private.bin").stat().st_mode) == 0o666 & ~_umask()


def test_an_atomic_directory_replaces_the_old_one_and_an_error_keeps_it(tmp_path):
    target = tmp_path / "model"
    with atomic_directory(target) as tmp:
        (tmp / "a").write_text("old")
    with atomic_directory(target) as tmp:
        (tmp / "b").write_text("new")
    assert sorted(p.name for p in target.iterdir()) == ["b"]
    with pytest.raises(RuntimeError), atomic_directory(target) as tmp:
        (tmp / "c").write_text("half")
        raise RuntimeError("killed half-way")
    assert sorted(p.name for p in target.iterdir()) == ["b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_changed_settings_names_what_differs_from_the_saved_file(tmp_path):
    from fgrpo_common.files import changed_settings

    path = tmp_path / "config.json"
    assert changed_settings(path, {"a": 1}) == {}  # nothing saved yet
    path.write_text('{"a": 1, "b": [2, 3], "steps": 10}')
    now = {"a": 1, "b": [2, 4], "steps": 20, "new": None}
    assert changed_settings(path, now) == {"b": ([2, 3], [2, 4]), "steps": (10, 20)}
    assert changed_settings(path, now, free=("steps",)) == {"b": ([2, 3], [2, 4])}
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"must hold a JSON object; use another --out"):
        changed_settings(path, now, hint="; use another --out")
    path.write_text("{not json")
    with pytest.raises(ValueError, match="is not readable JSON"):
        changed_settings(path, now)


def test_a_kill_between_the_two_renames_loses_nothing(tmp_path, monkeypatch):
    """Interrupted right after the old directory was moved aside (before the new one took its
    place), NAME is missing and its contents sit in a temporary: the next clean-up (a resumed
    run's) puts them back instead of deleting them with the leftovers."""
    import fgrpo_common.files as files

    target = tmp_path / "model"
    target.mkdir()
    (target / "eval.json").write_text("{}")
    real, calls = os.replace, []

    def replace(src, dst):
        calls.append((src, dst))
        real(src, dst)
        if len(calls) == 1:  # the old directory is aside: the kill
            raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt), atomic_directory(target) as tmp:
        (tmp / "weights").write_text("new")
    monkeypatch.setattr(files.os, "replace", real)
    assert not target.exists()
    files.remove_stale_temporaries(tmp_path)
    assert (target / "eval.json").read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]  # the leftovers are gone
