"""The split engine (``fgrpo_theory.sim.split``): one run of the compiled engine on two threads,
each owning half of the actions, exchanging a few numbers per step (``fgrpo_theory.sim.link``).
Its agreement in distribution with the other engines and its determinism are tested with
theirs (``test_sim_agreement.py``); here its halves, its initial state, its errors."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fgrpo_theory.sim import SimConfig, compiled, run_sweep, split
from fgrpo_theory.sim.link import swap

pytestmark = pytest.mark.skipif(
    split.unavailable_reason() is not None, reason=f"split engine: {split.unavailable_reason()}"
)

CFG = SimConfig(actions=1000, correct=90, rare=9, group_sizes=(8, 512), steps=30, lr=3e-2)


@pytest.fixture(autouse=True)
def split_every_run(monkeypatch):
    """Every group size on two threads (by default the smallest run on one)."""
    monkeypatch.setattr(split, "SPLIT_FROM", 2)


@pytest.mark.parametrize(
    "cfg",
    [
        CFG,
        SimConfig(actions=4, correct=3, rare=1),
        SimConfig(actions=7, correct=5, rare=3),
        SimConfig(actions=12_345, correct=1_001, rare=10),
    ],
)
def test_the_halves_are_a_relabelling_in_the_kernels_layout(cfg):
    """Every action in exactly one half; in each, the correct actions first and the rare ones
    at 1 .. E_h; both halves within one action of K / 2 and of C / 2."""
    first, second = split.halves(cfg)
    both = np.concatenate([first, second])
    assert sorted(both.tolist()) == list(range(cfg.actions))
    for idx in (first, second):
        correct = idx < cfg.correct
        C_h = int(correct.sum())
        assert correct[:C_h].all() and not correct[C_h:].any()
        rare = (idx >= 1) & (idx <= cfg.rare)
        E_h = int(rare.sum())
        assert rare[1 : 1 + E_h].all() and not rare[0] and not rare[1 + E_h :].any()
    assert abs(first.size - second.size) <= 2
    assert abs(int((first < cfg.correct).sum()) - int((second < cfg.correct).sum())) <= 2


def test_its_first_records_are_the_whole_policys():
    """Step 0's Q_pos, tau, entropy and M_ret (sums over both halves) are the compiled engine's
    to rounding, and so is the step's mean group success rate over many seeds."""
    cfg = replace(CFG, steps=1)
    a = split.simulate_run_split(cfg, 64, 1.0, 0)
    b = compiled.simulate_run_compiled(cfg, 64, 1.0, 0)
    for key in ("q_pos", "tau", "entropy", "m_ret"):
        np.testing.assert_allclose(a[key][0, 0], b[key][0, 0], rtol=1e-12, err_msg=key)
    mu = [split.simulate_run_split(cfg, 64, 1.0, s)["mu_hat"][0, 0] for s in range(200)]
    q = b["q_pos"][0, 0]  # X ~ Binomial(64, q): the mean of 200 within 4.5 standard errors
    assert abs(np.mean(mu) - q) < 4.5 * np.sqrt(q * (1 - q) / 64 / 200)


def test_its_draws_are_its_own_and_fixed_by_the_seed():
    """Its own random numbers (not the compiled engine's run by run), the same for a seed."""
    a = split.simulate_run_split(CFG, 512, 1.0, 4)
    b = split.simulate_run_split(CFG, 512, 1.0, 4)
    c = compiled.simulate_run_compiled(CFG, 512, 1.0, 4)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert not np.array_equal(a["mu_hat"], c["mu_hat"])


def test_small_groups_run_on_one_thread_as_the_compiled_engine(monkeypatch):
    monkeypatch.setattr(split, "SPLIT_FROM", 512)
    a = split.simulate_run_split(CFG, 8, 1.0, 2)
    b = compiled.simulate_run_compiled(CFG, 8, 1.0, 2)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    c = split.simulate_run_split(CFG, 512, 1.0, 2)
    assert not np.array_equal(
        c["mu_hat"], compiled.simulate_run_compiled(CFG, 512, 1.0, 2)["mu_hat"]
    )


def test_an_interrupted_split_sweep_resumes_and_is_cached_apart(tmp_path, monkeypatch):
    """The sweep's resume works for it as for the other engines (the same records as one
    uninterrupted sweep), and its results are not taken for the numpy engines' cache."""
    from fgrpo_theory.sim import run_cached, sweep

    cfg = replace(CFG, seeds=(0, 1), steps=10)
    whole = run_sweep(cfg, engine="split", progress=False)
    real, calls = sweep.simulate_runs, []

    def interrupted(cfg, N, runs, **kw):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(N)
        return real(cfg, N, runs, **kw)

    monkeypatch.setattr(sweep, "simulate_runs", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_cached(cfg, tmp_path, engine="split", workers=1, progress=False)
    assert len(list((tmp_path / "partial").glob("N*.npz"))) == 2
    monkeypatch.setattr(sweep, "simulate_runs", real)
    resumed = run_cached(cfg, tmp_path, engine="split", workers=1, progress=False)
    for key in whole.records:
        np.testing.assert_array_equal(resumed.records[key], whole.records[key], err_msg=key)
    other = run_cached(cfg, tmp_path, engine="compiled", workers=1, progress=False)
    assert not np.array_equal(other.records["mu_hat"], whole.records["mu_hat"])


def test_progress_counts_every_step():
    steps = []
    split.simulate_run_split(replace(CFG, steps=7), 512, 0.0, 0, progress=steps.append)
    assert sum(steps) == 7


def test_a_failing_thread_ends_the_run_with_its_error_not_a_hang(monkeypatch):
    """When one thread fails, its partner (waiting in an exchange) gives up, and the error is
    raised."""
    real = compiled._run_steps

    def failing(*args):
        if args[-1][0] == 1:  # the link of half 1
            time.sleep(0.05)  # (its partner is waiting by then)
            raise RuntimeError("half 1 broke")
        return real(*args)

    monkeypatch.setattr(compiled, "_run_steps", failing)
    t = time.perf_counter()
    with pytest.raises(RuntimeError, match="half 1 broke"):
        split.simulate_run_split(CFG, 512, 1.0, 0)
    assert time.perf_counter() - t < 30


def test_refusals_name_the_reason(monkeypatch):
    with pytest.raises(ValueError, match="correct=3, rare=2"):
        split.simulate_run_split(SimConfig(actions=10, correct=3, rare=2), 4, 1.0, 0)
    with pytest.raises(ValueError, match="surrogate='ratio'"):
        split.simulate_run_split(replace(CFG, surrogate="prob"), 4, 1.0, 0)
    with pytest.raises(ValueError, match="workers=2"):
        run_sweep(CFG, engine="split", workers=2, progress=False)
    with pytest.raises(ValueError, match="profile"):
        split.simulate_run_split(CFG, 4, 1.0, 0, profile=np.zeros(3))
    monkeypatch.setattr(split, "_cpus", lambda: [0])
    with pytest.raises(ValueError, match="two CPUs and this process may use 1"):
        run_sweep(CFG, engine="split", workers=1, progress=False)


def test_an_exchange_gives_up_when_the_abort_flag_is_raised():
    """``link.swap`` alone: with no partner, it returns (False, ...) once the flag is up."""
    from fgrpo_theory.sim.link import ABORT, new_link_arrays

    flags, ex = new_link_arrays()
    flags[ABORT] = 1
    ok, _ = swap(flags, ex, 0)
    assert not ok


def test_a_long_wait_yields_the_core_and_still_gets_the_partners_numbers():
    """``link.swap`` with a partner that comes 50 ms late (far beyond ``SPINS`` turns, so the
    waiting thread yields its core at each turn): it returns the partner's row."""
    import threading

    from fgrpo_theory.sim.link import SPACING, new_link_arrays

    flags, ex = new_link_arrays()
    ex[0, 1, 0] = 7.0  # half 1's first row

    def partner():
        time.sleep(0.05)
        flags[SPACING] = 1  # half 1 enters its first exchange

    th = threading.Thread(target=partner)
    th.start()
    ok, row = swap(flags, ex, 0)
    th.join()
    assert ok and row[0] == 7.0 and flags[0] == 1


def test_a_policy_that_leaves_float64s_range_is_a_value_error():
    """Both threads see the whole S, so both stop at the same step: a ValueError naming lr."""
    code = (
        "import numpy as np\n"
        "from tests.theory.test_sim_hostile import OVERFLOWS\n"
        "from fgrpo_theory.sim import run_sweep\n"
        "np.seterr(all='ignore')\n"
        "for cfg in OVERFLOWS * 2:\n"
        "    try:\n"
        "        res = run_sweep(cfg, progress=False, engine='split', workers=1)\n"
        "    except ValueError as err:\n"
        "        assert 'float64' in str(err) and 'lr=' in str(err), err\n"
        "    else:\n"
        "        assert all(np.isfinite(a).all() for a in res.records.values())\n"
        "print('ok')\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
