"""A full disk is one clear error and leaves nothing half-written: safetensors' own error while
writing weights (a checkpoint, the final model, a pretrained base) becomes an OSError (one line,
exit 2 from the CLI), and text files and figures leave neither an empty file nor a temporary."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

from fgrpo_common.files import atomic_write_text
from fgrpo_llm.cli import main
from fgrpo_llm.model import save_model_and_tokenizer

matplotlib.use("Agg")


def _full_disk_safetensors(monkeypatch):
    import transformers.modeling_utils as mu
    from safetensors import SafetensorError

    def full(*args, **kwargs):
        raise SafetensorError("Error while serializing: I/O error: No space left on device")

    monkeypatch.setattr(mu, "safe_save_file", full)


def test_weights_on_a_full_disk_are_an_oserror_and_leave_nothing(
    tiny_model, char_tokenizer, tmp_path, monkeypatch
):
    _full_disk_safetensors(monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        save_model_and_tokenizer(tiny_model, char_tokenizer, tmp_path / "model")
    assert list(tmp_path.iterdir()) == []


def test_train_on_a_full_disk_is_one_line(tiny_checkpoint, tmp_path, capsys, monkeypatch):
    _full_disk_safetensors(monkeypatch)
    argv = ["train", "--base", str(tiny_checkpoint), "--out", str(tmp_path / "run"), "--steps",
            "2", "--prompts-per-step", "2", "--group-size", "2", "--checkpoint-every", "1",
            "--no-progress"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left" in err[0] and "Traceback" not in err[0]
    assert not any(
        p.name.startswith(".") and "tmp" in p.name for p in (tmp_path / "run").rglob("*")
    )


def test_a_text_file_on_a_full_disk_leaves_nothing(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_text(tmp_path / "report.md", "x" * 1000)
    assert list(tmp_path.iterdir()) == []


def test_a_figure_that_fails_to_save_leaves_nothing(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from fgrpo_common.files import save_figure

    fig, _ = plt.subplots()

    def full(fh, **kwargs):  # writes part of the figure, then the disk is full
        fh.write(b"\x89PNG partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fig, "savefig", full)
    with pytest.raises(OSError):
        save_figure(fig, tmp_path / "plot.png", dpi=50)
    assert list(tmp_path.iterdir()) == []
    plt.close(fig)


def test_pretrain_on_a_real_full_disk(tmp_path):
    """A 256 KiB tmpfs (root only; skipped where mounting is not allowed): pretrain's base does
    not fit, the CLI says so in one line with exit 2 and leaves no partial base."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True
        ).returncode
    ):
        pytest.skip("cannot mount a small tmpfs here")
    try:
        cli = Path(sys.executable).parent / "fgrpo-llm"
        argv = [str(cli), "pretrain", "--out", str(mnt / "base"), "--steps", "2", "--no-progress"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        err = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert len(err) == 1 and "No space left" in err[0], err
        assert not (mnt / "base" / "model.safetensors").exists()
        assert not [p for p in mnt.rglob("*") if ".tmp" in p.name]
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
