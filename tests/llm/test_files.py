"""``fgrpo_llm.files``: a directory written atomically gets the mode a plain ``mkdir`` gives
(0o777 less the umask), replaces an existing one, and leaves nothing behind on an error."""

from __future__ import annotations

import os
import stat

import pytest

from fgrpo_llm.files import atomic_directory


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
    from fgrpo_llm.files import changed_settings

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
