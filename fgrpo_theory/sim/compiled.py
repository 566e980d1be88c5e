"""The compiled sparse engine of the categorical simulator (paper Section 5.1, Appendix J,
Fig. 2): the numpy sparse engine (``fgrpo_theory.sim.sparse``) step for step, in numba kernels,
with the same draws and the same floating-point operations, so its CSV is byte-identical.

What stays exactly as in the numpy engine, and why it is the same bits:

- the random numbers: drawn in Python from the run's ``numpy.random.Generator`` seeded by
  (seed, N), ``standard_exponential(N + 1)`` for the block sampler and ``random(N)`` for the
  guide table, as ``samplers`` does;
- the sampler's arithmetic: the block masses (numpy's pairwise sum in full mode, the running
  untouched sums plus the touched masses in touch order before), the cumulative sums, numpy's
  binary search over the block sums, the scaled keys inside a block, and the guide table's
  column-major cumulative masses F, summed in numpy's order: a draw is the first rank whose F
  exceeds the uniform, whatever search finds it;
- the advantages (``group.scalar_advantages``, bit for bit ``group_advantages``), the focal
  table, and lazy Adam's
  scalars (computed in Python by the same expressions) and per-action operations, in the same
  order (no fused multiply-add: numba leaves IEEE operations as written);
- exp: numba's ``math.exp`` and numpy's ``np.exp`` are the same libm function on x86-64 Linux
  with AVX2; ``unavailable_reason`` checks this (and the pairwise sum) on this machine before
  the engine is used, and ``auto`` falls back to the numpy engine where they differ.

What is faster: one pass per step over the touched actions (Adam, exp, the records' sums) in
compiled loops instead of a dozen numpy passes with temporaries; exp only where a logit changed
(Adam's steps of an action unsampled for ~300 steps fall below half an ulp, so late in a run
most incorrect logits stop moving, exactly); the guide table built in one pass and searched
without temporaries. The records (Q_pos, tau, entropy, M_ret) are sums over the same terms in
another order, so they agree with the numpy engine's to rounding (~1e-15, tested), far below
the CSV's six digits.

    >>> from fgrpo_theory.sim.config import SimConfig
    >>> from fgrpo_theory.sim.compiled import simulate_run_compiled
    >>> cfg = SimConfig(actions=500, correct=40, group_sizes=(4,), steps=5)
    >>> simulate_run_compiled(cfg, 4, 1.0, 0)["q_pos"].shape     # (1 run, steps + 1)
    (1, 6)

Shapes: ``K`` actions (``Kp`` padded to ``nb`` blocks of ``B``), ``N`` group, ``T`` steps,
``n`` touched actions.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from fgrpo_theory.sim.config import SimConfig, sparse_applies
from fgrpo_theory.sim.dense import SHIFT_SLACK
from fgrpo_theory.sim import libm_exp
from fgrpo_theory.sim.group import (
    finish_records,
    focal_table,
    new_records,
    record_group,
    scalar_advantages,
)
from fgrpo_theory.sim.samplers import GUIDE_BUCKETS, GUIDE_ROWS, layout, uses_guide
from fgrpo_theory.sim.sparse import FULL_FRACTION, _LazyAdam

try:
    import numba
except ImportError:  # pragma: no cover - numba is a dependency; the numpy engines still run
    numba = None


def _jit(fn):
    """numba.njit with an on-disk cache (compiled once per machine), or the function as is."""
    if numba is None:
        return fn
    return numba.njit(cache=True, nogil=True)(fn)


# ----------------------------------------------------------------------------- kernels

@_jit
def _block_sum(e, lo, n):
    """sum(e[lo:lo + n]) in numpy's pairwise order (8 accumulators, halves above 128)."""
    if n > 128:
        n2 = n // 2
        n2 -= n2 % 8
        return _block_sum(e, lo, n2) + _block_sum(e, lo + n2, n - n2)
    if n < 8:
        res = 0.0
        for i in range(n):
            res += e[lo + i]
        return res
    r0, r1, r2, r3 = e[lo], e[lo + 1], e[lo + 2], e[lo + 3]
    r4, r5, r6, r7 = e[lo + 4], e[lo + 5], e[lo + 6], e[lo + 7]
    i = 8
    stop = n - n % 8
    while i < stop:
        j = lo + i
        r0 += e[j]
        r1 += e[j + 1]
        r2 += e[j + 2]
        r3 += e[j + 3]
        r4 += e[j + 4]
        r5 += e[j + 5]
        r6 += e[j + 6]
        r7 += e[j + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += e[lo + i]
        i += 1
    return 0.0 + res


@_jit
def _exp_all(x, out):
    for i in range(x.size):
        out[i] = math.exp(x[i])


@_jit
def _exp1(x, fast):
    """exp(x): libm's own (``math.exp``), or its bit-identical numba twin when ``fast``."""
    if fast and not libm_exp.is_special(x):
        return libm_exp.exp_main(x, libm_exp.TABLE)
    return math.exp(x)


@_jit
def _exp_into(x, out, fast):
    """out = exp(x) elementwise, vectorised when ``fast`` (``libm_exp.exp_array``)."""
    if fast:
        libm_exp.exp_array(x, out)
    else:
        for i in range(x.size):
            out[i] = math.exp(x[i])


@_jit
def _record(y, e, ys, es, act, n, full, K, C, E, B, s_un, U, p0, S0, Q0, s, acc):
    """Block masses s (nb,) of pi_t and its records (S, Q_pos, tau, entropy, M_ret).

    Not full: s = s_un + the touched masses added per block in touch order (numpy's
    ``bincount``); full: numpy's pairwise sum of each block. The sums of the records run over
    the touched slots ys, es (plus the untouched running sums U) or, in full mode, over the
    actions' y, e."""
    nb = s.size
    sey = 0.0
    if full:
        s0 = s1 = s2 = s3 = 0.0                # sum e*y in four chains (a record only)
        for b in range(nb):
            lo = b * B
            s[b] = _block_sum(e, lo, B)
            hi = min(lo + B, K)
            a = lo
            while a + 4 <= hi:
                s0 += e[a] * y[a]
                s1 += e[a + 1] * y[a + 1]
                s2 += e[a + 2] * y[a + 2]
                s3 += e[a + 3] * y[a + 3]
                a += 4
            while a < hi:
                s0 += e[a] * y[a]
                a += 1
        sey = (s0 + s1) + (s2 + s3)
    else:
        acc[:] = 0.0
        for j in range(n):
            acc[act[j] // B] += es[j]
        for b in range(nb):
            s[b] = s_un[b] + acc[b]
    S = 0.0
    for b in range(nb):
        S += s[b]
    sc = 0.0
    sr = 0.0
    lost = 0.0
    if full:
        for a in range(C):
            sc += e[a]
            d = p0[a] - e[a] / S
            if d > 0.0:
                lost += d
        for a in range(1, 1 + E):
            sr += e[a]
    else:
        for j in range(n):
            a = act[j]
            ea = es[j]
            sey += ea * ys[j]
            if a < C:
                sc += ea
                d = p0[a] - ea / S
                if d > 0.0:
                    lost += d
                if 1 <= a <= E:
                    sr += ea
        lost += U[4] * max(0.0, 1.0 - S0 / S)
    q_pos = (U[1] + sc) / S
    tau = (U[2] + sr) / S
    ent = math.log(S) - (U[3] + sey) / S
    m_ret = 1.0 - lost / Q0
    return S, q_pos, tau, ent, m_ret


@_jit
def _binsearch_right(arr, keys, out):
    """numpy's searchsorted(arr, keys, side='right'), its algorithm verbatim (the same index
    even where arr is not monotone)."""
    n = arr.size
    lo = 0
    hi = n
    last = keys[0] if keys.size else 0.0
    for k in range(keys.size):
        key = keys[k]
        if last < key:
            hi = n
        else:
            lo = 0
            hi = hi + 1 if hi < n else n
        last = key
        while lo < hi:
            mid = lo + ((hi - lo) >> 1)
            if key < arr[mid]:
                hi = mid
            else:
                lo = mid + 1
        out[k] = lo


@_jit
def _draw_blocks(e, s, x, N, B, cs, u, blk, cb, uniq, cnt, C, E):
    """``samplers._draw_by_blocks`` for N draws from the exponentials x (N + 1,), compressed to
    distinct increasing actions uniq[:n_u] with counts cnt[:n_u]. Returns
    (n_u, X, hit_rare, sampled correct mass)."""
    nb = s.size
    acc = 0.0
    for b in range(nb):
        acc += s[b]
        cs[b] = acc
    run = 0.0
    for i in range(N + 1):
        run += x[i]
        x[i] = run
    scale = cs[nb - 1] / x[N]
    for i in range(N):
        u[i] = x[i] * scale
    _binsearch_right(cs, u[:N], blk)
    hi_frac = 1.0 - 1e-12
    tiny = 2.2250738585072014e-308
    n_u = 0
    X = 0
    hit = False
    mass = 0.0
    i = 0
    row = -1
    while i < N:
        b = min(blk[i], nb - 1)
        row += 1
        lo = b * B
        c = 0.0
        for j in range(B):                    # the block's cumulative masses c (numpy's cumsum)
            c += e[lo + j]
            cb[j] = c
        tot = max(c, tiny)
        base = cs[b - 1] if b > 0 else 0.0
        rowf = float(row)
        j = 0
        while i < N and min(blk[i], nb - 1) == b:
            frac = (u[i] - base) / tot
            frac = min(max(frac, 0.0), hi_frac)
            target = rowf + frac
            hi = B - 1                        # first j >= the last answer with key_j > target,
            while j < hi:                     # key_j = c_j / tot + row (row + 1 for the last)
                mid = (j + hi) >> 1
                if cb[mid] / tot + rowf > target:
                    hi = mid
                else:
                    j = mid + 1
            a = lo + j
            if n_u > 0 and uniq[n_u - 1] == a:
                cnt[n_u - 1] += 1
            else:
                uniq[n_u] = a
                cnt[n_u] = 1
                n_u += 1
                if a < C:
                    mass += e[a]
                if 1 <= a <= E:
                    hit = True
            if a < C:
                X += 1
            i += 1
    return n_u, X, hit, mass


@_jit
def _draw_guide(e, u01, N, rows, M, F, off, g, counts, uniq, cnt, C, E, want_uniq, us, bs,
                parts):
    """``samplers._draw_by_guide`` for the uniforms u01 (N,): counts (Kp,) of the drawn actions
    and, when ``want_uniq``, their distinct actions uniq[:n_u] and counts cnt[:n_u].

    F (Kp,) holds the column-major cumulative masses as numpy sums them, laid out as e viewed
    (rows, ncol): F0[i] = F0[i - 1] + E[i] row by row, off = cumsum(F0[rows - 1]), then
    F[i, j] = F0[i, j] + off[j - 1]; rank q is the action (q & mask) * ncol + (q >> rsh). A draw
    is the first rank whose F exceeds u = u01 * total, found through a guide table g of M
    buckets. Returns (n_u, X, hit_rare, sampled correct mass)."""
    Kp = e.size
    ncol = Kp // rows
    mask = rows - 1                           # rows is a power of 2: rank -> action by bits
    rsh = 0
    while (1 << rsh) < rows:
        rsh += 1
    for j in range(ncol):
        F[j] = e[j]
    for i in range(1, rows):
        lo = i * ncol
        for j in range(ncol):
            F[lo + j] = F[lo - ncol + j] + e[lo + j]
    last = (rows - 1) * ncol
    acc = F[last]
    off[0] = acc
    for j in range(1, ncol):
        acc = acc + F[last + j]
        off[j] = acc
    total = acc
    scale = M / total * (1.0 - 1e-14)
    g[:] = 0
    for i in range(rows):                     # F[i, j] += off[j - 1]; g[b + 1] counts the F
        lo = i * ncol                         # in bucket b (in any order)
        g[int(F[lo] * scale) + 1] += 1
        for j in range(1, ncol):
            v = F[lo + j] + off[j - 1]
            F[lo + j] = v
            g[int(v * scale) + 1] += 1
    for b in range(M):
        g[b + 1] += g[b]
    top = np.nextafter(total, 0.0)
    counts[:] = 0
    # the draws grouped by coarse bucket (the counts do not depend on the order), so that the
    # guide, F and the counts are read in cache-sized pieces; u01 is overwritten
    P = parts.size - 1
    sh = 0
    while ((M - 1) >> sh) >= P:
        sh += 1
    parts[:] = 0
    for k in range(N):
        uk = min(u01[k] * total, top)
        u01[k] = uk
        b = int(uk * scale)
        bs[k] = b
        parts[(b >> sh) + 1] += 1
    for p in range(P):
        parts[p + 1] += parts[p]
    for k in range(N):
        p = bs[k] >> sh
        at = parts[p]
        parts[p] = at + 1
        us[at] = u01[k]
    for k in range(N):
        uk = us[k]
        b = int(uk * scale)
        q = g[b]
        stop = g[b + 1]
        steps = 0
        while q < stop and F[(q & mask) * ncol + (q >> rsh)] <= uk and steps < 8:
            q += 1
            steps += 1
        if q < stop and F[(q & mask) * ncol + (q >> rsh)] <= uk:   # a crowded bucket: bisect
            lo, hi = q + 1, stop
            while lo < hi:
                mid = (lo + hi) >> 1
                if F[(mid & mask) * ncol + (mid >> rsh)] <= uk:
                    lo = mid + 1
                else:
                    hi = mid
            q = lo
        counts[(q & mask) * ncol + (q >> rsh)] += 1
    X = 0
    mass = 0.0
    for a in range(C):
        if counts[a] > 0:
            X += counts[a]
            mass += e[a]
    hit = False
    for a in range(1, 1 + E):
        if counts[a] > 0:
            hit = True
    n_u = 0
    if want_uniq:
        for a in range(Kp):
            if counts[a] > 0:
                uniq[n_u] = a
                cnt[n_u] = counts[a]
                n_u += 1
    return n_u, X, hit, mass


@_jit
def _touch(uniq, n_u, y, e, ys, es, ms, ws, pos, act, n, K, C, E, B, p0, U, s_un, acc):
    """Touch the sampled actions not touched before (in increasing action order): new slots
    (y, e, moments 0), out of the untouched sums U and s_un (numpy's bincount order).
    Returns n."""
    first = n
    for k in range(n_u):
        a = uniq[k]
        if pos[a] < 0:
            pos[a] = n
            act[n] = a
            ys[n] = y[a]
            es[n] = e[a]
            ms[n] = 0.0
            ws[n] = 0.0
            n += 1
    if n == first:
        return n
    for j in range(first, n):
        acc[act[j] // B] = 0.0
    for j in range(first, n):
        a = act[j]
        ea = e[a]
        acc[a // B] += ea
        U[0] -= ea
        if a < C:
            U[1] -= ea
            U[4] -= p0[a]
            if 1 <= a <= E:
                U[2] -= ea
        U[3] -= ea * y[a]
    for j in range(first, n):               # s_un -= bincount(new // B, weights=e[new])
        b = act[j] // B
        s_un[b] = s_un[b] - acc[b]
        acc[b] = 0.0                          # each block's sum is subtracted once
    return n


@_jit
def _go_full(pos, act, n, K, y, e, m, w, ys, es, ms, ws):
    """Touch every action: the slots become the actions in order (y, e, moments laid out by
    action; the untouched keep their y, e and zero moments)."""
    for j in range(n):
        a = act[j]
        y[a] = ys[j]
        e[a] = es[j]
        m[a] = ms[j]
        w[a] = ws[j]
    for a in range(K):
        pos[a] = a
        act[a] = a


@_jit
def _adam_sparse(uniq, cnt, n_u, r_c, r_w, w8, C, m, w, pos, full, c1, c2):
    """m~, w~ of the sampled actions, ascent direction (g/N) c_a r_a: the lazy Adam moments
    (``sparse._LazyAdam.step`` with slots); m, w by slot, or by action when full."""
    for k in range(n_u):
        a = uniq[k]
        g = float(cnt[k]) * (r_c if a < C else r_w) * w8
        i = a if full else pos[a]
        m[i] = m[i] + c1 * g
        w[i] = math.sqrt(w[i] * w[i] + c2 * (g * g))


@_jit
def _adam_dense(counts, K, C, rcw, rww, m, w, c1, c2):
    """m~, w~ of every action from the dense direction c_a (r w) (``_LazyAdam.step``, no
    slots: the full-mode guide path)."""
    for a in range(K):
        g = float(counts[a]) * (rcw if a < C else rww)
        m[a] = m[a] + g * c1
        w[a] = math.sqrt(w[a] * w[a] + (g * g) * c2)


@_jit
def _adam_move(y, e, m, w, ys, es, ms, ws, act, n, full, alpha, epsk, rebase, fm, fw, fast):
    """y += alpha m~ / (w~ + eps_k) on every touched action and e = exp(y) (in full mode one
    vectorised pass each; before, by slot, exp only where y changed and e published by
    action); rebase the moments when asked. Returns max y over the touched actions."""
    ymax = -np.inf
    if full:
        K = y.size
        for a in range(K):
            y[a] = y[a] + (m[a] / (w[a] + epsk)) * alpha
        for a in range(K):
            ymax = max(ymax, y[a])
        _exp_into(y, e, fast)
        if rebase:
            for a in range(K):
                m[a] *= fm
                w[a] *= fw
        return ymax
    for j in range(n):                      # the touched slots, and e published by action
        old = ys[j]
        new = old + (ms[j] / (ws[j] + epsk)) * alpha
        if new != old:
            ys[j] = new
            ev = _exp1(new, fast)
            es[j] = ev
            e[act[j]] = ev
        ymax = max(ymax, new)
    if rebase:
        for j in range(n):
            ms[j] *= fm
            ws[j] *= fw
    return ymax


@_jit
def _sgd_sparse(uniq, cnt, n_u, r_c, r_w, w8, C, lr, y, e, ys, es, pos, full, fast):
    """y[sl] += lr (g/N) c_a r_a on the sampled actions; e = exp(y) there (by slot, published
    by action, or by action when full). Returns their max."""
    ymax = -np.inf
    for k in range(n_u):
        a = uniq[k]
        g = float(cnt[k]) * (r_c if a < C else r_w) * w8
        if full:
            new = y[a] + lr * g
            y[a] = new
            e[a] = _exp1(new, fast)
        else:
            i = pos[a]
            new = ys[i] + lr * g
            ys[i] = new
            es[i] = _exp1(new, fast)
            e[a] = es[i]
        ymax = max(ymax, new)
    return ymax


@_jit
def _sgd_dense(counts, K, C, rcw, rww, lr, y, e, fast):
    """y += (c_a (r w)) lr on every action (full-mode guide path); e = exp(y) where it moved."""
    ymax = -np.inf
    for a in range(K):
        g = float(counts[a]) * (rcw if a < C else rww)
        old = y[a]
        new = old + g * lr
        if new != old:
            y[a] = new
            e[a] = _exp1(new, fast)
        if new > ymax:
            ymax = new
    return ymax


@_jit
def _shift(delta, y, e, ys, es, act, n, K, full, U, s_un, fast):
    """Lower every shifted logit by delta (c += delta) and rescale the running sums
    (``sparse._TouchedSet.shift``). Returns f = exp(-delta)."""
    f = math.exp(-delta)
    for a in range(K):
        y[a] = y[a] - delta
        e[a] = _exp1(y[a], fast)
    if not full:
        for j in range(n):
            ys[j] = ys[j] - delta
            ev = _exp1(ys[j], fast)
            es[j] = ev
            e[act[j]] = ev
        U[3] = f * (U[3] - delta * U[0])
        U[0] *= f
        U[1] *= f
        U[2] *= f
        for b in range(s_un.size):
            s_un[b] *= f
    return f


# ----------------------------------------------------------------------------- availability

@functools.lru_cache(maxsize=1)
def fast_exp_here() -> bool:
    """Whether the vectorised twin of libm's exp (``libm_exp``) is bit-identical to np.exp
    here; if not, the kernels call ``math.exp`` (libm's, checked by ``unavailable_reason``)."""
    return libm_exp.matches_numpy()


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """None when the compiled engine reproduces the numpy engines here, else why not: numba
    missing, or numba's exp / the pairwise block sum not bit-identical to numpy's on this
    machine (checked once per process on 200,000 values, in a second after the first
    compilation)."""
    if numba is None:
        return "numba is not installed"
    rng = np.random.default_rng(12345)
    x = np.concatenate([rng.uniform(-40.0, 1.0, 150_000), rng.uniform(-745.0, 709.0, 50_000)])
    got = np.empty_like(x)
    _exp_all(x, got)
    if not np.array_equal(got, np.exp(x)):
        return "numba's exp differs from numpy's on this machine"
    for n in (256, 240, 144, 16, 7):
        rows = np.exp(rng.normal(-5.0, 4.0, (64, n)))
        ref = rows.sum(axis=1)
        flat = rows.ravel()
        if any(_block_sum(flat, i * n, n) != ref[i] for i in range(64)):
            return "numpy's pairwise summation order is not the one reproduced here"
    return None


# ----------------------------------------------------------------------------- the engine

def simulate_run_compiled(cfg: SimConfig, N: int, gamma: float, seed: int, *,
                          progress=None) -> dict:
    """One run of the sparse engine (``sparse.simulate_run_sparse``) in numba kernels: the same
    draws and logits bit for bit, records equal to rounding. Requires ``sparse_applies(cfg)``.
    Returns records with a leading run axis of length 1."""
    if not sparse_applies(cfg):
        raise ValueError("the compiled engine needs surrogate='ratio' and a zero-sum advantage")
    K, C, E, T = cfg.actions, cfg.correct, cfg.rare, cfg.steps
    R_c, R_w = cfg.reward_correct, cfg.reward_wrong
    B, nb, Kp = layout(K)
    rng = np.random.default_rng([seed, N])
    rec = new_records(1, T)
    g_table = focal_table(N, gamma)[0]                                # (N + 1,) g / N

    # the state of ``sparse._TouchedSet``: touched slots in touch order, masses by action
    y = np.full(Kp, -np.inf)                                          # (Kp,) shifted logits
    y[:K] = cfg.logits0()
    y[:K] -= y[:K].max()
    e = np.exp(y)                                                     # (Kp,) masses
    s_un = e.reshape(nb, B).sum(axis=1)                               # (nb,) untouched masses
    S0 = float(s_un.sum())
    p0 = e[:C] / S0                                                   # (C,) initial probs
    Q0 = float(p0.sum())
    U = np.array([S0, float(e[:C].sum()), float(e[1:1 + E].sum()),
                  float(np.dot(e[:K], y[:K])), Q0])                   # untouched S, c, rare,
    m, w = np.zeros(Kp), np.zeros(Kp)                                 # ent, p0c; moments
    ys, es = np.empty(Kp), np.empty(Kp)                               # touched slots: y, e,
    ms, ws = np.zeros(Kp), np.zeros(Kp)                               # moments (not full)
    pos = np.full(Kp, -1, dtype=np.int64)                             # action -> slot
    act = np.zeros(Kp, dtype=np.int64)                                # slot -> action
    n, full = 0, False

    guide = uses_guide(N, Kp)
    s, acc, cs = np.empty(nb), np.zeros(nb), np.empty(nb)
    n_buf = min(N, Kp) if guide else N
    uniq, cnt = np.empty(n_buf, dtype=np.int64), np.empty(n_buf, dtype=np.int64)
    if guide:
        F, off = np.empty(Kp), np.empty(Kp // GUIDE_ROWS)
        M = GUIDE_BUCKETS * Kp                                        # guide buckets
        gb = np.empty(M + 2, dtype=np.int32)                          # int32: half the cache
        counts = np.empty(Kp, dtype=np.int32)
        us, bs = np.empty(N), np.empty(N, dtype=np.int32)             # draws by coarse bucket
        parts = np.empty(257, dtype=np.int64)
    else:
        u, blk, cb = np.empty(N), np.empty(N, dtype=np.int64), np.empty(B)
    adam = _LazyAdam(cfg) if cfg.optimizer == "adam" else None
    fast = fast_exp_here()
    b1, b2 = cfg.adam_betas

    for t in range(T + 1):
        # --- record pi_t (and its block masses s)
        S, q_pos, tau, ent, m_ret = _record(y, e, ys, es, act, n, full, K, C, E, B, s_un, U,
                                            p0, S0, Q0, s, acc)
        rec["q_pos"][0, t], rec["tau"][0, t] = q_pos, tau
        rec["entropy"][0, t], rec["m_ret"][0, t] = ent, m_ret
        if t == T:
            break
        dense_step = full and guide
        # --- sample N actions from pi_t
        if guide:
            n_u, X, hit, mass = _draw_guide(e, rng.random(N), N, GUIDE_ROWS, M, F, off, gb,
                                            counts, uniq, cnt, C, E, not dense_step, us, bs,
                                            parts)
        else:
            x = rng.standard_exponential(N + 1)
            n_u, X, hit, mass = _draw_blocks(e, s, x, N, B, cs, u, blk, cb, uniq, cnt, C, E)
        record_group(rec, 0, t, X=X, N=N, hit_rare=hit, sampled_correct_mass=mass, S=S,
                     q_pos=q_pos)
        # --- advantages and focal weight
        r_c, r_w = scalar_advantages(X, N, R_c=R_c, R_w=R_w, kind=cfg.advantage)
        w8 = float(g_table[X])
        if not dense_step and not full:
            n = _touch(uniq, n_u, y, e, ys, es, ms, ws, pos, act, n, K, C, E, B, p0, U, s_un,
                       acc)
            if n * FULL_FRACTION >= K:
                _go_full(pos, act, n, K, y, e, m, w, ys, es, ms, ws)
                n, full = K, True
                s_un[:] = 0.0
                U[:] = 0.0
        # --- step: lazy Adam on every touched logit, or SGD
        if adam is not None:
            k = t + 1
            d = k - adam.k0
            c1 = (1.0 - b1) * b1 ** -d
            c2 = (1.0 - b2) * b2 ** -d
            if dense_step:
                _adam_dense(counts, K, C, r_c * w8, r_w * w8, m, w, c1, c2)
            else:
                _adam_sparse(uniq, cnt, n_u, r_c, r_w, w8, C, m if full else ms,
                             w if full else ws, pos, full, c1, c2)
            root = np.sqrt(1.0 - b2 ** k)
            alpha = adam.lr * root / (1.0 - b1 ** k) * (b1 / np.sqrt(b2)) ** d
            epsk = adam.eps * root / np.sqrt(b2) ** d
            rebase = d >= adam.REBASE
            ymax = _adam_move(y[:K], e[:K], m[:K], w[:K], ys, es, ms, ws, act, n, full, alpha,
                              epsk, rebase, b1 ** d, np.sqrt(b2) ** d, fast)
            if rebase:
                adam.k0 = k
        elif dense_step:
            ymax = _sgd_dense(counts, K, C, r_c * w8, r_w * w8, cfg.lr, y, e, fast)
        else:
            ymax = _sgd_sparse(uniq, cnt, n_u, r_c, r_w, w8, C, cfg.lr, y, e, ys, es, pos,
                               full, fast)
        if ymax > SHIFT_SLACK:                                         # move the shift (rare)
            S0 *= _shift(ymax, y, e, ys, es, act, n, K, full, U, s_un, fast)
        if progress is not None:
            progress(1)
    return finish_records(rec, N)
