"""The sparse engine of the categorical simulator, numpy reference (paper Section 5.1,
Appendix J, Fig. 2): the paper's setting (ratio surrogate, zero-sum advantages,
``config.sparse_applies``) on the actions sampled so far only.

The ascent direction is then (g/N) c_a r_a on the sampled actions a (c_a their counts) and zero
elsewhere, so an action never sampled keeps zero Adam moments and its logit; a step only touches
the actions sampled so far plus running sums for the rest (``_TouchedSet``, O(N + |touched|)
instead of O(K)), with Adam's moment decay made free by rescaled moments (``_LazyAdam``); it
switches to whole arrays once half of the actions are touched. It draws with
``samplers.sample_group`` from a generator seeded by (seed, N), as the dense engine
(``fgrpo_theory.sim.dense``) does, so the two agree to rounding (tested). The compiled engine
(``fgrpo_theory.sim.compiled``) follows this one run by run, faster: the same random numbers,
so the same draws unless a uniform falls within rounding of a cumulative mass.

    >>> from fgrpo_theory.sim.config import SimConfig
    >>> from fgrpo_theory.sim.sparse import simulate_run_sparse
    >>> cfg = SimConfig(actions=500, correct=40, group_sizes=(4,), steps=5)
    >>> simulate_run_sparse(cfg, 4, 1.0, 0)["q_pos"].shape     # (1 run, steps + 1)
    (1, 6)

Shapes: ``K`` actions (``Kp`` padded to whole blocks), ``N`` group, ``T`` steps.
"""

from __future__ import annotations

import math

import numpy as np

from fgrpo_theory.sim.config import SimConfig, sparse_applies
from fgrpo_theory.sim.dense import SHIFT_SLACK
from fgrpo_theory.sim.group import (
    finish_records,
    focal_table,
    group_advantages,
    new_records,
    out_of_range,
    record_group,
)
from fgrpo_theory.sim.samplers import layout, sample_counts, sample_group, uses_guide

#: A sparse run switches to whole arrays once 1 / FULL_FRACTION of the actions are touched.
FULL_FRACTION = 2


class _LazyAdam:
    """Adam on the touched actions when the ascent direction G is zero off the sampled ones.

    The moments are stored rescaled, m~ = m / b1^d and w~ = sqrt(v) / sqrt(b2)^d with d the steps
    since the last rebase, so the decay of every unsampled moment is free; a step then costs four
    passes over the touched actions (add, divide, scale, add) plus O(n_u) work on the sampled:

        m~ += (1 - b1) b1^-d G,    w~ = sqrt(w~^2 + (1 - b2) b2^-d G^2),
        z  += alpha_k m~ / (w~ + eps_k),
        alpha_k = lr sqrt(1 - b2^k) / (1 - b1^k) * (b1 / sqrt(b2))^d,
        eps_k = eps sqrt(1 - b2^k) / sqrt(b2)^d,

    which is bias-corrected Adam, lr m_hat / (sqrt(v_hat) + eps), at step k rewritten exactly."""

    REBASE = 100
    """fold the scales into the moments every REBASE steps at most (b1^-d stays far from
    overflow); fewer where beta1 or beta2 is small (``rebase_every``)"""

    def __init__(self, cfg: SimConfig):
        self.lr, self.eps = cfg.lr, cfg.adam_eps
        self.b1, self.b2 = cfg.adam_betas
        self.k0 = 0
        self.every = rebase_every(self.b1, self.b2, self.REBASE)

    def scalars(self, k: int) -> tuple[float, float, float, float, bool, float, float]:
        """Step k's (c1, c2, alpha_k, eps_k, rebase, f_m, f_w): m~ += c1 G, w~ = sqrt(w~^2 +
        c2 G^2), z += alpha_k m~ / (w~ + eps_k), then, when rebase, m~ *= f_m and w~ *= f_w.
        They depend on k and the last rebase only, not on the draws. With ``every`` = 0 (beta1
        or beta2 too small for any rescaling, e.g. beta1 = 0) the moments are kept decayed for
        the next step instead: m~ = b1 m, w~ = sqrt(b2 v) after each step, so c1 = 1 - b1,
        c2 = 1 - b2 and f_m = b1, f_w = sqrt(b2) every step (the same bias-corrected Adam)."""
        b1, b2 = self.b1, self.b2
        root = np.sqrt(1.0 - b2**k)
        if self.every == 0:
            return (1.0 - b1, 1.0 - b2, self.lr * root / (1.0 - b1**k), self.eps * root, True,
                    b1, np.sqrt(b2))  # fmt: skip
        d = k - self.k0
        rebase = d >= self.every
        if rebase:
            self.k0 = k
        return (
            (1.0 - b1) * b1**-d,
            (1.0 - b2) * b2**-d,
            self.lr * root / (1.0 - b1**k) * (b1 / np.sqrt(b2)) ** d,
            self.eps * root / np.sqrt(b2) ** d,
            rebase,
            b1**d,
            np.sqrt(b2) ** d,
        )

    def step(self, y, m, w, sl, g, k: int, tmp) -> None:
        """In place, step k = 1, 2, ...: y, m~, w~ (n,) all touched; ascent direction g (n_u,) on
        the slots sl (n_u,), or g (n,) on every slot when sl is None (many draws: dense passes
        beat gathers; sqrt(w~^2) = w~ exactly where g = 0); tmp (n,) scratch."""
        c1, c2, alpha, epsk, rebase, fm, fw = self.scalars(k)
        if sl is None:
            np.multiply(g, c1, out=tmp)
            m += tmp
            np.multiply(g, g, out=tmp)
            tmp *= c2
            w *= w
            w += tmp
            np.sqrt(w, out=w)
        else:
            m[sl] += c1 * g
            w[sl] = np.sqrt(w[sl] ** 2 + c2 * g**2)
        np.add(w, epsk, out=tmp)
        np.divide(m, tmp, out=tmp)
        tmp *= alpha
        y += tmp
        if rebase:
            m *= fm
            w *= fw


def rebase_every(b1: float, b2: float, most: int = 100) -> int:
    """The largest d <= ``most`` with b1^-d and b2^-d <= 1e100 (lazy Adam's rescaled moments
    stay far from overflow), or 0 when not even d = 1 qualifies (beta = 0 or below 1e-100)."""
    small = min(b1, b2)
    if small >= 1.0:  # pragma: no cover - SimConfig keeps betas below 1
        return most
    if small <= 1e-100:
        return 0
    return int(min(most, math.floor(100.0 * math.log(10.0) / -math.log(small))))


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
        self.B, self.nb, self.Kp = layout(K)
        self.y = np.full(self.Kp, -np.inf)  # (Kp,) shifted logits z - c
        self.y[:K] = cfg.logits0()
        self.y[:K] -= self.y[:K].max()
        self.e = np.exp(self.y)  # (Kp,) masses, 0 on padding
        self.s_un = self.e.reshape(self.nb, self.B).sum(axis=1)  # (nb,) untouched masses
        self.S0 = float(self.s_un.sum())  # S_0 in current shift units
        self.p0 = self.e[:C] / self.S0  # (C,) initial correct probs
        self.Q0 = float(self.p0.sum())
        self.is_rare = np.zeros(self.Kp, dtype=bool)
        self.is_rare[1 : 1 + E] = True
        self.U = {
            "S": self.S0,
            "c": float(self.e[:C].sum()),
            "rare": float(self.e[1 : 1 + E].sum()),
            "ent": float(np.dot(self.e[:K], self.y[:K])),
            "p0c": self.Q0,
        }
        self.pos = np.full(self.Kp, -1, dtype=np.int64)  # action -> slot
        self.St = np.zeros((4, 1024))  # (4, capacity) slot arrays
        self.c_slots = np.zeros(0, dtype=np.int64)  # (nc,) correct slots
        self.p0c = np.zeros(0)  # (nc,) their p_0
        self.r_slots = np.zeros(0, dtype=np.int64)  # slots of rare actions
        self.blk = np.zeros(1024, dtype=np.int64)  # (capacity,) slot -> block
        self.act = np.zeros(1024, dtype=np.int64)  # (capacity,) slot -> action
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
        if n + k > self.St.shape[1]:  # grow the capacity
            cap = max(2 * self.St.shape[1], n + k)
            self.St = np.concatenate([self.St, np.zeros((4, cap - self.St.shape[1]))], axis=1)
            self.blk = np.concatenate([self.blk, np.zeros(cap - self.blk.size, dtype=np.int64)])
            self.act = np.concatenate([self.act, np.zeros(cap - self.act.size, dtype=np.int64)])
        cols = self.St[:, n : n + k]
        cols[self.Y], cols[self.E], cols[self.M], cols[self.W] = yN, eN, 0.0, 0.0
        fresh = np.arange(n, n + k)
        self.c_slots = np.concatenate([self.c_slots, fresh[isc]])
        self.p0c = np.concatenate([self.p0c, p0N])
        self.r_slots = np.concatenate([self.r_slots, fresh[isr]])
        self.blk[n : n + k] = new // self.B
        self.act[n : n + k] = new
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
        return self.St[self.Y, : self.n], self.St[self.E, : self.n]

    def block_masses(self, eA: np.ndarray) -> np.ndarray:
        """(nb,) block sums of the masses."""
        if self.full:
            return self.e.reshape(self.nb, self.B).sum(axis=1)
        return self.s_un + np.bincount(self.blk[: self.n], weights=eA, minlength=self.nb)

    def publish(self, eA: np.ndarray) -> None:
        """Copy the touched masses into the sampling array (nothing to do in full mode)."""
        if not self.full:
            self.e[self.act[: self.n]] = eA

    def shift(self, delta: float, yA: np.ndarray) -> None:
        """Lower every shifted logit by delta (c += delta) and rescale the running sums."""
        f = np.exp(-delta)
        yA -= delta
        if not self.full:
            self.y[: self.K] -= delta  # untouched (touched: stale)
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
    rec = new_records(1, T)
    g_table = focal_table(N, gamma, cfg.weighting)[0]  # (N + 1,) g / N
    run = _TouchedSet(cfg)
    adam = _LazyAdam(cfg) if cfg.optimizer == "adam" else None
    tmp = np.empty(0)

    for t in range(T + 1):
        # --- record pi_t
        yA, eA = run.masses()
        s = run.block_masses(eA)  # (nb,)
        S = float(s.sum())
        if not 0.0 < S < math.inf:  # NaN or inf masses: no policy to sample
            raise out_of_range(N, t, cfg.lr)
        U = run.U
        eC = eA[run.c_slots]  # (nc,) touched correct
        rec["q_pos"][0, t] = (U["c"] + eC.sum()) / S
        rec["tau"][0, t] = (U["rare"] + eA[run.r_slots].sum()) / S
        rec["entropy"][0, t] = np.log(S) - (U["ent"] + np.dot(eA, yA)) / S
        lost_t = run.p0c - eC / S  # p_0 - p_t, correct slots
        np.maximum(lost_t, 0.0, out=lost_t)
        lost = U["p0c"] * max(0.0, 1.0 - run.S0 / S) + lost_t.sum()
        rec["m_ret"][0, t] = 1.0 - lost / run.Q0  # Eq. 26
        if t == T:
            break
        if run.full and uses_guide(N, run.Kp):
            # --- many draws on whole arrays: counts c (K,), ascent direction (g/N) c_a r_a
            c = sample_counts(run.e, N, rng)[: run.K]
            X = int(c[:C].sum())
            record_group(
                rec,
                0,
                t,
                X=X,
                N=N,
                hit_rare=bool(c[run.r_slots].any()),
                sampled_correct_mass=eA[:C][c[:C] > 0].sum(),
                S=S,
                q_pos=rec["q_pos"][0, t],
            )
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
            record_group(
                rec,
                0,
                t,
                X=X,
                N=N,
                hit_rare=bool(run.is_rare[uniq].any()),
                sampled_correct_mass=run.e[uniq[uc]].sum(),
                S=S,
                q_pos=rec["q_pos"][0, t],
            )
            # --- advantages and focal weight: ascent direction (g/N) c_a r_a on the sampled actions
            r_c, r_w = group_advantages(np.array([X]), N, R_c=R_c, R_w=R_w, kind=cfg.advantage)
            g_u = cnt * np.where(uc, r_c[0], r_w[0]) * g_table[X]
            sl = run.slots(uniq)
        yA, eA = run.masses()
        # --- step: every touched logit (Adam) or the sampled ones (SGD)
        if adam is not None:
            if tmp.size < run.n:
                tmp = np.empty(run.Kp)
            adam.step(
                yA, run.St[run.M, : run.n], run.St[run.W, : run.n], sl, g_u, t + 1, tmp[: run.n]
            )
            ymax = float(yA.max())
        elif sl is None:
            g_u *= cfg.lr
            yA += g_u
            ymax = float(yA.max())
        else:
            yA[sl] += cfg.lr * g_u
            ymax = float(yA[sl].max())
        if ymax > SHIFT_SLACK:  # move the shift (rare)
            run.shift(ymax, yA)
            np.exp(yA, out=eA)
        elif adam is not None or sl is None:
            np.exp(yA, out=eA)
        else:
            eA[sl] = np.exp(yA[sl])
        run.publish(eA)
        if progress is not None:
            progress(1)
    return finish_records(rec, N, lr=cfg.lr)
