"""The forecast model (fgrpo_theory.forecast): the tied prefix-tree policy starts at the base,
stays a distribution, takes the exact policy-gradient step (by hand and by finite differences),
equals the dense categorical simulator where it has one prompt, depth 1 and no sharing, and
treats focal gamma = 0 as GRPO."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from fgrpo_theory.forecast import (
    MALFORMED,
    ForecastBase,
    Optimizer,
    PromptAnswers,
    RunSchedule,
    build_forest,
    forecast,
    train_once,
)
from fgrpo_theory.forecast.policy import edge_logp, gather, outcome_logp, policy_gradient
from fgrpo_theory.forecast.synthetic import countdown_like
from fgrpo_theory.forecast.train import draw_inverse_cdf
from fgrpo_theory.sim.config import SimConfig
from fgrpo_theory.sim.dense import simulate_batch
from fgrpo_theory.sim.samplers import layout, sample_group
from fgrpo_theory.weighting import parse_weighting


def _pa(pid, texts, probs, correct):
    toks = tuple(tuple(t) for t in texts)  # one character, one token
    return PromptAnswers(pid, tuple(texts), toks, np.log(probs), np.array(correct))


def _policy(f, delta=None, phi=None):
    """log pi(o | x) of every outcome of every prompt of forest f."""
    g = gather(f, np.arange(f.num_prompts))
    delta = np.zeros(f.num_edges) if delta is None else delta
    phi = np.zeros(f.num_shared + 1) if phi is None else phi
    return outcome_logp(g, edge_logp(g, delta, phi))


def _fixed(draws):
    """A sampler that returns the given (B, N) local outcome indices at every call."""
    return lambda p, first, count, N, rng: first[:, None] + np.asarray(draws)


# --- the initial policy is the base ------------------------------------------------------------


def test_initial_policy_reproduces_the_base_distribution():
    ps = countdown_like(5, np.random.default_rng(1))
    ps.append(_pa("h", ["12", "1", "21"], [0.5, 0.2, 0.2], [True, False, False]))
    f = build_forest(ps)
    np.testing.assert_allclose(_policy(f), f.base_logp, rtol=0, atol=1e-12)
    # the malformed outcome is last in each prompt, with the remainder 1 - sum
    last = f.outcome_start[1:] - 1
    np.testing.assert_allclose(np.exp(f.base_logp[last[-1]]), 0.1, atol=1e-12)


def test_shared_keys_tie_the_same_prefix_across_prompts():
    a = _pa("a", ["12", "13"], [0.5, 0.4], [True, False])
    b = _pa("b", ["12", "31"], [0.3, 0.3], [True, False])
    f = build_forest([a, b])
    key = {}
    for e in range(f.num_edges):
        key.setdefault(f.key_of(e), set()).add(int(f.edge_key[e]))
    # each (prefix, token) pair is one shared slot, and different pairs differ
    assert all(len(v) == 1 for v in key.values())
    assert len({next(iter(v)) for v in key.values()}) == len(key) == f.num_shared
    # a's root: "1", MALFORMED; a's "1": "2", "3"; b's root: "1", "3", MALFORMED
    assert set(key) == {((), "1"), ((), MALFORMED), (("1",), "2"), (("1",), "3"), ((), "3")}
    root = [[f.key_of(e) for e in range(f.edge_start[i], f.edge_start[i + 1])] for i in (0, 1)]
    assert ((), "1") in root[0] and ((), "1") in root[1]
    assert f.edge_key[f.edge_start[0]] == f.edge_key[f.edge_start[1]]  # the same first root edge
    assert build_forest([a, b], share="none").num_shared == 0
    with pytest.raises(ValueError, match="same tokens"):
        build_forest(
            [
                PromptAnswers(
                    "c", ("x", "y"), (("1",), ("1",)), np.log([0.5, 0.5]), np.array([True, False])
                )
            ]
        )


_tokens = st.lists(st.sampled_from("abc"), min_size=1, max_size=3).map(tuple)


@st.composite
def _prompts(draw):
    out = []
    for i in range(draw(st.integers(1, 3))):
        toks = draw(st.lists(_tokens, min_size=1, max_size=6, unique=True))
        w = np.array(
            draw(st.lists(st.floats(0.01, 1.0), min_size=len(toks) + 1, max_size=len(toks) + 1))
        )
        w /= w.sum()
        correct = np.array(draw(st.lists(st.booleans(), min_size=len(toks), max_size=len(toks))))
        texts = tuple("".join(t) for t in toks)
        out.append(PromptAnswers(f"x{i}", texts, tuple(toks), np.log(w[:-1]), correct))
    return out


@settings(max_examples=60, deadline=None)
@given(_prompts(), st.integers(0, 2**32 - 1), st.floats(0.0, 5.0))
def test_probabilities_sum_to_one_per_prompt_and_start_at_the_base(ps, seed, scale):
    f = build_forest(ps)
    np.testing.assert_allclose(_policy(f), f.base_logp, atol=1e-12)
    rng = np.random.default_rng(seed)
    logp = _policy(
        f,
        scale * rng.normal(size=f.num_edges),
        np.append(scale * rng.normal(size=f.num_shared), 0.0),
    )
    for i in range(f.num_prompts):
        seg = logp[f.outcome_start[i] : f.outcome_start[i + 1]]
        assert abs(logsumexp(seg)) < 1e-12


# --- one step by hand ---------------------------------------------------------------------------


def test_one_sgd_step_by_hand():
    """One prompt, answers "a" (correct, 0.6) and "b" (0.3), malformed 0.1; the group draws
    [a, b]: R = (1, 0), Bessel std sqrt(1/2), A = +-(1/2) / (sqrt(1/2) + 1e-6). With D = N = 2,
    dJ/dz_a = A+/2 - (A+/2 + A-/2) p_a = A+/2, dJ/dz_b = A-/2, dJ/dz_malformed = 0; the root's
    shared entries get the same gradient, so z_a moves by (s_theta + s_phi) lr A+/2."""
    pa = _pa("x", ["a", "b"], [0.6, 0.3], [True, False])
    base = ForecastBase([pa], [pa], [("x", "b")])
    lr, s_t, s_p = 0.3, 2.0, 0.5
    run = RunSchedule(
        order=[["x"]],
        group_size=2,
        weighting=parse_weighting("none"),
        lr=lr,
        optimizer=Optimizer("sgd"),
        reduction="group",
    )
    tr = train_once(
        base,
        run,
        lr_theta_scale=s_t,
        lr_phi_scale=s_p,
        rng=np.random.default_rng(0),
        sampler=_fixed([[0, 1]]),
    )
    c = 0.5 / (math.sqrt(0.5) + 1e-6) / 2
    z = np.log([0.6, 0.3, 0.1]) + (s_t + s_p) * lr * np.array([c, -c, 0.0])
    np.testing.assert_allclose(_policy(base.forest, tr.delta, tr.phi), z - logsumexp(z), atol=1e-12)


def _reference_logp(ps, theta, phi, share=lambda n, c: (n, c)):
    """log pi(o | x) by an independent, loop-based computation: each prompt's tree from its
    tokens, one softmax per node over theta[(x, n, c)] + phi[key]."""
    out = []
    for pa in ps:
        kids = {}
        for toks in pa.tokens:
            for i in range(len(toks)):
                kids.setdefault(toks[:i], set()).add(toks[i])
            kids.setdefault(toks, set()).add("<END>")
        kids[()].add("<MAL>")

        def lp(n, c, pid=pa.prompt_id, kids=kids):
            z = {k: theta[(pid, n, k)] + phi.get(share(n, k), 0.0) for k in kids[n]}
            return z[c] - logsumexp(list(z.values()))

        for toks in pa.tokens:
            path = [(toks[:i], toks[i]) for i in range(len(toks))] + [(toks, "<END>")]
            out.append(sum(lp(n, c) for n, c in path))
        out.append(lp((), "<MAL>"))
    return np.array(out)


def _children(pa) -> dict:
    """prefix -> the set of its children (next tokens, "<END>", and "<MAL>" at the root)."""
    kids = {}
    for toks in pa.tokens:
        for i in range(len(toks)):
            kids.setdefault(toks[:i], set()).add(toks[i])
        kids.setdefault(toks, set()).add("<END>")
    kids[()].add("<MAL>")
    return kids


def _edge_mass(pa, mass: dict, n: tuple, c: str) -> float:
    """The base's mass below edge (n -> c)."""
    if c == "<MAL>":
        return math.exp(pa.malformed_logp)
    if c == "<END>":
        return math.exp(dict(zip(pa.tokens, pa.logp, strict=True))[n])
    return mass[n + (c,)]


def _reference_parameters(pas) -> tuple[dict, dict]:
    """theta (the base's log conditionals, from the masses of subtrees) and phi (0), as dicts
    keyed by (prompt, prefix, child) and (prefix, child): the independent definition."""
    theta, phi = {}, {}
    for pa in pas:
        mass = {}  # prefix -> the base's mass of the answers below it
        for toks, lp_ in zip(pa.tokens, pa.logp, strict=True):
            for i in range(len(toks) + 1):
                mass[toks[:i]] = mass.get(toks[:i], 0.0) + math.exp(lp_)
        for n, cs in _children(pa).items():
            for c in cs:
                m = _edge_mass(pa, mass, n, c)
                theta[(pa.prompt_id, n, c)] = math.log(m) - math.log(1.0 if n == () else mass[n])
                phi[(n, c)] = 0.0
    return theta, phi


def test_one_step_equals_finite_differences_of_the_surrogate_with_sharing():
    """Two prompts sharing the prefix "1": fixed draws, one SGD step at D = B N; the update of
    every logit equals lr times the finite-difference gradient of J = (1/D) sum A log pi."""
    a = _pa("a", ["12", "13", "2"], [0.4, 0.3, 0.2], [True, False, False])
    b = _pa("b", ["12", "31"], [0.5, 0.3], [False, True])
    base = ForecastBase([a, b], [a], [("a", "13")])
    draws = np.array([[0, 1, 3, 0], [1, 2, 0, 1]])  # local outcomes (3 = a's malformed)
    N, lr = 4, 0.7
    run = RunSchedule(
        order=[["a", "b"]],
        group_size=N,
        weighting=parse_weighting("focal:1"),
        lr=lr,
        optimizer=Optimizer("sgd"),
    )
    tr = train_once(
        base,
        run,
        lr_theta_scale=1.0,
        lr_phi_scale=1.0,
        rng=np.random.default_rng(0),
        sampler=_fixed(draws),
    )
    # the independent computation: parameters as dicts, gradient by central differences
    f = base.forest
    theta, phi = _reference_parameters((a, b))
    lp0 = _reference_logp((a, b), theta, phi)
    np.testing.assert_allclose(lp0, f.base_logp, atol=1e-12)

    R = f.correct[np.concatenate([draws[0], draws[1] + 4])].reshape(2, N).astype(float)
    A, _, _ = run.advantages(R)
    flat = np.concatenate([draws[0], draws[1] + 4])

    def J(th, ph):
        lp = _reference_logp((a, b), th, ph)
        return float((A.ravel() * lp[flat]).sum() / (2 * N))

    h, new_t, new_p = 1e-6, dict(theta), dict(phi)
    for table, new, other in ((theta, new_t, "t"), (phi, new_p, "p")):
        for k in table:
            up, dn = dict(table), dict(table)
            up[k] += h
            dn[k] -= h
            args = ((up, phi), (dn, phi)) if other == "t" else ((theta, up), (theta, dn))
            new[k] = table[k] + lr * (J(*args[0]) - J(*args[1])) / (2 * h)
    expected = _reference_logp((a, b), new_t, new_p)
    np.testing.assert_allclose(_policy(f, tr.delta, tr.phi), expected, atol=1e-8)
    assert not np.allclose(expected, lp0, atol=1e-3)  # the step moved the policy


# --- against the dense single-prompt simulator --------------------------------------------------


@pytest.mark.parametrize("gamma", [0.0, 1.0])
def test_one_prompt_depth_one_untied_sgd_equals_the_dense_simulator(gamma):
    """K actions as K one-token answers of one prompt (no malformed mass, no sharing): with the
    simulator's draws (the same generator, seeded (seed, N)), GRPO advantages (Bessel, 1e-6),
    0/1 rewards, (1/N) per group and SGD, Q_pos and the rare mass match the dense engine's."""
    K, C, E, N, T, lr, seed = 40, 10, 3, 8, 25, 2.0, 3
    z0 = np.random.default_rng(7).normal(0, 1.0, K)
    cfg = SimConfig(
        actions=K,
        correct=C,
        rare=E,
        initial_logits=tuple(z0),
        group_sizes=(N,),
        gammas=(gamma,),
        seeds=(seed,),
        steps=T,
        lr=lr,
        optimizer="sgd",
        advantage="grpo",
        reward_correct=1.0,
        reward_wrong=0.0,
    )
    rec = simulate_batch(cfg, N, [(gamma, seed)])
    logp = z0 - logsumexp(z0)
    pa = PromptAnswers(
        "x",
        tuple(f"a{k}" for k in range(K)),
        tuple((f"a{k}",) for k in range(K)),
        logp,
        np.arange(K) < C,
    )
    base = ForecastBase([pa], [pa], [("x", f"a{k}") for k in range(1, 1 + E)], share="none")
    Bk, nb, Kp = layout(K)

    def dense_draws(p, first, count, N, rng):
        e = np.zeros(Kp)
        e[:K] = p[:K]
        uniq, cnt = sample_group(e, e.reshape(nb, Bk).sum(axis=1), N, rng, Bk)
        return np.repeat(uniq, cnt)[None, :]

    run = RunSchedule(
        order=[["x"]] * T,
        group_size=N,
        weighting=parse_weighting(f"focal:{gamma}"),
        lr=lr,
        optimizer=Optimizer("sgd"),
        reduction="group",
    )
    tr = train_once(
        base,
        run,
        lr_theta_scale=1.0,
        lr_phi_scale=0.0,
        rng=np.random.default_rng([seed, N]),
        sampler=dense_draws,
    )
    p = np.exp(_policy(base.forest, tr.delta, tr.phi))
    np.testing.assert_allclose(p[:C].sum(), rec["q_pos"][0, T], rtol=1e-9)
    np.testing.assert_allclose(p[1 : 1 + E].sum(), rec["tau"][0, T], rtol=1e-9)
    assert abs(rec["q_pos"][0, T] - rec["q_pos"][0, 0]) > 1e-3  # training moved it


# --- the weighting -----------------------------------------------------------------------------


def _small_run(weighting, optimizer="adam", steps=6):
    ps = countdown_like(12, np.random.default_rng(2))
    rare = [(pa.prompt_id, pa.answers[int(np.flatnonzero(pa.correct)[0])]) for pa in ps[:4]]
    base = ForecastBase(ps[:10], ps[10:], rare)
    order = [[f"p{(2 * t + j) % 10}" for j in range(3)] for t in range(steps)]
    run = RunSchedule(
        order=order,
        group_size=8,
        weighting=parse_weighting(weighting),
        lr=0.05,
        optimizer=Optimizer(optimizer, weight_decay=0.01, warmup_steps=3),
    )
    return base, run


def test_focal_gamma_zero_is_grpo_exactly():
    base, run0 = _small_run("focal:0")
    _, run_none = _small_run("none")
    _, run1 = _small_run("focal:1")
    out = {}
    for name, run in (("f0", run0), ("none", run_none), ("f1", run1)):
        out[name] = train_once(
            base, run, lr_theta_scale=3.0, lr_phi_scale=1.0, rng=np.random.default_rng(5)
        )
    assert np.array_equal(out["f0"].delta, out["none"].delta)
    assert np.array_equal(out["f0"].phi, out["none"].phi)
    assert not np.array_equal(out["f1"].delta, out["none"].delta)


def test_maxrl_advantage_is_r_minus_mu_over_mu():
    _, run = _small_run("maxrl")
    R = np.array([[1.0, 0, 0, 0, 0, 0, 0, 0], [0.0] * 8, [1.0, 1, 1, 0, 0, 0, 0, 0]])
    A, w, active = run.advantages(R)
    mu = R.mean(axis=1, keepdims=True)
    expected = np.where(mu > 0, (R - mu) / np.where(mu > 0, mu, 1), 0.0)
    np.testing.assert_allclose(A, expected, atol=1e-12)
    assert active.tolist() == [True, False, True]


def test_replicates_average_the_runs_and_the_seed_fixes_them():
    base, run = _small_run("none")
    one = forecast(base, run, lr_theta_scale=3.0, lr_phi_scale=1.0, seed=4)
    again = forecast(base, run, lr_theta_scale=3.0, lr_phi_scale=1.0, seed=4)
    two = forecast(base, run, lr_theta_scale=3.0, lr_phi_scale=1.0, seed=4, replicates=2)
    assert one.delta_nll_rare == again.delta_nll_rare
    assert two.replicates == 2 and two.delta_nll_rare != one.delta_nll_rare
    assert one.delta_nll_per_rare.shape == (4,)
    np.testing.assert_allclose(one.delta_nll_rare, one.delta_nll_per_rare.mean())
    zero = forecast(base, run, lr_theta_scale=0.0, lr_phi_scale=0.0, seed=4)
    assert zero.delta_nll_rare == 0.0
    assert zero.pass_at[64] == pytest.approx(base.base_pass_at(64), abs=1e-12)


def test_per_token_divides_each_rare_trajectory_by_its_tokens_and_the_end():
    base, run = _small_run("focal:1")
    ps = countdown_like(12, np.random.default_rng(2))  # _small_run's prompts
    ks = [int(np.flatnonzero(pa.correct)[0]) for pa in ps[:4]]
    rare = [(pa.prompt_id, pa.answers[k]) for pa, k in zip(ps, ks, strict=False)]
    per_tok = ForecastBase(ps[:10], ps[10:], rare, per_token=True)
    lengths = [len(pa.tokens[k]) + 1 for pa, k in zip(ps, ks, strict=False)]
    assert min(lengths) > 1
    a = forecast(base, run, lr_theta_scale=3.0, lr_phi_scale=1.0, seed=4)
    b = forecast(per_tok, run, lr_theta_scale=3.0, lr_phi_scale=1.0, seed=4)
    np.testing.assert_allclose(b.delta_nll_per_rare, a.delta_nll_per_rare / lengths, rtol=1e-12)
    assert b.pass_at == a.pass_at


def test_pass_at_k_is_exact_on_the_final_distribution():
    pa = _pa("x", ["a", "b"], [0.6, 0.3], [True, False])
    base = ForecastBase([pa], [pa], [("x", "a")])
    for k in (1, 64):
        assert base.base_pass_at(k) == pytest.approx(1 - 0.4**k, rel=1e-12)


# --- sampling and bad input -------------------------------------------------------------------


def test_inverse_cdf_draws_follow_the_probabilities_and_skip_zero_mass():
    p = np.array([0.5, 0.0, 0.5, 0.2, 0.8, 0.0])
    first, count = np.array([0, 3]), np.array([3, 3])
    d = draw_inverse_cdf(p, first, count, 20_000, np.random.default_rng(0))
    assert set(np.unique(d[0])) == {0, 2} and set(np.unique(d[1])) == {3, 4}
    assert abs((d[1] == 3).mean() - 0.2) < 0.01  # 4.4 standard errors


def test_bad_inputs_name_the_value():
    pa = _pa("x", ["a", "b"], [0.6, 0.3], [True, False])
    with pytest.raises(ValueError, match="'y'"):
        ForecastBase([pa], [pa], [("x", "y")])
    with pytest.raises(ValueError, match="listed twice"):
        build_forest([pa, pa])
    base = ForecastBase([pa], [pa], [("x", "a")])
    run = RunSchedule(order=[["z"]], group_size=2, weighting=parse_weighting("none"), lr=0.1)
    with pytest.raises(ValueError, match="'z'"):
        train_once(base, run, lr_theta_scale=1.0, lr_phi_scale=1.0, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="group_size"):
        RunSchedule(order=[["x"]], group_size=1, weighting=parse_weighting("none"), lr=0.1)
    with pytest.raises(ValueError, match="optimizer"):
        Optimizer("rmsprop")
    with pytest.raises(ValueError, match="lr_phi_scale"):
        train_once(
            base,
            RunSchedule(order=[["x"]], group_size=2, weighting=parse_weighting("none"), lr=0.1),
            lr_theta_scale=1.0,
            lr_phi_scale=-1.0,
            rng=np.random.default_rng(0),
        )


# --- the gradient against the forward pass, on random trees -------------------------------------


@settings(max_examples=30, deadline=None)
@given(_prompts(), st.integers(0, 2**32 - 1))
def test_policy_gradient_is_the_derivative_of_the_surrogate(ps, seed):
    """dJ/d delta and dJ/d phi of J = sum_o c_o log pi(o) (random c, random parameters) equal
    central differences of the forward pass."""
    f = build_forest(ps)
    rng = np.random.default_rng(seed)
    g = gather(f, np.arange(f.num_prompts))
    delta = rng.normal(size=f.num_edges)
    phi = np.append(rng.normal(size=f.num_shared), 0.0)
    c = rng.normal(size=g.outcomes.size)

    def J(d, p):
        return float(c @ outcome_logp(g, edge_logp(g, d, p)))

    dz, _ = policy_gradient(g, edge_logp(g, delta, phi), c)
    h = 1e-6
    for e in range(f.num_edges):
        up, dn = delta.copy(), delta.copy()
        up[e] += h
        dn[e] -= h
        assert dz[e] == pytest.approx((J(up, phi) - J(dn, phi)) / (2 * h), abs=1e-6)
    d_phi = np.bincount(g.keys, weights=dz, minlength=f.num_shared + 1)
    for s in range(f.num_shared):
        up, dn = phi.copy(), phi.copy()
        up[s] += h
        dn[s] -= h
        assert d_phi[s] == pytest.approx((J(delta, up) - J(delta, dn)) / (2 * h), abs=1e-6)


def test_adam_moves_a_prompt_only_when_it_is_trained():
    """Lazy rows: after its visit a prompt's own logits stay put while other prompts train; its
    first Adam step moves each edge by at most lr_theta (|m_hat / sqrt(v_hat)| <= 1)."""
    base, run = _small_run("none", steps=1)
    lr_t = 3.0 * run.lr * run.optimizer.schedule(0)
    one = train_once(base, run, lr_theta_scale=3.0, lr_phi_scale=0.0, rng=np.random.default_rng(1))
    mine = slice(base.forest.edge_start[0], base.forest.edge_start[3])  # p0, p1, p2 of step 0
    assert np.abs(one.delta[mine]).max() > 0.5 * lr_t
    assert np.abs(one.delta).max() <= lr_t * (1 + 1e-9)
    later = RunSchedule(
        order=[run.order[0], ("p5", "p6", "p7")],
        group_size=8,
        weighting=run.weighting,
        lr=run.lr,
        optimizer=run.optimizer,
    )
    two = train_once(
        base, later, lr_theta_scale=3.0, lr_phi_scale=0.0, rng=np.random.default_rng(1)
    )
    np.testing.assert_array_equal(two.delta[mine], one.delta[mine])
    assert np.abs(two.delta[base.forest.edge_start[5] : base.forest.edge_start[8]]).max() > 0
