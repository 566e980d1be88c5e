"""The link between the two threads of one run split by its actions
(``fgrpo_theory.sim.split``): each thread owns half of the K actions, and three times a step
they exchange a few numbers (their halves' masses and record sums, correct draws, largest
logit) through shared memory, waiting for each other there.

A link is ``(h, flags, ex, srng)``:

- h: this thread's half, 0 or 1;
- flags (FLAGS,) int64, shared: the number of exchanges each thread has entered, at
  flags[SPACING h] (the two counters a cache line apart), and flags[ABORT], set (by the
  Python side) when the other thread failed: the waiting thread then gives up;
- ex (2, 2, WIDTH) float64, shared: [parity of the exchange, half, value]. Two buffers, so a
  thread that is one exchange ahead writes the other buffer and never one its partner is still
  reading;
- srng: the generator of the split of each group between the halves; each thread holds its own
  copy, seeded alike, so both draw the same number without an exchange.

A link whose flags are empty is a run on one thread (``solo``): no exchange at all.

The counters are read and written with atomic acquire / release operations (LLVM's
``load atomic`` and ``store atomic``, plain loads and stores on x86-64): what a thread wrote
into ex before it raised its counter is what its partner reads after seeing the raised counter.
A thread waits by spinning; after SPINS turns (a partner that is not running: the cores are
shared with other work) it also yields its core at each turn (``sched_yield``, where the
system has it), so that whatever else runs there gets on.
"""

from __future__ import annotations

import os

import numpy as np

try:
    import numba
    from numba.core import cgutils, types
    from numba.extending import intrinsic
except ImportError:  # pragma: no cover - numba is a dependency; the numpy engines still run
    numba = None

#: int64s between the two threads' counters (64 bytes: one cache line each).
SPACING = 8
#: Where the abort flag lies in flags, and the length of flags.
ABORT = 2 * SPACING
FLAGS = ABORT + SPACING
#: Numbers per thread and exchange.
WIDTH = 8
#: Turns of a waiting thread's spin before it yields its core at each turn (~0.1 ms here;
#: a partner that is running answers within a few microseconds).
SPINS = 1 << 16


def new_link_arrays() -> tuple[np.ndarray, np.ndarray]:
    """(flags, ex) for a new pair of threads: every counter at 0."""
    return np.zeros(FLAGS, dtype=np.int64), np.zeros((2, 2, WIDTH))


def solo_link(rng: np.random.Generator) -> tuple:
    """The link of a run on one thread (no exchange; ``rng`` is never drawn from)."""
    return (0, np.zeros(0, dtype=np.int64), np.zeros((2, 2, WIDTH)), rng)


def _jit(fn):
    if numba is None:
        return fn
    return numba.njit(cache=True, nogil=True, error_model="numpy")(fn)


if numba is not None:

    @intrinsic
    def _load_acquire(typingctx, arr, i):
        """arr[i] of an int64 array by an atomic load with acquire ordering."""
        sig = types.int64(arr, i)

        def codegen(context, builder, signature, args):
            aryty = signature.args[0]
            ary = context.make_array(aryty)(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])
            return builder.load_atomic(ptr, "acquire", 8)

        return sig, codegen

    @intrinsic
    def _store_release(typingctx, arr, i, v):
        """arr[i] = v on an int64 array by an atomic store with release ordering."""
        sig = types.void(arr, i, v)

        def codegen(context, builder, signature, args):
            aryty = signature.args[0]
            ary = context.make_array(aryty)(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])
            builder.store_atomic(args[2], ptr, "release", 8)
            return context.get_dummy_value()

        return sig, codegen

    if os.name == "posix":
        #: sched_yield(2) from the C library, called by name (the cached kernels hold no address)
        _yield = types.ExternalFunction("sched_yield", types.int32())
    else:  # pragma: no cover - no sched_yield: spin on

        @numba.njit(cache=True, nogil=True)
        def _yield():
            return 0

else:  # pragma: no cover - the kernels run as Python only in name

    def _load_acquire(arr, i):
        return int(arr[i])

    def _store_release(arr, i, v):
        arr[i] = v

    def _yield():
        return 0


@_jit
def mine(flags, ex, h):
    """The row (WIDTH,) this thread writes its numbers into for its next exchange."""
    return ex[_load_acquire(flags, SPACING * h) & 1, h]


@_jit
def swap(flags, ex, h):
    """Publish this thread's row (``mine``) and wait for the partner's: returns (True, its
    row), or (False, this thread's row) when the abort flag was raised while waiting."""
    k = _load_acquire(flags, SPACING * h) + 1
    _store_release(flags, SPACING * h, k)
    other = SPACING * (1 - h)
    turns = 0
    while _load_acquire(flags, other) < k:
        if _load_acquire(flags, ABORT) != 0:
            return False, ex[(k - 1) & 1, h]
        turns += 1
        if turns > SPINS:
            _yield()
    return True, ex[(k - 1) & 1, 1 - h]


@_jit
def exchange(flags, ex, h, a, b, c, d):
    """Publish (a, b, c, d) (``mine``, then ``swap``): returns (True, the partner's row), or
    (False, ...) when the abort flag was raised while waiting."""
    row = mine(flags, ex, h)
    row[0], row[1], row[2], row[3] = a, b, c, d
    return swap(flags, ex, h)
