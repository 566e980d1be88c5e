"""The two engines of the multi-step categorical simulator (paper Section 5.1, Appendix J,
Fig. 2; SPEC.md §4): one step draws a group of N actions from p = softmax(z), forms advantages
r_j and the focal weight g = (1 - X/N)^gamma (Eq. 11-13), and ascends the ratio or the Eq. 5
(prob) surrogate by SGD or Adam, recording Q_pos, M_ret (Eq. 26), the entropy, Q_u,pos, tau and
the tail miss beside Lemma 3.1.

``simulate_batch`` (dense, every option) keeps the runs that share N as (R, K) arrays updated
in place. ``simulate_run_sparse`` serves the paper's setting (ratio surrogate, zero-sum
advantages, ``sparse_applies``): the ascent direction is then (g/N) c_a r_a on the sampled
actions a (c_a their counts) and zero elsewhere, so an action never sampled keeps zero Adam
moments and its logit; a step only touches the actions sampled so far plus running sums for the
rest (``_TouchedSet``, O(N + |touched|) instead of O(K)), with Adam's moment decay made free by
rescaled moments (``_LazyAdam``); it switches to whole arrays once half of the actions are
touched. Both draw with ``fgrpo_theory.sampling.sample_group`` from a generator seeded by
(seed, N), so they agree to rounding (tested). Sweeps over (N, gamma, seed) and the choice of
engine live in ``fgrpo_theory.simulate``.

    >>> from fgrpo_theory.simulate import SimConfig
    >>> from fgrpo_theory.sim_engines import simulate_batch
    >>> cfg = SimConfig(actions=500, correct=40, group_sizes=(4,), steps=5)
    >>> simulate_batch(cfg, 4, [(0.0, 0), (1.0, 0)])["q_pos"].shape     # (runs, steps + 1)
    (2, 6)

Shapes: ``R`` runs in a batch, ``K`` actions (``Kp`` padded to whole blocks), ``N`` group,
``T`` steps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from fgrpo_theory.sampling import _layout, sample_counts, sample_group, uses_guide

if TYPE_CHECKING:
    from fgrpo_theory.simulate import SimConfig

#: A sparse run switches to whole arrays once 1 / FULL_FRACTION of the actions are touched.
FULL_FRACTION = 2

#: Logits are exponentiated relative to a fixed shift c (the initial max), moved up only when a
#: logit exceeds c + SHIFT_SLACK, so untouched actions keep bit-identical masses exp(z - c).
SHIFT_SLACK = 30.0


def group_advantages(X: np.ndarray, N: int, *, R_c: float, R_w: float, kind: str):
    """Advantages (r_c, r_w) of a correct / incorrect draw for groups with X correct of N (R,).

    centered: r = R - mean (App. J). grpo: (R - mean) / (std + 1e-6), Bessel std (verl's
    convention; std = 0 when N = 1). raw: r = R."""
    X = X.astype(np.float64)
    if kind == "raw":
        return np.full_like(X, R_c), np.full_like(X, R_w)
    mean = (X * R_c + (N - X) * R_w) / N
    r_c, r_w = R_c - mean, R_w - mean
    if kind == "grpo":
        var = (R_c - R_w) ** 2 * X * (N - X) / (N * max(N - 1, 1))
        scale = 1.0 / (np.sqrt(var) + 1e-6)
        r_c, r_w = r_c * scale, r_w * scale
    return r_c, r_w


def _new_records(R: int, T: int) -> dict:
    rec = {k: np.empty((R, T + 1)) for k in ("q_pos", "m_ret", "entropy", "tau")}
    rec.update({k: np.empty((R, T)) for k in ("q_u_pos", "p_tail_miss", "mu_hat")})
    rec["tail_miss"] = np.empty((R, T), dtype=bool)
    return rec


def _record_group(rec, r, t, *, X, N, hit_rare, sampled_correct_mass, S, q_pos):
    """Group records at step t for run r (rows may be arrays for a batch)."""
    rec["mu_hat"][r, t] = X / N
    rec["tail_miss"][r, t] = (X > 0) & (X < N) & ~hit_rare
    rec["q_u_pos"][r, t] = q_pos - sampled_correct_mass / S


def _finish_records(rec, N: int) -> dict:
    """Lemma 3.1 at the (mu, tau) = (Q_pos, tau) each group was drawn from, all steps at once."""
    from fgrpo_theory.tail_miss import p_tail_miss

    mu, tau = rec["q_pos"][:, :-1], rec["tau"][:, :-1]
    rec["p_tail_miss"][:] = p_tail_miss(mu, np.minimum(tau, mu), N)
    return rec


def _focal_table(N: int, gamma) -> np.ndarray:
    """g / N for every possible X = 0..N: focal_weight(X / N, gamma) / N, (R, N + 1)."""
    from fgrpo_theory.focal import focal_weight

    mu_hat = np.arange(N + 1) / N
    gamma = np.atleast_1d(np.asarray(gamma, dtype=np.float64))
    return np.asarray(focal_weight(mu_hat[None, :], gamma[:, None]), dtype=np.float64) / N


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


def sparse_applies(cfg: SimConfig) -> bool:
    """True when the ascent direction vanishes off the sampled actions: the ratio surrogate with
    advantages that sum to zero over the group (centred or GRPO), so sum_j r_j p = 0."""
    return cfg.surrogate == "ratio" and cfg.advantage in ("centered", "grpo")


def simulate_batch(cfg: SimConfig, N: int, runs: list[tuple[float, int]], *, progress=None) -> dict:
    """Simulate the runs [(gamma, seed), ...] that share the group size N, all at once, on dense
    (R, Kp) arrays (every option; the reference engine).

    Returns a dict of per-step records, each (R, T + 1) for policy quantities (t = 0..T) or
    (R, T) for group quantities (the group drawn at step t from pi_t)."""
    K, C, E, T = cfg.actions, cfg.correct, cfg.rare, cfg.steps
    R_c, R_w = cfg.reward_correct, cfg.reward_wrong
    R = len(runs)
    B, nb, Kp = _layout(K)
    gamma = np.array([g for g, _ in runs], dtype=np.float64)          # (R,)
    rngs = [np.random.default_rng([seed, N]) for _, seed in runs]

    z = np.full((R, Kp), -1e30)                                       # padding: mass exactly 0
    z[:, :K] = cfg.logits0()
    c = z.max(axis=1, keepdims=True)                                  # (R, 1) shift
    zs, e, G, tmp = (np.empty((R, Kp)) for _ in range(4))
    adam = cfg.optimizer == "adam"
    if adam:
        m, v = np.zeros((R, Kp)), np.zeros((R, Kp))
    rec = _new_records(R, T)
    g_table = _focal_table(N, gamma)                                  # (R, N + 1)
    p0 = np.exp(z[0, :C] - c[0]) / np.exp(z[0, :K] - c[0]).sum()      # (C,) initial correct probs

    def softmax_and_record(t: int):
        """Fills zs = z - c, e = exp(zs); records pi_t; returns (block masses (R, nb), S (R,))."""
        zmax = z.max(axis=1, keepdims=True)
        np.copyto(c, zmax, where=zmax > c + SHIFT_SLACK)
        np.subtract(z, c, out=zs)
        np.exp(zs, out=e)
        s = e.reshape(R, nb, B).sum(axis=2)                            # (R, nb)
        S = s.sum(axis=1)                                              # (R,)
        pc = e[:, :C] / S[:, None]                                     # (R, C) correct probabilities
        rec["q_pos"][:, t] = pc.sum(axis=1)
        rec["tau"][:, t] = pc[:, 1:1 + E].sum(axis=1)
        np.subtract(p0, pc, out=pc)
        np.maximum(pc, 0.0, out=pc)
        rec["m_ret"][:, t] = 1.0 - pc.sum(axis=1) / p0.sum()          # Eq. 26
        rec["entropy"][:, t] = np.log(S) - np.einsum("rk,rk->r", e[:, :K], zs[:, :K]) / S
        return s, S

    for t in range(T):
        # --- sample: N draws per run from pi_t
        s, S = softmax_and_record(t)
        counts = np.zeros((R, Kp), dtype=np.int64)
        for r in range(R):
            uniq, cnt = sample_group(e[r], s[r], N, rngs[r], B)
            counts[r, uniq] = cnt
        np.divide(e, S[:, None], out=e)                                # e is now p (R, Kp)
        # --- score: X correct draws, tail miss of the rare subset (Lemma 3.1)
        X = counts[:, :C].sum(axis=1)
        sampled_c = counts[:, :C] > 0
        _record_group(rec, slice(None), t, X=X, N=N, hit_rare=counts[:, 1:1 + E].any(axis=1),
                      sampled_correct_mass=(e[:, :C] * sampled_c).sum(axis=1), S=1.0,
                      q_pos=rec["q_pos"][:, t])
        # --- advantages and focal weight g = (1 - mu_hat)^gamma
        r_c, r_w = group_advantages(X, N, R_c=R_c, R_w=R_w, kind=cfg.advantage)
        w = g_table[np.arange(R), X]                                   # (R,) g / N
        # --- ascent direction G (R, Kp)
        if cfg.surrogate == "ratio":
            # sum_j r_j (onehot(a_j) - p): counts times the action's advantage ...
            np.multiply(counts[:, :C], r_c[:, None], out=G[:, :C])
            np.multiply(counts[:, C:], r_w[:, None], out=G[:, C:])
            if cfg.advantage == "raw":                                 # ... minus p sum_j r_j
                np.multiply(e, (X * r_c + (N - X) * r_w)[:, None], out=tmp)
                G -= tmp                                               # (sum_j r_j = 0 otherwise)
        else:
            # Eq. 5 over distinct sampled actions: p_i (r_i 1{i sampled} - S_r)
            sampled = counts > 0
            S_r = r_c * (e[:, :C] * sampled_c).sum(axis=1) + r_w * (e[:, C:] * sampled[:, C:]).sum(axis=1)
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
    return _finish_records(rec, N)


class _LazyAdam:
    """Adam on the touched actions when the ascent direction G is zero off the sampled ones.

    The moments are stored rescaled, m~ = m / b1^d and w~ = sqrt(v) / sqrt(b2)^d with d the steps
    since the last rebase, so the decay of every unsampled moment is free; a step then costs four
    passes over the touched actions (add, divide, scale, add) plus O(n_u) work on the sampled:

        m~ += (1 - b1) b1^-d G,    w~ = sqrt(w~^2 + (1 - b2) b2^-d G^2),
        z  += alpha_k m~ / (w~ + eps_k),
        alpha_k = lr sqrt(1 - b2^k) / (1 - b1^k) * (b1 / sqrt(b2))^d,  eps_k = eps sqrt(1 - b2^k) / sqrt(b2)^d,

    which is bias-corrected Adam, lr m_hat / (sqrt(v_hat) + eps), at step k rewritten exactly."""

    REBASE = 100
    """fold the scales into the moments every REBASE steps (b1^-d stays far from overflow)"""

    def __init__(self, cfg: SimConfig):
        self.lr, self.eps = cfg.lr, cfg.adam_eps
        self.b1, self.b2 = cfg.adam_betas
        self.k0 = 0

    def step(self, y, m, w, sl, g, k: int, tmp) -> None:
        """In place, step k = 1, 2, ...: y, m~, w~ (n,) all touched; ascent direction g (n_u,) on
        the slots sl (n_u,), or g (n,) on every slot when sl is None (many draws: dense passes
        beat gathers; sqrt(w~^2) = w~ exactly where g = 0); tmp (n,) scratch."""
        b1, b2 = self.b1, self.b2
        d = k - self.k0
        if sl is None:
            np.multiply(g, (1.0 - b1) * b1 ** -d, out=tmp)
            m += tmp
            np.multiply(g, g, out=tmp)
            tmp *= (1.0 - b2) * b2 ** -d
            w *= w
            w += tmp
            np.sqrt(w, out=w)
        else:
            m[sl] += ((1.0 - b1) * b1 ** -d) * g
            w[sl] = np.sqrt(w[sl] ** 2 + ((1.0 - b2) * b2 ** -d) * g ** 2)
        root = np.sqrt(1.0 - b2 ** k)
        alpha = self.lr * root / (1.0 - b1 ** k) * (b1 / np.sqrt(b2)) ** d
        np.add(w, self.eps * root / np.sqrt(b2) ** d, out=tmp)
        np.divide(m, tmp, out=tmp)
        tmp *= alpha
        y += tmp
        if d >= self.REBASE:
            m *= b1 ** d
            w *= np.sqrt(b2) ** d
            self.k0 = k


class _TouchedSet:
    """The state of one sparse run: the actions sampled so far ("touched") in slot arrays, the
    rest as running sums.

    An untouched action keeps its initial shifted logit y = z_0 - c and mass e = exp(y); its
    contribution to S, Q_pos, tau, sum e*y (entropy) and the initial correct mass is kept in
    ``U``, per block in ``s_un``. Touched actions live in the columns of ``St`` (rows: y, e, m~,
    w~) in the order they were touched; ``pos`` maps action -> slot, ``c_slots`` / ``r_slots``
    list the slots of correct / rare actions and ``p0c`` their initial probabilities. Once half
    of the actions are touched the run goes ``full``: the slots become the actions in order (the
    slot lists become slices), e is the full mass array itself and U is zero."""

    Y, E, M, W = range(4)

    def __init__(self, cfg: SimConfig):
        K, C, E = cfg.actions, cfg.correct, cfg.rare
        self.K, self.C = K, C
        self.B, self.nb, self.Kp = _layout(K)
        self.y = np.full(self.Kp, -np.inf)                             # (Kp,) shifted logits z - c
        self.y[:K] = cfg.logits0()
        self.y[:K] -= self.y[:K].max()
        self.e = np.exp(self.y)                                        # (Kp,) masses, 0 on padding
        self.s_un = self.e.reshape(self.nb, self.B).sum(axis=1)        # (nb,) untouched block masses
        self.S0 = float(self.s_un.sum())                               # S_0 in current shift units
        self.p0 = self.e[:C] / self.S0                                 # (C,) initial correct probs
        self.Q0 = float(self.p0.sum())
        self.is_rare = np.zeros(self.Kp, dtype=bool)
        self.is_rare[1:1 + E] = True
        self.U = {"S": self.S0, "c": float(self.e[:C].sum()), "rare": float(self.e[1:1 + E].sum()),
                  "ent": float(np.dot(self.e[:K], self.y[:K])), "p0c": self.Q0}
        self.pos = np.full(self.Kp, -1, dtype=np.int64)                # action -> slot
        self.St = np.zeros((4, 1024))                                  # (4, capacity) slot arrays
        self.c_slots = np.zeros(0, dtype=np.int64)                     # (nc,) slots of correct actions
        self.p0c = np.zeros(0)                                         # (nc,) their p_0
        self.r_slots = np.zeros(0, dtype=np.int64)                     # slots of rare actions
        self.blk = np.zeros(1024, dtype=np.int64)                      # (capacity,) slot -> block
        self.act = np.zeros(1024, dtype=np.int64)                      # (capacity,) slot -> action
        self.n = 0
        self.full = False

    def slots(self, uniq: np.ndarray) -> np.ndarray:
        """Slots of the sampled actions uniq, touching the new ones (going full when half are)."""
        if not self.full:
            new = uniq[self.pos[uniq] < 0]
            if new.size:
                self._touch(new)
            if self.n * FULL_FRACTION >= self.K:
                self._go_full()
        return self.pos[uniq]

    def _touch(self, new: np.ndarray) -> None:
        """Move the new actions (distinct, untouched) from the running sums to fresh slots."""
        eN, yN = self.e[new], self.y[new]
        isc, isr = new < self.C, self.is_rare[new]
        self.U["S"] -= eN.sum()
        self.U["c"] -= eN[isc].sum()
        self.U["rare"] -= eN[isr].sum()
        self.U["ent"] -= np.dot(eN, yN)
        p0N = self.p0[new[isc]]
        self.U["p0c"] -= p0N.sum()
        self.s_un -= np.bincount(new // self.B, weights=eN, minlength=self.nb)
        n, k = self.n, new.size
        if n + k > self.St.shape[1]:                                   # grow the capacity
            cap = max(2 * self.St.shape[1], n + k)
            self.St = np.concatenate([self.St, np.zeros((4, cap - self.St.shape[1]))], axis=1)
            self.blk = np.concatenate([self.blk, np.zeros(cap - self.blk.size, dtype=np.int64)])
            self.act = np.concatenate([self.act, np.zeros(cap - self.act.size, dtype=np.int64)])
        cols = self.St[:, n:n + k]
        cols[self.Y], cols[self.E], cols[self.M], cols[self.W] = yN, eN, 0.0, 0.0
        fresh = np.arange(n, n + k)
        self.c_slots = np.concatenate([self.c_slots, fresh[isc]])
        self.p0c = np.concatenate([self.p0c, p0N])
        self.r_slots = np.concatenate([self.r_slots, fresh[isr]])
        self.blk[n:n + k] = new // self.B
        self.act[n:n + k] = new
        self.pos[new] = fresh
        self.n = n + k

    def _go_full(self) -> None:
        """Touch every remaining action, then lay the slots out as the actions 0..K-1."""
        K = self.K
        self._touch(np.flatnonzero(self.pos[:K] < 0))
        St = np.empty((4, K))
        St[:, self.act[:K]] = self.St[:, :K]
        self.St, self.n = St, K
        self.act = np.arange(K)
        self.pos[:K] = self.act
        self.blk = self.act // self.B
        self.y[:K] = St[self.Y]
        self.e[:K] = St[self.E]
        self._y_view, self._e_view = self.y[:K], self.e[:K]
        self.c_slots, self.r_slots = slice(0, self.C), np.flatnonzero(self.is_rare[:K])
        self.p0c = self.p0
        self.U = dict.fromkeys(self.U, 0.0)
        self.s_un[:] = 0.0
        self.full = True

    def masses(self):
        """(y, e) of the touched actions as (n,) arrays that may be written in place: in full mode
        views of the full arrays (so e stays the sampling array), else rows of St."""
        if self.full:
            return self._y_view, self._e_view
        return self.St[self.Y, :self.n], self.St[self.E, :self.n]

    def block_masses(self, eA: np.ndarray) -> np.ndarray:
        """(nb,) block sums of the masses."""
        if self.full:
            return self.e.reshape(self.nb, self.B).sum(axis=1)
        return self.s_un + np.bincount(self.blk[:self.n], weights=eA, minlength=self.nb)

    def publish(self, eA: np.ndarray) -> None:
        """Copy the touched masses into the sampling array (nothing to do in full mode)."""
        if not self.full:
            self.e[self.act[:self.n]] = eA

    def shift(self, delta: float, yA: np.ndarray) -> None:
        """Lower every shifted logit by delta (c += delta) and rescale the running sums."""
        f = np.exp(-delta)
        yA -= delta
        if not self.full:
            self.y[:self.K] -= delta                                   # untouched (touched ones stale)
            np.exp(self.y, out=self.e)
            self.U["ent"] = f * (self.U["ent"] - delta * self.U["S"])
            for key in ("S", "c", "rare"):
                self.U[key] *= f
            self.s_un *= f
        self.S0 *= f


def simulate_run_sparse(cfg: SimConfig, N: int, gamma: float, seed: int, *, progress=None) -> dict:
    """One run on the actions sampled so far only (requires ``sparse_applies(cfg)``).

    With the ratio surrogate and zero-sum advantages the ascent direction is
    (g/N) sum_j r_j onehot(a_j) = (g/N) c_a r_a on the sampled actions a (c_a their counts) and 0
    elsewhere: an action never sampled has Adam moments 0 and an unchanged logit. Its part of S,
    Q_pos, tau, the entropy and M_ret is kept in running sums (``_TouchedSet``) and Adam runs
    lazily (``_LazyAdam``), so a step costs O(N + |touched|) instead of O(K), with few passes.
    The draws are those of ``simulate_batch`` (same sampler and generator) and the arithmetic is
    Adam rewritten exactly: records agree to rounding (tested).
    Returns records with a leading run axis of length 1."""
    if not sparse_applies(cfg):
        raise ValueError("the sparse engine needs surrogate='ratio' and a zero-sum advantage")
    C, T = cfg.correct, cfg.steps
    R_c, R_w = cfg.reward_correct, cfg.reward_wrong
    rng = np.random.default_rng([seed, N])
    rec = _new_records(1, T)
    g_table = _focal_table(N, gamma)[0]                                # (N + 1,) g / N
    run = _TouchedSet(cfg)
    adam = _LazyAdam(cfg) if cfg.optimizer == "adam" else None
    tmp = np.empty(0)

    for t in range(T + 1):
        # --- record pi_t
        yA, eA = run.masses()
        s = run.block_masses(eA)                                       # (nb,)
        S = float(s.sum())
        U = run.U
        eC = eA[run.c_slots]                                           # (nc,) touched correct masses
        rec["q_pos"][0, t] = (U["c"] + eC.sum()) / S
        rec["tau"][0, t] = (U["rare"] + eA[run.r_slots].sum()) / S
        rec["entropy"][0, t] = np.log(S) - (U["ent"] + np.dot(eA, yA)) / S
        lost_t = run.p0c - eC / S                                      # p_0 - p_t, correct slots
        np.maximum(lost_t, 0.0, out=lost_t)
        lost = U["p0c"] * max(0.0, 1.0 - run.S0 / S) + lost_t.sum()
        rec["m_ret"][0, t] = 1.0 - lost / run.Q0                       # Eq. 26
        if t == T:
            break
        if run.full and uses_guide(N, run.Kp):
            # --- many draws on whole arrays: counts c (K,), ascent direction (g/N) c_a r_a
            c = sample_counts(run.e, N, rng)[:run.K]
            X = int(c[:C].sum())
            _record_group(rec, 0, t, X=X, N=N, hit_rare=bool(c[run.r_slots].any()),
                          sampled_correct_mass=eA[:C][c[:C] > 0].sum(), S=S, q_pos=rec["q_pos"][0, t])
            r_c, r_w = group_advantages(np.array([X]), N, R_c=R_c, R_w=R_w, kind=cfg.advantage)
            g_u = np.multiply(c, r_w[0] * g_table[X])
            np.multiply(c[:C], r_c[0] * g_table[X], out=g_u[:C])
            sl = None
        else:
            # --- sample N actions from pi_t: distinct actions and counts
            uniq, cnt = sample_group(run.e, s, N, rng, run.B)
            # --- score
            uc = uniq < C
            X = int(cnt[uc].sum())
            _record_group(rec, 0, t, X=X, N=N, hit_rare=bool(run.is_rare[uniq].any()),
                          sampled_correct_mass=run.e[uniq[uc]].sum(), S=S, q_pos=rec["q_pos"][0, t])
            # --- advantages and focal weight: ascent direction (g/N) c_a r_a on the sampled actions
            r_c, r_w = group_advantages(np.array([X]), N, R_c=R_c, R_w=R_w, kind=cfg.advantage)
            g_u = cnt * np.where(uc, r_c[0], r_w[0]) * g_table[X]
            sl = run.slots(uniq)
        yA, eA = run.masses()
        # --- step: every touched logit (Adam) or the sampled ones (SGD)
        if adam is not None:
            if tmp.size < run.n:
                tmp = np.empty(run.Kp)
            adam.step(yA, run.St[run.M, :run.n], run.St[run.W, :run.n], sl, g_u, t + 1, tmp[:run.n])
            ymax = float(yA.max())
        elif sl is None:
            g_u *= cfg.lr
            yA += g_u
            ymax = float(yA.max())
        else:
            yA[sl] += cfg.lr * g_u
            ymax = float(yA[sl].max())
        if ymax > SHIFT_SLACK:                                         # move the shift (rare)
            run.shift(ymax, yA)
            np.exp(yA, out=eA)
        elif adam is not None or sl is None:
            np.exp(yA, out=eA)
        else:
            eA[sl] = np.exp(yA[sl])
        run.publish(eA)
        if progress is not None:
            progress(1)
    return _finish_records(rec, N)
