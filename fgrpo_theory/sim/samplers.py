"""Exact Multinomial(N, p) group samplers for the categorical simulator (paper Section 5.1,
Appendix J).

``sample_group`` draws N actions i.i.d. from p = e_r / sum(e_r) and returns the distinct actions
with their counts, exactly the Multinomial(N, p) counts. Few draws take sorted uniforms
(normalised cumulative sums of exponentials, O(N)) and search the block masses, then only the hit
blocks (``_draw_by_blocks``); many draws (N >= Kp / GUIDE_FACTOR, ``uses_guide``) invert the
cumulative masses through a guide table (``_draw_by_guide``, O(K + N), no binary search over K
per draw). The choice depends on (N, Kp) only, so every engine (``dense``, ``sparse``,
``compiled``) draws the same actions from the same ``numpy.random.Generator``.

    >>> import numpy as np
    >>> from fgrpo_theory.sim.samplers import layout, sample_group
    >>> B, nb, Kp = layout(300)
    >>> e = np.zeros(Kp); e[:300] = 1.0
    >>> uniq, cnt = sample_group(e, e.reshape(nb, B).sum(axis=1), 8, np.random.default_rng(0), B)
    >>> int(cnt.sum())
    8

Shapes: ``K`` actions (``Kp`` padded to whole blocks of ``B``, ``nb`` blocks), ``N`` draws.
"""

from __future__ import annotations

import numpy as np

#: Actions per sampling block (see the module docstring).
BLOCK = 256
#: Rows of the guide sampler's cumulative sums (a power of 2 dividing the padded action count).
GUIDE_ROWS = 16
_GUIDE_SHIFT = 4
#: The guide sampler serves N >= Kp / GUIDE_FACTOR draws, the block sampler fewer.
GUIDE_FACTOR = 8
#: Guide buckets per action.
GUIDE_BUCKETS = 1


def layout(K: int) -> tuple[int, int, int]:
    """(B, nb, Kp): block size, number of blocks, padded action count (a multiple of
    GUIDE_ROWS)."""
    B = BLOCK if K >= BLOCK else GUIDE_ROWS * -(-K // GUIDE_ROWS)
    nb = -(-K // B)
    return B, nb, nb * B


def _draw_by_blocks(
    e_r: np.ndarray, s_r: np.ndarray, N: int, rng: np.random.Generator, B: int
) -> np.ndarray:
    """N i.i.d. action indices (sorted) from the unnormalised masses e_r (Kp,) (zero on the
    padding), block masses s_r (nb,), for few draws: sorted uniforms (normalised cumulative sums
    of exponentials, O(N)) search the block masses, then only the hit blocks."""
    nb = s_r.size
    cs = np.cumsum(s_r)  # (nb,)
    x = rng.standard_exponential(N + 1)
    np.cumsum(x, out=x)
    u = x[:N] * (cs[-1] / x[N])  # (N,) sorted uniforms on [0, total)
    blk = np.searchsorted(cs, u, side="right")
    np.minimum(blk, nb - 1, out=blk)
    new = np.empty(N, dtype=bool)
    new[0] = True
    np.not_equal(blk[1:], blk[:-1], out=new[1:])
    row = np.cumsum(new) - 1  # (N,) row of each draw among hit blocks
    ub = blk[new]  # (n_u,) hit blocks, increasing
    c = np.cumsum(e_r.reshape(nb, B)[ub], axis=1)  # (n_u, B) local cumulative masses
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
    E = e_r.reshape(rows, -1)  # (rows, ncol)
    ncol = E.shape[1]
    F = np.empty_like(E)
    F[0] = E[0]
    for i in range(1, rows):  # cumulative sums down each column
        np.add(F[i - 1], E[i], out=F[i])
    off = np.cumsum(F[-1])  # (ncol,) column ends
    F[:, 1:] += off[:-1]  # F[i, j] = mass of ranks <= j*rows + i
    F = F.ravel()
    total = off[-1]

    def action(q):  # rank -> action (rows is a power of 2)
        return (q & (rows - 1)) * ncol + (q >> _GUIDE_SHIFT)

    M = GUIDE_BUCKETS * e_r.size
    scale = M / total * (1.0 - 1e-14)  # F * scale < M even after rounding
    bk = (F * scale).astype(np.intp)  # (Kp,) bucket of each F, monotone in F
    g = np.zeros(M + 1, dtype=np.intp)
    np.cumsum(np.bincount(bk, minlength=M), out=g[1:])  # g[b]: ranks with bucket < b
    u = rng.random(N)
    u *= total
    np.minimum(u, np.nextafter(total, 0.0), out=u)  # u < total, so never a zero-mass rank
    b = (u * scale).astype(np.intp)
    q = g[b]  # answer (first rank with F > u) is
    todo = np.flatnonzero(F[action(q)] <= u)  # in [g[b], g[b + 1]]; mostly g[b]
    q[todo] += 1
    lo, hi = q[todo], g[b[todo] + 1]
    while True:  # bisection on the few others
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


def sample_group(
    e_r: np.ndarray, s_r: np.ndarray, N: int, rng: np.random.Generator, B: int
) -> tuple[np.ndarray, np.ndarray]:
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
