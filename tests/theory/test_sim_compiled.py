"""The compiled engine follows the numpy sparse engine (paper Section 5.1, App. J): the same
random numbers and the same arithmetic up to exp's last bits (its own vectorised exp), so the
same draws and records equal to rounding, also with its exp an ulp off (``EXP_SCALE``); its
samplers give numpy's draws on the same masses; and its CSVs match, to the six digits they
print, those the numpy simulator wrote (fixtures ``fgrpo-theory simulate --preset tiny`` and
``--preset small --steps 60``). Agreement in distribution, the engines' contract, is in
test_sim_agreement.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_theory.sim import PRESETS, SimConfig, choose_engine, compiled, run_sweep
from fgrpo_theory.sim.compiled import simulate_run_compiled
from fgrpo_theory.sim.samplers import uses_guide
from fgrpo_theory.sim.sparse import simulate_run_sparse
from tests.theory.csv_compare import assert_csv_close, exp_scale

#: exp exact, and an ulp above or below (``compiled.EXP_SCALE``)
EXP_SCALES = (1.0, 1.0 + 2.0**-52, 1.0 - 2.0**-53)

DATA = Path(__file__).parent / "data"
SMALL = SimConfig(
    actions=300,
    correct=30,
    rare=2,
    group_sizes=(4,),
    gammas=(0.0, 1.0),
    seeds=(0, 1),
    steps=40,
    lr=0.05,
)


def _assert_same_run(a: dict, b: dict) -> None:
    np.testing.assert_array_equal(a["mu_hat"], b["mu_hat"])  # the same draws
    np.testing.assert_array_equal(a["tail_miss"], b["tail_miss"])
    for key in ("q_pos", "m_ret", "entropy", "tau", "q_u_pos", "p_tail_miss"):
        np.testing.assert_allclose(b[key], a[key], rtol=1e-11, atol=1e-13, err_msg=key)


@given(
    st.integers(0, 10_000),
    st.sampled_from([1, 3, 32, 100, 600]),
    st.sampled_from(["adam", "sgd"]),
    st.sampled_from(["centered", "grpo"]),
    st.floats(0.0, 2.0),
)
@settings(max_examples=15, deadline=None)
@pytest.mark.parametrize("scale", EXP_SCALES)
def test_compiled_engine_follows_the_numpy_sparse_engine(
    scale, seed, N, optimizer, advantage, gamma
):
    """Block sampler (N < Kp / 8), guide table (N >= 64 here), touched set and full mode; the
    compiled engine's exp exact or an ulp off. (A draw differs only where a uniform falls
    between the two engines' cumulative masses, about 1e-15 per draw.)"""
    cfg = replace(
        SMALL,
        optimizer=optimizer,
        advantage=advantage,
        steps=30,
        lr=0.05 if optimizer == "adam" else 3.0,
    )
    with exp_scale(scale):
        got = simulate_run_compiled(cfg, N, gamma, seed)
    _assert_same_run(simulate_run_sparse(cfg, N, gamma, seed), got)


@pytest.mark.parametrize("scale", EXP_SCALES)
@pytest.mark.parametrize("N", [8, 200])
def test_compiled_engine_survives_a_shift_of_the_logit_reference(N, scale):
    """SGD with a huge lr pushes logits far above the initial max (the shift c moves)."""
    cfg = replace(SMALL, optimizer="sgd", lr=400.0, steps=25)
    with exp_scale(scale):
        b = simulate_run_compiled(cfg, N, 0.0, 0)
    a = simulate_run_sparse(cfg, N, 0.0, 0)
    np.testing.assert_array_equal(a["mu_hat"], b["mu_hat"])
    np.testing.assert_allclose(b["q_pos"], a["q_pos"], rtol=1e-9, atol=1e-12)
    assert a["q_pos"][0, -1] > 0.99


@pytest.mark.parametrize("scale", EXP_SCALES)
def test_compiled_engine_goes_full_on_the_block_path_and_rebases_adam(scale):
    """Many steps at a moderate N: the touched set passes K / 2 while N < Kp / 8 (the block
    sampler on whole arrays) and lazy Adam rebases its moments (every 100 steps)."""
    cfg = replace(PRESETS["tiny"], steps=250)
    assert not uses_guide(128, 1280)
    with exp_scale(scale):
        got = simulate_run_compiled(cfg, 128, 1.0, 4)
    _assert_same_run(simulate_run_sparse(cfg, 128, 1.0, 4), got)


def test_block_sum_is_numpys_pairwise_sum():
    rng = np.random.default_rng(0)
    for n in (256, 240, 144, 112, 16, 7):
        rows = np.exp(rng.normal(-5.0, 4.0, (200, n)))
        ref = rows.sum(axis=1)
        flat = rows.ravel()
        got = np.array([compiled._block_sum(flat, i * n, n) for i in range(200)])
        np.testing.assert_array_equal(got, ref)


@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 60),
    st.integers(0, 200),
    st.sampled_from([0.0, 0.3, 1.0]),
)
@settings(max_examples=60, deadline=None)
def test_merge_search_is_numpys_searchsorted_on_sorted_input(seed, n, k, zeros):
    """The block search by a merge: numpy's searchsorted(side='right') on non-decreasing
    arrays (cumulative sums with zero-mass blocks: repeated values) and sorted keys, keys
    equal to entries included."""
    rng = np.random.default_rng(seed)
    arr = np.cumsum(rng.random(n) * (rng.random(n) >= zeros))
    keys = np.sort(np.concatenate([rng.random(k) * (arr[-1] + 0.5), rng.choice(arr, 5)]))
    out = np.empty(keys.size, dtype=np.int64)
    compiled._merge_right(arr, keys, keys.size, out)
    np.testing.assert_array_equal(out, np.searchsorted(arr, keys, side="right"))


@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from([1, 2, 5, 40, 300]),
    st.sampled_from([16, 64, 256]),
    st.floats(0.0, 8.0),
)
@settings(max_examples=40, deadline=None)
def test_block_draws_are_numpys_block_sampler(seed, N, B, spread):
    """The compiled block sampler (merge search, four cumulative sums at a time, branch-free
    bisections on the cumulative masses, four at a time) gives numpy's ``samplers`` draws, on
    masses that span many orders of magnitude (some zero). (Its search multiplies numpy's
    keys out, so a draw within rounding of a cumulative mass, about 1e-16 per draw, may go
    to the neighbour; none of these examples comes near one.)"""
    from fgrpo_theory.sim.samplers import sample_group

    rng = np.random.default_rng(seed)
    nb = int(rng.integers(1, 12)) + N * 8 // B  # few draws: numpy's block sampler
    assert not uses_guide(N, nb * B)
    e = np.exp(-spread * rng.random(nb * B)) * (rng.random(nb * B) > 0.1)
    e[int(rng.integers(0, e.size))] = 1.0
    s = e.reshape(nb, B).sum(axis=1)
    C, E = int(rng.integers(1, nb * B)), 3
    uniq_ref, cnt_ref = sample_group(e, s, N, np.random.default_rng([seed, 1]), B)
    x = np.random.default_rng([seed, 1]).standard_exponential(N + 1)
    bufs = dict(
        cs=np.empty(nb),
        u=np.empty(N),
        blk=np.empty(N, dtype=np.int64),
        hb=np.empty(N, dtype=np.int64),
        starts=np.empty(N + 1, dtype=np.int64),
        cbs=np.empty((4, B)),
        st=np.empty(4, dtype=np.int64),
    )
    uniq, cnt = np.empty(N, dtype=np.int64), np.empty(N, dtype=np.int64)
    n_u, X, hit, mass = compiled._draw_blocks(e, s, x, N, B, *bufs.values(), uniq, cnt, C, E)
    np.testing.assert_array_equal(uniq[:n_u], uniq_ref)
    np.testing.assert_array_equal(cnt[:n_u], cnt_ref)
    assert X == int(cnt_ref[uniq_ref < C].sum())
    assert hit == bool(((uniq_ref >= 1) & (uniq_ref <= E)).any())
    assert mass == pytest.approx(float(e[uniq_ref[uniq_ref < C]].sum()), rel=1e-12, abs=0.0)


def _guide_counts(e, N, seed, *, split_prefix=False, many=False):
    """``compiled._draw_guide``'s counts and (n_u, X, uniq) for N draws from the masses e."""
    from fgrpo_theory.sim.samplers import GUIDE_ROWS

    Kp = e.size
    F0 = np.empty(Kp)
    if split_prefix:
        for lo in range(0, Kp, 32):
            compiled._guide_prefix(e, GUIDE_ROWS, F0, lo, lo + 32)
    else:
        compiled._guide_prefix(e, GUIDE_ROWS, F0, 0, Kp)
    counts = np.empty(Kp, dtype=np.int32)
    uniq, cnt = np.empty(Kp, dtype=np.int64), np.empty(Kp, dtype=np.int64)
    n_u, X, _, _ = compiled._draw_guide(
        e,
        F0,
        np.random.default_rng([seed, 2]).random(N),
        N,
        GUIDE_ROWS,
        Kp,
        np.empty(Kp // GUIDE_ROWS),
        np.empty(Kp + 2, dtype=np.int32),
        counts,
        uniq,
        cnt,
        5,
        2,
        True,
        np.empty(N),
        np.empty(N, dtype=np.int32),
        np.empty(257, dtype=np.int64),
        np.empty(Kp if many else 0, dtype=np.uint16),
    )
    return counts, n_u, X, uniq


@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from([64, 512, 4096]),
    st.floats(0.0, 12.0),
    st.booleans(),
    st.booleans(),
)
@settings(max_examples=40, deadline=None)
def test_guide_draws_are_numpys_guide_sampler(seed, Kp, spread, split_prefix, many):
    """The guide sampler on F0 from ``_guide_prefix`` (in one piece, or chunk by chunk as
    ``_move_full`` builds it), searching every draw or counting them per bucket (``many``),
    gives numpy's ``samplers`` counts exactly."""
    from fgrpo_theory.sim.samplers import sample_counts

    rng = np.random.default_rng(seed)
    e = np.exp(-spread * rng.random(Kp)) * (rng.random(Kp) > 0.05)
    e[0] = 1.0
    N = int(rng.integers(Kp if many else 1, 3 * Kp))
    ref = sample_counts(e, N, np.random.default_rng([seed, 2]))
    counts, n_u, X, uniq = _guide_counts(e, N, seed, split_prefix=split_prefix, many=many)
    np.testing.assert_array_equal(counts, ref)
    np.testing.assert_array_equal(uniq[:n_u], np.flatnonzero(ref))
    assert X == int(ref[:5].sum())


def test_guide_buckets_of_more_draws_than_15_bits_hold_fall_back_to_searching_every_draw():
    """3 x 10^6 draws over 64 actions put ~47,000 in a guide bucket: past the 15 bits a
    bucket's count has, so the step searches every draw, with numpy's counts still."""
    from fgrpo_theory.sim.samplers import sample_counts

    e = np.exp(-np.linspace(0.0, 3.0, 64))
    N = 3_000_000
    counts, _, _, _ = _guide_counts(e, N, 7, many=True)
    np.testing.assert_array_equal(counts, sample_counts(e, N, np.random.default_rng([7, 2])))
    assert counts.max() >= 1 << 15


def _adam_state(rng, K, frozen, far):
    """Logits, masses and lazy-Adam moments of K actions padded to Kp: a fraction ``frozen``
    of the logits does not move; the others move by at most ~0.03 (``fast_exp.SMALL`` = 1/16:
    the incremental masses), or, when ``far``, a few by about 1 (e = exp(y) afresh)."""
    from fgrpo_theory.sim.samplers import layout

    B, nb, Kp = layout(K)
    y = np.full(Kp, -np.inf)
    y[:K] = -rng.random(K) * 8.0
    m, w = np.zeros(Kp), np.zeros(Kp)
    m[:K] = rng.normal(0.0, 1e-3, K) * (rng.random(K) >= frozen)
    w[:K] = np.abs(rng.normal(0.0, 1e-3, K)) + 1e-3
    if far:
        m[rng.integers(0, K, 3)] = 0.1
    return B, nb, Kp, y, np.exp(y), m, w


@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from([300, 1000, 5000]),
    st.booleans(),
    st.booleans(),
    st.floats(0.0, 1.0),
    st.booleans(),
)
@settings(max_examples=30, deadline=None)
def test_fused_full_pass_is_lazy_adam_exp_and_the_block_sums(seed, K, dense, rebase, frozen, far):
    """``_move_full`` against numpy: lazy Adam's moments and step (``sparse._LazyAdam``'s
    operations, bit for bit), e = exp(y) (within a few ulp of np.exp: e exp(d) for small moves
    d, exp afresh on a rebase or where a move is large), an unmoved logit's mass unchanged, the
    block sums and the guide's column sums (to rounding)."""
    from fgrpo_theory.sim.samplers import GUIDE_ROWS

    rng = np.random.default_rng(seed)
    B, nb, Kp, y, e, m, w = _adam_state(rng, K, frozen, far)
    C = K // 10
    y_before, e_before = y.copy(), e.copy()
    counts = np.zeros(Kp, dtype=np.int32)
    counts[:K] = rng.poisson(0.5, K)
    rcw, rww, c1, c2, alpha, epsk, fm, fw = 0.3, -0.02, 0.1, 0.001, 1e-2, 1e-8, 0.9, 0.99
    # numpy, the sparse engine's operations
    M, W, Y = m.copy(), w.copy(), y.copy()
    if dense:
        g = counts[:K] * np.where(np.arange(K) < C, rcw, rww)
        M[:K] += g * c1
        W[:K] = np.sqrt(W[:K] * W[:K] + (g * g) * c2)
    Y[:K] += (M[:K] / (W[:K] + epsk)) * alpha
    if rebase:
        M[:K] *= fm
        W[:K] *= fw
    Ee = np.exp(Y)
    S = Ee.reshape(nb, B).sum(axis=1)
    cols = Ee.reshape(GUIDE_ROWS, -1)
    F0ref = np.cumsum(cols, axis=0).ravel()
    s, F0 = np.empty(nb), np.empty(Kp)
    CB = compiled.CHUNK if K > 1000 else B
    ymax, sey = compiled._move_full(
        y,
        e,
        m,
        w,
        counts,
        dense,
        K,
        C,
        rcw,
        rww,
        c1,
        c2,
        alpha,
        epsk,
        rebase,
        fm,
        fw,
        1.0,
        B,
        s,
        True,
        GUIDE_ROWS,
        F0,
        -1.0,
        CB,
    )
    for got, want in ((y, Y), (m, M), (w, W)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(e, Ee, rtol=1e-15, atol=0.0)  # a few ulp
    if not (rebase or far):  # e exp(d) everywhere: an unmoved logit keeps its mass exactly
        still = Y == y_before
        np.testing.assert_array_equal(e[still], e_before[still])
    for got, want in ((s, S), (F0, F0ref)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0.0)
    assert ymax == Y[:K].max()  # above the slack (-1): the true max
    assert sey == pytest.approx(float(np.dot(Ee[:K], Y[:K])), rel=1e-12)


def test_auto_takes_the_compiled_engine_wherever_numba_runs():
    assert compiled.unavailable_reason() is None
    assert choose_engine(SMALL, "auto") == "compiled"


@pytest.mark.parametrize("engine", ["compiled", "sparse"])
def test_tiny_preset_csv_is_the_numpy_simulators(engine):
    res = run_sweep(PRESETS["tiny"], engine=engine, progress=False)
    assert_csv_close(res.csv_text(), (DATA / "sim_tiny.csv").read_text())


@pytest.mark.parametrize(
    "engine",
    [
        "compiled",
        pytest.param("sparse", marks=pytest.mark.slow),
        pytest.param("dense", marks=pytest.mark.slow),
    ],
)
def test_reduced_small_preset_csv_is_the_numpy_simulators(engine):
    """'small' (K = 12,800, N = 2 ... 16,384, 2 seeds) for 60 steps: both samplers, full mode."""
    res = run_sweep(replace(PRESETS["small"], steps=60), engine=engine, progress=False)
    assert_csv_close(res.csv_text(), (DATA / "sim_small_steps60.csv").read_text())


@given(st.integers(0, 2**63 - 1), st.integers(0, 2**20), st.integers(0, 70))
@settings(max_examples=40, deadline=None)
def test_inline_pcg64_draws_numpys_uniforms_and_leaves_its_state(seed, key, n_small):
    """``_pcg_doubles`` (four lanes of the 128-bit LCG) gives ``Generator.random(n)`` bit for
    bit, for n below, at and past the four lanes, and the generator then continues as numpy's
    does."""
    for n in (n_small, 4 * n_small + 3, 1000 + n_small):
        ours, ref = np.random.default_rng([seed, key]), np.random.default_rng([seed, key])
        pcg = compiled.pcg_state(ours.bit_generator)
        out = np.empty(n)
        compiled._pcg_doubles(pcg, out, n)
        compiled.set_pcg_state(ours.bit_generator, pcg)
        np.testing.assert_array_equal(out, ref.random(n))
        np.testing.assert_array_equal(ours.random(9), ref.random(9))
        assert ours.standard_exponential() == ref.standard_exponential()


def test_only_pcg64_is_drawn_inline():
    assert compiled.pcg_state(np.random.MT19937(1)) is None
    assert compiled.pcg_state(np.random.default_rng(1).bit_generator).dtype == np.uint64


@pytest.mark.parametrize("N", [6, 1 << 20])  # the block sampler; the guide, 4 steps a call
def test_a_run_in_calls_of_a_few_steps_is_the_run_in_one_call(N, monkeypatch):
    """With a progress callback the run kernel is called for a few steps at a time: the state
    carried between the calls (touched set, full mode, Adam, the PCG64 state, the shift) makes
    it the same run, record for record, and the callback counts every step once."""
    if N < 1000:  # make the small run take several calls too
        monkeypatch.setattr(compiled, "_steps_per_call", lambda N: 3)
    cfg = replace(SMALL, actions=64, correct=8, rare=2, steps=17, lr=0.3)
    whole = simulate_run_compiled(cfg, N, 1.0, 5)
    done = []
    parts = simulate_run_compiled(cfg, N, 1.0, 5, progress=done.append)
    assert all(np.array_equal(whole[k], parts[k]) for k in whole)
    assert sum(done) == cfg.steps and len(done) > 3


def test_auto_warns_when_it_falls_back_to_the_numpy_engine(monkeypatch):
    monkeypatch.setattr(compiled, "unavailable_reason", lambda: "numba is not installed")
    with pytest.warns(RuntimeWarning, match="numba is not installed"):
        assert choose_engine(SMALL, "auto") == "sparse"
    with pytest.raises(ValueError, match="not available here: numba is not installed"):
        choose_engine(SMALL, "compiled")


@pytest.mark.parametrize("K", [300, 5000])
def test_incremental_masses_stay_the_exp_of_the_logits(K):
    """Between rebases the fused pass updates each mass as e exp(d) (``fast_exp.exp_small``):
    over 99 steps of small moves (Adam's rebase interval is 100) the masses stay within 1e-13
    of exp(y), and the first rebase step puts them back within a few ulp."""
    from fgrpo_theory.sim.samplers import GUIDE_ROWS

    rng = np.random.default_rng(K)
    B, nb, Kp, y, e, m, w = _adam_state(rng, K, 0.1, False)
    s, F0, counts = np.empty(nb), np.empty(Kp), np.zeros(Kp, dtype=np.int32)
    CB = compiled.CHUNK if K > 1000 else B

    def step(rebase):
        compiled._move_full(
            y, e, m, w, counts, False, K, K // 10, 0.0, 0.0, 0.1, 0.001, 1e-2, 1e-8,
            rebase, 1.0, 1.0, 1.0, B, s, False, GUIDE_ROWS, F0, np.inf, CB,
        )  # fmt: skip

    y0 = y.copy()
    for _ in range(99):
        step(False)
    assert np.abs(y[:K] - y0[:K]).max() > 0.3  # the logits moved
    np.testing.assert_allclose(e, np.exp(y), rtol=1e-13, atol=0.0)
    drift = np.abs(e[:K] / np.exp(y[:K]) - 1.0).max()
    step(True)
    np.testing.assert_allclose(e, np.exp(y), rtol=1e-15, atol=0.0)
    assert np.abs(e[:K] / np.exp(y[:K]) - 1.0).max() <= drift
