"""The sweep (paper Section 5.1, App. J): native thread pools pinned inside the worker processes
and the single-process path, an interrupted sweep resumed without redoing finished runs, the
progress bar, checkpoint files it cannot trust, and the simulator's advantages against the
reference ``fgrpo_theory.advantages``."""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

import fgrpo_theory.sim.sweep as sweep
from fgrpo_common.pool import process_pool
from fgrpo_theory.advantages import grpo_advantages, mean_centred_advantages
from fgrpo_theory.sim import SimConfig, run_cached, run_sweep
from fgrpo_theory.sim.group import GRPO_EPS, group_advantages
from fgrpo_theory.sim.threads import pin_worker, pinned, thread_counts

CFG = SimConfig(
    actions=300,
    correct=30,
    rare=2,
    group_sizes=(2, 8, 64),
    gammas=(0.0, 1.0),
    seeds=(0, 1),
    steps=12,
    lr=0.05,
)


def _pool_counts(workers: int) -> list[dict]:
    """thread_counts() inside the worker processes the sweep starts."""
    with process_pool(workers, spawn=False, initializer=pin_worker, initargs=(1,)) as pool:
        return list(pool.map(_counts_after_numpy, range(2 * workers)))


def _counts_after_numpy(_):
    np.dot(np.ones(4), np.ones(4))
    return thread_counts()


def test_worker_processes_pin_their_thread_pools():
    """The parent allows 4 BLAS threads; every worker of the sweep's pool runs with 1."""
    with threadpool_limits(limits=4):
        assert max(thread_counts().values()) == 4  # the parent's pool, inherited by a fork
        counts = _pool_counts(2)
    assert counts and all(c and set(c.values()) == {1} for c in counts)


def test_the_single_process_path_pins_its_thread_pools(monkeypatch):
    seen = []
    real = sweep.simulate_runs

    def spy(*args, **kwargs):
        seen.append(thread_counts())
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep, "simulate_runs", spy)
    with threadpool_limits(limits=4):
        run_sweep(replace(CFG, group_sizes=(2,), steps=2), progress=False)
        assert max(thread_counts().values()) == 4  # restored after the sweep
    assert seen and all(set(c.values()) == {1} for c in seen)


def test_pinned_restores_the_environment(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    with pinned(1):
        import os

        assert os.environ["OMP_NUM_THREADS"] == "1"
    assert os.environ["OMP_NUM_THREADS"] == "7"


def test_an_interrupted_sweep_resumes_without_redoing_finished_runs(tmp_path, monkeypatch):
    whole = run_sweep(CFG, progress=False)
    calls = []
    real = sweep.simulate_runs

    def interrupted(cfg, N, runs, **kw):
        if len(calls) == 5:
            raise KeyboardInterrupt
        calls.append((N, runs))
        return real(cfg, N, runs, **kw)

    monkeypatch.setattr(sweep, "simulate_runs", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_cached(CFG, tmp_path, progress=False)
    assert len(list((tmp_path / "partial").glob("N*.npz"))) == 5
    assert not (tmp_path / "simulation.npz").exists()

    redone = []

    def counting(cfg, N, runs, **kw):
        redone.extend((N, g, s) for g, s in runs)
        return real(cfg, N, runs, **kw)

    monkeypatch.setattr(sweep, "simulate_runs", counting)
    resumed = run_cached(CFG, tmp_path, progress=False)
    done_before = {(N, g, s) for N, runs in calls for g, s in runs}
    assert len(redone) == 12 - 5 and not done_before & set(redone)
    assert resumed.csv_text() == whole.csv_text()
    for key in whole.records:
        np.testing.assert_array_equal(resumed.records[key], whole.records[key], err_msg=key)
    assert (tmp_path / "simulation.npz").exists() and not (tmp_path / "partial").exists()


def test_an_interrupted_sweep_resumes_over_worker_processes(tmp_path):
    """Workers save runs as they finish; a second call with the same folder computes none."""
    first = run_sweep(CFG, workers=2, progress=False, checkpoint=tmp_path / "ck")
    assert len(list((tmp_path / "ck").glob("N*.npz"))) == 12
    again = run_sweep(CFG, workers=2, progress=False, checkpoint=tmp_path / "ck", engine="sparse")
    assert again.csv_text() == first.csv_text()


def test_checkpoints_of_another_config_or_damaged_are_not_used(tmp_path):
    ck = tmp_path / "ck"
    run_sweep(replace(CFG, steps=5), progress=False, checkpoint=ck)
    target = run_sweep(CFG, progress=False)
    res = run_sweep(CFG, progress=False, checkpoint=ck)  # other steps: all recomputed
    assert res.csv_text() == target.csv_text()
    victim = sorted(ck.glob("N*.npz"))[0]
    victim.write_bytes(b"not an npz file")
    (ck / sorted(ck.glob("N*.npz"))[1].name).write_bytes(b"PK\x03\x04 broken zip")
    assert run_sweep(CFG, progress=False, checkpoint=ck).csv_text() == target.csv_text()


def test_saved_results_are_readable_like_any_written_file_and_load_again(tmp_path):
    """Written atomically through a temporary file, yet with the mode a plain ``open`` gives
    (0o666 less the umask), not mkstemp's 0o600; loaded back (no pickle) to the same records."""
    out = tmp_path / "out"
    res = run_cached(replace(CFG, group_sizes=(2,)), out, progress=False)
    mask = os.umask(0)
    os.umask(mask)
    for name in ("simulation.npz", "simulation_config.json"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o666 & ~mask, name
    again = sweep.load_cached(replace(CFG, group_sizes=(2,)), out)
    assert all(np.array_equal(again.records[k], res.records[k]) for k in res.records)


def test_a_computed_sweep_records_what_computed_it_and_a_cached_one_keeps_that(
    tmp_path, monkeypatch
):
    """``environment.json`` beside the results: versions, CPU, the engine ``auto`` resolved to;
    a rerun that loads the cached results leaves the record of the machine that computed them."""
    out, cfg = tmp_path / "out", replace(CFG, group_sizes=(2,))
    monkeypatch.setenv("NPY_DISABLE_CPU_FEATURES", "AVX512F")  # recorded when set (not applied)
    run_cached(cfg, out, progress=False, engine="sparse")
    env = json.loads((out / "environment.json").read_text())
    assert env["engine"] == "sparse" and env["workers"] == 1
    assert env["numpy"] == np.__version__ and env["NPY_DISABLE_CPU_FEATURES"] == "AVX512F"
    assert {"numba", "scipy", "cpu", "cpu_flags", "python", "fgrpo", "git_commit"} <= set(env)
    (out / "environment.json").write_text('{"cpu": "the computing machine"}')
    run_cached(cfg, out, progress=False, engine="dense")  # cached: the same numpy family
    assert json.loads((out / "environment.json").read_text()) == {"cpu": "the computing machine"}


def test_progress_shows_runs_done_and_time_left(capsys, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # on a terminal (off elsewhere)
    run_sweep(replace(CFG, group_sizes=(2, 8)), progress=True)
    err = capsys.readouterr().err
    assert "runs 8/8" in err and "<" in err and "run-step" in err


def test_progress_is_off_away_from_a_terminal(capsys):
    run_sweep(replace(CFG, group_sizes=(2, 8)), progress=True)
    assert "run-step" not in capsys.readouterr().err


@given(st.integers(2, 300), st.data(), st.floats(-3.0, 3.0), st.floats(0.01, 5.0))
@settings(max_examples=60, deadline=None)
def test_group_advantages_match_the_reference_implementation(N, data, R_w, gap):
    """The closed forms (r_c, r_w) for X correct of N are the reference advantages of the group
    (mean-centred; GRPO with the Bessel std and eps = 1e-6, verl's convention)."""
    X = data.draw(st.integers(0, N))
    R_c = R_w + gap
    rewards = np.where(np.arange(N) < X, R_c, R_w)
    for kind, ref in (
        ("centered", mean_centred_advantages(rewards)),
        ("grpo", grpo_advantages(rewards, std="bessel", eps=GRPO_EPS)),
    ):
        r_c, r_w = group_advantages(np.array([X]), N, R_c=R_c, R_w=R_w, kind=kind)
        got = np.where(np.arange(N) < X, r_c[0], r_w[0])
        np.testing.assert_allclose(
            got, ref, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(ref).max()), err_msg=kind
        )
    r_c, r_w = group_advantages(np.array([X]), N, R_c=R_c, R_w=R_w, kind="raw")
    assert (r_c[0], r_w[0]) == (R_c, R_w)


@given(
    st.integers(1, 10**6),
    st.data(),
    st.floats(-3.0, 3.0),
    st.floats(0.01, 5.0),
    st.sampled_from(["centered", "grpo", "raw"]),
)
@settings(max_examples=80, deadline=None)
def test_scalar_advantages_are_bit_for_bit_the_array_ones(N, data, R_w, gap, kind):
    from fgrpo_theory.sim.group import scalar_advantages

    X = data.draw(st.integers(0, N))
    a = group_advantages(np.array([X]), N, R_c=R_w + gap, R_w=R_w, kind=kind)
    b = scalar_advantages(X, N, R_c=R_w + gap, R_w=R_w, kind=kind)
    assert (float(a[0][0]), float(a[1][0])) == b


@pytest.mark.slow
def test_a_killed_cli_sweep_resumes_and_writes_the_numpy_simulators_csv(tmp_path):
    """SIGKILL in the middle of `fgrpo-theory simulate --out`, rerun: the finished runs are
    reused and the CSV is the numpy simulator's (to its printed digits)."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    out = tmp_path / "run"
    argv = [
        sys.executable,
        "-m",
        "fgrpo_theory.cli",
        "simulate",
        "--preset",
        "small",
        "--steps",
        "60",
        "--workers",
        "1",
        "--no-progress",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    partial = out / "partial"
    for _ in range(3000):  # wait for 3 finished runs
        if proc.poll() is not None or len(list(partial.glob("N*.npz"))) >= 3:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kept = len(list(partial.glob("N*.npz")))
    assert 3 <= kept < 56 and not (out / "simulation.npz").exists()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    data = Path(__file__).parent / "data" / "sim_small_steps60.csv"
    from tests.theory.csv_compare import assert_csv_close

    assert_csv_close((out / "fig2.csv").read_text(), data.read_text())


def _damage_central_directory(path) -> None:
    """Set a zip version no reader supports in the first central-directory entry of ``path``."""
    data = bytearray(path.read_bytes())
    at = data.find(b"PK\x01\x02")
    data[at + 6] = 0xFF
    path.write_bytes(bytes(data))


def test_cached_files_that_no_reader_takes_are_recomputed(tmp_path):
    """A damaged zip (an unsupported version: NotImplementedError), a config that is not UTF-8,
    and run files of the right shapes but another dtype are recomputed, not trusted nor fatal."""
    cfg = replace(CFG, group_sizes=(2, 8))
    out = tmp_path / "out"
    want = run_cached(cfg, out, progress=False).csv_text()
    _damage_central_directory(out / "simulation.npz")
    assert sweep.load_cached(cfg, out) is None
    assert run_cached(cfg, out, progress=False).csv_text() == want
    (out / "simulation_config.json").write_bytes(b"\xff\xfe")
    assert sweep.load_cached(cfg, out) is None
    ck = tmp_path / "ck"
    run_sweep(cfg, progress=False, checkpoint=ck)
    (ck / "config.json").write_bytes(b"\xff\xfe not json")  # another config: runs recomputed
    assert run_sweep(cfg, progress=False, checkpoint=ck).csv_text() == want
    first, second = sorted(ck.glob("N*.npz"))[:2]
    with np.load(first) as data:
        np.savez(first, **{k: data[k].astype(str) for k in data.files})  # text, right shapes
    with np.load(second) as data:
        np.savez(second, **{k: data[k].astype(np.int64) for k in data.files})  # truncated
    assert sweep._Checkpoint(ck, cfg, "numpy").load(2, 0.0, 0) is None
    assert run_sweep(cfg, progress=False, checkpoint=ck).csv_text() == want


def test_finishing_a_sweep_removes_only_its_own_files_from_the_checkpoint_folder(tmp_path):
    """The user's files in OUT/partial stay (and so does the folder); the sweep's run files,
    config and leftovers of interrupted atomic writes go."""
    cfg = replace(CFG, group_sizes=(2,))
    partial = tmp_path / "out" / "partial"
    partial.mkdir(parents=True)
    (partial / "notes.txt").write_text("mine")
    (partial / "N2-g0-s0.npz.bak").write_text("mine too")
    (partial / ".N2-g0-s1.npz.tmp-0a1b2c").write_bytes(b"half a run")
    run_cached(cfg, tmp_path / "out", progress=False)
    assert sorted(p.name for p in partial.iterdir()) == ["N2-g0-s0.npz.bak", "notes.txt"]
    empty = tmp_path / "other" / "partial"
    run_cached(cfg, tmp_path / "other", progress=False)
    assert not empty.exists()
