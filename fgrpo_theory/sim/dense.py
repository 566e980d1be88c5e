"""The dense reference engine of the categorical simulator (paper Section 5.1, Appendix J,
Fig. 2): every option (ratio or Eq. 5 "prob" surrogate, centred / GRPO / raw advantages, SGD or
Adam) on whole (R, K) arrays, for R runs that share the group size N.

One step draws a group of N actions from p = softmax(z) (``samplers.sample_group``), forms the
advantages and the focal weight g = (1 - X/N)^gamma (Eq. 11-13), and ascends

    ratio:  L = (g/N) sum_j r_j pi(a_j)/pi_old(a_j)   gradient (g/N) sum_j r_j (onehot(a_j) - p)
    prob:   L = (g/N) sum over distinct sampled a of r_a p_a   gradient (g/N) p_i (r_i - S_r)
            (Eq. 5)

by SGD or Adam, recording Q_pos, M_ret (Eq. 26), the entropy, Q_u,pos (correct mass the group
missed), the rare mass tau and the tail miss beside Lemma 3.1. Each run draws from its own
generator seeded by (seed, N), so a run gives the same numbers alone or in a batch.

    >>> from fgrpo_theory.sim.config import SimConfig
    >>> from fgrpo_theory.sim.dense import simulate_batch
    >>> cfg = SimConfig(actions=500, correct=40, group_sizes=(4,), steps=5)
    >>> simulate_batch(cfg, 4, [(0.0, 0), (1.0, 0)])["q_pos"].shape     # (runs, steps + 1)
    (2, 6)

Shapes: ``R`` runs in a batch, ``K`` actions (``Kp`` padded to whole blocks), ``N`` group,
``T`` steps.
"""

from __future__ import annotations

import numpy as np

from fgrpo_theory.sim.config import SimConfig
from fgrpo_theory.sim.group import (
    finish_records,
    focal_table,
    group_advantages,
    new_records,
    out_of_range,
    record_group,
)
from fgrpo_theory.sim.samplers import layout, sample_group

#: Logits are exponentiated relative to a fixed shift c (the initial max), moved up only when a
#: logit exceeds c + SHIFT_SLACK, so untouched actions keep bit-identical masses exp(z - c).
SHIFT_SLACK = 30.0


def _adam_step(z, G, m, v, tmp, t: int, cfg: SimConfig) -> None:
    """In place: m, v moments of the ascent direction G; z += lr m_hat / (sqrt(v_hat) + eps)."""
    b1, b2 = cfg.adam_betas
    m *= b1
    np.multiply(G, 1.0 - b1, out=tmp)
    m += tmp
    v *= b2
    np.multiply(G, G, out=tmp)
    tmp *= 1.0 - b2
    v += tmp
    np.sqrt(v, out=tmp)
    tmp *= 1.0 / np.sqrt(1.0 - b2 ** (t + 1))
    tmp += cfg.adam_eps
    np.divide(m, tmp, out=tmp)
    tmp *= cfg.lr / (1.0 - b1 ** (t + 1))
    z += tmp


def simulate_batch(cfg: SimConfig, N: int, runs: list[tuple[float, int]], *, progress=None) -> dict:
    """Simulate the runs [(gamma, seed), ...] that share the group size N, all at once, on dense
    (R, Kp) arrays (every option; the reference engine).

    Returns a dict of per-step records, each (R, T + 1) for policy quantities (t = 0..T) or
    (R, T) for group quantities (the group drawn at step t from pi_t)."""
    K, C, E, T = cfg.actions, cfg.correct, cfg.rare, cfg.steps
    R_c, R_w = cfg.reward_correct, cfg.reward_wrong
    R = len(runs)
    B, nb, Kp = layout(K)
    gamma = np.array([g for g, _ in runs], dtype=np.float64)  # (R,)
    rngs = [np.random.default_rng([seed, N]) for _, seed in runs]

    z = np.full((R, Kp), -1e30)  # padding: mass exactly 0
    z[:, :K] = cfg.logits0()
    c = z.max(axis=1, keepdims=True)  # (R, 1) shift
    zs, e, G, tmp = (np.empty((R, Kp)) for _ in range(4))
    adam = cfg.optimizer == "adam"
    if adam:
        m, v = np.zeros((R, Kp)), np.zeros((R, Kp))
    rec = new_records(R, T)
    g_table = focal_table(N, gamma, cfg.weighting)  # (R, N + 1)
    p0 = np.exp(z[0, :C] - c[0]) / np.exp(z[0, :K] - c[0]).sum()  # (C,) initial correct probs

    def softmax_and_record(t: int):
        """Fills zs = z - c, e = exp(zs); records pi_t; returns (block masses (R, nb), S (R,))."""
        zmax = z.max(axis=1, keepdims=True)
        np.copyto(c, zmax, where=zmax > c + SHIFT_SLACK)
        np.subtract(z, c, out=zs)
        np.exp(zs, out=e)
        s = e.reshape(R, nb, B).sum(axis=2)  # (R, nb)
        S = s.sum(axis=1)  # (R,)
        if not ((S > 0.0) & (S < np.inf)).all():  # NaN or inf masses: no policy to sample
            raise out_of_range(N, t, cfg.lr)
        pc = e[:, :C] / S[:, None]  # (R, C) correct probs
        rec["q_pos"][:, t] = pc.sum(axis=1)
        rec["tau"][:, t] = pc[:, 1 : 1 + E].sum(axis=1)
        np.subtract(p0, pc, out=pc)
        np.maximum(pc, 0.0, out=pc)
        rec["m_ret"][:, t] = 1.0 - pc.sum(axis=1) / p0.sum()  # Eq. 26
        rec["entropy"][:, t] = np.log(S) - np.einsum("rk,rk->r", e[:, :K], zs[:, :K]) / S
        return s, S

    for t in range(T):
        # --- sample: N draws per run from pi_t
        s, S = softmax_and_record(t)
        counts = np.zeros((R, Kp), dtype=np.int64)
        for r in range(R):
            uniq, cnt = sample_group(e[r], s[r], N, rngs[r], B)
            counts[r, uniq] = cnt
        np.divide(e, S[:, None], out=e)  # e is now p (R, Kp)
        # --- score: X correct draws, tail miss of the rare subset (Lemma 3.1)
        X = counts[:, :C].sum(axis=1)
        sampled_c = counts[:, :C] > 0
        record_group(
            rec,
            slice(None),
            t,
            X=X,
            N=N,
            hit_rare=counts[:, 1 : 1 + E].any(axis=1),
            sampled_correct_mass=(e[:, :C] * sampled_c).sum(axis=1),
            S=1.0,
            q_pos=rec["q_pos"][:, t],
        )
        # --- advantages and the weight g = w(mu_hat), (1 - mu_hat)^gamma for the focal one
        r_c, r_w = group_advantages(X, N, R_c=R_c, R_w=R_w, kind=cfg.advantage)
        w = g_table[np.arange(R), X]  # (R,) g / N
        # --- ascent direction G (R, Kp)
        if cfg.surrogate == "ratio":
            # sum_j r_j (onehot(a_j) - p): counts times the action's advantage ...
            np.multiply(counts[:, :C], r_c[:, None], out=G[:, :C])
            np.multiply(counts[:, C:], r_w[:, None], out=G[:, C:])
            if cfg.advantage == "raw":  # ... minus p sum_j r_j
                np.multiply(e, (X * r_c + (N - X) * r_w)[:, None], out=tmp)
                G -= tmp  # (sum_j r_j = 0 otherwise)
        else:
            # Eq. 5 over distinct sampled actions: p_i (r_i 1{i sampled} - S_r)
            sampled = counts > 0
            S_r = r_c * (e[:, :C] * sampled_c).sum(axis=1) + r_w * (e[:, C:] * sampled[:, C:]).sum(
                axis=1
            )
            np.multiply(sampled[:, :C], r_c[:, None], out=G[:, :C])
            np.multiply(sampled[:, C:], r_w[:, None], out=G[:, C:])
            G -= S_r[:, None]
            G *= e
        G *= w[:, None]
        # --- step (ascent), in place
        if adam:
            _adam_step(z, G, m, v, tmp, t, cfg)
        else:
            G *= cfg.lr
            z += G
        if progress is not None:
            progress(R)
    softmax_and_record(T)
    return finish_records(rec, N, lr=cfg.lr)
