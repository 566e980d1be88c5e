"""The compiled engine reproduces the numpy sparse engine (paper Section 5.1, App. J): the same
draws bit for bit, records equal to rounding, and CSVs byte-identical to those the simulator
wrote before the compiled engine existed (fixtures written by the numpy code at commit 89a52c2:
``fgrpo-theory simulate --preset tiny`` and ``--preset small --steps 60``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_theory.sim import PRESETS, SimConfig, choose_engine, run_sweep
from fgrpo_theory.sim import compiled
from fgrpo_theory.sim.compiled import simulate_run_compiled
from fgrpo_theory.sim.samplers import uses_guide
from fgrpo_theory.sim.sparse import simulate_run_sparse

DATA = Path(__file__).parent / "data"
SMALL = SimConfig(actions=300, correct=30, rare=2, group_sizes=(4,), gammas=(0.0, 1.0),
                  seeds=(0, 1), steps=40, lr=0.05)


def _assert_same_run(a: dict, b: dict) -> None:
    np.testing.assert_array_equal(a["mu_hat"], b["mu_hat"])          # the same draws
    np.testing.assert_array_equal(a["tail_miss"], b["tail_miss"])
    for key in ("q_pos", "m_ret", "entropy", "tau", "q_u_pos", "p_tail_miss"):
        np.testing.assert_allclose(b[key], a[key], rtol=1e-11, atol=1e-13, err_msg=key)


@given(st.integers(0, 10_000), st.sampled_from([1, 3, 32, 100, 600]),
       st.sampled_from(["adam", "sgd"]), st.sampled_from(["centered", "grpo"]),
       st.floats(0.0, 2.0))
@settings(max_examples=15, deadline=None)
def test_compiled_engine_equals_the_numpy_sparse_engine(seed, N, optimizer, advantage, gamma):
    """Block sampler (N < Kp / 8), guide table (N >= 64 here), touched set and full mode."""
    cfg = replace(SMALL, optimizer=optimizer, advantage=advantage, steps=30,
                  lr=0.05 if optimizer == "adam" else 3.0)
    _assert_same_run(simulate_run_sparse(cfg, N, gamma, seed),
                     simulate_run_compiled(cfg, N, gamma, seed))


@pytest.mark.parametrize("N", [8, 200])
def test_compiled_engine_survives_a_shift_of_the_logit_reference(N):
    """SGD with a huge lr pushes logits far above the initial max (the shift c moves)."""
    cfg = replace(SMALL, optimizer="sgd", lr=400.0, steps=25)
    a, b = simulate_run_sparse(cfg, N, 0.0, 0), simulate_run_compiled(cfg, N, 0.0, 0)
    np.testing.assert_array_equal(a["mu_hat"], b["mu_hat"])
    np.testing.assert_allclose(b["q_pos"], a["q_pos"], rtol=1e-9, atol=1e-12)
    assert a["q_pos"][0, -1] > 0.99


def test_compiled_engine_goes_full_on_the_block_path_and_rebases_adam():
    """Many steps at a moderate N: the touched set passes K / 2 while N < Kp / 8 (the block
    sampler on whole arrays) and lazy Adam rebases its moments (every 100 steps)."""
    cfg = replace(PRESETS["tiny"], steps=250)
    assert not uses_guide(128, 1280)
    _assert_same_run(simulate_run_sparse(cfg, 128, 1.0, 4), simulate_run_compiled(cfg, 128, 1.0, 4))


def test_block_sum_is_numpys_pairwise_sum():
    rng = np.random.default_rng(0)
    for n in (256, 240, 144, 112, 16, 7):
        rows = np.exp(rng.normal(-5.0, 4.0, (200, n)))
        ref = rows.sum(axis=1)
        flat = rows.ravel()
        got = np.array([compiled._block_sum(flat, i * n, n) for i in range(200)])
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("monotone", [True, False])
def test_binary_search_is_numpys_searchsorted_even_on_unsorted_input(monotone):
    rng = np.random.default_rng(1)
    for _ in range(50):
        arr = np.cumsum(rng.random(37)) if monotone else rng.random(37)
        keys = np.sort(rng.random(64) * arr.max() * 1.1)
        out = np.empty(keys.size, dtype=np.int64)
        compiled._binsearch_right(arr, keys, out)
        np.testing.assert_array_equal(out, np.searchsorted(arr, keys, side="right"))


def test_exp_and_the_block_sum_match_numpy_here():
    """The engine's precondition on this machine (else 'auto' takes the numpy engine)."""
    assert compiled.unavailable_reason() is None
    assert choose_engine(SMALL, "auto") == "compiled"


@pytest.mark.parametrize("engine", ["compiled", "sparse"])
def test_tiny_preset_csv_is_byte_identical_to_the_numpy_simulator(engine):
    res = run_sweep(PRESETS["tiny"], engine=engine, progress=False)
    assert res.csv_text() == (DATA / "sim_tiny.csv").read_text()


@pytest.mark.parametrize("engine", [
    "compiled",
    pytest.param("sparse", marks=pytest.mark.slow),
    pytest.param("dense", marks=pytest.mark.slow),
])
def test_reduced_small_preset_csv_is_byte_identical_to_the_numpy_simulator(engine):
    """'small' (K = 12,800, N = 2 ... 16,384, 2 seeds) for 60 steps: both samplers, full mode."""
    res = run_sweep(replace(PRESETS["small"], steps=60), engine=engine, progress=False)
    assert res.csv_text() == (DATA / "sim_small_steps60.csv").read_text()
