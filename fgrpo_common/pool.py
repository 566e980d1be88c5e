"""The one pool of worker processes (``concurrent.futures.ProcessPoolExecutor``) of both packages:
the simulator's sweep, the Maze's RL runs and the demo's side stages.

Every job's numbers depend on its arguments only (each seeds its own generators), so the worker
count and the finishing order change none of them. A failed job (or a consumer that stops)
cancels the queued ones and raises at once, without running them first.

    from fgrpo_common.pool import as_finished
    for result in as_finished(simulate_one, [(cfg, 8), (cfg, 16)], workers=2):
        print(result)
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

__all__ = ["process_pool", "as_finished"]


def process_pool(
    workers: int, *, spawn: bool = True, initializer: Callable | None = None, initargs=()
) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes; ``spawn``: fresh interpreters (no forked torch thread
    pools), else the platform's default start method. ``initializer(*initargs)`` runs in each
    worker first (pinning its thread pools, say)."""
    context = multiprocessing.get_context("spawn") if spawn else None
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=initializer, initargs=initargs
    )


def as_finished(
    fn: Callable,
    jobs: Iterable[tuple],
    *,
    workers: int,
    spawn: bool = True,
    initializer: Callable | None = None,
    initargs=(),
) -> Iterator:
    """``fn(*job)`` for every job on at most ``workers`` processes (:func:`process_pool`),
    yielded as each finishes. A job that raises, or a consumer that stops (an exception, Ctrl-C),
    cancels the jobs not yet started and shuts the pool down without waiting for them."""
    jobs = list(jobs)
    if not jobs:
        return
    pool = process_pool(
        min(workers, len(jobs)), spawn=spawn, initializer=initializer, initargs=initargs
    )
    with pool:
        pending = {pool.submit(fn, *job) for job in jobs}
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield future.result()
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
