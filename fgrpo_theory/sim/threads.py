"""Native thread pools pinned to the cores a simulation is given: ``--workers W`` uses W cores
and no more.

numpy's BLAS (OpenBLAS, MKL) and OpenMP start one thread per core by default, so W worker
processes would put W x cores threads on the machine. ``pinned`` limits every pool loaded in
this process (through threadpoolctl) and sets the ``*_NUM_THREADS`` variables so that libraries
loaded later, and processes started from this one, start no more either. ``pin_worker`` is the
initializer of the sweep's worker processes. The compiled engine's numba kernels are serial
(no ``parallel=True``), so numba starts no thread pool of its own.

    >>> from fgrpo_theory.sim.threads import pinned, thread_counts
    >>> with pinned(1):
    ...     all(n == 1 for n in thread_counts().values())
    True
"""

from __future__ import annotations

import contextlib
import os

from fgrpo_common.environment import set_variables

#: The environment variables that native libraries read for their thread count at load time.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)

_WORKER_LIMITS = []  # keeps a worker's limits alive for the life of the process


@contextlib.contextmanager
def pinned(threads: int = 1):
    """Within the block, every native thread pool of this process uses ``threads`` threads."""
    from threadpoolctl import threadpool_limits

    saved = {k: os.environ.get(k) for k in THREAD_VARIABLES}
    os.environ.update({k: str(threads) for k in saved})
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        set_variables(saved)


def pin_worker(threads: int = 1) -> None:
    """Initializer of a worker process: pin its thread pools for the rest of its life, and end
    it when its parent is gone (``exit_with_parent``)."""
    os.environ.update({k: str(threads) for k in THREAD_VARIABLES})
    from threadpoolctl import threadpool_limits

    _WORKER_LIMITS.append(threadpool_limits(limits=threads))
    exit_with_parent()


#: How often a worker looks whether its parent is still there (seconds).
PARENT_CHECK_S = 0.2


def exit_with_parent() -> None:
    """End this process (exit status 1) as soon as its parent process is gone: a worker of a
    sweep whose main process was killed (SIGKILL, an out-of-memory kill, a scheduler's limit)
    otherwise waits for work forever. A daemon thread polls the parent's pid."""
    import threading
    import time

    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def thread_counts() -> dict[str, int]:
    """{library: threads} for every native thread pool loaded in this process."""
    from threadpoolctl import threadpool_info

    return {
        f"{info['internal_api']}:{info['prefix']}": int(info["num_threads"])
        for info in threadpool_info()
    }
