"""The engines' contract (paper Section 5.1, App. J; ``fgrpo_theory.sim.agreement``): each engine
is deterministic for a given (config, seed, machine); the engines agree in distribution over
seeds (final Q_pos and M_ret, Welch t at a family-wise false-alarm rate of 1e-4), also with the
compiled engine's exp an ulp off; what does not depend on the draws (the initial state, Adam's
schedule) agrees exactly; and the check fails for an engine that ignores gamma."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fgrpo_theory.sim import PRESETS, SimConfig, compiled, run_sweep
from fgrpo_theory.sim.agreement import compare, compare_sweeps
from tests.theory.csv_compare import exp_scale

#: A reduced sweep over both samplers (block: N < Kp / 8; guide table) and full mode.
CFG = SimConfig(
    actions=640,
    correct=50,
    group_sizes=(2, 16, 128, 2048),
    gammas=(0.0, 1.0),
    seeds=tuple(range(16)),
    steps=60,
    lr=3e-2,
)
#: The same sweep on other seeds: independent draws.
OTHER = replace(CFG, seeds=tuple(range(100, 116)))


@pytest.fixture(scope="module")
def sparse_other():
    return run_sweep(OTHER, engine="sparse", progress=False)


@pytest.mark.parametrize("scale", [1.0, 1.0 + 2.0**-52, 1.0 - 2.0**-53])
def test_compiled_engine_agrees_with_the_sparse_engine_in_distribution(scale, sparse_other):
    with exp_scale(scale):
        got = run_sweep(CFG, engine="compiled", progress=False)
    agreement = compare_sweeps(got, sparse_other)
    assert agreement.ok, agreement.summary()
    moved = np.abs(got.records["q_pos"][..., -1] - got.records["q_pos"][..., 0]).max()
    assert moved > 0.05  # the policy moved, so the check has teeth


def _split_or_skip(monkeypatch):
    """Skip where the split engine does not run; else split runs of every group size."""
    from fgrpo_theory.sim import split

    if split.unavailable_reason() is not None:
        pytest.skip(f"split engine: {split.unavailable_reason()}")
    monkeypatch.setattr(split, "SPLIT_FROM", 2)


def test_split_engine_agrees_with_the_sparse_engine_in_distribution(sparse_other, monkeypatch):
    """Its own random numbers (a binomial split of each group between two halves of the
    actions, then each half's own draws), the same law."""
    _split_or_skip(monkeypatch)
    got = run_sweep(CFG, engine="split", progress=False)
    agreement = compare_sweeps(got, sparse_other)
    assert agreement.ok, agreement.summary()


def test_dense_engine_agrees_with_the_sparse_engine_in_distribution(sparse_other):
    agreement = compare_sweeps(run_sweep(CFG, engine="dense", progress=False), sparse_other)
    assert agreement.ok, agreement.summary()


def test_torch_engine_agrees_with_the_numpy_engines_in_distribution(sparse_other):
    pytest.importorskip("torch")
    got = run_sweep(CFG, engine="torch", device="cpu", progress=False)
    agreement = compare_sweeps(got, sparse_other)
    assert agreement.ok, agreement.summary()


@pytest.mark.parametrize("engine", ["compiled", "split"])
def test_an_engine_that_ignores_gamma_disagrees(engine, sparse_other, monkeypatch):
    """The check has teeth: the compiled (or split) engine with every run at gamma = 0 fails
    it, at the group sizes where the focal weight matters."""
    if engine == "split":
        _split_or_skip(monkeypatch)
    table = compiled.focal_table
    monkeypatch.setattr(compiled, "focal_table", lambda N, gamma, *rest: table(N, 0.0, *rest))
    agreement = compare_sweeps(run_sweep(CFG, engine=engine, progress=False), sparse_other)
    assert not agreement.ok
    bad = {(c.N, c.gamma) for c in agreement.cells if not c.ok}
    assert bad and all(gamma == 1.0 for _, gamma in bad)


def test_the_false_alarm_rate_is_the_stated_one():
    """Two samples of one distribution: over 2,000 comparisons of 16 vs 16 normal draws at
    alpha = 0.05 (one cell each), about 5% fail."""
    rng = np.random.default_rng(7)
    fails = sum(
        not compare(
            {"q_pos": rng.normal(0.3, 0.05, (1, 1, 16, 1))},
            {"q_pos": rng.normal(0.3, 0.05, (1, 1, 16, 1))},
            (8,),
            (1.0,),
            keys=("q_pos",),
            alpha=0.05,
        ).ok
        for _ in range(2000)
    )
    assert 0.035 <= fails / 2000 <= 0.065


def test_the_false_alarm_rate_is_shared_among_the_comparisons():
    """m comparisons (8 cells x 2 quantities): each at alpha / m (Bonferroni), so the family
    fails about alpha of the time, not m alpha."""
    rng = np.random.default_rng(8)

    def family():
        def draw():
            return {k: rng.normal(0.3, 0.05, (4, 2, 16, 1)) for k in ("q_pos", "m_ret")}

        return compare(draw(), draw(), (2, 4, 8, 16), (0.0, 1.0), alpha=0.2)

    fails = sum(not family().ok for _ in range(400))
    # Binomial(400, <= 0.2): at most ~0.2 (Bonferroni is a bound; independent cells give 0.18);
    # alpha per comparison would fail 1 - 0.8^16 = 97% of the families
    assert 0.10 <= fails / 400 <= 0.25


def test_compare_rejects_bad_shapes_and_alpha():
    a = {"q_pos": np.zeros((2, 1, 4, 3)), "m_ret": np.zeros((2, 1, 4, 3))}
    with pytest.raises(ValueError, match="alpha"):
        compare(a, a, (2, 4), (1.0,), alpha=0.0)
    with pytest.raises(ValueError, match="do not match"):
        compare(a, a, (2,), (1.0,))
    one = {k: v[:, :, :1] for k, v in a.items()}
    with pytest.raises(ValueError, match="at least 2 seeds"):
        compare(one, one, (2, 4), (1.0,))


@pytest.mark.parametrize("engine", ["dense", "sparse", "compiled", "split", "torch"])
def test_each_engine_is_deterministic(engine, monkeypatch):
    if engine == "torch":
        pytest.importorskip("torch")
    if engine == "split":
        _split_or_skip(monkeypatch)
    cfg = replace(CFG, group_sizes=(16, 2048), seeds=(3,), steps=20)
    kw = {"device": "cpu"} if engine == "torch" else {}
    a = run_sweep(cfg, engine=engine, progress=False, **kw)
    b = run_sweep(cfg, engine=engine, progress=False, **kw)
    for key in a.records:
        np.testing.assert_array_equal(a.records[key], b.records[key], err_msg=key)


def test_what_does_not_depend_on_the_draws_agrees_exactly():
    """The initial state (step 0's records) is the same in the numpy engines, and the compiled
    engine's tabulated Adam scalars are lazy Adam's, step for step."""
    cfg = replace(CFG, group_sizes=(16,), seeds=(0,), steps=250)
    first = {e: run_sweep(cfg, engine=e, progress=False).records for e in ("sparse", "compiled")}
    for key in ("q_pos", "m_ret", "entropy", "tau"):
        np.testing.assert_array_equal(first["compiled"][key][..., 0], first["sparse"][key][..., 0])
    # the compiled engine's table replayed as lazy Adam on made-up gradients (some steps 0, as
    # for an undrawn action) is textbook bias-corrected Adam, every column of it
    A = compiled._adam_schedule(cfg)
    b1, b2 = cfg.adam_betas
    G = (
        np.random.default_rng(0).normal(size=(cfg.steps, 3))
        * (np.arange(cfg.steps) % 3 > 0)[:, None]
    )
    m_t, w_t, lazy = np.zeros(3), np.zeros(3), np.zeros(3)
    m, v, plain = np.zeros(3), np.zeros(3), np.zeros(3)
    for t in range(cfg.steps):
        c1, c2, alpha, epsk, rebase, fm, fw = A[t]
        m_t += c1 * G[t]
        w_t = np.sqrt(w_t**2 + c2 * G[t] ** 2)
        lazy += alpha * m_t / (w_t + epsk)
        if rebase:
            m_t, w_t = m_t * fm, w_t * fw
        k = t + 1
        m, v = b1 * m + (1 - b1) * G[t], b2 * v + (1 - b2) * G[t] ** 2
        plain += cfg.lr * (m / (1 - b1**k)) / (np.sqrt(v / (1 - b2**k)) + cfg.adam_eps)
        np.testing.assert_allclose(lazy, plain, rtol=1e-10, atol=1e-12)
    assert A[:, 4].sum() == 2  # rebased at steps 100 and 200


def _avx512_off_env() -> dict | None:
    """The environment that turns numpy's AVX-512 dispatch off, on an AVX-512 machine."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    if " avx512f" not in flags:
        return None
    features = "AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL"
    features += " AVX512_ICL AVX512_SPR X86_V4"
    return {**os.environ, "NPY_DISABLE_CPU_FEATURES": features}


def test_both_numpy_dispatches_give_the_same_findings(tmp_path):
    """On an AVX-512 machine, numpy's exp with its AVX-512 dispatch on and off differs in the
    last bit: each engine's sweep in the two settings agrees in distribution, the compiled
    engine's to rounding (its exp is its own; only the initial masses use np.exp)."""
    env = _avx512_off_env()
    if env is None:
        pytest.skip("not an AVX-512 machine: numpy has one dispatch here")
    script = (
        "import sys, numpy as np\n"
        "from tests.theory.test_sim_agreement import CFG\n"
        "from fgrpo_theory.sim import run_sweep\n"
        "from fgrpo_theory.sim import split\n"
        "engines = ['compiled', 'sparse'] + ['split'] * (split.unavailable_reason() is None)\n"
        "for e in engines:\n"
        "    r = run_sweep(CFG, engine=e, progress=False).records\n"
        "    np.savez(sys.argv[1] + e + '.npz', **r)\n"
    )
    root = Path(__file__).resolve().parents[2]
    for name, e in (("on_", None), ("off_", env)):
        subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / name)], check=True, cwd=root, env=e
        )
    for e in ("compiled", "sparse", "split"):
        if not (tmp_path / f"on_{e}.npz").exists():
            continue  # (the split engine where it does not run)
        on, off = np.load(tmp_path / f"on_{e}.npz"), np.load(tmp_path / f"off_{e}.npz")
        agreement = compare(dict(on), dict(off), CFG.group_sizes, CFG.gammas)
        assert agreement.ok, (e, agreement.summary())
    on, off = np.load(tmp_path / "on_compiled.npz"), np.load(tmp_path / "off_compiled.npz")
    np.testing.assert_allclose(on["q_pos"], off["q_pos"], rtol=1e-9, atol=1e-12)


def test_maxrl_weighting_in_every_engine_agrees_in_distribution():
    """SimConfig(weighting='maxrl'): w = sqrt((1 - X/N) / (X/N)) in the numpy, compiled and
    torch engines alike (``fgrpo_theory.weighting.maxrl``), and the engines agree."""
    from fgrpo_theory.sim.group import focal_table
    from fgrpo_theory.weighting import maxrl

    np.testing.assert_allclose(
        focal_table(8, 0.0, "maxrl")[0] * 8, maxrl()(np.arange(9) / 8), rtol=1e-15
    )
    cfg = replace(CFG, group_sizes=(4, 128, 2048), gammas=(0.0,), weighting="maxrl")
    ref = run_sweep(replace(cfg, seeds=OTHER.seeds), engine="sparse", progress=False)
    for engine in ("compiled", "dense", "torch"):
        if engine == "torch":
            pytest.importorskip("torch")
        kw = {"device": "cpu"} if engine == "torch" else {}
        got = run_sweep(cfg, engine=engine, progress=False, **kw)
        agreement = compare_sweeps(got, ref)
        assert agreement.ok, (engine, agreement.summary())
    focal_run = run_sweep(replace(cfg, weighting="focal", gammas=(1.0,)), progress=False)
    assert not np.array_equal(focal_run.records["q_pos"], got.records["q_pos"])
    with pytest.raises(ValueError, match="maxrl' ignores gamma"):
        replace(CFG, weighting="maxrl")


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["compiled", "split", "torch"])
def test_engines_agree_inside_the_collapse_zone(engine, monkeypatch):
    """The reduced sweep above ends with M_ret near 1 in every cell; the 'small' preset (K =
    12,800, 300 steps, past lazy Adam's rebases) collapses M_ret at N = 64 ... 1,024 and keeps it
    at 4,096: the engines agree there too (16 seeds against 16 others of the sparse engine)."""
    if engine == "torch":
        pytest.importorskip("torch")
    if engine == "split":
        _split_or_skip(monkeypatch)
    small = replace(PRESETS["small"], group_sizes=(16, 64, 1024, 4096))
    kw = {"device": "cpu"} if engine == "torch" else {}
    got = run_sweep(replace(small, seeds=tuple(range(16))), engine=engine, progress=False, **kw)
    ref = run_sweep(replace(small, seeds=tuple(range(100, 116))), engine="sparse", progress=False)
    agreement = compare_sweeps(got, ref)
    assert agreement.ok, agreement.summary()
    m_ret = ref.records["m_ret"][..., -1].mean(axis=2)  # (N, gamma) over seeds
    assert m_ret.min() < 0.5 < m_ret.max()  # the zone is reached, and left
