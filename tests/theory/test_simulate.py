"""Tests of the multi-step categorical simulator (paper Section 5.1, Appendix J, Fig. 2): the
sampler, one step against Eq. 5, determinism, batched = one-at-a-time, sparse engine = dense
engine, the tail-miss records against Lemma 3.1, caching, and the three M_ret regimes on a
reduced setting."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_theory.categorical import logit_update, softmax
from fgrpo_theory.sim import PRESETS, SimConfig, load_cached, run_cached, run_sweep
from fgrpo_theory.sim.dense import _adam_step, simulate_batch
from fgrpo_theory.sim.group import group_advantages
from fgrpo_theory.sim.samplers import _draw_by_guide, layout, sample_group
from fgrpo_theory.sim.sparse import _LazyAdam, simulate_run_sparse

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


def _masses(z: np.ndarray):
    """e (Kp,) and block masses s (nb,) as the engines build them."""
    K = z.size
    B, nb, Kp = layout(K)
    e = np.zeros(Kp)
    e[:K] = np.exp(z - z.max())
    return e, e.reshape(nb, B).sum(axis=1), B


def _group_counts(e, s, B, N, rng, K):
    uniq, cnt = sample_group(e, s, N, rng, B)
    counts = np.zeros(e.size, dtype=np.int64)
    counts[uniq] = cnt
    return counts


@pytest.mark.parametrize("K,N", [(1000, 3), (1000, 40), (1000, 5000), (7, 200), (5000, 700)])
def test_sampler_frequencies_match_the_policy(K, N):
    """Both sampling paths (few draws: block search; many: guide table) draw from p."""
    rng = np.random.default_rng(1)
    z = rng.normal(0, 1.5, K)
    z[: K // 10] += 4.0  # a heavy class, as in the paper's layout
    p = softmax(z)
    e, s, B = _masses(z)
    reps = max(1, 200_000 // N)
    counts = sum(_group_counts(e, s, B, N, rng, K) for _ in range(reps))
    assert counts[K:].sum() == 0 and counts.sum() == reps * N  # never the padding
    expected = p * reps * N
    big = expected > 20
    chi2 = ((counts[:K][big] - expected[big]) ** 2 / expected[big]).sum()
    dof = big.sum() - 1
    assert chi2 < dof + 6 * np.sqrt(2 * dof)


@pytest.mark.parametrize("N", [5, 400])
def test_sampler_counts_have_multinomial_moments(N):
    """Counts per group (block path at N = 5, guide path at N = 400): mean N p_i, variance
    N p_i (1 - p_i), covariance -N p_i p_j, on six heavy actions among 600."""
    rng = np.random.default_rng(7)
    z = np.concatenate([[1.0, -0.5, 0.3, 2.0, -1.0, 0.0], np.full(594, -6.0)])
    p = softmax(z)[:6]
    e, s, B = _masses(z)
    G = 20_000
    c = np.stack([_group_counts(e, s, B, N, rng, z.size)[:6] for _ in range(G)])  # (G, 6)
    cov = N * (np.diag(p) - np.outer(p, p))
    np.testing.assert_allclose(c.mean(axis=0), N * p, atol=5 * np.sqrt(N * p.max() / G))
    np.testing.assert_allclose(np.cov(c.T), cov, atol=0.06 * N * p.max())


def test_sampler_returns_increasing_actions_and_never_padding():
    rng = np.random.default_rng(2)
    z = np.array([0.0, 50.0, -3.0])  # K = 3: one block, heavy mass on a real action
    e, s, B = _masses(z)
    for N in (1, 2, 64):
        uniq, cnt = sample_group(e, s, N, rng, B)
        assert np.all(np.diff(uniq) > 0) and uniq.max() < 3 and cnt.sum() == N and cnt.min() >= 1


def test_guide_sampler_is_the_inverse_cdf_in_rank_order():
    """The guide table returns exactly the inversion (searchsorted) of the column-major
    cumulative masses, including actions of tiny mass and a bucket holding many of them."""
    K = 4096
    rng = np.random.default_rng(3)
    z = np.concatenate([rng.normal(8, 2, 40), rng.normal(-6, 3, K - 40)])
    e, _, _ = _masses(z)
    u01 = np.random.default_rng(4).random(50_000)

    class Fixed:  # a generator that returns the uniforms above
        def random(self, n):
            return u01[:n].copy()

    got = _draw_by_guide(e, u01.size, Fixed())
    F = np.cumsum(e.reshape(16, -1), axis=0)
    F[:, 1:] += np.cumsum(F[-1])[:-1]
    Frank, total = F.T.ravel(), F[-1, -1]  # rank q = column * 16 + row
    q = np.searchsorted(Frank, np.minimum(u01 * total, np.nextafter(total, 0)), side="right")
    np.testing.assert_array_equal(got, (q % 16) * (e.size // 16) + q // 16)


def test_lazy_adam_equals_bias_corrected_adam_on_sparse_gradients():
    """Rescaled moments (free decay, periodic rebase) reproduce plain Adam step by step."""
    cfg = SimConfig(actions=50, correct=5, lr=0.03)
    rng = np.random.default_rng(5)
    n, T = 50, 3 * _LazyAdam.REBASE + 7
    z, y = np.zeros(n), np.zeros(n)
    m, v, m_l, w_l = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    lazy = _LazyAdam(cfg)
    for t in range(T):
        sl = np.unique(rng.integers(0, n, 3)) if t % 5 else np.zeros(0, dtype=np.int64)
        g = rng.normal(0, 1, sl.size)
        G = np.zeros(n)
        G[sl] = g
        _adam_step(z, G, m, v, np.empty(n), t, cfg)
        lazy.step(y, m_l, w_l, sl, g, t + 1, np.empty(n))
        np.testing.assert_allclose(y, z, rtol=1e-12, atol=1e-14)
    assert np.abs(z).max() > 0.1


def test_one_sgd_step_of_the_prob_surrogate_is_eq5():
    """surrogate='prob', advantage='raw', SGD: Q_pos after one step equals the one from the
    categorical module's Eq. 5 update for the same drawn group."""
    K, C, N, lr = 40, 12, 6, 0.7
    z0 = np.random.default_rng(3).normal(0, 1, K)
    cfg = SimConfig(
        actions=K,
        correct=C,
        rare=2,
        initial_logits=tuple(z0),
        group_sizes=(N,),
        gammas=(1.0,),
        seeds=(5,),
        steps=1,
        lr=lr,
        optimizer="sgd",
        surrogate="prob",
        advantage="raw",
        reward_correct=1.0,
        reward_wrong=-0.5,
    )
    rec = simulate_batch(cfg, N, [(1.0, 5)])
    e, s, B = _masses(z0)
    uniq, cnt = sample_group(e, s, N, np.random.default_rng([5, N]), B)
    actions = np.repeat(uniq, cnt)
    correct = np.arange(K) < C
    p = softmax(z0)
    z1 = z0 + logit_update(p, correct, actions, eta=lr, R_c=1.0, R_w=-0.5, gamma=1.0)
    assert rec["q_pos"][0, 1] == pytest.approx(softmax(z1)[correct].sum(), abs=1e-13)
    assert rec["q_pos"][0, 1] != pytest.approx(rec["q_pos"][0, 0], abs=1e-6)


def test_one_sgd_step_of_the_ratio_surrogate_moves_sampled_logits_only():
    """ratio + centred advantage: Delta z = lr (g/N) count_i r(i); unsampled logits stay put."""
    K, C, N, lr = 30, 10, 5, 0.3
    z0 = np.random.default_rng(4).normal(0, 1, K)
    cfg = SimConfig(
        actions=K,
        correct=C,
        initial_logits=tuple(z0),
        group_sizes=(N,),
        gammas=(0.0,),
        seeds=(2,),
        steps=1,
        lr=lr,
        optimizer="sgd",
    )
    rec = simulate_batch(cfg, N, [(0.0, 2)])
    e, s, B = _masses(z0)
    counts = _group_counts(e, s, B, N, np.random.default_rng([2, N]), K)[:K]
    X = counts[:C].sum()
    r_c, r_w = group_advantages(np.array([X]), N, R_c=1.0, R_w=-1.0, kind="centered")
    dz = lr / N * counts * np.where(np.arange(K) < C, r_c[0], r_w[0])
    assert rec["q_pos"][0, 1] == pytest.approx(softmax(z0 + dz)[:C].sum(), abs=1e-13)


def test_same_seed_same_numbers_and_different_seed_different_numbers():
    a = run_sweep(SMALL, progress=False)
    b = run_sweep(SMALL, progress=False)
    for key in a.records:
        np.testing.assert_array_equal(a.records[key], b.records[key])
    assert not np.array_equal(a.records["q_pos"][0, 0, 0], a.records["q_pos"][0, 0, 1])


@pytest.mark.parametrize(
    "overrides",
    [
        dict(),
        dict(optimizer="sgd", surrogate="prob", advantage="raw", lr=5.0),
        dict(advantage="grpo", optimizer="sgd", lr=2.0),
    ],
)
def test_batched_runs_equal_one_at_a_time_runs(overrides):
    cfg = replace(SMALL, **overrides)
    runs = [(g, s) for g in cfg.gammas for s in cfg.seeds]
    batch = simulate_batch(cfg, 16, runs)
    for r, run in enumerate(runs):
        single = simulate_batch(cfg, 16, [run])
        for key in batch:
            np.testing.assert_array_equal(batch[key][r], single[key][0], err_msg=key)


@given(
    st.integers(0, 10_000),
    st.sampled_from([1, 3, 32, 600]),
    st.sampled_from(["adam", "sgd"]),
    st.sampled_from(["centered", "grpo"]),
    st.floats(0.0, 2.0),
)
@settings(max_examples=12, deadline=None)
def test_sparse_engine_equals_dense_engine(seed, N, optimizer, advantage, gamma):
    cfg = replace(
        SMALL,
        optimizer=optimizer,
        advantage=advantage,
        steps=30,
        lr=0.05 if optimizer == "adam" else 3.0,
    )
    dense = simulate_batch(cfg, N, [(gamma, seed)])
    sparse = simulate_run_sparse(cfg, N, gamma, seed)
    np.testing.assert_array_equal(dense["mu_hat"], sparse["mu_hat"])  # the same draws
    np.testing.assert_array_equal(dense["tail_miss"], sparse["tail_miss"])
    for key in ("q_pos", "m_ret", "entropy", "tau", "q_u_pos", "p_tail_miss"):
        np.testing.assert_allclose(sparse[key], dense[key], rtol=1e-10, atol=1e-12, err_msg=key)


def test_sparse_engine_survives_a_shift_of_the_logit_reference():
    """SGD with a huge lr pushes logits far above the initial max (the shift c moves)."""
    cfg = replace(SMALL, optimizer="sgd", lr=400.0, steps=25)
    dense = simulate_batch(cfg, 8, [(0.0, 0)])
    sparse = simulate_run_sparse(cfg, 8, 0.0, 0)
    np.testing.assert_allclose(sparse["q_pos"], dense["q_pos"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sparse["entropy"], dense["entropy"], rtol=1e-8, atol=1e-9)
    assert dense["q_pos"][0, -1] > 0.99


def test_initial_records_match_the_paper_layout():
    """Logits 5 / 3 / 0: Q_pos(0) and tau(0) from the closed form; M_ret(0) = 1."""
    K, C = 1280, 100
    cfg = SimConfig(actions=K, correct=C, group_sizes=(4,), gammas=(0.0,), seeds=(0,), steps=1)
    rec = simulate_batch(cfg, 4, [(0.0, 0)])
    Z = np.exp(5.0) + (C - 1) * np.exp(3.0) + (K - C)
    assert rec["q_pos"][0, 0] == pytest.approx((np.exp(5.0) + (C - 1) * np.exp(3.0)) / Z, rel=1e-12)
    assert rec["tau"][0, 0] == pytest.approx(np.exp(3.0) / Z, rel=1e-12)
    assert rec["m_ret"][0, 0] == 1.0
    big = PRESETS["paper-fig2"]
    assert big.logits0()[[0, 1, 9_999, 10_000]].tolist() == [5.0, 3.0, 3.0, 0.0]
    first = simulate_batch(replace(big, group_sizes=(2,), seeds=(0,), steps=1), 2, [(0.0, 0)])
    assert first["q_pos"][0, 0] == pytest.approx(0.630, abs=5e-4)  # Sec. 5.1, App. J


def test_the_paper_fig2_preset_is_app_j():
    """The setting of App. J, field by field: 128,000 actions, 10,000 correct, logits 5 / 3 / 0,
    rewards +1 / -1, Adam (0.9, 0.999, 1e-8) at lr 1e-2 on the ratio surrogate with centred
    rewards, 1000 steps, N = 2 ... 2^17, gamma 0 and 1, seeds 0-3."""
    big = PRESETS["paper-fig2"]
    assert (big.actions, big.correct, big.rare) == (128_000, 10_000, 1)
    assert (big.anchor_logit, big.correct_logit, big.incorrect_logit) == (5.0, 3.0, 0.0)
    assert big.initial_logits is None
    assert (big.reward_correct, big.reward_wrong) == (1.0, -1.0)
    assert (big.optimizer, big.lr, big.adam_betas, big.adam_eps) == (
        "adam",
        1e-2,
        (0.9, 0.999),
        1e-8,
    )
    assert (big.surrogate, big.advantage, big.weighting) == ("ratio", "centered", "focal")
    assert big.steps == 1000 and big.seeds == (0, 1, 2, 3) and big.gammas == (0.0, 1.0)
    assert big.group_sizes == tuple(2**i for i in range(1, 18))
    assert len(big.group_sizes) * len(big.gammas) * len(big.seeds) == 136  # the sweep's runs


def test_tail_miss_frequency_matches_lemma_3_1_on_a_frozen_policy():
    """With a negligible lr the policy is frozen: the tail-miss rate is P(B_{E,N})."""
    cfg = SimConfig(
        actions=60,
        correct=20,
        rare=2,
        group_sizes=(8,),
        gammas=(0.0,),
        seeds=(0,),
        steps=3000,
        lr=1e-12,
        optimizer="sgd",
    )
    rec = simulate_run_sparse(cfg, 8, 0.0, 0)
    P = rec["p_tail_miss"][0].mean()
    assert 0.05 < P < 0.95
    assert abs(rec["tail_miss"][0].mean() - P) < 4 * np.sqrt(P * (1 - P) / cfg.steps)


def test_q_u_pos_is_the_correct_mass_the_group_missed():
    rec = simulate_batch(SMALL, 4, [(0.0, 0)])
    assert np.all(rec["q_u_pos"] <= rec["q_pos"][:, :-1] + 1e-15)
    assert np.all(rec["q_u_pos"] >= 0)
    # four draws cannot cover thirty correct actions
    assert np.all(rec["q_u_pos"] > 0)


def test_three_regimes_and_the_focal_effect_on_a_reduced_setting():
    """K/10 setting: M_ret is high at small N, collapses at intermediate N, recovers at large N;
    Q_pos rises for every N; gamma = 1 retains more mass inside the collapse zone."""
    cfg = SimConfig(
        actions=3_200,
        correct=250,
        group_sizes=(2, 64, 32_768),
        gammas=(0.0, 1.0),
        seeds=(0,),
        steps=300,
        lr=3e-2,
    )
    res = run_sweep(cfg, progress=False)
    m = res.records["m_ret"][:, :, 0, -1]  # (N, gamma)
    q = res.records["q_pos"][:, :, 0, :]
    assert m[1, 0] < m[0, 0] - 0.2 and m[1, 0] < m[2, 0] - 0.2
    assert np.all(q[..., -1] > q[..., 0])
    assert m[1, 1] > m[1, 0]


def test_cache_is_reused_only_for_the_same_config(tmp_path):
    cfg = replace(SMALL, steps=5)
    first = run_cached(cfg, tmp_path, progress=False)
    saved = json.loads((tmp_path / "simulation_config.json").read_text())
    assert saved["steps"] == 5 and saved["optimizer"] == "adam"
    again = load_cached(cfg, tmp_path)
    assert again is not None
    np.testing.assert_array_equal(again.records["m_ret"], first.records["m_ret"])
    assert load_cached(replace(cfg, lr=0.01), tmp_path) is None


def test_csv_has_one_row_per_run(tmp_path):
    res = run_sweep(replace(SMALL, steps=3), progress=False)
    lines = res.write_csv(tmp_path / "x.csv").read_text().splitlines()
    assert lines[0] == "N,gamma,seed,q_pos,m_ret,entropy"
    assert len(lines) == 1 + 1 * 2 * 2


def test_workers_give_the_same_numbers():
    cfg = replace(SMALL, group_sizes=(2, 8), steps=10)
    a = run_sweep(cfg, progress=False, workers=1)
    b = run_sweep(cfg, progress=False, workers=2)
    np.testing.assert_array_equal(a.records["q_pos"], b.records["q_pos"])


@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(correct=300), "correct"),
        (dict(rare=30), "rare"),
        (dict(group_sizes=(0,)), "group_sizes"),
        (dict(gammas=(-1.0,)), "gammas"),
        (dict(lr=0.0), "lr"),
        (dict(optimizer="rmsprop"), "optimizer"),
        (dict(surrogate="logit"), "surrogate"),
        (dict(advantage="zscore"), "advantage"),
        (dict(reward_correct=-1.0), "reward_correct"),
        (dict(initial_logits=(0.0, 1.0)), "initial_logits"),
        (dict(seeds=(1, 1)), "seeds"),
    ],
)
def test_bad_configs_are_rejected(bad, match):
    with pytest.raises(ValueError, match=match):
        replace(SMALL, **bad)


def test_config_fields_follow_the_shared_rules():
    """SIM_RULES (fgrpo_common.fields): numbers written as text are read as numbers (a YAML or
    --set value), numpy arrays and scalars become tuples of Python numbers."""
    cfg = replace(
        SMALL,
        actions="300",
        lr="5e-2",
        gammas=("0", 1),
        group_sizes=np.array([4, 8]),
        seeds=np.arange(2),
        steps=np.int32(40),
        adam_betas=[0.5, 0.9],
    )
    assert cfg == replace(SMALL, group_sizes=(4, 8), adam_betas=(0.5, 0.9))
    assert type(cfg.actions) is type(cfg.steps) is type(cfg.group_sizes[0]) is int
    assert type(cfg.lr) is type(cfg.gammas[0]) is type(cfg.adam_betas[0]) is float
    assert replace(SMALL, initial_logits=np.zeros(300)).initial_logits == (0.0,) * 300


@pytest.mark.parametrize(
    "bad,message",
    [
        (dict(actions=True), r"actions must be an integer >= 2 and <= 134217728, got actions=True"),
        (dict(steps=40.0), r"steps must be an integer >= 1 and <= 10000000, got steps=40\.0"),
        (
            dict(group_sizes=(4, 8.0)),
            r"group_sizes\[1\] must be an integer .*, got group_sizes\[1\]=8\.0",
        ),
        (dict(seeds=(0, True)), r"seeds\[1\] must be an integer >= 0, got seeds\[1\]=True"),
        (dict(lr=True), r"lr must be a finite number > 0, got lr=True"),
        (dict(lr="fast"), r"lr must be a finite number > 0, got lr='fast'"),
        (
            dict(reward_wrong=-(10**400)),
            r"reward_wrong must be a finite number >= -1e\+100 and <= 1e\+100, got "
            r"reward_wrong=-10+\.\.\.",  # repr cut
        ),
        (
            dict(adam_betas=(0.9,)),
            r"adam_betas must be a list of 2 values, .*, got adam_betas=\(0\.9,\)",
        ),
        (dict(group_sizes=4), r"group_sizes must be a non-empty list .*, got group_sizes=4"),
        (
            dict(initial_logits=(0.0,) * 299 + (np.inf,)),
            r"initial_logits\[299\] must be a finite number, got initial_logits\[299\]=inf",
        ),
    ],
)
def test_a_bad_field_is_one_value_error_naming_it_and_its_value(bad, message):
    """A bool is never a number, a float (even 40.0) never an integer, text must be a number."""
    with pytest.raises(ValueError, match=f"^{message}$"):
        replace(SMALL, **bad)


def test_sparse_engine_refuses_dense_options():
    with pytest.raises(ValueError, match="sparse"):
        run_sweep(replace(SMALL, surrogate="prob"), engine="sparse", progress=False)


def test_regime_sweep_demo_fast_writes_csv_and_figure(tmp_path):
    from fgrpo_theory.demo import regime_sweep_demo

    out = regime_sweep_demo(tmp_path, fast=True)
    assert (tmp_path / "regimes.csv").stat().st_size > 0
    assert (tmp_path / "regimes.png").stat().st_size > 0
    m = out["final_m_ret"]["gamma=0"]
    assert set(m) == set(PRESETS["tiny"].group_sizes) and all(0 <= x <= 1 for x in m.values())
