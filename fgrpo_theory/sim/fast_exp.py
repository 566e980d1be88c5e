"""exp(x) in numba, written so that a loop over an array vectorises (libm's ``math.exp`` is a
call per element, which LLVM cannot vectorise without a vector math library).

Cody and Waite's reduction with fdlibm's split of ln 2 (``e_exp.c``), then a polynomial:

    x = k ln2 + r,   k = round(x / ln2),   |r| <= ln2 / 2,
    exp(x) = 2^k exp(r),   exp(r) ~ sum_{j=0}^{13} r^j / j!   (truncation < 0.03 ulp),

with k taken from the bits of x / ln2 + 1.5 2^52 and 2^k written into the exponent bits. The
polynomial's multiply-adds are fused where the CPU has FMA (numba compiles for the machine it
runs on, and ``fastmath={"contract"}`` lets LLVM fuse them): a third fewer operations, and
results that may differ in the last bit between CPUs, which the simulator's contract allows.
Within 1 ulp of the true exp for -708 <= x <= 709 (tested against mpmath,
``tests/theory/test_sim_fast_exp.py``); other inputs (overflow, subnormal results, inf, NaN)
take ``math.exp``.

``exp_small(d)`` is exp for |d| <= 1/16 by a Taylor polynomial of degree 8 (no reduction): the
factor by which the simulator updates a mass, e exp(d), when its logit moves by a small d.

The simulator's results do not rest on exp's last bit: its engines agree in distribution
(``fgrpo_theory.sim.agreement``), also with this exp perturbed by an ulp (tested).

    >>> import numpy as np
    >>> x = np.linspace(-40.0, 1.0, 1001); out = np.empty_like(x)
    >>> exp_array(x, out)
    >>> bool(np.allclose(out, np.exp(x), rtol=1e-15, atol=0.0))
    True
"""

from __future__ import annotations

import math

import numpy as np

try:
    import numba
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic
except ImportError:  # pragma: no cover - numba is a dependency; the numpy engines still run
    numba = None

INV_LN2 = 1.44269504088896338700e00  # 1 / ln 2
SHIFT = 6755399441055744.0  # 1.5 * 2^52: x / ln2 + SHIFT rounds to an integer, k in its low bits
LN2_HI = 6.93147180369123816490e-01  # ln 2, high part: k * LN2_HI is exact for |k| < 2^20
LN2_LO = 1.90821492927058770002e-10  # ln 2 - LN2_HI
#: 1 / j! for j = 13 .. 2, highest first (Horner)
COEFFS = tuple(1.0 / math.factorial(j) for j in range(13, 1, -1))
#: Inputs outside [LOW, HIGH] (or NaN) go to ``math.exp``: 2^k stays a normal number inside.
LOW, HIGH = -708.0, 709.0
#: ``exp_small`` serves |d| <= SMALL: its Taylor polynomial of degree 8 is then within
#: SMALL^9 / 9! ~ 4e-17 (a third of an ulp) of exp(d).
SMALL = 1.0 / 16.0
#: 1 / j! for j = 8 .. 2, highest first (Horner)
SMALL_COEFFS = tuple(1.0 / math.factorial(j) for j in range(8, 1, -1))


if numba is not None:

    @intrinsic
    def _bits(typingctx, x):
        """The bits of a float64 as a uint64."""

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.IntType(64))

        return types.uint64(types.float64), codegen

    @intrinsic
    def _float(typingctx, u):
        """The float64 with the bits of a uint64."""

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.DoubleType())

        return types.float64(types.uint64), codegen

    _jit = numba.njit(cache=True, nogil=True, fastmath={"contract"})

    @_jit
    def _taylor(r, coeffs):
        """1 + r + r^2 (c_0 r^(n-1) + ... + c_(n-1)) by Horner, coeffs = (1/n!, ..., 1/2!)
        highest first (a constant tuple: the loop unrolls)."""
        p = coeffs[0]
        for c in coeffs[1:]:
            p = p * r + c
        return 1.0 + (r + (r * r) * p)

    @_jit
    def exp_main(x):
        """exp(x) for LOW <= x <= HIGH (no special cases: the caller checks)."""
        kd = x * INV_LN2 + SHIFT
        ki = _bits(kd)  # SHIFT's bits + k
        kd = kd - SHIFT
        r = (x - kd * LN2_HI) - kd * LN2_LO
        er = _taylor(r, COEFFS)
        scale = _float((ki + np.uint64(1023)) << np.uint64(52))  # 2^k (SHIFT's bits drop out)
        return er * scale

    @_jit
    def exp_small(d):
        """exp(d) for |d| <= SMALL (the caller checks): a degree-8 polynomial, no reduction,
        within about an ulp (the factor of an incremental exp, e exp(d), in the simulator)."""
        return _taylor(d, SMALL_COEFFS)

    @_jit
    def is_special(x):
        """x outside [LOW, HIGH], or NaN."""
        return not (x >= LOW and x <= HIGH)

    @_jit
    def exp1(x):
        """exp(x) for one value."""
        if is_special(x):
            return math.exp(x)
        return exp_main(x)

    @_jit
    def exp_array(x, out):
        """out = exp(x): a vectorisable pass, a vectorisable test for special inputs, and only
        if there are any, their values by ``math.exp``."""
        for i in range(x.size):
            out[i] = exp_main(x[i])
        special = False
        for i in range(x.size):
            special |= (x[i] < LOW) | (x[i] > HIGH) | (x[i] != x[i])
        if special:
            for i in range(x.size):
                if is_special(x[i]):
                    out[i] = math.exp(x[i])
