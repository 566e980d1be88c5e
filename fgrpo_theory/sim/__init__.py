"""The categorical softmax-policy simulator (paper Section 5.1, Appendix J, Fig. 2): retained
positive mass M_ret over group size N and focal exponent gamma, with the paper's three regimes.

Each step draws N actions i.i.d. from p = softmax(z), forms the advantages r_j and the focal
weight g = (1 - X/N)^gamma (Eq. 11-13), and ascends the ratio or the Eq. 5 surrogate by SGD or
Adam, recording Q_pos, M_ret (Eq. 26), the entropy, Q_u,pos, the rare mass tau and the tail miss
beside Lemma 3.1.

Modules, from the bottom up:

- ``config``: ``SimConfig``, its checks, ``PRESETS`` (``paper-fig2``, ``small``, ``tiny``, ...);
- ``samplers``: exact Multinomial(N, p) group samplers (block search, guide table);
- ``group``: a group's advantages (closed form), focal-weight table and per-step records;
- ``dense``: the reference engine, every option, on whole (R, K) arrays;
- ``sparse``: the paper's setting on the touched actions only (numpy);
- ``fast_exp``: a vectorisable exp for the numba kernels;
- ``kernel_cache``: numba's cache of the kernels, dropped when a file they are built from changes;
- ``link``: two threads of one run exchanging a few numbers per step;
- ``compiled``: the sparse engine's draws and arithmetic in numba kernels;
- ``split``: one compiled run over two cores, each thread owning half of the actions;
- ``torch_engine``: many (N, gamma, seed) runs as one batch on a GPU (imported on request);
- ``engines``: which engine runs a config, and the work items;
- ``agreement``: whether two engines' sweeps agree in distribution (the engines' contract);
- ``threads``: native thread pools pinned to the cores a sweep is given;
- ``sweep``: ``run_sweep``, ``run_cached``, ``SweepResult``, progress, resume, output files.

    fgrpo-theory simulate --preset paper-fig2 --out results/fig2
    >>> from fgrpo_theory.sim import PRESETS, run_sweep
    >>> from dataclasses import replace
    >>> res = run_sweep(replace(PRESETS["tiny"], steps=3), progress=False)
    >>> res.m_ret.shape           # (group sizes, gammas, seeds, steps + 1)
    (4, 2, 1, 4)
"""

from fgrpo_theory.sim.config import (
    ADVANTAGES,
    OPTIMIZERS,
    PRESETS,
    SURROGATES,
    SimConfig,
    config_fields,
    config_from_preset,
    sparse_applies,
)
from fgrpo_theory.sim.engines import ENGINES, choose_engine, simulate_runs
from fgrpo_theory.sim.sweep import (
    SIMULATOR_VERSION,
    SweepResult,
    load_cached,
    run_cached,
    run_sweep,
)

__all__ = [
    "ADVANTAGES",
    "ENGINES",
    "OPTIMIZERS",
    "PRESETS",
    "SIMULATOR_VERSION",
    "SURROGATES",
    "SimConfig",
    "SweepResult",
    "choose_engine",
    "config_fields",
    "config_from_preset",
    "load_cached",
    "run_cached",
    "run_sweep",
    "simulate_runs",
    "sparse_applies",
]
