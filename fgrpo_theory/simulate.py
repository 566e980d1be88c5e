"""Multi-step simulation of the categorical softmax policy (paper Section 5.1, Appendix J, Fig. 2;
SPEC.md §4).

K actions, the first C of them correct (reward R_c), the rest incorrect (R_w). Action 0 is the
"anchor" (a high initial logit), actions 1..E are the designated rare-correct subset. Each step
draws N actions i.i.d. from p = softmax(z), forms advantages r_j, and ascends

    ratio:  L = (g/N) sum_j r_j pi(a_j)/pi_old(a_j)   gradient (g/N) sum_j r_j (onehot(a_j) - p)
    prob:   L = (g/N) sum over distinct sampled a of r_a p_a   gradient (g/N) p_i (r_i - S_r)  (Eq. 5)

with the focal weight g = (1 - X/N)^gamma (Eq. 11-13), by SGD or Adam. Per step it records
Q_pos, M_ret (Eq. 26), the entropy, Q_u,pos (correct mass the group missed), the rare mass tau,
and whether the group was a tail miss for the rare subset beside the Lemma 3.1 probability at
the current (mu, tau).

Engines. ``simulate_batch`` (dense, every option) keeps the runs that share N as (R, K) arrays
updated in place; it batches runs only while R * K stays cache-sized (``BATCH_ELEMENTS``), since
at K = 128,000 one run's arrays already fill the cache. ``simulate_run_sparse`` serves the
paper's setting (ratio surrogate, zero-sum advantages): the ascent direction is then
(g/N) c_a r_a on the sampled actions a (c_a their counts) and zero elsewhere, so an action never
sampled keeps zero Adam moments and its logit; a step only touches the actions sampled so far
plus running sums for the rest (O(N + |touched|) instead of O(K)), with Adam's moment decay made
free by rescaled moments (``_LazyAdam``); it switches to whole arrays once half of the actions
are touched. Both engines draw the same samples and agree to rounding (tested).

Sampling (``sample_group``, the Multinomial(N, p) counts of N i.i.d. draws, exactly): few draws
take sorted uniforms (normalised cumulative sums of exponentials, O(N)) and search the block
masses, then only the hit blocks; many draws (N >= Kp / GUIDE_FACTOR) invert the cumulative
masses through a guide table (O(K + N), no binary search over K per draw). Each run draws from
its own ``numpy.random.Generator`` seeded by (seed, N), so a run gives the same numbers alone or
in a batch, and gamma = 0 and gamma = 1 share their draws (common random numbers). Which engine:
``run_sweep(..., engine='auto')``.

    fgrpo-theory simulate --preset paper-fig2 --out results/fig2
    >>> from fgrpo_theory.simulate import SimConfig, run_sweep
    >>> res = run_sweep(SimConfig(actions=500, correct=40, group_sizes=(4,), gammas=(0.0,),
    ...                          seeds=(0,), steps=5), progress=False)
    >>> res.q_pos.shape           # (group sizes, gammas, seeds, steps + 1)
    (1, 1, 1, 6)

Shapes: ``R`` runs in a batch, ``K`` actions (``Kp`` padded to whole blocks), ``N`` group,
``T`` steps.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from fgrpo_theory._validate import as_float_array, check_integer, check_nonnegative

OPTIMIZERS = ("sgd", "adam")
SURROGATES = ("ratio", "prob")
ADVANTAGES = ("centered", "grpo", "raw")
#: Actions per sampling block (see the module docstring).
BLOCK = 256
#: Rows of the guide sampler's cumulative sums (a power of 2 dividing the padded action count).
GUIDE_ROWS = 16
_GUIDE_SHIFT = 4
#: The guide sampler serves N >= Kp / GUIDE_FACTOR draws, the block sampler fewer.
GUIDE_FACTOR = 8
#: Guide buckets per action.
GUIDE_BUCKETS = 1


@dataclass(frozen=True)
class SimConfig:
    """One sweep of the categorical simulator (defaults: the paper's App. J setting, one N)."""

    actions: int = 128_000
    """K, the number of actions"""
    correct: int = 10_000
    """C, the number of correct actions (actions 0..C-1; action 0 is the anchor)"""
    anchor_logit: float = 5.0
    """initial logit of the anchor (action 0)"""
    correct_logit: float = 3.0
    """initial logit of the other correct actions"""
    incorrect_logit: float = 0.0
    """initial logit of the incorrect actions"""
    initial_logits: tuple[float, ...] | None = None
    """explicit initial logits (K values); overrides the three values above"""
    rare: int = 1
    """E, the size of the rare-correct subset: actions 1..E"""
    reward_correct: float = 1.0
    """R_c"""
    reward_wrong: float = -1.0
    """R_w (< R_c)"""
    group_sizes: tuple[int, ...] = (64,)
    """the group sizes N to sweep"""
    gammas: tuple[float, ...] = (0.0, 1.0)
    """the focal exponents gamma to sweep (0 = plain GRPO)"""
    seeds: tuple[int, ...] = (0,)
    """one run per seed; a run's generator is seeded by (seed, N)"""
    steps: int = 1000
    """T, optimisation steps"""
    lr: float = 1e-2
    """learning rate"""
    optimizer: str = "adam"
    """'adam' (betas 0.9/0.999, eps 1e-8, bias-corrected) or 'sgd'"""
    surrogate: str = "ratio"
    """'ratio' (log-prob gradient) or 'prob' (the literal Eq. 5 gradient)"""
    advantage: str = "centered"
    """'centered' r = R - mean (App. J), 'grpo' (R - mean)/(std + 1e-6) with Bessel std, 'raw' r = R"""
    adam_betas: tuple[float, float] = (0.9, 0.999)
    """Adam (beta1, beta2)"""
    adam_eps: float = 1e-8
    """Adam epsilon"""

    def __post_init__(self):
        K = int(check_integer("actions", self.actions, minimum=2))
        C = int(check_integer("correct", self.correct, minimum=1))
        if C >= K:
            raise ValueError(f"correct must be < actions={K}, got correct={C}")
        E = int(check_integer("rare", self.rare, minimum=1))
        if E >= C:
            raise ValueError(f"rare must be < correct={C} (action 0 is the anchor), got rare={E}")
        for name in ("anchor_logit", "correct_logit", "incorrect_logit", "reward_correct", "reward_wrong"):
            x = as_float_array(name, getattr(self, name))
            if not np.isfinite(x).all():
                raise ValueError(f"{name} must be finite, got {name}={getattr(self, name)}")
        if not self.reward_correct > self.reward_wrong:
            raise ValueError(f"reward_correct must exceed reward_wrong, got "
                             f"{self.reward_correct} <= {self.reward_wrong}")
        if self.initial_logits is not None:
            z0 = as_float_array("initial_logits", self.initial_logits)
            if z0.shape != (K,) or not np.isfinite(z0).all():
                raise ValueError(f"initial_logits must be {K} finite values, got shape {z0.shape}")
            object.__setattr__(self, "initial_logits", tuple(float(v) for v in z0))
        sizes = check_integer("group_sizes", self.group_sizes, minimum=1).ravel()
        object.__setattr__(self, "group_sizes", tuple(int(n) for n in sizes))
        gammas = check_nonnegative("gammas", self.gammas).ravel()
        object.__setattr__(self, "gammas", tuple(float(g) for g in gammas))
        seeds = check_integer("seeds", self.seeds, minimum=0).ravel()
        object.__setattr__(self, "seeds", tuple(int(s) for s in seeds))
        for name in ("group_sizes", "gammas", "seeds"):
            if len(set(getattr(self, name))) != len(getattr(self, name)):
                raise ValueError(f"{name} must not repeat values, got {name}={getattr(self, name)}")
        check_integer("steps", self.steps, minimum=1)
        lr = float(as_float_array("lr", self.lr))
        if not (np.isfinite(lr) and lr > 0):
            raise ValueError(f"lr must be > 0, got lr={self.lr}")
        for name, allowed in (("optimizer", OPTIMIZERS), ("surrogate", SURROGATES), ("advantage", ADVANTAGES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {name}={getattr(self, name)!r}")
        b1, b2 = (float(b) for b in self.adam_betas)
        if not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise ValueError(f"adam_betas must lie in [0, 1), got {self.adam_betas}")
        object.__setattr__(self, "adam_betas", (b1, b2))
        if not float(self.adam_eps) > 0:
            raise ValueError(f"adam_eps must be > 0, got {self.adam_eps}")

    def logits0(self) -> np.ndarray:
        """Initial logits z_0 (K,)."""
        if self.initial_logits is not None:
            return np.asarray(self.initial_logits, dtype=np.float64)
        z0 = np.full(self.actions, float(self.incorrect_logit))
        z0[: self.correct] = self.correct_logit
        z0[0] = self.anchor_logit
        return z0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)


PRESETS: dict[str, SimConfig] = {
    # App. J / Fig. 2: Adam on the ratio surrogate reproduces the paper's description (SPEC §4).
    "paper-fig2": SimConfig(
        actions=128_000, correct=10_000, group_sizes=tuple(2**k for k in range(1, 18)),
        gammas=(0.0, 1.0), seeds=(0, 1, 2, 3), steps=1000, lr=1e-2,
        optimizer="adam", surrogate="ratio", advantage="centered",
    ),
    # The same with plain SGD: the logits barely move (updates scale with p_i ~ 6e-5).
    "paper-fig2-sgd": SimConfig(
        actions=128_000, correct=10_000, group_sizes=tuple(2**k for k in range(1, 18)),
        gammas=(0.0, 1.0), seeds=(0, 1, 2, 3), steps=1000, lr=1e-2,
        optimizer="sgd", surrogate="ratio", advantage="centered",
    ),
    # A reduced sweep (K / 10, fewer steps, a larger lr) that shows the three regimes in seconds.
    "small": SimConfig(
        actions=12_800, correct=1_000, group_sizes=tuple(2**k for k in range(1, 15)),
        gammas=(0.0, 1.0), seeds=(0, 1), steps=300, lr=3e-2,
    ),
    "tiny": SimConfig(
        actions=1_280, correct=100, group_sizes=(2, 16, 128, 4096),
        gammas=(0.0, 1.0), seeds=(0,), steps=100, lr=3e-2,
    ),
}


# ----------------------------------------------------------------------------- one batch

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


def _draw_by_blocks(e_r: np.ndarray, s_r: np.ndarray, N: int, rng: np.random.Generator,
                    B: int) -> np.ndarray:
    """N i.i.d. action indices (sorted) from the unnormalised masses e_r (Kp,) (zero on the
    padding), block masses s_r (nb,), for few draws: sorted uniforms (normalised cumulative sums
    of exponentials, O(N)) search the block masses, then only the hit blocks."""
    nb = s_r.size
    cs = np.cumsum(s_r)                                    # (nb,)
    x = rng.standard_exponential(N + 1)
    np.cumsum(x, out=x)
    u = x[:N] * (cs[-1] / x[N])                            # (N,) sorted uniforms on [0, total)
    blk = np.searchsorted(cs, u, side="right")
    np.minimum(blk, nb - 1, out=blk)
    new = np.empty(N, dtype=bool)
    new[0] = True
    np.not_equal(blk[1:], blk[:-1], out=new[1:])
    row = np.cumsum(new) - 1                               # (N,) row of each draw among hit blocks
    ub = blk[new]                                          # (n_u,) hit blocks, increasing
    c = np.cumsum(e_r.reshape(nb, B)[ub], axis=1)          # (n_u, B) local cumulative masses
    tot = np.maximum(c[:, -1], np.finfo(np.float64).tiny)
    base = np.where(ub > 0, cs[ub - 1], 0.0)
    frac = (u - base[row]) / tot[row]
    np.clip(frac, 0.0, 1.0 - 1e-12, out=frac)
    # rows shifted by their index make one increasing key array: row i spans (i, i + 1]
    ckey = c / tot[:, None]
    ckey += np.arange(ub.size, dtype=np.float64)[:, None]
    ckey[:, -1] = np.arange(1, ub.size + 1)
    pos = np.searchsorted(ckey.ravel(), row + frac, side="right")
    return ub[pos // B] * B + pos % B


def _draw_by_guide(e_r: np.ndarray, N: int, rng: np.random.Generator) -> np.ndarray:
    """N i.i.d. action indices (unsorted) from the masses e_r (Kp,) for many draws: inversion of
    the cumulative masses F through a guide table, O(Kp + N) instead of O(N log Kp).

    F is taken in column-major order of e_r viewed as (GUIDE_ROWS, Kp / GUIDE_ROWS), built by
    GUIDE_ROWS vectorised row additions (a plain cumsum is a slow sequential loop): rank q holds
    action (q % GUIDE_ROWS) * ncol + q // GUIDE_ROWS. Inverting in any fixed order is exact. With
    M = Kp equal buckets of [0, total), g[b] is the first rank whose F lies in bucket b or later,
    so the answer for a uniform u in bucket b lies in [g[b], g[b + 1]]; a vectorised bisection
    finds it (usually zero or one step: a bucket holds about one F on average)."""
    rows = GUIDE_ROWS
    E = e_r.reshape(rows, -1)                              # (rows, ncol)
    ncol = E.shape[1]
    F = np.empty_like(E)
    F[0] = E[0]
    for i in range(1, rows):                               # cumulative sums down each column
        np.add(F[i - 1], E[i], out=F[i])
    off = np.cumsum(F[-1])                                 # (ncol,) column ends
    F[:, 1:] += off[:-1]                                   # F[i, j] = mass of ranks <= j*rows + i
    F = F.ravel()
    total = off[-1]

    def action(q):                                         # rank -> action (rows is a power of 2)
        return (q & (rows - 1)) * ncol + (q >> _GUIDE_SHIFT)

    M = GUIDE_BUCKETS * e_r.size
    scale = M / total * (1.0 - 1e-14)                      # F * scale < M even after rounding
    bk = (F * scale).astype(np.intp)                       # (Kp,) bucket of each F, monotone in F
    g = np.zeros(M + 1, dtype=np.intp)
    np.cumsum(np.bincount(bk, minlength=M), out=g[1:])     # g[b]: ranks with bucket < b
    u = rng.random(N)
    u *= total
    np.minimum(u, np.nextafter(total, 0.0), out=u)         # u < total, so never a zero-mass rank
    b = (u * scale).astype(np.intp)
    q = g[b]                                               # answer (first rank with F > u) is
    todo = np.flatnonzero(F[action(q)] <= u)               # in [g[b], g[b + 1]]; mostly g[b]
    q[todo] += 1
    lo, hi = q[todo], g[b[todo] + 1]
    while True:                                            # bisection on the few others
        open_ = lo < hi
        if not open_.any():
            break
        todo, lo, hi = todo[open_], lo[open_], hi[open_]
        mid = (lo + hi) >> 1
        right = F[action(mid)] <= u[todo]
        lo = np.where(right, mid + 1, lo)
        hi = np.where(right, hi, mid)
        q[todo] = lo
    return action(q)


def uses_guide(N: int, Kp: int) -> bool:
    """Whether N draws over Kp (padded) actions take the guide-table sampler."""
    return N * GUIDE_FACTOR >= Kp


def sample_counts(e_r: np.ndarray, N: int, rng: np.random.Generator) -> np.ndarray:
    """Counts (Kp,) of N draws by the guide table (for ``uses_guide(N, Kp)``; the same draws as
    ``sample_group``)."""
    return np.bincount(_draw_by_guide(e_r, N, rng), minlength=e_r.size)


def sample_group(e_r: np.ndarray, s_r: np.ndarray, N: int, rng: np.random.Generator,
                 B: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw N actions i.i.d. from p = e_r / sum(e_r) and return them as (uniq, cnt): the distinct
    actions drawn (increasing) and how often each was drawn (the Multinomial(N, p) counts).

    e_r (Kp,) masses (zero on the padding), s_r (nb,) their block sums, B the block size. Few
    draws (N < Kp / GUIDE_FACTOR) search the blocks, many use the guide table; the choice depends
    on (N, Kp) only, so every engine draws the same actions from the same generator."""
    Kp = e_r.size
    if uses_guide(N, Kp):
        counts = sample_counts(e_r, N, rng)
        uniq = np.flatnonzero(counts)
        return uniq, counts[uniq]
    idx = _draw_by_blocks(e_r, s_r, N, rng, B)
    first = np.empty(N, dtype=bool)
    first[0] = True
    np.not_equal(idx[1:], idx[:-1], out=first[1:])
    return idx[first], np.diff(np.append(np.flatnonzero(first), N))


#: A sparse run switches to whole arrays once 1 / FULL_FRACTION of the actions are touched.
FULL_FRACTION = 2

#: Logits are exponentiated relative to a fixed shift c (the initial max), moved up only when a
#: logit exceeds c + SHIFT_SLACK, so untouched actions keep bit-identical masses exp(z - c).
SHIFT_SLACK = 30.0


def _layout(K: int) -> tuple[int, int, int]:
    """(B, nb, Kp): block size, number of blocks, padded action count (a multiple of GUIDE_ROWS)."""
    B = BLOCK if K >= BLOCK else GUIDE_ROWS * -(-K // GUIDE_ROWS)
    nb = -(-K // B)
    return B, nb, nb * B


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


# ----------------------------------------------------------------------------- sweeps

@dataclass
class SweepResult:
    """Records of a sweep, each indexed (group size, gamma, seed, step)."""

    config: SimConfig
    records: dict = field(default_factory=dict)

    def __getattr__(self, name):
        rec = self.__dict__.get("records", {})
        if name in rec:
            return rec[name]
        raise AttributeError(name)

    def final_rows(self) -> list[dict]:
        """One row per (N, gamma, seed) with the final q_pos, m_ret, entropy."""
        rows = []
        for i, N in enumerate(self.config.group_sizes):
            for j, gamma in enumerate(self.config.gammas):
                for k, seed in enumerate(self.config.seeds):
                    rows.append({"N": N, "gamma": gamma, "seed": seed,
                                 "q_pos": float(self.records["q_pos"][i, j, k, -1]),
                                 "m_ret": float(self.records["m_ret"][i, j, k, -1]),
                                 "entropy": float(self.records["entropy"][i, j, k, -1])})
        return rows

    def write_csv(self, path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as f:
            f.write("N,gamma,seed,q_pos,m_ret,entropy\n")
            for r in self.final_rows():
                f.write(f"{r['N']},{r['gamma']:g},{r['seed']},{r['q_pos']:.6g},{r['m_ret']:.6g},{r['entropy']:.6g}\n")
        return path

    def write_jsonl(self, path) -> Path:
        """One JSON line per step t: {"step": t, "q_pos/N=2/gamma=0": seed mean, ...} for the
        policy records (q_pos, m_ret, entropy, tau)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        cfg = self.config
        means = {k: self.records[k].mean(axis=2) for k in ("q_pos", "m_ret", "entropy", "tau")}
        with path.open("w") as f:
            for t in range(cfg.steps + 1):
                row = {"step": t}
                for k, a in means.items():
                    for i, N in enumerate(cfg.group_sizes):
                        for j, g in enumerate(cfg.gammas):
                            row[f"{k}/N={N}/gamma={g:g}"] = round(float(a[i, j, t]), 7)
                f.write(json.dumps(row) + "\n")
        return path

    def save(self, out_dir) -> Path:
        """records as ``simulation.npz`` next to the resolved config ``simulation_config.json``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(out / "simulation.npz", **self.records)
        (out / "simulation_config.json").write_text(_saved_config_json(self.config))
        return out / "simulation.npz"


#: Runs are batched while a batch's (R, K) arrays stay about this size (elements): beyond
#: it they fall out of cache and one run at a time is faster (measured at K = 128,000).
BATCH_ELEMENTS = 1 << 17


ENGINES = ("auto", "dense", "sparse")


def _engine(cfg: SimConfig, engine: str) -> str:
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if engine == "sparse" and not sparse_applies(cfg):
        raise ValueError("engine='sparse' needs surrogate='ratio' and advantage 'centered' or 'grpo'")
    if engine == "auto":
        return "sparse" if sparse_applies(cfg) else "dense"
    return engine


def simulate_runs(cfg: SimConfig, N: int, runs: list[tuple[float, int]], *, engine: str = "auto",
                  progress=None) -> dict:
    """Records (R, ...) of the runs [(gamma, seed), ...] at group size N, by either engine."""
    if _engine(cfg, engine) == "dense":
        return simulate_batch(cfg, N, runs, progress=progress)
    parts = [simulate_run_sparse(cfg, N, g, s, progress=progress) for g, s in runs]
    return {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}


def _batch_task(args):
    cfg, N, runs, engine = args
    return N, runs, simulate_runs(cfg, N, runs, engine=engine)


def _tasks(cfg: SimConfig, engine: str) -> list[tuple[int, list[tuple[float, int]]]]:
    """(N, runs) work items, largest N first; runs = (gamma, seed) pairs. The dense engine
    batches runs while (R, K) stays near BATCH_ELEMENTS; the sparse engine takes runs singly."""
    runs = [(g, s) for g in cfg.gammas for s in cfg.seeds]
    size = max(1, BATCH_ELEMENTS // cfg.actions) if engine == "dense" else 1
    return [(N, runs[i:i + size]) for N in sorted(cfg.group_sizes, reverse=True)
            for i in range(0, len(runs), size)]


def run_sweep(cfg: SimConfig, *, workers: int = 1, progress: bool = True, engine: str = "auto") -> SweepResult:
    """All (N, gamma, seed) runs of ``cfg``, largest N first, over ``workers`` processes
    (1 = in this process), with a tqdm bar on stderr. ``engine``: 'dense' (every option,
    runs batched), 'sparse' (ratio surrogate with zero-sum advantages; much faster at small N)
    or 'auto' (sparse where it applies)."""
    from tqdm.auto import tqdm

    workers = int(check_integer("workers", workers, minimum=1))
    engine = _engine(cfg, engine)
    nG, nS, T = len(cfg.gammas), len(cfg.seeds), cfg.steps
    tasks = _tasks(cfg, engine)
    bar = tqdm(total=len(cfg.group_sizes) * nG * nS * T, unit="run-step", disable=not progress,
               desc="simulate", unit_scale=True)
    done: dict[tuple[int, float, int], dict] = {}

    def collect(N, runs, rec):
        for r, (g, s) in enumerate(runs):
            done[N, g, s] = {k: a[r] for k, a in rec.items()}

    if workers == 1 or len(tasks) == 1:
        for N, runs in tasks:
            collect(N, runs, simulate_runs(cfg, N, runs, engine=engine, progress=bar.update))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for N, runs, rec in pool.map(_batch_task, [(cfg, N, runs, engine) for N, runs in tasks]):
                collect(N, runs, rec)
                bar.update(len(runs) * T)
    bar.close()
    keys = next(iter(done.values())).keys()
    records = {k: np.stack([np.stack([np.stack([done[N, g, s][k] for s in cfg.seeds])
                                      for g in cfg.gammas]) for N in cfg.group_sizes])
               for k in keys}                                      # (nN, nG, nS, ...)
    return SweepResult(config=cfg, records=records)


#: Bumped whenever the simulator draws or computes differently for the same config, so that
#: results cached by an older version are recomputed (2: the guide-table sampler for large N).
SIMULATOR_VERSION = 2


def _saved_config_json(cfg: SimConfig) -> str:
    """The resolved config as saved next to the results, with the simulator version."""
    return json.dumps({**asdict(cfg), "simulator_version": SIMULATOR_VERSION}, indent=2, sort_keys=True)


def load_cached(cfg: SimConfig, out_dir) -> SweepResult | None:
    """The saved sweep in ``out_dir`` when its config (and simulator version) equals ``cfg``'s,
    else None."""
    out = Path(out_dir)
    npz, js = out / "simulation.npz", out / "simulation_config.json"
    if not (npz.exists() and js.exists()):
        return None
    if json.loads(js.read_text()) != json.loads(_saved_config_json(cfg)):
        return None
    with np.load(npz) as data:
        return SweepResult(config=cfg, records={k: data[k] for k in data.files})


def run_cached(cfg: SimConfig, out_dir, *, workers: int = 1, progress: bool = True,
               engine: str = "auto") -> SweepResult:
    """``run_sweep`` unless ``out_dir`` already holds this exact config's results; saves them."""
    cached = load_cached(cfg, out_dir)
    if cached is not None:
        return cached
    res = run_sweep(cfg, workers=workers, progress=progress, engine=engine)
    res.save(out_dir)
    return res


def config_from_preset(name: str, **overrides) -> SimConfig:
    """A preset with some fields replaced."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
    return replace(PRESETS[name], **{k: v for k, v in overrides.items() if v is not None})


def config_fields() -> list[str]:
    return [f.name for f in fields(SimConfig)]


def regime_sweep_demo(out_dir, *, fast: bool = False) -> dict:
    """A reduced Fig. 2 sweep for ``make demo``: the 'small' preset (or 'tiny' when fast),
    writing ``regimes.csv``, ``regimes.png`` and the cached records under ``out_dir``.
    Returns a summary dict (paths and final mean M_ret per (gamma, N))."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fgrpo_theory.plots_categorical import plot_fig2

    cfg = PRESETS["tiny" if fast else "small"]
    out = Path(out_dir)
    res = run_cached(cfg, out, workers=1 if fast else min(2, os.cpu_count() or 1), progress=not fast)
    csv = res.write_csv(out / "regimes.csv")
    fig = plot_fig2(res)
    png = out / "regimes.png"
    fig.savefig(png, dpi=90)
    plt.close(fig)
    m = res.records["m_ret"][..., -1].mean(axis=2)                      # (nN, nG)
    return {"csv": str(csv), "figure": str(png),
            "final_m_ret": {f"gamma={g:g}": dict(zip(cfg.group_sizes, m[:, j].round(4).tolist()))
                            for j, g in enumerate(cfg.gammas)}}
