"""The compiled sparse engine of the categorical simulator (paper Section 5.1, Appendix J,
Fig. 2): the numpy sparse engine (``fgrpo_theory.sim.sparse``) step for step, in numba kernels.

Its contract with the other engines (``fgrpo_theory.sim.agreement``): deterministic for a given
(config, seed, machine), and in agreement in distribution over seeds. In practice it follows
the numpy sparse engine far more closely:

- the random numbers are those of the run's ``numpy.random.Generator`` seeded by (seed, N),
  ``standard_exponential(N + 1)`` for the block sampler and ``random(N)`` for the guide table,
  as ``samplers`` draws them, drawn inside the run's kernel: through numba's ``Generator``
  methods (numpy's algorithms on the same bit generator), and the uniforms by an inline PCG64
  (``_pcg_doubles``: numpy's 128-bit LCG and output, tested against ``Generator.random``);
- the samplers' arithmetic is numpy's (block masses, cumulative sums, the block of each draw by
  a merge instead of searchsorted, the guide table's column-major cumulative masses; the block
  search compares masses where numpy compares them divided by the block's mass), so on the
  same masses they give numpy's draws but where a uniform lies within rounding of a cumulative
  mass (tested);
- the advantages (``group.group_advantages`` for X = 0..N), the focal table and lazy Adam's
  scalars (tabulated before the run by the same Python expressions, ``_adam_schedule``) are
  the numpy engine's, and so is the initial state;
- exp is its own (``fast_exp``: vectorised, within an ulp or two of numpy's, whose last bit
  itself depends on the CPU), and between lazy Adam's rebases (every 100 steps) a mass is
  updated as e exp(d) when its logit moves by d (``fast_exp.exp_small``, |d| <= 1/16; larger
  moves and the rebase steps take exp(y) afresh), so e = exp(y) holds to ~1e-14 rather than to
  an ulp; the block masses and the records' sum of e*y are vectorised sums in the machine's
  order. So the logits and masses differ from the numpy engine's by rounding, and a draw
  differs only where a uniform falls between the two engines' cumulative masses (about 1e-14
  per draw). Nothing rests on exp's last bit: the tests run with it perturbed by an ulp
  (``EXP_SCALE``).

What is faster: a run's steps in one kernel (``_run_steps``: no Python, no per-call argument
checks between the parts of a step); one fused pass per step over the touched actions, chunk by
chunk (``_move_slots``; ``_move_full`` once the run is full: Adam's moments and step, the
masses, the next step's block masses, the records' sum of e*y and the guide's column sums,
while a chunk is in cache) instead of a dozen numpy passes with temporaries; loops over array
slices with numpy's error model, so that LLVM vectorises them; the masses by the incremental
exp (a degree-8 polynomial, no range reduction: an unmoved logit, d = 0, keeps its mass
exactly, with no search for the moved ones); the moments only of the drawn actions; the block
sampler's cumulative sums four blocks at a time and its bisections branch-free, four draws in
lockstep; the guide table searched without temporaries, and with N >= Kp draws most draws
counted per guide bucket without a search.

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

from fgrpo_theory.sim import config, dense, fast_exp, group, kernel_cache, link, samplers, sparse
from fgrpo_theory.sim.config import SimConfig, sparse_applies
from fgrpo_theory.sim.dense import SHIFT_SLACK
from fgrpo_theory.sim.group import (
    finish_records,
    focal_table,
    group_advantages,
    new_records,
    out_of_range,
)
from fgrpo_theory.sim.link import exchange as link_exchange
from fgrpo_theory.sim.link import solo_link
from fgrpo_theory.sim.samplers import BLOCK, GUIDE_BUCKETS, GUIDE_ROWS, layout, uses_guide
from fgrpo_theory.sim.sparse import FULL_FRACTION, _LazyAdam

try:
    import numba
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic
except ImportError:  # pragma: no cover - numba is a dependency; the numpy engines still run
    numba = None


#: Actions per chunk of the fused passes (a multiple of the block): the chunk's y, e, m~, w~
#: stay in L1/L2 while every pass of a step runs over it.
CHUNK = 2048
#: The guide sampler counts the draws per bucket (and searches only those in buckets that hold
#: a cumulative mass) from N >= MANY_DRAWS * Kp draws on; below, it searches every draw.
MANY_DRAWS = 1.0


def _jit(fn):
    """numba.njit with an on-disk cache (compiled once per machine), or the function as is.
    numpy's error model: a float division is IEEE's (no zero-divisor check, which would keep
    the loops from vectorising; no division here has a zero divisor)."""
    if numba is None:
        return fn
    return numba.njit(cache=True, nogil=True, error_model="numpy")(fn)


def _jit_sums(fn):
    """``_jit`` for a kernel of sums that may be reassociated (LLVM then vectorises them: lanes
    of partial sums, added at the end). The order of additions is the machine's, fixed for a
    given machine: the engines' contract asks no more."""
    if numba is None:
        return fn
    return numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc"})(fn)


#: The parts of a step that ``_run_steps`` times when asked (``profile_simulate.py``).
PROFILE_PARTS = ("record", "rng", "sampler", "touch", "moments", "move", "rest")


if numba is not None:

    @intrinsic
    def _cycles(typingctx):
        """The CPU's cycle counter (llvm.readcyclecounter: rdtsc on x86-64)."""

        def codegen(context, builder, signature, args):
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.IntType(64), []), "llvm.readcyclecounter"
            )
            return builder.call(fn, [])

        return types.int64(), codegen

    @intrinsic
    def _mulhi(typingctx, a, b):
        """The high 64 bits of the 128-bit product of two uint64 (one mul on x86-64)."""
        sig = types.uint64(types.uint64, types.uint64)

        def codegen(context, builder, signature, args):
            i128 = ir.IntType(128)
            p = builder.mul(builder.zext(args[0], i128), builder.zext(args[1], i128))
            return builder.trunc(builder.lshr(p, ir.Constant(i128, 64)), ir.IntType(64))

        return sig, codegen


@_jit
def _tick(prof, part, since):
    """Add the cycles since ``since`` to prof[part] and return the counter; nothing (and 0)
    when prof is empty, the default."""
    if prof.size == 0:
        return 0
    now = _cycles()
    prof[part] += now - since
    return now


@_jit
def cycles_now():
    """The cycle counter, from Python (to convert ``_run_steps``'s profile into seconds)."""
    return _cycles()


#: PCG64's multiplier (numpy's ``PCG_DEFAULT_MULTIPLIER_128``).
PCG_MULT = (2549297995355413924 << 64) + 4865540595714422341
_U64 = (1 << 64) - 1


def pcg_state(bitgen) -> np.ndarray | None:
    """The state of a numpy PCG64 bit generator as the uint64 array (8,) that ``_pcg_doubles``
    advances: the 128-bit state s, the increment c, and M^4, c (1 + M + M^2 + M^3) (mod 2^128),
    which take four lanes four steps ahead at once, each as (high, low) words. None for
    another bit generator."""
    if type(bitgen) is not np.random.PCG64:
        return None
    st = bitgen.state["state"]
    s, c = st["state"], st["inc"]
    m4 = pow(PCG_MULT, 4, 1 << 128)
    c4 = c * (1 + PCG_MULT + PCG_MULT**2 + PCG_MULT**3) % (1 << 128)
    words = [w for v in (s, c, m4, c4) for w in (v >> 64, v & _U64)]
    return np.array(words, dtype=np.uint64)


def set_pcg_state(bitgen, pcg: np.ndarray) -> None:
    """Put the state advanced by ``_pcg_doubles`` back into the bit generator."""
    state = bitgen.state
    state["state"]["state"] = (int(pcg[0]) << 64) | int(pcg[1])
    bitgen.state = state


# ----------------------------------------------------------------------------- kernels


@_jit
def _pcg_mul_add(ah, al, bh, bl, ch, cl):
    """(a * b + c) mod 2^128 on (high, low) uint64 words."""
    lo = al * bl
    hi = _mulhi(al, bl) + al * bh + ah * bl
    lo2 = lo + cl
    return hi + ch + (np.uint64(1) if lo2 < lo else np.uint64(0)), lo2


@_jit
def _pcg_double(h, lo):
    """PCG64's output of the state (h, lo) (XSL-RR) as numpy's next_double: (x >> 11) 2^-53."""
    rot = h >> np.uint64(58)
    x = h ^ lo
    x = (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))
    return float(x >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@_jit
def _pcg_doubles(pcg, out, n):
    """out[:n] = the next n doubles of numpy's PCG64 (``Generator.random(n)``) from the state
    in pcg (``pcg_state``), which is advanced by n: the same 128-bit LCG steps and output, in
    four lanes (states s_{i+1} ... s_{i+4}, each taken four steps ahead by M^4 and c4) that
    the CPU runs side by side, where one generator call per number waits on the last."""
    sh, sl, ch, cl = pcg[0], pcg[1], pcg[2], pcg[3]
    mh, ml = np.uint64(2549297995355413924), np.uint64(4865540595714422341)
    h0, l0 = _pcg_mul_add(sh, sl, mh, ml, ch, cl)
    h1, l1 = _pcg_mul_add(h0, l0, mh, ml, ch, cl)
    h2, l2 = _pcg_mul_add(h1, l1, mh, ml, ch, cl)
    h3, l3 = _pcg_mul_add(h2, l2, mh, ml, ch, cl)
    m4h, m4l, c4h, c4l = pcg[4], pcg[5], pcg[6], pcg[7]
    i = 0
    while i + 4 <= n:
        out[i] = _pcg_double(h0, l0)
        out[i + 1] = _pcg_double(h1, l1)
        out[i + 2] = _pcg_double(h2, l2)
        out[i + 3] = _pcg_double(h3, l3)
        sh, sl = h3, l3
        i += 4
        h0, l0 = _pcg_mul_add(h0, l0, m4h, m4l, c4h, c4l)
        h1, l1 = _pcg_mul_add(h1, l1, m4h, m4l, c4h, c4l)
        h2, l2 = _pcg_mul_add(h2, l2, m4h, m4l, c4h, c4l)
        h3, l3 = _pcg_mul_add(h3, l3, m4h, m4l, c4h, c4l)
    r = n - i  # 0 to 3 left: the first r lanes
    if r > 0:
        out[i] = _pcg_double(h0, l0)
        sh, sl = h0, l0
    if r > 1:
        out[i + 1] = _pcg_double(h1, l1)
        sh, sl = h1, l1
    if r > 2:
        out[i + 2] = _pcg_double(h2, l2)
        sh, sl = h2, l2
    pcg[0], pcg[1] = sh, sl


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
def _exp1(x, xs):
    """exp(x) (``fast_exp``) times xs: 1.0 (exact) in every run, an ulp off 1 in the tests that
    check that nothing rests on exp's last bit."""
    return fast_exp.exp1(x) * xs


@_jit
def _record_sums(y, e, ys, es, act, n, full, K, C, E, B, s_un, U, s, acc, cslot, nc):
    """Block masses s (nb,) of pi_t and the sums of its records: S = sum e, the correct mass,
    the rare mass and sum e*y (``_finish``; M_ret's lost mass needs the whole policy's S,
    ``_lost``).

    Not full: s = s_un + the touched masses added per block in touch order (numpy's
    ``bincount``); full: numpy's pairwise sum of each block. The sums of the records run over
    the touched slots ys, es (plus the untouched running sums U) or, in full mode, over the
    actions' y, e; the rest as ``_rest_sums``."""
    nb = s.size
    sey = 0.0
    if full:
        s0 = s1 = s2 = s3 = 0.0  # sum e*y in four chains (a record only)
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
        for j in range(n):
            sey += es[j] * ys[j]
    return _rest_sums(e, es, act, cslot, nc, full, C, E, U, s, sey)


@_jit
def _lost(e, es, act, cslot, nc, full, C, p0, U, S0, S):
    """M_ret's lost mass sum_{a correct} max(0, p0_a - pi_t(a)) (Eq. 26) over this thread's
    correct actions, with S the whole policy's normaliser (the correct actions in order, or
    the touched correct slots in slot order, plus the untouched ones, whose mass is still
    their initial one: p0 S0 / S)."""
    lost = 0.0
    if full:
        for a in range(C):
            d = p0[a] - e[a] / S
            if d > 0.0:
                lost += d
    else:
        for k in range(nc):
            j = cslot[k]
            d = p0[act[j]] - es[j] / S
            if d > 0.0:
                lost += d
        lost += U[4] * max(0.0, 1.0 - S0 / S)
    return lost


@_jit
def _merge_right(arr, keys, n, out):
    """numpy's searchsorted(arr, keys[:n], side='right') for non-decreasing arr and keys, by a
    merge: on a sorted array that search returns the number of entries <= each key (the last
    index is arr.size, which callers clip)."""
    b = 0
    na = arr.size
    for i in range(n):
        k = keys[i]
        while b < na and arr[b] <= k:
            b += 1
        out[i] = b


@_jit
def _target(u, base, top):
    """A draw's mass within its hit block: u - base clipped to [0, top] (top just below the
    block's mass: ``samplers._draw_by_blocks`` clips frac = (u - base) / tot to [0, 1 - 1e-12])."""
    return min(max(u - base, 0.0), top)


@_jit
def _bisect4(cb, t0, t1, t2, t3):
    """For four targets at once, the first j in [0, BLOCK - 1] with cb[j] > t (cb
    non-decreasing, cb[BLOCK - 1] taken as above every target): four branch-free
    bisections in lockstep, so the four chains of dependent loads overlap."""
    j0 = j1 = j2 = j3 = 0
    n = BLOCK - 1  # (a constant length: the loop unrolls)
    while n > 1:
        half = n >> 1
        j0 += half * (cb[j0 + half - 1] <= t0)
        j1 += half * (cb[j1 + half - 1] <= t1)
        j2 += half * (cb[j2 + half - 1] <= t2)
        j3 += half * (cb[j3 + half - 1] <= t3)
        n -= half
    j0 += n * (cb[j0] <= t0)
    j1 += n * (cb[j1] <= t1)
    j2 += n * (cb[j2] <= t2)
    j3 += n * (cb[j3] <= t3)
    return j0, j1, j2, j3


@_jit
def _block_draws(e, u, i, stop, lo, B, cb, tot, base, st, mass, uniq, cnt, C, E, ad):
    """The draws u[i:stop] of the block at lo (cumulative masses cb, total tot, the cumulative
    mass before it base): each is the first j with cb_j > u - base (clipped, ``_target``;
    j <= B - 1), ``samplers._draw_by_blocks``'s search with its keys cb_j / tot + row and
    target row + (u - base) / tot multiplied out (the same draw but where a draw lies within
    rounding of a cumulative mass); their actions in ad[i:stop], then appended to uniq / cnt in
    draw order. The bisections (four draws at a time, ``_bisect4``) and the bookkeeping are
    branch-free (draws of one block land on unpredictable actions).
    st = [n_u, X, hit, last action], updated; returns the sampled correct mass, mass plus the
    new correct actions' masses in draw order."""
    top = tot * (1.0 - 1e-12)
    k = i
    if B == BLOCK:
        while k + 4 <= stop:
            j0, j1, j2, j3 = _bisect4(
                cb,
                _target(u[k], base, top),
                _target(u[k + 1], base, top),
                _target(u[k + 2], base, top),
                _target(u[k + 3], base, top),
            )
            ad[k], ad[k + 1], ad[k + 2], ad[k + 3] = lo + j0, lo + j1, lo + j2, lo + j3
            k += 4
    rest = k
    for k in range(rest, stop):
        target = _target(u[k], base, top)
        j = 0  # branch-free bisection of [0, B - 1]
        n = B - 1
        while n > 1:
            half = n >> 1
            j += half * (cb[j + half - 1] <= target)
            n -= half
        j += n * (cb[j] <= target)
        ad[k] = lo + j
    n_u, X, hit, last = st[0], st[1], st[2] != 0, st[3]
    for k in range(i, stop):
        a = ad[k]
        new = a != last
        last = a
        n_u += 1 if new else 0
        uniq[n_u - 1] = a
        cnt[n_u - 1] = 1 if new else cnt[n_u - 1] + 1
        mass += e[a] if (new and a < C) else 0.0
        hit |= new and 1 <= a <= E
        X += 1 if a < C else 0
    st[0], st[1], st[2], st[3] = n_u, X, 1 if hit else 0, last
    return mass


@_jit
def _draw_blocks(e, s, x, N, B, cs, u, blk, hb, starts, cbs, st, uniq, cnt, C, E):
    """``samplers._draw_by_blocks`` for N draws from the exponentials x (N + 1,), compressed to
    distinct increasing actions uniq[:n_u] with counts cnt[:n_u]. Returns
    (n_u, X, hit_rare, sampled correct mass).

    The block of each draw is numpy's ``searchsorted(cs, u, side='right')``, found by a merge
    (``_merge_right``: cs and u are both non-decreasing); the hit blocks' cumulative masses
    (numpy's cumsum, one dependent chain of B additions each) are computed four blocks at a
    time into the rows of cbs (4, B), so the four chains overlap; each block's draws then go to
    ``_block_draws``."""
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
    _merge_right(cs, u, N, blk)
    nh = 0
    for i in range(N):  # the hit blocks and where their draws start
        b = min(blk[i], nb - 1)
        if nh == 0 or hb[nh - 1] != b:
            hb[nh] = b
            starts[nh] = i
            nh += 1
    starts[nh] = N
    tiny = 2.2250738585072014e-308
    st[0], st[1], st[2], st[3] = 0, 0, 0, -1
    mass = 0.0
    for h in range(0, nh, 4):
        r = min(4, nh - h)  # up to four hit blocks; a missing one repeats the first
        lo0 = hb[h] * B
        lo1 = hb[h + 1] * B if r > 1 else lo0
        lo2 = hb[h + 2] * B if r > 2 else lo0
        lo3 = hb[h + 3] * B if r > 3 else lo0
        c0 = c1 = c2 = c3 = 0.0
        cb0, cb1, cb2, cb3 = cbs[0], cbs[1], cbs[2], cbs[3]
        for j in range(B):  # four cumulative sums, interleaved
            c0 += e[lo0 + j]
            cb0[j] = c0
            c1 += e[lo1 + j]
            cb1[j] = c1
            c2 += e[lo2 + j]
            cb2[j] = c2
            c3 += e[lo3 + j]
            cb3[j] = c3
        for q in range(r):
            b = hb[h + q]
            mass = _block_draws(
                e,
                u,
                starts[h + q],
                starts[h + q + 1],
                b * B,
                B,
                cbs[q],
                max(cbs[q, B - 1], tiny),
                cs[b - 1] if b > 0 else 0.0,
                st,
                mass,
                uniq,
                cnt,
                C,
                E,
                blk,
            )
    return st[0], st[1], st[2] != 0, mass


@_jit
def _guide_prefix(e, rows, F0, lo, hi):
    """F0[a] for a in [lo, hi): the cumulative masses down the columns of e viewed as
    (rows, ncol), F0[i, j] = F0[i - 1, j] + E[i, j] (numpy's row-by-row additions of
    ``samplers._draw_by_guide``); rows below lo must be done."""
    ncol = e.size // rows
    for a in range(lo, min(hi, ncol)):
        F0[a] = e[a]
    first = max(lo, ncol)
    if hi > first:
        prev, cur, ee = F0[first - ncol : hi - ncol], F0[first:hi], e[first:hi]
        for i in range(hi - first):  # slices: the loop vectorises
            cur[i] = prev[i] + ee[i]


@_jit
def _guide_grouped(F, g, u, n, total, top, scale, sh, parts, us, bs, counts, mask, ncol, rsh):
    """Count the ranks of the draws min(u[:n] * total, top) of the uniforms u[:n] (u is
    overwritten with them; us (n,) receives them grouped): the first rank q whose F exceeds the
    draw, in [g[b], g[b + 1]] for a draw in bucket b (a few steps, then a bisection in a
    crowded bucket). The draws are grouped by coarse bucket first
    (the counts do not depend on the order), so that the guide, F and the counts are read in
    cache-sized pieces. (The search written out here: as a function it ran slower.)"""
    P = parts.size - 1
    parts[:] = 0
    for k in range(n):
        uk = min(u[k] * total, top)
        u[k] = uk
        b = int(uk * scale)
        bs[k] = b
        parts[(b >> sh) + 1] += 1
    for p in range(P):
        parts[p + 1] += parts[p]
    for k in range(n):
        p = bs[k] >> sh
        at = parts[p]
        parts[p] = at + 1
        us[at] = u[k]
    for k in range(n):
        uk = us[k]
        b = int(uk * scale)
        q = g[b]
        stop = g[b + 1]
        steps = 0
        while q < stop and F[(q & mask) * ncol + (q >> rsh)] <= uk and steps < 8:
            q += 1
            steps += 1
        if q < stop and F[(q & mask) * ncol + (q >> rsh)] <= uk:  # a crowded bucket: bisect
            lo, hi = q + 1, stop
            while lo < hi:
                mid = (lo + hi) >> 1
                if F[(mid & mask) * ncol + (mid >> rsh)] <= uk:
                    lo = mid + 1
                else:
                    hi = mid
            q = lo
        counts[(q & mask) * ncol + (q >> rsh)] += 1


@_jit
def _draw_guide(
    e, F, u01, N, rows, M, off, g, counts, uniq, cnt, C, E, want_uniq, us, bs, parts, hh
):
    """``samplers._draw_by_guide`` for the uniforms u01 (N,): counts (Kp,) of the drawn actions
    and, when ``want_uniq``, their distinct actions uniq[:n_u] and counts cnt[:n_u].

    F (Kp,) comes in holding F0, the cumulative masses down the columns of e viewed
    (rows, ncol) as numpy sums them (``_guide_prefix``, or ``_move_full`` on its way), and
    leaves holding the column-major cumulative masses: off = cumsum(F0[rows - 1]), then
    F[i, j] = F0[i, j] + off[j - 1]; rank q is the action (q & mask) * ncol + (q >> rsh). A draw
    is the first rank whose F exceeds u = u01 * total, found through a guide table g of M
    buckets (``_guide_grouped``).

    With many draws (hh (M,) uint16 given, N >= M), most buckets hold no F (late in a run
    88-97%), and every draw u in such a bucket b has rank g[b]: the draws are counted per
    bucket (hh's low 15 bits; its top bit marks the buckets that hold an F) and added to the
    rank g[b] in one pass over the buckets, and only the draws in buckets holding an F are
    searched. A bucket of 2^15 draws or more, which the sum of the counts reveals, sends the
    step back to searching every draw. With fewer draws, each draw in a bucket that holds no
    F is counted at rank g[b] as it comes (no pass over the buckets), and only the others are
    searched. Every way the same rank per draw, so the same counts.
    Returns (n_u, X, hit_rare, sampled correct mass)."""
    Kp = e.size
    ncol = Kp // rows
    mask = rows - 1  # rows is a power of 2: rank -> action by bits
    rsh = 0
    while (1 << rsh) < rows:
        rsh += 1
    last = (rows - 1) * ncol
    acc = F[last]
    off[0] = acc
    for j in range(1, ncol):
        acc = acc + F[last + j]
        off[j] = acc
    total = acc
    scale = M / total * (1.0 - 1e-14)
    g[:] = 0
    for i in range(rows):  # F[i, j] += off[j - 1]; g[b + 1] counts the F
        lo = i * ncol  # in bucket b (in any order)
        g[int(F[lo] * scale) + 1] += 1
        for j in range(1, ncol):
            v = F[lo + j] + off[j - 1]
            F[lo + j] = v
            g[int(v * scale) + 1] += 1
    many = hh.size == M
    for b in range(M):
        if many:  # (before the sum, g[b + 1] is the number of F in bucket b)
            hh[b] = 0x8000 if g[b + 1] > 0 else 0
        g[b + 1] += g[b]
    top = np.nextafter(total, 0.0)  # u < total, so never a zero-mass rank
    counts[:] = 0
    P = parts.size - 1
    sh = 0
    while ((M - 1) >> sh) >= P:
        sh += 1
    if many:
        nh = 0  # the draws in buckets that hold an F, in us[:nh] (as uniforms)
        for k in range(N):
            b = int(min(u01[k] * total, top) * scale)
            v = hh[b]
            hh[b] = v + 1
            us[nh] = u01[k]
            nh += v >> 15
        tot = 0
        for b in range(M):  # the other draws: rank g[b]
            v = hh[b]
            c = v & 0x7FFF
            tot += c
            q = g[b]
            counts[(q & mask) * ncol + (q >> rsh)] += c * (1 - (v >> 15))
        if tot == N:  # (grouped into u01, no longer needed)
            _guide_grouped(
                F, g, us, nh, total, top, scale, sh, parts, u01, bs, counts, mask, ncol, rsh
            )
        else:  # a bucket overflowed its 15 bits: search every draw
            counts[:] = 0
            many = False
    if not many:  # the draws in buckets that hold no F: rank g[b], counted at once
        nh = 0  # (the others, in us[:nh], are searched; u01 takes them grouped)
        for k in range(N):
            b = int(min(u01[k] * total, top) * scale)
            q = g[b]
            free = g[b + 1] == q
            counts[(q & mask) * ncol + (q >> rsh)] += 1 if free else 0
            us[nh] = u01[k]
            nh += 0 if free else 1
        _guide_grouped(F, g, us, nh, total, top, scale, sh, parts, u01, bs, counts, mask, ncol, rsh)
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
def _touch(
    uniq, n_u, y, e, ys, es, ms, ws, pos, act, sb, n, K, C, E, B, p0, U, s_un, acc, cslot, nc
):
    """Touch the sampled actions not touched before (in increasing action order): new slots
    (y, e, moments 0, block sb; correct ones also listed in cslot[:nc], in slot order), out of the
    untouched sums U and s_un (numpy's bincount order). Returns (n, nc)."""
    first = n
    for k in range(n_u):
        a = uniq[k]
        if pos[a] < 0:
            pos[a] = n
            act[n] = a
            sb[n] = a // B
            ys[n] = y[a]
            es[n] = e[a]
            ms[n] = 0.0
            ws[n] = 0.0
            if a < C:
                cslot[nc] = n
                nc += 1
            n += 1
    if n == first:
        return n, nc
    for j in range(first, n):
        acc[sb[j]] = 0.0
    for j in range(first, n):
        a = act[j]
        ea = e[a]
        acc[sb[j]] += ea
        U[0] -= ea
        if a < C:
            U[1] -= ea
            U[4] -= p0[a]
            if 1 <= a <= E:
                U[2] -= ea
        U[3] -= ea * y[a]
    for j in range(first, n):  # s_un -= bincount(new // B, weights=e[new])
        b = sb[j]
        s_un[b] = s_un[b] - acc[b]
        acc[b] = 0.0  # each block's sum is subtracted once
    return n, nc


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
def _exp_range(y, e, lo, hi, xs):
    """e[lo:hi] = exp(y[lo:hi]) times xs (``_exp1``), vectorised (``fast_exp.exp_array``)."""
    fast_exp.exp_array(y[lo:hi], e[lo:hi])
    if xs != 1.0:
        for a in range(lo, hi):
            e[a] *= xs


@_jit
def _max_of(x, lo, hi):
    """max(x[lo:hi]) in four chains (no NaN here)."""
    m0 = m1 = m2 = m3 = -np.inf
    a = lo
    while a + 4 <= hi:
        m0 = x[a] if x[a] > m0 else m0
        m1 = x[a + 1] if x[a + 1] > m1 else m1
        m2 = x[a + 2] if x[a + 2] > m2 else m2
        m3 = x[a + 3] if x[a + 3] > m3 else m3
        a += 4
    while a < hi:
        m0 = x[a] if x[a] > m0 else m0
        a += 1
    return max(max(m0, m1), max(m2, m3))


@_jit
def _adam_y_e(y, e, m, w, lo, hi, alpha, epsk, slack, xs):
    """y[lo:hi] += (m~ / (w~ + eps_k)) alpha (``sparse._LazyAdam.step``) and e *= exp(d) for
    each logit's move d (``fast_exp.exp_small``: e = exp(y) is kept up to rounding, and an
    unmoved logit, d = 0, keeps its mass exactly). Returns (whether a y exceeds slack, whether
    a move is outside [-SMALL, SMALL] or NaN: then the caller recomputes e = exp(y) on the
    range). One vectorised pass, no exp's range reduction, no search for the moved logits."""
    yy, ee, mm, ww = y[lo:hi], e[lo:hi], m[lo:hi], w[lo:hi]
    over = False
    far = False
    for i in range(hi - lo):
        old = yy[i]
        new = old + (mm[i] / (ww[i] + epsk)) * alpha
        d = new - old  # exact (Sterbenz) while |d| is small against |y|
        yy[i] = new
        ee[i] = ee[i] * (fast_exp.exp_small(d) * xs)
        over |= new > slack
        far |= not (abs(d) <= fast_exp.SMALL)
    return over, far


@_jit
def _adam_moments(counts, m, w, lo, hi, rw, c1, c2):
    """m~ += g c1, w~ = sqrt(w~^2 + g^2 c2) on [lo, hi) for the direction g = c_a (r w)
    (``sparse._LazyAdam.step`` without slots)."""
    cc, mm, ww = counts[lo:hi], m[lo:hi], w[lo:hi]
    for i in range(hi - lo):
        if cc[i] != 0:  # (g = 0 leaves m~ and w~ as they are; late in a run most
            g = float(cc[i]) * rw  # incorrect actions go undrawn, in long stretches)
            mm[i] = mm[i] + g * c1
            ww[i] = math.sqrt(ww[i] * ww[i] + (g * g) * c2)


@_jit
def _rescale(m, w, lo, hi, fm, fw):
    """Lazy Adam's rebase on [lo, hi): m~ *= b1^d, w~ *= sqrt(b2)^d."""
    mm, ww = m[lo:hi], w[lo:hi]
    for i in range(hi - lo):
        mm[i] *= fm
        ww[i] *= fw


@_jit
def _adam_step(y, e, m, w, lo, hi, alpha, epsk, slack, xs, rebase, fm, fw):
    """Lazy Adam's step on [lo, hi) with its masses: e <- e exp(d) (``_adam_y_e``), then, on a
    rebase step (the incremental factors' rounding starts over) and where a move is too large
    for ``fast_exp.exp_small``, e = exp(y) afresh; on a rebase step also m~ *= fm, w~ *= fw.
    Returns whether a y exceeds slack."""
    over, far = _adam_y_e(y, e, m, w, lo, hi, alpha, epsk, slack, xs)
    if rebase or far:
        _exp_range(y, e, lo, hi, xs)
    if rebase:
        _rescale(m, w, lo, hi, fm, fw)
    return over


@_jit_sums
def _block_sums(e, y, s, lo, end, hi, B):
    """s[b] = sum(e[b B:(b + 1) B]) for the blocks of [lo, end), and sum(e[lo:hi] y[lo:hi]),
    returned (hi <= end: the padding past K, where y = -inf and e = 0, stays out of e*y)."""
    for b in range(lo // B, end // B):
        ee = e[b * B : (b + 1) * B]
        acc = 0.0
        for i in range(B):
            acc += ee[i]
        s[b] = acc
    ee, yy = e[lo:hi], y[lo:hi]
    sey = 0.0
    for i in range(hi - lo):
        sey += ee[i] * yy[i]
    return sey


@_jit
def _move_full(
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
    xs,
    B,
    s,
    guide,
    rows,
    F0,
    slack,
    CB,
):
    """One lazy-Adam step on every action, and what the next step needs of pi_{t+1}, in one
    pass over chunks of CB actions (whole blocks of B; a chunk's y, e, m~, w~ stay in cache
    while every part of the pass runs over it):

    - when ``dense`` (the guide sampler's counts c (Kp,)), the moments of every action from
      the direction c_a (r w) (``_adam_moments``; else ``_adam_sparse`` did the sampled ones);
    - y += (m~ / (w~ + eps_k)) alpha (``sparse._LazyAdam.step``'s operations) and the masses
      (``_adam_step``: e <- e exp(d) for each logit's move d, or e = exp(y) afresh on a rebase
      step and in a chunk where a move exceeds ``fast_exp.SMALL``), the rebase m~ *= fm, w~ *= fw;
    - the block masses s[b] and sum e*y (a record), vectorised sums in the machine's order,
      and, when ``guide``, the guide's column cumulative masses F0 (``_guide_prefix``).

    Returns (max y if it exceeds slack, else -inf; sum e*y); after a shift of the logits the
    caller redoes the sums."""
    Kp = y.size
    over = False
    sey = 0.0
    for lo in range(0, Kp, CB):
        end = min(lo + CB, Kp)
        hi = min(end, K)
        if dense:
            _adam_moments(counts, m, w, lo, min(hi, C), rcw, c1, c2)
            _adam_moments(counts, m, w, max(lo, C), hi, rww, c1, c2)
        over |= _adam_step(y, e, m, w, lo, hi, alpha, epsk, slack, xs, rebase, fm, fw)
        sey += _block_sums(e, y, s, lo, end, hi, B)
        if guide:
            _guide_prefix(e, rows, F0, lo, end)
    ymax = _max_of(y, 0, K) if over else -np.inf
    return ymax, sey


@_jit
def _move_slots(
    y,
    e,
    ys,
    es,
    ms,
    ws,
    act,
    sb,
    n,
    alpha,
    epsk,
    rebase,
    fm,
    fw,
    xs,
    s_un,
    s,
    acc,
    slack,
    CB,
):
    """``_move_full`` before the run goes full: the lazy-Adam move of the touched slots
    (in chunks of CB, the masses updated as there), the masses published by action, the
    rebase, and pi_{t+1}'s block masses
    s = s_un + the touched masses added per block in slot order (numpy's ``bincount``) and
    sum e*y over the slots in slot order. Returns (max y if it exceeds slack, else -inf;
    sum e*y over the slots)."""
    over = False
    acc[:] = 0.0
    sey = 0.0
    for j0 in range(0, n, CB):
        j1 = min(j0 + CB, n)
        over |= _adam_step(ys, es, ms, ws, j0, j1, alpha, epsk, slack, xs, rebase, fm, fw)
        for j in range(j0, j1):
            e[act[j]] = es[j]
        for j in range(j0, j1):
            ea = es[j]
            acc[sb[j]] += ea  # (the slot's block, stored: a division costs more)
            sey += ea * ys[j]
    for b in range(s.size):
        s[b] = s_un[b] + acc[b]
    ymax = _max_of(ys, 0, n) if over else -np.inf
    return ymax, sey


@_jit
def _rest_sums(e, es, act, cslot, nc, full, C, E, U, s, sey):
    """The record sums from the block masses s and sum e*y (``_record_sums``'s, or those
    ``_move_full`` / ``_move_slots`` left): S, the correct and rare masses (the correct actions
    in order, or the correct slots in slot order) and sum e*y, each with its untouched part."""
    S = 0.0
    for b in range(s.size):
        S += s[b]
    sc = 0.0
    sr = 0.0
    if full:
        for a in range(C):
            sc += e[a]
        for a in range(1, 1 + E):
            sr += e[a]
    else:
        for k in range(nc):
            j = cslot[k]
            a = act[j]
            sc += es[j]
            if 1 <= a <= E:
                sr += es[j]
    return S, U[1] + sc, U[2] + sr, U[3] + sey


@_jit
def _sgd_sparse(uniq, cnt, n_u, r_c, r_w, w8, C, lr, y, e, ys, es, pos, full, xs):
    """y[sl] += lr (g/N) c_a r_a on the sampled actions; e = exp(y) there (by slot, published
    by action, or by action when full). Returns their max."""
    ymax = -np.inf
    for k in range(n_u):
        a = uniq[k]
        g = float(cnt[k]) * (r_c if a < C else r_w) * w8
        if full:
            new = y[a] + lr * g
            y[a] = new
            e[a] = _exp1(new, xs)
        else:
            i = pos[a]
            new = ys[i] + lr * g
            ys[i] = new
            es[i] = _exp1(new, xs)
            e[a] = es[i]
        ymax = max(ymax, new)
    return ymax


@_jit
def _sgd_dense(counts, K, C, rcw, rww, lr, y, e, xs):
    """y += (c_a (r w)) lr on every action (full-mode guide path); e = exp(y) where it moved."""
    ymax = -np.inf
    for a in range(K):
        g = float(counts[a]) * (rcw if a < C else rww)
        old = y[a]
        new = old + g * lr
        if new != old:
            y[a] = new
            e[a] = _exp1(new, xs)
        if new > ymax:
            ymax = new
    return ymax


@_jit
def _shift(delta, y, e, ys, es, act, n, K, full, U, s_un, xs):
    """Lower every shifted logit by delta (c += delta) and rescale the running sums
    (``sparse._TouchedSet.shift``). Returns f = exp(-delta)."""
    f = _exp1(-delta, xs)
    for a in range(K):
        y[a] = y[a] - delta
        e[a] = _exp1(y[a], xs)
    if not full:
        for j in range(n):
            ys[j] = ys[j] - delta
            ev = _exp1(ys[j], xs)
            es[j] = ev
            e[act[j]] = ev
        U[3] = f * (U[3] - delta * U[0])
        U[0] *= f
        U[1] *= f
        U[2] *= f
        for b in range(s_un.size):
            s_un[b] *= f
    return f


@_jit
def _run_steps(
    t0,
    t1,
    rng,
    pcg,
    ist,
    fst,
    consts,
    state,
    bufs,
    guide_bufs,
    block_bufs,
    tables,
    rows,
    prof,
    link,
):
    """Steps t0 <= t < t1 (and the record of pi_t1 when t1 = T + 1) of one run: the loop of
    ``simulate_run_compiled``, with the run's generator ``rng`` drawn here (numba's Generator
    methods are numpy's algorithms on the same bit generator: the same numbers), its uniforms
    by ``_pcg_doubles`` from the PCG64 state pcg when that is given (8,). The state
    that is not in arrays lives in ist = [n, nc, full, have, ready] and fst = [S0, sey].

    The arrays and constants come in tuples, unpacked below (``simulate_run_compiled`` builds
    them): the run's constants, the touched set's state, the step's buffers, the guide's and
    the block sampler's buffers, the tables (r_c_tab, r_w_tab, g_tab (N + 1,): the advantages
    and g / N for X correct of N; A (T, 7): lazy Adam's scalars c1, c2, alpha, eps_k, rebase,
    b1^d, sqrt(b2)^d of each step, ``_adam_schedule``) and the records' rows.

    ``link`` (``fgrpo_theory.sim.link``) joins this thread to the one that runs the other half
    of the actions (``fgrpo_theory.sim.split``), or is ``solo``. Split, each step the halves
    exchange their masses and record sums (the whole S), then draw Binomial(N, S_0 / S) and
    the rest of the group from their own halves, exchange the correct draws (the whole X: the
    advantages and focal weight) and M_ret's lost mass, move their own logits, and exchange
    their largest logit (a shift moves both halves alike). Every choice of the loop is made
    on exchanged numbers, so the two threads take the same branches.

    Returns -2 when the partner thread failed (split), -1, or the step t at which the masses
    stopped being finite numbers (NaN or inf normaliser S: the logits overflowed), before its
    draws: the samplers index by the masses, so they must never see NaN."""
    T, guide, adam, p0, Q0, lr, N, K, C, E, B, xs, CB = consts
    y, e, m, w, ys, es, ms, ws, pos, act, sb, s_un, U = state
    s, acc, cs, cslot, uniq, cnt, u = bufs
    F0, off, gb, counts, us, bs, parts, hh = guide_bufs
    x, blk, hb, starts, cbs, st = block_bufs
    r_c_tab, r_w_tab, g_tab, A = tables
    rec_q, rec_tau, rec_ent, rec_m, rec_mu, rec_miss, rec_qu = rows
    h, flags, ex, srng = link
    split = flags.size > 0
    n, nc, full, have, ready = ist[0], ist[1], ist[2] != 0, ist[3] != 0, ist[4] != 0
    S0, sey = fst[0], fst[1]
    Kp = y.size
    M = GUIDE_BUCKETS * Kp
    c = cycles_now() if prof.size else 0
    for t in range(t0, min(t1, T + 1)):
        # --- record pi_t (and its block masses s): sums, then the whole policy's
        if have:
            S, qc, qr, ey = _rest_sums(e, es, act, cslot, nc, full, C, E, U, s, sey)
        else:
            S, qc, qr, ey = _record_sums(
                y, e, ys, es, act, n, full, K, C, E, B, s_un, U, s, acc, cslot, nc
            )
        S_first = S
        if split:
            ok, other = link_exchange(flags, ex, h, S, qc, qr, ey)
            if not ok:
                return -2
            S_first = S if h == 0 else other[0]
            S, qc, qr, ey = S + other[0], qc + other[1], qr + other[2], ey + other[3]
        if not (S > 0.0 and S < np.inf):  # NaN or inf masses: no policy to sample
            return t
        lost = _lost(e, es, act, cslot, nc, full, C, p0, U, S0, S)
        q_pos = qc / S
        rec_q[t], rec_tau[t], rec_ent[t] = q_pos, qr / S, math.log(S) - ey / S
        c = _tick(prof, 0, c)
        if t == T:
            if split:
                ok, other = link_exchange(flags, ex, h, lost, 0.0, 0.0, 0.0)
                if not ok:
                    return -2
                lost += other[0]
            rec_m[t] = 1.0 - lost / Q0
            break
        dense_step = full and guide
        # --- sample this half's share of the N actions from pi_t
        n_h = N
        if split:
            n_first = srng.binomial(N, min(S_first / S, 1.0))
            n_h = n_first if h == 0 else N - n_first
        if n_h == 0:  # none in this half (split): a half may hold no mass, which no sampler
            n_u, X, hit, mass = 0, 0, False, 0.0  # may see (its guide would divide by 0)
            if dense_step:
                counts[:] = 0
        elif guide:
            if not ready:
                _guide_prefix(e, GUIDE_ROWS, F0, 0, Kp)
            c = _tick(prof, 2, c)
            if pcg.size:  # rng.random(n_h), four numbers at a time
                _pcg_doubles(pcg, u, n_h)
            else:
                for i in range(n_h):
                    u[i] = rng.random()
            c = _tick(prof, 1, c)
            n_u, X, hit, mass = _draw_guide(
                e,
                F0,
                u,
                n_h,
                GUIDE_ROWS,
                M,
                off,
                gb,
                counts,
                uniq,
                cnt,
                C,
                E,
                not dense_step,
                us,
                bs,
                parts,
                hh,
            )
        else:
            for i in range(n_h + 1):  # rng.standard_exponential(n_h + 1)
                x[i] = rng.standard_exponential()
            c = _tick(prof, 1, c)
            n_u, X, hit, mass = _draw_blocks(
                e, s, x, n_h, B, cs, u, blk, hb, starts, cbs, st, uniq, cnt, C, E
            )
        c = _tick(prof, 2, c)
        if split:  # the whole group's X, rare hit and drawn correct mass; M_ret's lost mass
            ok, other = link_exchange(flags, ex, h, lost, float(X), 1.0 if hit else 0.0, mass)
            if not ok:
                return -2
            lost, X, hit = lost + other[0], X + int(other[1]), hit or other[2] != 0.0
            mass = mass + other[3]
        rec_m[t] = 1.0 - lost / Q0
        # --- the group's records (``group.record_group``)
        rec_mu[t] = X / N
        rec_miss[t] = (X > 0) and (X < N) and not hit
        rec_qu[t] = q_pos - mass / S
        # --- advantages and focal weight
        r_c, r_w, w8 = r_c_tab[X], r_w_tab[X], g_tab[X]
        if not dense_step and not full:
            n, nc = _touch(
                uniq,
                n_u,
                y,
                e,
                ys,
                es,
                ms,
                ws,
                pos,
                act,
                sb,
                n,
                K,
                C,
                E,
                B,
                p0,
                U,
                s_un,
                acc,
                cslot,
                nc,
            )
            if n * FULL_FRACTION >= K:
                _go_full(pos, act, n, K, y, e, m, w, ys, es, ms, ws)
                n, full = K, True
                s_un[:] = 0.0
                U[:] = 0.0
        c = _tick(prof, 3, c)
        # --- step: lazy Adam on every touched logit (and pi_{t+1}'s sums), or SGD
        have = ready = False
        if adam:
            c1, c2, alpha, epsk = A[t, 0], A[t, 1], A[t, 2], A[t, 3]
            rebase, fm, fw = A[t, 4] != 0.0, A[t, 5], A[t, 6]
            if not dense_step:
                _adam_sparse(
                    uniq,
                    cnt,
                    n_u,
                    r_c,
                    r_w,
                    w8,
                    C,
                    m if full else ms,
                    w if full else ws,
                    pos,
                    full,
                    c1,
                    c2,
                )
            c = _tick(prof, 4, c)
            if full:
                ymax, sey = _move_full(
                    y,
                    e,
                    m,
                    w,
                    counts,
                    dense_step,
                    K,
                    C,
                    r_c * w8,
                    r_w * w8,
                    c1,
                    c2,
                    alpha,
                    epsk,
                    rebase,
                    fm,
                    fw,
                    xs,
                    B,
                    s,
                    guide,
                    GUIDE_ROWS,
                    F0,
                    SHIFT_SLACK,
                    CB,
                )
                ready = guide
            else:
                ymax, sey = _move_slots(
                    y,
                    e,
                    ys,
                    es,
                    ms,
                    ws,
                    act,
                    sb,
                    n,
                    alpha,
                    epsk,
                    rebase,
                    fm,
                    fw,
                    xs,
                    s_un,
                    s,
                    acc,
                    SHIFT_SLACK,
                    CB,
                )
            have = True
        elif dense_step:
            ymax = _sgd_dense(counts, K, C, r_c * w8, r_w * w8, lr, y, e, xs)
        else:
            ymax = _sgd_sparse(uniq, cnt, n_u, r_c, r_w, w8, C, lr, y, e, ys, es, pos, full, xs)
        c = _tick(prof, 5, c)
        if split:  # both halves shift alike, by the larger of their largest logits
            ok, other = link_exchange(flags, ex, h, ymax, 0.0, 0.0, 0.0)
            if not ok:
                return -2
            y0, y1 = (ymax, other[0]) if h == 0 else (other[0], ymax)
            ymax = max(y0, y1)  # (in half order: the same in both threads, NaN included)
        if ymax > SHIFT_SLACK:  # move the shift (rare)
            S0 *= _shift(ymax, y, e, ys, es, act, n, K, full, U, s_un, xs)
            have = ready = False
        c = _tick(prof, 6, c)
    ist[0], ist[1] = n, nc
    ist[2], ist[3], ist[4] = 1 if full else 0, 1 if have else 0, 1 if ready else 0
    fst[0], fst[1] = S0, sey
    return -1


# ----------------------------------------------------------------------------- the cache

#: The modules the kernels are built from (their code, or constants frozen into the kernels),
#: besides this one: numba's cache tracks this file only (``kernel_cache``).
KERNEL_SOURCES = (config, dense, fast_exp, group, link, samplers, sparse)


def _drop_stale_kernels() -> None:
    """Delete this module's cached kernels if any file of ``KERNEL_SOURCES`` (or this one)
    changed since they were compiled (``kernel_cache.drop_stale``)."""
    path = getattr(getattr(_tick, "_cache", None), "cache_path", None)  # numba's cache folder
    if path is not None:
        files = [__file__, *(module.__file__ for module in KERNEL_SOURCES)]
        kernel_cache.drop_stale(
            path, __name__.rpartition(".")[2], kernel_cache.sources_stamp(files)
        )


if numba is not None:
    _drop_stale_kernels()


# ----------------------------------------------------------------------------- availability


#: exp's results are multiplied by this inside the kernels: 1.0 (exact, every run); the tests
#: set it an ulp off 1 to check that no result rests on exp's last bit.
EXP_SCALE = 1.0


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """None when the compiled engine runs here (numba imports and compiles), else why not."""
    if numba is None:
        return "numba is not installed"
    try:
        x, out = np.linspace(-3.0, 0.0, 64), np.empty(64)
        fast_exp.exp_array(x, out)
    except Exception as exc:  # pragma: no cover - a numba that cannot compile here
        return f"numba cannot compile here ({type(exc).__name__}: {exc})"
    return None


# ----------------------------------------------------------------------------- the engine


def _steps_per_call(N: int) -> int:
    """Steps per call of the run kernel when progress is shown: about 2^22 draws (a tenth of a
    second or so)."""
    return max(1, (1 << 22) // max(N, 1 << 10))


@functools.lru_cache(maxsize=8)
def _adam_schedule(cfg: SimConfig) -> np.ndarray:
    """Lazy Adam's scalars of steps k = 1..T, (T, 7): c1, c2, alpha_k, eps_k, rebase (1.0 /
    0.0), f_m, f_w, the numpy engine's own (``sparse._LazyAdam.scalars``). They depend on k and
    the last rebase only, not on the draws, so they are known before the run (and the same for
    every run of a config: kept, read-only; 2.5 ms of Python for 1000 steps)."""
    adam = _LazyAdam(cfg)
    A = np.empty((cfg.steps, 7))
    for t in range(cfg.steps):
        c1, c2, alpha, epsk, rebase, fm, fw = adam.scalars(t + 1)
        A[t] = (c1, c2, alpha, epsk, 1.0 if rebase else 0.0, fm, fw)
    A.flags.writeable = False
    return A


def samplers_for(draws: int, Kp: int) -> tuple[bool, bool]:
    """(guide, many) for about ``draws`` draws a step over Kp (padded) actions: whether they
    take the guide table, and whether it counts them per bucket (``_draw_guide``)."""
    guide = uses_guide(draws, Kp)
    return guide, guide and draws >= MANY_DRAWS * Kp


def profile_cycles(profile, rows: int = 1) -> np.ndarray:
    """``profile`` checked: None (no profile: an empty array), or int64 cycle counts, (7,)
    (``PROFILE_PARTS``) or, with rows = 2, also (2, 7): a row per half of a split run."""
    n = len(PROFILE_PARTS)
    prof = np.zeros(0, dtype=np.int64) if profile is None else profile
    shapes = ((0,), (n,)) + (((rows, n),) if rows > 1 else ())
    if not isinstance(prof, np.ndarray) or prof.dtype != np.int64 or prof.shape not in shapes:
        per_half = f" (or {rows} x {n}, one row per half)" if rows > 1 else ""
        raise ValueError(f"profile must be an int64 array of {n} cycle counts{per_half}")
    return prof


def initial_masses(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y (Kp,), e (Kp,), s_un (nb,)) for the shifted initial logits z (K,): the logits padded
    with -inf to the samplers' layout, their masses exp(y) (times ``EXP_SCALE``) and the masses
    per block."""
    B, nb, Kp = layout(z.size)
    y = np.full(Kp, -np.inf)  # (Kp,) shifted logits
    y[: z.size] = z
    e = np.exp(y) * float(EXP_SCALE)  # (Kp,) masses
    return y, e, e.reshape(nb, B).sum(axis=1)


def run_tables(cfg: SimConfig, N: int, gamma: float) -> tuple:
    """The tables of a run that do not depend on its actions: (r_c_tab, r_w_tab, g_tab) (N + 1,)
    the advantages and g / N for X correct of N, A (T, 7) lazy Adam's scalars
    (``_run_steps``)."""
    r_c_tab, r_w_tab = group_advantages(
        np.arange(N + 1), N, R_c=cfg.reward_correct, R_w=cfg.reward_wrong, kind=cfg.advantage
    )  # (N + 1,) each: bit for bit ``scalar_advantages``
    g_table = focal_table(N, gamma, cfg.weighting)[0]  # (N + 1,) g / N
    if cfg.optimizer == "adam":
        A = _adam_schedule(cfg)  # (read-only: numba compiles one kernel for both kinds)
    else:
        A = np.zeros((cfg.steps, 7))
        A.flags.writeable = False
    return r_c_tab, r_w_tab, g_table, A


def run_arrays(cfg, N, masses, K, C, E, S0, Q0, guide, many, rng, tables, *, blas=True) -> tuple:
    """What ``_run_steps`` takes for a run over the actions whose ``initial_masses`` are
    ``masses`` (K actions: all of them, or one half of a split run), the first C correct and
    1 .. E rare, in a policy whose initial normaliser is S0 and initial correct probability
    Q0, with the ``run_tables`` ``tables``: (arrays, ist, fst, pcg, records). Up to N draws a
    step; ``guide``: whether they take the guide table, ``many``: whether it counts them per
    bucket (``_draw_guide``); ``rng``: the run's generator (its PCG64 state is copied into pcg
    for the guide's uniforms); ``blas``: sum e*y by ``np.dot`` (the numpy engines' sum), else
    without the BLAS, whose threads, once woken, spin for a while on the cores a split run
    holds."""
    T = cfg.steps
    y, e, s_un = masses
    B, nb, Kp = layout(K)
    xs = float(EXP_SCALE)
    rec = new_records(1, T)

    # the state of ``sparse._TouchedSet``: touched slots in touch order, masses by action
    p0 = e[:C] / S0  # (C,) initial probs
    U = np.array(
        [
            float(s_un.sum()),
            float(e[:C].sum()),
            float(e[1 : 1 + E].sum()),
            float(np.dot(e[:K], y[:K]) if blas else np.einsum("i,i->", e[:K], y[:K])),
            float(p0.sum()),
        ]
    )  # untouched S, c, rare, ent, p0c
    m, w = np.zeros(Kp), np.zeros(Kp)  # moments
    ys, es = np.empty(Kp), np.empty(Kp)  # touched slots: y, e,
    ms, ws = np.zeros(Kp), np.zeros(Kp)  # moments (not full)
    pos = np.full(Kp, -1, dtype=np.int64)  # action -> slot
    act = np.zeros(Kp, dtype=np.int64)  # slot -> action
    sb = np.zeros(Kp, dtype=np.int64)  # slot -> block

    s, acc, cs = np.empty(nb), np.zeros(nb), np.empty(nb)
    cslot = np.empty(min(C, Kp), dtype=np.int64)  # correct slots
    n_buf = min(N, Kp) if guide else N
    uniq, cnt = np.empty(n_buf, dtype=np.int64), np.empty(n_buf, dtype=np.int64)
    one, one_i, one_i32 = np.empty(1), np.empty(1, dtype=np.int64), np.empty(1, dtype=np.int32)
    u = np.empty(N)  # (N,) the step's uniforms (guide) or sorted uniforms (blocks)
    if guide:
        F0, off = np.empty(Kp), np.empty(Kp // GUIDE_ROWS)  # F0, then F
        gb = np.empty(GUIDE_BUCKETS * Kp + 2, dtype=np.int32)  # guide (int32: half the cache)
        counts = np.empty(Kp, dtype=np.int32)
        us, bs = np.empty(N), np.empty(N, dtype=np.int32)  # draws by coarse bucket
        parts = np.empty(257, dtype=np.int64)
        x, blk, hb, starts, cbs = one, one_i, one_i, one_i, np.empty((4, 1))
        # the draws counted per guide bucket when there are many (``_draw_guide``)
        hh = np.empty(GUIDE_BUCKETS * Kp if many else 0, dtype=np.uint16)
    else:
        F0, off, gb, counts, us, bs, parts = one, one, one_i32, one_i32, one, one_i32, one_i
        hh = np.empty(0, dtype=np.uint16)
        x, blk = np.empty(N + 1), np.empty(N, dtype=np.int64)  # exponentials; blocks
        hb, starts = np.empty(N, dtype=np.int64), np.empty(N + 1, dtype=np.int64)
        cbs = np.empty((4, B))  # four blocks' cumulative masses
    st = np.empty(4, dtype=np.int64)
    CB = B * max(1, CHUNK // B)  # actions per chunk of the fused passes
    ist = np.zeros(5, dtype=np.int64)  # n, nc, full, have, ready
    fst = np.array([S0, 0.0])  # S0, sum e*y of pi_t
    rows = [rec[k][0] for k in ("q_pos", "tau", "entropy", "m_ret", "mu_hat")]
    rows += [rec["tail_miss"][0], rec["q_u_pos"][0]]
    pcg = pcg_state(rng.bit_generator) if guide else None  # the guide's uniforms, inline
    if pcg is None:
        pcg = np.zeros(0, dtype=np.uint64)
    adam = cfg.optimizer == "adam"
    consts = (T, guide, adam, p0, Q0, float(cfg.lr), N, K, C, E, B, xs, CB)
    state = (y, e, m, w, ys, es, ms, ws, pos, act, sb, s_un, U)
    bufs = (s, acc, cs, cslot, uniq, cnt, u)
    guide_bufs = (F0, off, gb, counts, us, bs, parts, hh)
    block_bufs = (x, blk, hb, starts, cbs, st)
    arrays = (consts, state, bufs, guide_bufs, block_bufs, tables, tuple(rows))
    return arrays, ist, fst, pcg, rec


def simulate_run_compiled(
    cfg: SimConfig, N: int, gamma: float, seed: int, *, progress=None, profile=None
) -> dict:
    """One run of the sparse engine (``sparse.simulate_run_sparse``) in numba kernels: the same
    random numbers, so the same draws (unless a uniform falls within rounding of a cumulative
    mass) and then the same logits bit for bit, records equal to rounding. Requires
    ``sparse_applies(cfg)``.
    Returns records with a leading run axis of length 1.

    The steps run inside one kernel (``_run_steps``), in calls of several steps when
    ``progress`` (called with the steps done) is given. profile: an int64 array (7,) to which
    the cycles spent in each part of a step (``PROFILE_PARTS``) are added."""
    if not sparse_applies(cfg):
        raise ValueError("the compiled engine needs surrogate='ratio' and a zero-sum advantage")
    K, C, E, T = cfg.actions, cfg.correct, cfg.rare, cfg.steps
    rng = np.random.default_rng([seed, N])
    z = cfg.logits0()
    masses = initial_masses(z - z.max())  # (Kp,) y, e; (nb,) s_un
    S0 = float(masses[2].sum())
    Q0 = float((masses[1][:C] / S0).sum())
    Kp = masses[0].size
    guide, many = samplers_for(N, Kp)
    arrays, ist, fst, pcg, rec = run_arrays(
        cfg, N, masses, K, C, E, S0, Q0, guide, many, rng, run_tables(cfg, N, gamma)
    )
    prof = profile_cycles(profile)
    link = solo_link(rng)
    per_call = T + 1 if progress is None else _steps_per_call(N)
    for t0 in range(0, T + 1, per_call):
        t1 = min(t0 + per_call, T + 1)
        bad = _run_steps(t0, t1, rng, pcg, ist, fst, *arrays, prof, link)
        if bad >= 0:
            raise out_of_range(N, bad, cfg.lr)
        if progress is not None:
            progress(min(t1, T) - t0)
    if pcg.size:
        set_pcg_state(rng.bit_generator, pcg)
    return finish_records(rec, N, lr=cfg.lr)
