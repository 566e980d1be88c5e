"""Wall and CPU seconds of a computation and of its named phases (timings only: no number of a
result may depend on them).

Wall time is ``time.perf_counter``; CPU time (:func:`cpu_seconds`) is this process's and that of
every child process it has waited for (a pool's or a task runner's workers, once they ended).

    timer = Timer()
    sample()
    timer.mark("sampled")
    train()
    timer.seconds("start", "sampled"), timer.seconds("sampled")  # the phases' wall seconds
"""

from __future__ import annotations

import time

__all__ = ["Timer", "cpu_seconds"]


def cpu_seconds() -> float:
    """CPU seconds of this process and of every child process it has waited for."""
    import resource  # POSIX only: imported where it is used

    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class Timer:
    """Marks in time, the first (``"start"``) made on construction: :meth:`seconds` gives the
    wall seconds between two marks (or from one to now), :meth:`cpu` the CPU seconds."""

    def __init__(self):
        self.marks: dict[str, tuple[float, float]] = {}
        self.mark("start")

    def mark(self, name: str) -> None:
        """Mark now as ``name`` (a mark made again moves)."""
        self.marks[name] = (time.perf_counter(), cpu_seconds())

    def seconds(self, a: str = "start", b: str | None = None) -> float:
        """Wall seconds from mark ``a`` to mark ``b`` (None: now)."""
        end = time.perf_counter() if b is None else self.marks[b][0]
        return end - self.marks[a][0]

    def cpu(self, a: str = "start", b: str | None = None) -> float:
        """CPU seconds (:func:`cpu_seconds`) from mark ``a`` to mark ``b`` (None: now)."""
        end = cpu_seconds() if b is None else self.marks[b][1]
        return end - self.marks[a][1]
