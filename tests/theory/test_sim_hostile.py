"""The simulator under careless or hostile use: results of two configs never mixed (a sweep killed
between its two result files, two sweeps into one folder, torch results saved by hand), the
arguments of a cached sweep checked all the same, a policy that leaves float64's range refused
with a ValueError in every engine (not NaN in the CSV, a traceback or a corrupted heap), and the
worker processes of a killed sweep ending with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pytest

import fgrpo_theory.sim.sweep as sweep
from fgrpo_theory.cli import main
from fgrpo_theory.sim import SimConfig, run_cached, run_sweep

CFG = SimConfig(
    actions=200, correct=20, group_sizes=(4,), gammas=(0.0,), seeds=(0,), steps=20, lr=0.01
)
TINY = ["--actions", "200", "--correct", "20", "--group-size", "4", "--gamma", "0"]
TINY += ["--steps", "5", "--workers", "1", "--no-progress"]


def test_a_sweep_killed_between_its_two_result_files_is_not_taken_for_the_old_config(
    tmp_path, monkeypatch
):
    """OUT holds config A's results; a sweep of B into it dies after writing simulation.npz and
    before simulation_config.json: a rerun of A must not load B's records as A's."""
    a, b = CFG, replace(CFG, lr=0.5)
    want = run_cached(a, tmp_path, progress=False).csv_text()
    real = sweep._write_text

    def killed(path, text):
        if path.name == "simulation_config.json":
            raise KeyboardInterrupt
        return real(path, text)

    monkeypatch.setattr(sweep, "_write_text", killed)
    with pytest.raises(KeyboardInterrupt):
        run_cached(b, tmp_path, progress=False)
    monkeypatch.setattr(sweep, "_write_text", real)
    assert run_sweep(b, progress=False).csv_text() != want  # the two configs differ
    assert run_cached(a, tmp_path, progress=False).csv_text() == want


def _hold(folder):
    """Lock ``folder`` as another process's sweep would (an open file description of its own)."""
    fcntl = pytest.importorskip("fcntl")
    fd = os.open(folder, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_a_folder_in_use_by_another_sweep_is_refused_before_anything_is_touched(tmp_path, capsys):
    """Two sweeps into one OUT (or one checkpoint folder) would mix their runs in partial/: the
    second is refused with one line, and the first one's files stay as they are."""
    out = tmp_path / "out"
    out.mkdir()
    fd = _hold(out)
    try:
        with pytest.raises(ValueError, match="in use"):
            run_cached(CFG, out, progress=False)
        assert list(out.iterdir()) == []
        assert main(["simulate", *TINY, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "in use" in err
    finally:
        os.close(fd)
    ck = tmp_path / "ck"
    run_sweep(CFG, progress=False, checkpoint=ck)
    before = sorted(p.name for p in ck.iterdir())
    fd = _hold(ck)
    try:
        with pytest.raises(ValueError, match="in use"):
            run_sweep(replace(CFG, lr=0.5), progress=False, checkpoint=ck)
    finally:
        os.close(fd)
    assert sorted(p.name for p in ck.iterdir()) == before
    assert run_cached(CFG, out, progress=False).csv_text()  # free again


def test_a_cached_sweep_still_checks_its_arguments(tmp_path):
    run_cached(CFG, tmp_path, progress=False)
    for bad in (
        dict(engine="bogus"),
        dict(engine=None),
        dict(workers=0),
        dict(workers="x"),
        dict(engine="dense", device="cuda"),
    ):
        with pytest.raises((ValueError, TypeError)):
            run_cached(CFG, tmp_path, progress=False, **bad)
    with pytest.raises(ValueError, match="device"):
        run_sweep(CFG, progress=False, engine="dense", device="cuda")


def test_torch_results_saved_by_hand_are_not_loaded_as_the_numpy_engines(tmp_path):
    pytest.importorskip("torch")
    cfg = replace(CFG, group_sizes=(64,))
    run_sweep(cfg, engine="torch", device="cpu", progress=False).save(tmp_path)
    assert sweep.load_cached(cfg, tmp_path) is None
    assert sweep.load_cached(cfg, tmp_path, engine="torch") is not None
    numpy = run_sweep(cfg, progress=False)
    assert run_cached(cfg, tmp_path, progress=False).csv_text() == numpy.csv_text()


def test_initial_logits_further_apart_than_float64_reaches_are_refused():
    with pytest.raises(ValueError, match="logits"):
        SimConfig(
            actions=200, correct=20, anchor_logit=1e308, correct_logit=-1e308,
            incorrect_logit=-1e308,
        )  # fmt: skip
    with pytest.raises(ValueError, match="initial_logits"):
        SimConfig(actions=4, correct=2, rare=1, initial_logits=(1e308, 0.0, -1e308, 0.0))


#: Configs whose logits overflow within a few steps: the entropy turned NaN (its CSV written with
#: exit status 0), or the samplers met NaN masses (a traceback, a cryptic error, or in the
#: compiled engine writes out of bounds).
OVERFLOWS = [
    replace(CFG, group_sizes=(2, 64), optimizer="sgd", lr=1.7e308, steps=10),
    replace(
        CFG,
        group_sizes=(4, 64),
        optimizer="sgd",
        lr=1e300,
        reward_correct=1e100,
        reward_wrong=-1e100,
        steps=10,
    ),
]


@pytest.mark.parametrize("engine", ["dense", "sparse", "torch"])
@pytest.mark.parametrize("which", range(len(OVERFLOWS)))
def test_a_policy_that_leaves_float64s_range_is_a_value_error_never_nan(engine, which):
    """Finite records (the dense engine follows the first config to a policy on one action), or
    a ValueError naming lr: never NaN records, another error or a crash."""
    if engine == "torch":
        pytest.importorskip("torch")
    kw = {"device": "cpu"} if engine == "torch" else {}
    try:
        with np.errstate(all="ignore"):
            res = run_sweep(OVERFLOWS[which], progress=False, engine=engine, **kw)
    except ValueError as err:
        assert "float64" in str(err) and "lr=" in str(err)
    else:
        assert all(np.isfinite(a).all() for a in res.records.values())


def test_the_compiled_engine_refuses_nan_masses_instead_of_writing_out_of_bounds():
    """In a process of its own: before the check, the kernels' out-of-bounds writes on NaN
    masses aborted the interpreter ("corrupted double-linked list") a call or two later."""
    code = (
        "import gc, sys, numpy as np\n"
        "from tests.theory.test_sim_hostile import OVERFLOWS\n"
        "from fgrpo_theory.sim import run_sweep\n"
        "np.seterr(all='ignore')\n"
        "for cfg in OVERFLOWS * 3:\n"
        "    try:\n"
        "        run_sweep(cfg, progress=False, engine='compiled')\n"
        "    except ValueError as err:\n"
        "        assert 'float64' in str(err), err\n"
        "    else:\n"
        "        sys.exit('no error')\n"
        "    x = [np.ones(1000) for _ in range(3000)]; del x; gc.collect()\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=_repo_root()
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def _repo_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_cli_refuses_an_overflowing_lr_with_one_line(tmp_path, capsys):
    path = tmp_path / "x.csv"
    flags = ["--group-size", "2,64", "--gamma", "0"]
    argv = ["simulate", "--actions", "200", "--correct", "20", *flags, "--steps", "10"]
    argv += ["--optimizer", "sgd", "--lr", "1.7e308", "--workers", "1", "--no-progress"]
    with np.errstate(all="ignore"):
        code = main([*argv, "--csv", str(path)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "float64" in err and "lr" in err
    assert not path.exists()


def test_the_workers_of_a_killed_sweep_end_with_it(tmp_path):
    """SIGKILL of a sweep's main process left its idle worker processes waiting forever."""
    code = (
        "import os, signal\n"
        "from fgrpo_common.pool import process_pool\n"
        "from fgrpo_theory.sim.threads import pin_worker\n"
        "pool = process_pool(1, spawn=False, initializer=pin_worker, initargs=(1,))\n"
        "print(pool.submit(os.getpid).result(), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL
    worker = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 30
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(worker)
    if alive:
        os.kill(worker, signal.SIGKILL)
    assert not alive


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, reaped by init soon, counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
