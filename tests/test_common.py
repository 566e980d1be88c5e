"""The plumbing both packages share (``fgrpo_common``): the process pool, the directory lock in
its folder mode (the simulator's sweep lock) and its re-entrance, the timer."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fgrpo_common.files import DirectoryInUse, directory_lock
from fgrpo_common.pool import as_finished
from fgrpo_common.timer import Timer

ROOT = Path(__file__).resolve().parents[1]


def _square_or_fail(x: int) -> int:
    if x < 0:
        raise ArithmeticError(f"job {x} failed")
    return x * x


def test_the_pool_yields_every_job_once_and_a_failed_job_raises():
    jobs = [(x,) for x in range(6)]
    assert sorted(as_finished(_square_or_fail, jobs, workers=2, spawn=False)) == [
        x * x for x in range(6)
    ]
    assert list(as_finished(_square_or_fail, [], workers=2)) == []
    with pytest.raises(ArithmeticError, match="job -1 failed"):
        list(as_finished(_square_or_fail, [(1,), (-1,), (2,)], workers=1, spawn=False))


HOLD = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from fgrpo_theory.sim.sweep import sweep_lock\n"
    "with sweep_lock(sys.argv[1]):\n"
    "    Path(sys.argv[2]).write_text('held')\n"
    "    time.sleep(120)\n"
)


def test_a_sweep_folder_is_held_without_a_file_in_it_and_re_entered_by_its_holder(tmp_path):
    from fgrpo_theory.sim.sweep import sweep_lock

    folder, flag = tmp_path / "sweep", tmp_path / "flag"
    with sweep_lock(folder), sweep_lock(folder):  # re-entrant within a process
        assert list(folder.iterdir()) == []  # the folder itself is locked: nothing written
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), str(flag)], cwd=ROOT)
    try:
        for _ in range(600):
            if flag.exists():
                break
            time.sleep(0.05)
        with pytest.raises(DirectoryInUse, match="in use by another sweep"), sweep_lock(folder):
            pass
        with pytest.raises(DirectoryInUse), directory_lock(folder, lock_file=None):
            pass
    finally:
        proc.kill()
        proc.wait()
    with sweep_lock(folder):  # the OS released the killed holder's lock
        pass


def test_the_run_lock_is_re_entrant_within_its_process(tmp_path):
    with directory_lock(tmp_path / "run"):
        with directory_lock(tmp_path / "run"):
            pass
        assert (tmp_path / "run" / ".lock").read_text() == f"{os.getpid()}\n"


def test_the_timer_measures_between_marks():
    timer = Timer()
    time.sleep(0.02)
    timer.mark("slept")
    assert timer.seconds("start", "slept") >= 0.02
    assert timer.seconds() >= timer.seconds("start", "slept") >= timer.seconds("slept", "slept")
    assert timer.cpu() >= 0.0
