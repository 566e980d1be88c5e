"""Run an experiment's tasks in fresh processes, each under its own environment variables.

A study pretrains several bases and trains many runs; each base may need another kernel family
(torch's ``ATEN_CPU_CAPABILITY``, numpy's ``NPY_DISABLE_CPU_FEATURES``), which a process reads once,
when it starts. So every task runs in a process of its own, started (spawned, not forked: no
inherited torch thread pools) with the task's variables set:

    tasks = [Task("base1/seed0/grpo_n8", train_one, (out, cfg, spec),
                  env={"ATEN_CPU_CAPABILITY": "avx2"}, cost=8)]
    for task, seconds in run_tasks(tasks, workers=2):
        print(task.name, "done in", seconds)

Tasks start in the order given (put the longest first so the workers finish together). When one
fails, no queued task starts, the running ones finish (their work is kept: tasks resume), and
:class:`TaskFailed` names the one that failed. Interrupted (Ctrl-C, SIGTERM), it stops every
running task with the processes that task started (each task runs in its own process group, and
dies with its parent even when the parent is killed outright). With one worker and nothing to
change in the environment the tasks run in this process (no start-up cost). Every number a task
computes depends on its arguments and environment only, so the worker count and the finishing
order change none.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from fgrpo_common.environment import set_variables
from fgrpo_common.timer import Timer

__all__ = ["Task", "TaskFailed", "run_tasks"]


@dataclass(frozen=True)
class Task:
    """One unit of work: ``fn(*args)`` in a process with ``env`` applied."""

    name: str
    fn: Callable
    """A module-level function (it is pickled into the new process)."""
    args: tuple = ()
    env: Mapping[str, str | None] = field(default_factory=dict)
    """Variables to set (a string) or to remove (None) in the task's process."""
    cost: float = 1.0
    """Relative cost; informational (callers order tasks by it)."""


class TaskFailed(RuntimeError):
    """A task's process ended with an error (its traceback went to stderr)."""


def _env_applies(env: Mapping[str, str | None]) -> bool:
    """Whether this process already has ``env``."""
    return all(os.environ.get(k) == v for k, v in env.items())


def _die_with_parent() -> None:
    """Linux: this process gets SIGTERM when its parent dies, even by SIGKILL (best effort
    elsewhere: nothing)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _child(fn: Callable, args: tuple) -> None:
    os.setpgid(0, 0)  # its own process group: stopping the task stops the processes it starts
    _die_with_parent()
    try:
        fn(*args)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


def _start(ctx, task: Task):
    """Spawn ``task``'s process with its variables: set here around the start (the new process
    inherits this process's environment at that moment), then restored."""
    saved = {k: os.environ.get(k) for k in task.env}
    try:
        set_variables(task.env)
        proc = ctx.Process(target=_child, args=(task.fn, task.args), name=task.name, daemon=False)
        proc.start()
    finally:
        set_variables(saved)
    return proc


def _raise_on_sigterm():
    """In the main thread: SIGTERM raises SystemExit, so the tasks' processes are stopped too (a
    killed study must not leave runs training on). The previous handler, or None."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    return signal.signal(signal.SIGTERM, handler)


def _stop(proc) -> None:
    """SIGTERM to the task's process group (the task and what it started), then wait."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        proc.terminate()
    proc.join(timeout=30)
    if proc.is_alive():
        proc.kill()
        proc.join()


def run_tasks(tasks, workers: int = 1) -> Iterator[tuple[Task, float]]:
    """Yield ``(task, seconds)`` as tasks finish, at most ``workers`` at a time, started in the
    given order. Raises :class:`TaskFailed` (after the running tasks finish) when one fails."""
    tasks = list(tasks)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got workers={workers!r}")
    if workers == 1 and all(_env_applies(t.env) for t in tasks):
        for task in tasks:
            timer = Timer()
            task.fn(*task.args)
            yield task, timer.seconds()
        return
    previous = _raise_on_sigterm()
    try:
        yield from _run_spawned(tasks, workers)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _run_spawned(tasks: list[Task], workers: int) -> Iterator[tuple[Task, float]]:
    """``run_tasks`` on spawned processes, one per task."""
    import multiprocessing
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("spawn")
    queue, running, failed = list(tasks), {}, None
    try:
        while queue or running:
            while queue and len(running) < workers and failed is None:
                task = queue.pop(0)
                proc = _start(ctx, task)
                running[proc.sentinel] = (proc, task, Timer())
            for sentinel in wait(list(running)):
                proc, task, timer = running.pop(sentinel)
                proc.join()
                if proc.exitcode == 0:
                    yield task, timer.seconds()
                elif failed is None:
                    failed = (task, proc.exitcode)
                    queue.clear()  # cancel what has not started; the running tasks finish
    except BaseException:  # interrupted (Ctrl-C, SIGTERM, a consumer's error): stop every task
        for proc, _task, _timer in running.values():
            _stop(proc)
        raise
    if failed is not None:
        task, code = failed
        raise TaskFailed(f"task {task.name} failed (exit code {code}); its traceback is above")
