"""One run of the compiled engine over two cores: each of two threads owns half of the K
actions (paper Section 5.1's categorical policy; ``engine="split"``).

A group of N draws from pi_t is Multinomial(N, pi_t). Split the actions into two halves with
masses S_0 and S_1 (S = S_0 + S_1): then the number of draws in half 0 is
Binomial(N, S_0 / S), and given it, the draws within each half are Multinomial from that half's
own probabilities, independently. So each thread draws its half's share from its own
generator and its own samplers (``compiled``: the block sampler or the guide table over its
half), and the group is exactly a Multinomial(N, pi_t) draw. The update of a logit needs only
its own counts and the group's X (the advantages and focal weight), and the records need the
halves' sums: the threads exchange these few numbers each step (``link``) and run the rest of
``compiled._run_steps`` on their own halves, in their own caches.

The halves are a relabelling of the actions: half 0 holds the anchor (action 0), every other
rare action and every other of the other correct and wrong actions; half 1 the rest, one of
the other correct actions first (so each half's correct actions come first, its rare ones at
1 .. E_h, as the kernels lay them out). The policy's law is the same under a relabelling, so
this engine agrees with the others in distribution (``agreement``); its random numbers are its
own (a generator per half and one, copied in both threads, for the split), so its runs are
not the numpy engines' run by run. It is deterministic for a given (config, seed, machine):
the threads exchange numbers, never timings, and take the same branches.

It needs two CPUs for this process and pins its two threads to the first two of them (left
to the operating system, they were at times placed badly: in one benchmark the split run was
no faster than one thread at N = 2,048, slower at 1,024). Several split runs at once on a
larger machine each want their own pair: ``taskset -c 2,3 fgrpo-theory simulate ...``. Runs
with groups smaller than ``SPLIT_FROM`` it runs on one thread, as the compiled engine does (the
same records): there a step is too short to pay for two threads. For sweeps, worker
processes (``--workers``) use the cores better; this engine makes one run (or a sweep with
one worker) faster.

    >>> from fgrpo_theory.sim.config import SimConfig
    >>> cfg = SimConfig(actions=2000, correct=200, group_sizes=(64,), steps=5)
    >>> simulate_run_split(cfg, 64, 1.0, 0)["m_ret"].shape     # (1 run, steps + 1)
    (1, 6)
"""

from __future__ import annotations

import functools
import os
import threading

import numpy as np

from fgrpo_theory.sim import compiled
from fgrpo_theory.sim.config import SimConfig, sparse_applies
from fgrpo_theory.sim.group import finish_records, out_of_range
from fgrpo_theory.sim.link import ABORT, new_link_arrays
from fgrpo_theory.sim.samplers import layout

#: The smallest group size whose runs are split over two threads (below, one thread is as fast
#: or faster over 100 steps of paper-fig2: ``benchmarks/bench_simulate.py``).
SPLIT_FROM = 512


def unavailable_reason(cfg: SimConfig | None = None) -> str | None:
    """None when split runs of ``cfg`` can run here, else why not: the compiled engine's
    needs, two CPUs for this process, and a correct action besides the anchor and the rare
    ones (the first action of half 1)."""
    why = compiled.unavailable_reason()
    if why:
        return why
    cpus = _cpus()
    if len(cpus) < 2:
        return f"it needs two CPUs and this process may use {len(cpus)}"
    if cfg is not None and cfg.correct < cfg.rare + 2:
        return (
            "it needs a correct action besides the anchor and the rare ones, got "
            f"correct={cfg.correct}, rare={cfg.rare}"
        )
    if cfg is not None and cfg.actions < 4:
        return f"it needs at least 4 actions, got actions={cfg.actions}"
    return None


def _cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def halves(cfg: SimConfig) -> tuple[np.ndarray, np.ndarray]:
    """The actions (global indices) of half 0 and half 1, each in its local order: correct
    first, the rare ones at local 1 .. E_h."""
    C, E, K = cfg.correct, cfg.rare, cfg.actions
    rare = np.arange(1, 1 + E)
    other = np.arange(1 + E, C)  # the other correct actions (at least one)
    wrong = np.arange(C, K)
    first = np.concatenate([[0], rare[0::2], other[1::2], wrong[0::2]])
    second = np.concatenate([other[:1], rare[1::2], other[2::2], wrong[1::2]])
    return first.astype(np.int64), second.astype(np.int64)


def simulate_run_split(
    cfg: SimConfig, N: int, gamma: float, seed: int, *, progress=None, profile=None
) -> dict:
    """One run on two threads (the module's docstring): records with a leading run axis of
    length 1, like ``compiled.simulate_run_compiled``. ``progress`` (called with the steps
    done) is half 0's; ``profile``: int64 cycle counts (``compiled.PROFILE_PARTS``), (7,) for
    half 0 or (2, 7) for each half.

    Nothing here calls numpy's BLAS: a BLAS thread, once woken by a dot product, spins for a
    while (OpenBLAS: about 0.1 s), and on a core of the run's it stalls the partner that
    waits for the thread it preempts (measured: the run no faster than on one core)."""
    if not sparse_applies(cfg):
        raise ValueError("the split engine needs surrogate='ratio' and a zero-sum advantage")
    why = unavailable_reason(cfg)
    if why:
        raise ValueError(f"engine='split' is not available here: {why}")
    prof = compiled.profile_cycles(profile, rows=2)
    if N < SPLIT_FROM:
        one = prof[0] if prof.ndim == 2 else prof
        return compiled.simulate_run_compiled(cfg, N, gamma, seed, progress=progress, profile=one)
    return _simulate(cfg, N, gamma, seed, progress, prof)


@functools.lru_cache(maxsize=4)
def _layout(cfg: SimConfig) -> tuple:
    """What the halves' runs start from, for any N, gamma and seed: per half its actions, its
    ``compiled.initial_masses`` (read-only: each run copies them), C_h and E_h; and the whole
    policy's S0 and Q0."""
    z = cfg.logits0()
    z = z - z.max()
    parts = halves(cfg)
    masses = [compiled.initial_masses(z[idx]) for idx in parts]
    for arrays in masses:
        for a in arrays:
            a.flags.writeable = False
    S0 = float(masses[0][2].sum()) + float(masses[1][2].sum())
    C_h = [int(np.count_nonzero(idx < cfg.correct)) for idx in parts]
    E_h = [int(np.count_nonzero((idx >= 1) & (idx <= cfg.rare))) for idx in parts]
    Q0 = sum(float((m[1][:c] / S0).sum()) for m, c in zip(masses, C_h, strict=True))
    return parts, masses, C_h, E_h, S0, Q0


def _simulate(cfg: SimConfig, N: int, gamma: float, seed: int, progress, prof) -> dict:
    T = cfg.steps
    parts, masses, C_h, E_h, S0, Q0 = _layout(cfg)
    tables = compiled.run_tables(cfg, N, gamma)  # (read by both threads)
    flags, ex = new_link_arrays()
    runs = []
    for h, idx in enumerate(parts):
        rng = np.random.default_rng([seed, N, 2, h])
        Kp = layout(idx.size)[2]
        guide, many = compiled.samplers_for(N // 2, Kp)
        mine = tuple(a.copy() for a in masses[h])
        arrays, ist, fst, pcg, rec = compiled.run_arrays(
            cfg, N, mine, idx.size, C_h[h], E_h[h], S0, Q0, guide, many, rng, tables, blas=False
        )
        link = (h, flags, ex, np.random.default_rng([seed, N, 1]))  # the split, alike in both
        runs.append((rng, pcg, ist, fst, arrays, link, rec))
    per_call = T + 1 if progress is None else compiled._steps_per_call(N)
    cpus = _cpus()
    bad, errors = [-1, -1], [None, None]

    def work(h: int) -> None:
        rng, pcg, ist, fst, arrays, link, _ = runs[h]
        mine = prof[h] if prof.ndim == 2 else prof if h == 0 else prof[:0]
        try:
            if hasattr(os, "sched_setaffinity"):
                os.sched_setaffinity(0, {cpus[h]})  # 0: this thread (Linux)
            for t0 in range(0, T + 1, per_call):
                t1 = min(t0 + per_call, T + 1)
                b = compiled._run_steps(t0, t1, rng, pcg, ist, fst, *arrays, mine, link)
                if b != -1:
                    bad[h] = b
                    return
                if progress is not None and h == 0:
                    progress(min(t1, T) - t0)
        except BaseException as exc:  # the partner must not wait for this thread forever
            errors[h] = exc
            flags[ABORT] = 1

    threads = [threading.Thread(target=work, args=(h,), daemon=True) for h in (0, 1)]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        flags[ABORT] = 1  # (a KeyboardInterrupt while joining: the threads stop at once)
    for exc in errors:
        if exc is not None:
            raise exc
    if bad[0] >= 0:
        raise out_of_range(N, bad[0], cfg.lr)
    return finish_records(runs[0][-1], N, lr=cfg.lr)
