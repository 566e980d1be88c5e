"""One process at a time in a run directory (``fgrpo_common.files.directory_lock``): a second
``fgrpo-llm train`` on the same ``--out`` (``--resume`` included) refuses with one line naming
the holder, and a lock held by a killed process does not block the next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fgrpo_common.files import DirectoryInUse, directory_lock
from fgrpo_llm.cli import main

ROOT = Path(__file__).resolve().parents[2]
HOLD = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from fgrpo_common.files import directory_lock\n"
    "with directory_lock(sys.argv[1]):\n"
    "    Path(sys.argv[2]).write_text('held')\n"
    "    time.sleep(120)\n"
)


def _holder(directory: Path, flag: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(directory), str(flag)], cwd=ROOT)
    for _ in range(600):
        if flag.exists():
            return proc
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the lock holder did not start")


def test_a_second_process_is_refused_and_a_killed_holder_frees_the_directory(tmp_path):
    run = tmp_path / "run"
    proc = _holder(run, tmp_path / "flag")
    try:
        with pytest.raises(DirectoryInUse, match=rf"pid {proc.pid}"):
            with directory_lock(run):
                pass
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with directory_lock(run):  # the OS released the dead holder's lock
        pass


@pytest.mark.parametrize("resume", [False, True])
def test_train_on_a_directory_in_use_is_one_line(tiny_checkpoint, tmp_path, capsys, resume):
    run = tmp_path / "run"
    argv = ["train", "--base", str(tiny_checkpoint), "--out", str(run), "--steps", "1",
            "--prompts-per-step", "2", "--group-size", "2", "--no-progress"]  # fmt: skip
    if resume:  # a run to resume, then another process in it
        assert main(argv) == 0
        argv = ["train", "--out", str(run), "--steps", "2", "--resume", "--no-progress"]
    before = sorted(p.name for p in run.iterdir()) if run.exists() else [".lock"]
    capsys.readouterr()
    proc = _holder(run, tmp_path / "flag")
    try:
        assert main(argv) == 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"pid {proc.pid}" in err[0] and "Traceback" not in err[0]
    assert sorted(p.name for p in run.iterdir()) == before  # nothing of a run written


@pytest.mark.parametrize(
    "argv",
    [
        ["pretrain", "--steps", "2", "--no-progress"],
        ["demo", "--fast"],
        ["study", "--fast", "--seeds", "0"],
        ["maze", "--preset", "reduced", "--no-progress"],
    ],
)
def test_pipelines_refuse_an_output_directory_in_use(tmp_path, capsys, argv):
    """pretrain, demo, study and maze own their output directory too."""
    out = tmp_path / "out"
    proc = _holder(out, tmp_path / "flag")
    try:
        assert main([*argv, "--out", str(out)]) == 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"pid {proc.pid}" in err[0], err
    assert sorted(p.name for p in out.iterdir()) == [".lock"]


def test_a_directory_the_lock_made_goes_again_when_the_block_fails_at_once(tmp_path):
    """A run refused at its first check leaves no directory holding only the lock file; one
    that wrote something, or a directory that was there before, stays."""
    fresh = tmp_path / "fresh"
    with pytest.raises(ValueError, match="refused"), directory_lock(fresh):
        raise ValueError("refused")
    assert not fresh.exists()
    wrote = tmp_path / "wrote"
    with pytest.raises(ValueError), directory_lock(wrote):
        (wrote / "metrics.jsonl").write_text("{}\n")
        raise ValueError("later")
    assert (wrote / "metrics.jsonl").is_file()
    there = tmp_path / "there"
    there.mkdir()
    with pytest.raises(ValueError), directory_lock(there):
        raise ValueError("refused")
    assert there.is_dir()
    with directory_lock(fresh):  # a block that ends well keeps its directory
        pass
    assert (fresh / ".lock").is_file()


def test_a_run_directory_given_as_a_model_names_its_policy(tiny_checkpoint, tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", "--base", str(tiny_checkpoint), "--out", str(run), "--steps", "1",
            "--prompts-per-step", "2", "--group-size", "2", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    for cmd in (
        ["eval", "--model", str(run), "--samples", "2"],
        ["train", "--base", str(run), "--out", str(tmp_path / "again"), "--steps", "1"],
    ):
        assert main(cmd) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"its policy is {run / 'model'}" in err[0], err
    assert not (tmp_path / "again").exists()


FORK_AND_DIE = (
    "import os, sys, time\n"
    "from pathlib import Path\n"
    "from fgrpo_common.files import directory_lock\n"
    "with directory_lock(sys.argv[1]):\n"
    "    if os.fork() == 0:  # a worker that outlives the trainer\n"
    "        Path(sys.argv[3]).write_text(str(os.getpid()))\n"
    "        time.sleep(60)\n"
    "        os._exit(0)\n"
    "    Path(sys.argv[2]).write_text('held')\n"
    "    time.sleep(120)\n"
)


def test_a_child_that_outlives_a_killed_holder_does_not_keep_the_lock(tmp_path):
    """A forked worker (a data loader, a pool) shares the holder's open lock file: it closes
    its copy at the fork, so killing the holder frees the run though the worker lives on."""
    run, flag, child = tmp_path / "run", tmp_path / "held", tmp_path / "child"
    proc = subprocess.Popen(
        [sys.executable, "-c", FORK_AND_DIE, str(run), str(flag), str(child)], cwd=ROOT
    )
    try:
        for _ in range(600):
            if flag.exists() and child.exists() and child.read_text():
                break
            time.sleep(0.05)
        with pytest.raises(DirectoryInUse):
            with directory_lock(run):
                pass
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        with directory_lock(run):  # the worker still runs, the lock is free
            pass
    finally:
        proc.kill()
        if child.exists() and child.read_text():
            try:
                os.kill(int(child.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
